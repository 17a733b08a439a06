"""The data constructs, each in a bare stack: keys, the item table, the keyword table, the vector
store, the bus."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from infra.constructs import EncryptionKeys, ItemTable, KeywordTable, LifecycleEvents, VectorStore
from memsvc.adapters.aws.dynamo_keywords import keyword_table_definition
from memsvc.adapters.aws.dynamo_store import TTL_ATTRIBUTE, table_definition
from memsvc.adapters.aws.s3vectors_index import NON_FILTERABLE_METADATA_KEYS
from tests.infra.helpers import only, resources_of


def _key(stack: cdk.Stack) -> kms.Key:
    return kms.Key(stack, "Key", enable_key_rotation=True)


def test_keys_are_separate_rotated_and_retained_when_asked(bare_stack):
    stack = bare_stack()
    EncryptionKeys(stack, "Keys", alias_prefix="memsvc-x", removal_policy=cdk.RemovalPolicy.RETAIN)
    t = Template.from_stack(stack)
    t.resource_count_is("AWS::KMS::Key", 2)
    t.all_resources_properties("AWS::KMS::Key", {"EnableKeyRotation": True, "PendingWindowInDays": 30})
    for key in resources_of(t.to_json(), "AWS::KMS::Key").values():
        assert key["DeletionPolicy"] == "Retain"
    aliases = {a["Properties"]["AliasName"] for a in resources_of(t.to_json(), "AWS::KMS::Alias").values()}
    assert aliases == {"alias/memsvc-x/envelope", "alias/memsvc-x/storage"}


def _table_template(bare_stack, *, retain: bool) -> dict:
    stack = bare_stack()
    ItemTable(stack, "Items", table_name="t", encryption_key=_key(stack),
              removal_policy=cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY,
              deletion_protection=retain)
    return Template.from_stack(stack).to_json()


def test_the_cdk_table_is_exactly_table_definition(bare_stack):
    """The schema the adapter and its tests create on moto is the schema that is deployed."""
    props = only(_table_template(bare_stack, retain=False), "AWS::DynamoDB::GlobalTable")
    want = table_definition("t")
    assert props["TableName"] == want["TableName"]
    assert props["BillingMode"] == want["BillingMode"] == "PAY_PER_REQUEST"
    assert sorted(props["AttributeDefinitions"], key=str) == sorted(want["AttributeDefinitions"], key=str)
    assert props["KeySchema"] == want["KeySchema"]

    def gsis(items):
        return {g["IndexName"]: (g["KeySchema"], {k: sorted(v) if isinstance(v, list) else v
                                                 for k, v in g["Projection"].items()}) for g in items}

    assert gsis(props["GlobalSecondaryIndexes"]) == gsis(want["GlobalSecondaryIndexes"])
    assert set(gsis(want["GlobalSecondaryIndexes"])) == {"by_recent", "by_id", "pending", "history"}
    # A key's timeline events, newest first (GET /v1/memories/history): sparse, keys only.
    assert gsis(props["GlobalSecondaryIndexes"])["history"] == (
        [{"AttributeName": "hk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        {"ProjectionType": "KEYS_ONLY"})
    assert props["StreamSpecification"] == {"StreamViewType": want["StreamSpecification"]["StreamViewType"]}
    assert props["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"


def test_table_ttl_pitr_and_customer_managed_key(bare_stack):
    template = _table_template(bare_stack, retain=False)
    props = only(template, "AWS::DynamoDB::GlobalTable")
    assert props["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    assert TTL_ATTRIBUTE == "ttl"
    assert props["SSESpecification"] == {"SSEEnabled": True, "SSEType": "KMS"}
    (replica,) = props["Replicas"]
    assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    key_id, attribute = replica["SSESpecification"]["KMSMasterKeyId"]["Fn::GetAtt"]
    assert attribute == "Arn" and key_id.startswith("Key")  # the customer-managed key given
    assert replica["DeletionProtectionEnabled"] is False
    (table,) = resources_of(template, "AWS::DynamoDB::GlobalTable").values()
    assert table["DeletionPolicy"] == "Delete"


def test_table_is_protected_and_retained_when_asked(bare_stack):
    template = _table_template(bare_stack, retain=True)
    (table,) = resources_of(template, "AWS::DynamoDB::GlobalTable").values()
    assert table["DeletionPolicy"] == "Retain" and table["UpdateReplacePolicy"] == "Retain"
    assert table["Properties"]["Replicas"][0]["DeletionProtectionEnabled"] is True


@pytest.mark.parametrize("retain", [False, True])
def test_the_keyword_table_is_exactly_keyword_table_definition(bare_stack, retain):
    """On demand, keys as the adapter's schema, no stream, no TTL, no index; point-in-time
    recovery and the customer-managed key given; protected and retained when asked."""
    stack = bare_stack()
    KeywordTable(stack, "Keywords", table_name="kw", encryption_key=_key(stack),
                 removal_policy=cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY,
                 deletion_protection=retain)
    template = Template.from_stack(stack).to_json()
    props = only(template, "AWS::DynamoDB::GlobalTable")
    want = keyword_table_definition("kw")
    assert props["TableName"] == want["TableName"] == "kw"
    assert props["BillingMode"] == want["BillingMode"] == "PAY_PER_REQUEST"
    assert props["AttributeDefinitions"] == want["AttributeDefinitions"]
    assert props["KeySchema"] == want["KeySchema"]
    for absent in ("StreamSpecification", "TimeToLiveSpecification", "GlobalSecondaryIndexes",
                   "LocalSecondaryIndexes"):
        assert absent not in props and absent not in want
    assert props["SSESpecification"] == {"SSEEnabled": True, "SSEType": "KMS"}
    (replica,) = props["Replicas"]
    assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    key_id, attribute = replica["SSESpecification"]["KMSMasterKeyId"]["Fn::GetAtt"]
    assert attribute == "Arn" and key_id.startswith("Key")
    assert replica["DeletionProtectionEnabled"] is retain
    (table,) = resources_of(template, "AWS::DynamoDB::GlobalTable").values()
    assert table["DeletionPolicy"] == ("Retain" if retain else "Delete")


def test_vector_store_index_matches_the_adapter(bare_stack):
    stack = bare_stack()
    VectorStore(stack, "Vectors", bucket_name="b", index_name="memories", dimension=512,
                non_filterable_keys=NON_FILTERABLE_METADATA_KEYS, encryption_key=_key(stack),
                removal_policy=cdk.RemovalPolicy.RETAIN)
    template = Template.from_stack(stack).to_json()
    bucket = only(template, "AWS::S3Vectors::VectorBucket")
    assert bucket["VectorBucketName"] == "b"
    assert bucket["EncryptionConfiguration"]["SseType"] == "aws:kms"
    assert "Fn::GetAtt" in bucket["EncryptionConfiguration"]["KmsKeyArn"]
    index = only(template, "AWS::S3Vectors::Index")
    assert index["DataType"] == "float32"
    assert index["DistanceMetric"] == "cosine"
    assert index["Dimension"] == 512
    assert index["IndexName"] == "memories"
    assert index["MetadataConfiguration"]["NonFilterableMetadataKeys"] == list(NON_FILTERABLE_METADATA_KEYS)
    assert index["EncryptionConfiguration"]["SseType"] == "aws:kms"
    for resource in [*resources_of(template, "AWS::S3Vectors::Index").values(),
                     *resources_of(template, "AWS::S3Vectors::VectorBucket").values()]:
        assert resource["DeletionPolicy"] == "Retain"
    (key,) = resources_of(template, "AWS::KMS::Key").values()
    indexing = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Sid") == "S3VectorsIndexing"]
    assert indexing and indexing[0]["Principal"] == {"Service": "indexing.s3vectors.amazonaws.com"}
    assert indexing[0]["Action"] == "kms:Decrypt"
    assert "aws:SourceAccount" in indexing[0]["Condition"]["StringEquals"]


def test_vector_store_refuses_more_non_filterable_keys_than_s3_vectors_allows(bare_stack):
    stack = bare_stack()
    try:
        VectorStore(stack, "Vectors", bucket_name="b", index_name="i", dimension=1024,
                    non_filterable_keys=[f"k{i}" for i in range(11)], encryption_key=_key(stack),
                    removal_policy=cdk.RemovalPolicy.DESTROY)
    except ValueError:
        return
    raise AssertionError("11 non-filterable keys were accepted")


def test_event_bus_is_encrypted_and_archived(bare_stack):
    stack = bare_stack()
    LifecycleEvents(stack, "Events", bus_name="bus", archive_retention_days=30, encryption_key=_key(stack),
                    removal_policy=cdk.RemovalPolicy.RETAIN)
    template = Template.from_stack(stack).to_json()
    bus = only(template, "AWS::Events::EventBus")
    assert bus["Name"] == "bus" and "Fn::GetAtt" in bus["KmsKeyIdentifier"]
    archive = only(template, "AWS::Events::Archive")
    assert archive["RetentionDays"] == 30
    assert "Fn::GetAtt" in archive["KmsKeyIdentifier"]
    assert archive["SourceArn"] == {"Fn::GetAtt": [next(iter(resources_of(template, "AWS::Events::EventBus"))), "Arn"]}
    # No policy on the bus: nobody outside the account can put events (cdk-nag EVB1).
    assert not resources_of(template, "AWS::Events::EventBusPolicy")
    (key,) = resources_of(template, "AWS::KMS::Key").values()
    sids = {s.get("Sid") for s in key["Properties"]["KeyPolicy"]["Statement"]}
    assert {"EventBridgeArchive", "EventBridgeDescribeKey"} <= sids
