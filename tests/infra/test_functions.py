"""The functions, in a bare stack: packaging, environment, the stream mapping, and each role's
exact permissions (read from the code's calls, see the constructs' docstrings)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from infra.config import LAMBDA_PYTHON
from infra.constructs import (ApiFunction, IndexerFunction, ItemTable, KeywordTable, LambdaPackage, TimelineFunction,
                              VectorStore)
from infra.constructs.functions import (
    CHANGE_FILTER_PATTERNS,
    INDEXER_FILTER_PATTERNS,
    TIMELINE_FILTER_PATTERNS,
    ServiceSettings,
    StreamSettings,
)
from infra.stack import PROJECT_ROOT
from layers.build import lambda_python, package_code
from memsvc.adapters.aws.dynamo_store import change_from_stream_record
from tests.infra.helpers import REGION, as_list, new_app, resources_of

SETTINGS_SOURCE = (PROJECT_ROOT / "memsvc" / "settings.py").read_text()


def aws_settings_variables() -> set[str]:
    """Every MEMSVC_* variable `AwsSettings.from_env` reads (from its source)."""
    body = SETTINGS_SOURCE[SETTINGS_SOURCE.index("class AwsSettings"):]
    return set(re.findall(r"env(?:\[|\.get\()\"(MEMSVC_[A-Z_]+)\"", body))


def service_resources(stack: cdk.Stack, envelope: kms.IKey, storage: kms.IKey) -> dict[str, Any]:
    """What every function construct is given, in a bare stack: the package, the data stores
    (encrypted under `storage`), the envelope key and the settings."""
    table = ItemTable(stack, "Items", table_name="items", encryption_key=storage,
                      removal_policy=cdk.RemovalPolicy.DESTROY, deletion_protection=False)
    keywords = KeywordTable(stack, "Keywords", table_name="keywords", encryption_key=storage,
                            removal_policy=cdk.RemovalPolicy.DESTROY, deletion_protection=False)
    vectors = VectorStore(stack, "Vectors", bucket_name="vb", index_name="memories", dimension=1024,
                          non_filterable_keys=["key"], encryption_key=storage,
                          removal_policy=cdk.RemovalPolicy.DESTROY)
    package = LambdaPackage(stack, "Package", project_root=PROJECT_ROOT, layer_name="deps")
    settings = ServiceSettings(embedding_model_id="amazon.titan-embed-text-v2:0", embedding_dimension=1024,
                               embedding_concurrency=8, data_key_cache_seconds=300, log_level="INFO",
                               log_retention=logs.RetentionDays.ONE_MONTH, removal_policy=cdk.RemovalPolicy.DESTROY)
    return dict(package=package, table=table, keywords=keywords, vectors=vectors, envelope_key=envelope,
                storage_key=storage, settings=settings)


def _build(bare_stack) -> tuple[cdk.Stack, dict[str, Any]]:
    stack = bare_stack()
    envelope = kms.Key(stack, "EnvelopeKey", enable_key_rotation=True)
    storage = kms.Key(stack, "StorageKey", enable_key_rotation=True)
    common = service_resources(stack, envelope, storage)
    bus = events.EventBus(stack, "Bus", event_bus_name="bus", kms_key=storage)
    ApiFunction(stack, "Api", function_name="fn-api", memory_mb=1024, timeout=Duration.seconds(25),
                reserved_concurrency=None, event_bus=bus, **common)
    IndexerFunction(stack, "Indexer", function_name="fn-indexer", memory_mb=1024, timeout=Duration.seconds(300),
                    stream=StreamSettings(batch_size=100, batching_window=Duration.seconds(2), retry_attempts=5,
                                          max_record_age=Duration.hours(6), parallelization_factor=1,
                                          dlq_retention=Duration.days(14)),
                    **common)
    TimelineFunction(stack, "Timeline", function_name="fn-timeline", memory_mb=512, timeout=Duration.seconds(120),
                     stream=StreamSettings(batch_size=50, batching_window=Duration.seconds(0), retry_attempts=4,
                                           max_record_age=Duration.hours(3), parallelization_factor=1,
                                           dlq_retention=Duration.days(14)),
                     event_bus=bus, **common)
    return stack, Template.from_stack(stack).to_json()


@pytest.fixture(scope="module")
def built():
    return _build(lambda: cdk.Stack(new_app(), "Bare", env=cdk.Environment(region=REGION)))[1]


def _function(template: dict[str, Any], name: str) -> dict[str, Any]:
    found = [r["Properties"] for r in resources_of(template, "AWS::Lambda::Function").values()
             if r["Properties"]["FunctionName"] == name]
    assert len(found) == 1
    return found[0]


def _logical(template: dict[str, Any], type_: str, prefix: str) -> str:
    (logical,) = [k for k in resources_of(template, type_) if k.startswith(prefix)]
    return logical


def _grants(template: dict[str, Any], role_prefix: str) -> set[tuple[str, str]]:
    """(action, resource) pairs of the role's policies, resources rendered as short names."""
    role = _logical(template, "AWS::IAM::Role", role_prefix)
    pairs = set()
    for policy in resources_of(template, "AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for st in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert st["Effect"] == "Allow"
            for action in as_list(st["Action"]):
                for resource in as_list(st["Resource"]):
                    pairs.add((action, _short(resource)))
    return pairs


def _short(resource: Any) -> str:
    """`table`, `table/index/by_id`, `stream`, `EnvelopeKey`, ... for readable assertions."""
    text = json.dumps(resource)
    for pattern, name in (
        (r'"ItemsTable[0-9A-F]+", "StreamArn"', "stream"),
        (r'"ItemsTable[0-9A-F]+", "Arn"\]\}, "/index/(\w+)"', r"table/index/\1"),
        (r'^\{"Fn::GetAtt": \["ItemsTable[0-9A-F]+", "Arn"\]\}$', "table"),
        (r'^\{"Fn::GetAtt": \["KeywordsTable[0-9A-F]+", "Arn"\]\}$', "keyword-table"),
        (r'"(EnvelopeKey|StorageKey)[0-9A-F]+", "Arn"', r"\1"),
        (r'"VectorsIndex[0-9A-F]+", "IndexArn"', "vector-index"),
        (r'"IndexerFailedBatches[0-9A-F]+", "Arn"', "dlq"),
        (r'"TimelineFailedBatches[0-9A-F]+", "Arn"', "timeline-dlq"),
        (r'"Bus[0-9A-F]+", "Arn"', "bus"),
        (r'"(Api|Indexer|Timeline)ServiceLogs[0-9A-F]+", "Arn"', "own-log-group"),
        (r"foundation-model/(amazon\.[a-z0-9.:-]+)", r"model/\1"),
    ):
        match = re.search(pattern, text)
        if match:
            return match.expand(name)
    return text.strip('"')


FUNCTIONS = (("fn-api", "functions.api.handler", "Api"), ("fn-indexer", "functions.indexer.handler", "Indexer"),
             ("fn-timeline", "functions.timeline.handler", "Timeline"))


def test_function_runtime_packaging_and_tracing(built):
    for name, handler, construct in FUNCTIONS:
        fn = _function(built, name)
        assert fn["Runtime"] == f"python{LAMBDA_PYTHON}"
        assert LAMBDA_PYTHON >= "3.12"
        assert fn["Architectures"] == ["x86_64"]
        assert fn["Handler"] == handler
        assert fn["TracingConfig"] == {"Mode": "Active"}
        assert len(fn["Layers"]) == 1
        assert fn["LoggingConfig"]["LogGroup"] == {"Ref": _logical(built, "AWS::Logs::LogGroup",
                                                                   f"{construct}ServiceLogs")}
    layer = next(iter(resources_of(built, "AWS::Lambda::LayerVersion").values()))["Properties"]
    assert layer["CompatibleRuntimes"] == [f"python{LAMBDA_PYTHON}"]
    assert layer["CompatibleArchitectures"] == ["x86_64"]
    for group in resources_of(built, "AWS::Logs::LogGroup").values():
        assert group["Properties"]["RetentionInDays"] == 30


def test_default_tenant_only_when_configured(bare_stack):
    """Without a default tenant, a token (e.g. a Cognito access token) without a tenant claim is a 401."""
    assert "MEMSVC_DEFAULT_TENANT" in aws_settings_variables()
    stack = bare_stack()
    key = kms.Key(stack, "Key")
    ApiFunction(stack, "Api", function_name="fn-api", memory_mb=1024, timeout=Duration.seconds(25),
                reserved_concurrency=None, default_tenant="shared",
                event_bus=events.EventBus(stack, "Bus", event_bus_name="bus", kms_key=key),
                **service_resources(stack, key, key))
    env = _function(Template.from_stack(stack).to_json(), "fn-api")["Environment"]["Variables"]
    assert env["MEMSVC_DEFAULT_TENANT"] == "shared"


def test_every_setting_the_code_reads_is_set(built):
    wanted = aws_settings_variables()
    assert {"MEMSVC_TABLE_NAME", "MEMSVC_KEYWORD_TABLE_NAME", "MEMSVC_VECTOR_BUCKET", "MEMSVC_VECTOR_INDEX",
            "MEMSVC_KMS_KEY_ID", "MEMSVC_EVENT_BUS_NAME"} <= wanted
    # The bus is the publishers' alone (the timeline; the API for session close and seed 003's
    # workflow events): without it a function publishes nothing (AwsSettings' default).
    publishes = {"fn-timeline", "fn-api"}
    for name, service in (("fn-api", "memsvc-api"), ("fn-indexer", "memsvc-indexer"),
                          ("fn-timeline", "memsvc-timeline")):
        env = _function(built, name)["Environment"]["Variables"]
        # The default tenant only where an environment names one (test_default_tenant_only_when_configured);
        # the remember queue's URL only on the API, set by the stack (test_stacks: the remember queue).
        needed = wanted - {"MEMSVC_DEFAULT_TENANT", "MEMSVC_REMEMBER_QUEUE_URL"}
        needed = needed if name in publishes else needed - {"MEMSVC_EVENT_BUS_NAME"}
        assert needed <= set(env), f"{name} misses {sorted(needed - set(env))}"
        assert ("MEMSVC_EVENT_BUS_NAME" in env) == (name in publishes), name
        assert "MEMSVC_DEFAULT_TENANT" not in env, name
        assert env["POWERTOOLS_SERVICE_NAME"] == service
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == "memsvc"
        assert env["LOG_LEVEL"] == "INFO"
        assert env["POWERTOOLS_LOGGER_LOG_EVENT"] == "false"
        assert env["MEMSVC_EMBEDDING_DIMENSION"] == "1024"
        assert env["MEMSVC_VECTOR_INDEX"] == "memories"
        assert "EnvelopeKey" in json.dumps(env["MEMSVC_KMS_KEY_ID"])  # the envelope key, not the storage key
        assert "ItemsTable" in json.dumps(env["MEMSVC_TABLE_NAME"])
        assert "KeywordsTable" in json.dumps(env["MEMSVC_KEYWORD_TABLE_NAME"])
    for name in publishes:
        assert _function(built, name)["Environment"]["Variables"]["MEMSVC_EVENT_BUS_NAME"] == {
            "Ref": _logical(built, "AWS::Events::EventBus", "Bus")}


# What `DynamoKeywordIndex` calls (TransactWriteItems is authorized as its Update and Delete actions).
KEYWORD_TABLE = {(f"dynamodb:{a}", "keyword-table") for a in
                 ("GetItem", "PutItem", "BatchWriteItem", "BatchGetItem", "Query", "UpdateItem", "DeleteItem")}


def test_api_role_is_exactly_what_the_api_calls(built):
    tenant = "EnvelopeKey"
    assert _grants(built, "ApiServiceRole") == {
        ("logs:CreateLogStream", "own-log-group"), ("logs:PutLogEvents", "own-log-group"),
        ("xray:PutTraceSegments", "*"), ("xray:PutTelemetryRecords", "*"),
        *{(f"dynamodb:{a}", "table") for a in ("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem",
                                              "DeleteItem", "BatchWriteItem")},  # with seed 003's workflow rows
        *{("dynamodb:Query", f"table/index/{i}") for i in ("by_recent", "by_id", "pending", "history")},
        *KEYWORD_TABLE,
        ("events:PutEvents", "bus"),  # seed 003's plan-status and task-context-deleted events
        ("kms:Decrypt", "StorageKey"), ("kms:DescribeKey", "StorageKey"), ("kms:GenerateDataKey", "StorageKey"),
        ("kms:GenerateDataKey", tenant), ("kms:Decrypt", tenant),
        *{(f"s3vectors:{a}", "vector-index") for a in
          ("QueryVectors", "GetVectors", "GetIndex", "PutVectors", "DeleteVectors")},
        ("bedrock:InvokeModel", "model/amazon.titan-embed-text-v2:0"),
        # search's rerank step: Rerank has no resource type; the model is limited by InvokeModel
        ("bedrock:Rerank", "*"), ("bedrock:InvokeModel", "model/amazon.rerank-v1:0"),
    }


def test_indexer_role_is_exactly_what_the_indexer_calls(built):
    assert _grants(built, "IndexerServiceRole") == {
        ("logs:CreateLogStream", "own-log-group"), ("logs:PutLogEvents", "own-log-group"),
        ("xray:PutTraceSegments", "*"), ("xray:PutTelemetryRecords", "*"),
        # a batch's rows (BatchGetItem), one row (GetItem), the index, attempt and quarantine marks (UpdateItem)
        ("dynamodb:GetItem", "table"), ("dynamodb:BatchGetItem", "table"), ("dynamodb:UpdateItem", "table"),
        *KEYWORD_TABLE,
        ("dynamodb:DescribeStream", "stream"), ("dynamodb:GetRecords", "stream"),
        ("dynamodb:GetShardIterator", "stream"), ("dynamodb:ListStreams", "*"),
        ("kms:Decrypt", "StorageKey"), ("kms:DescribeKey", "StorageKey"), ("kms:GenerateDataKey", "StorageKey"),
        ("kms:Decrypt", "EnvelopeKey"),
        ("s3vectors:PutVectors", "vector-index"), ("s3vectors:DeleteVectors", "vector-index"),
        ("bedrock:InvokeModel", "model/amazon.titan-embed-text-v2:0"),
        ("bedrock:InvokeModel", "model/amazon.nova-micro-v1:0"),  # entity extraction (Converse)
        ("sqs:SendMessage", "dlq"),
    }


def test_timeline_role_is_exactly_what_the_timeline_calls(built):
    """The event log's record path (GetItem, BatchGetItem, TransactWriteItems of Put and Update,
    which IAM authorizes as PutItem and UpdateItem), PutEvents on its bus, its stream and DLQ,
    the storage key for encryption at rest; no envelope key, no vectors, no model."""
    assert _grants(built, "TimelineServiceRole") == {
        ("logs:CreateLogStream", "own-log-group"), ("logs:PutLogEvents", "own-log-group"),
        ("xray:PutTraceSegments", "*"), ("xray:PutTelemetryRecords", "*"),
        *{(f"dynamodb:{a}", "table") for a in ("GetItem", "BatchGetItem", "PutItem", "UpdateItem")},
        ("dynamodb:DescribeStream", "stream"), ("dynamodb:GetRecords", "stream"),
        ("dynamodb:GetShardIterator", "stream"), ("dynamodb:ListStreams", "*"),
        ("kms:Decrypt", "StorageKey"), ("kms:DescribeKey", "StorageKey"), ("kms:GenerateDataKey", "StorageKey"),
        ("events:PutEvents", "bus"),
        ("sqs:SendMessage", "timeline-dlq"),
    }


def test_only_the_timeline_and_the_api_publish_and_only_to_their_bus(built):
    """The timeline publishes memory events; the API the workflow events (`EventBridgeBusEvents`)."""
    publishers = {role for role in ("ApiServiceRole", "IndexerServiceRole", "TimelineServiceRole")
                  if any(a.startswith("events:") for a, _ in _grants(built, role))}
    assert publishers == {"TimelineServiceRole", "ApiServiceRole"}
    statements = [st for p in resources_of(built, "AWS::IAM::Policy").values()
                  for st in p["Properties"]["PolicyDocument"]["Statement"] if "events:PutEvents" in as_list(st["Action"])]
    assert len(statements) == 2
    for statement in statements:
        assert statement["Resource"] == {"Fn::GetAtt": [_logical(built, "AWS::Events::EventBus", "Bus"), "Arn"]}
        assert "Condition" not in statement


def test_envelope_key_only_with_the_tenant_as_encryption_context(built):
    for policy in resources_of(built, "AWS::IAM::Policy").values():
        for st in policy["Properties"]["PolicyDocument"]["Statement"]:
            if "EnvelopeKey" in json.dumps(st["Resource"]):
                assert st["Condition"] == {
                    "ForAnyValue:StringEquals": {"kms:EncryptionContextKeys": ["memsvc:tenant"]},
                    "ForAllValues:StringEquals": {"kms:EncryptionContextKeys": ["memsvc:tenant"]},
                }


def test_bedrock_model_arn_is_regional_foundation_model(built):
    arns = [st["Resource"] for p in resources_of(built, "AWS::IAM::Policy").values()
            for st in p["Properties"]["PolicyDocument"]["Statement"] if st["Action"] == "bedrock:InvokeModel"]
    models = {"amazon.titan-embed-text-v2:0", "amazon.nova-micro-v1:0",  # embeddings; entity extraction
              "amazon.rerank-v1:0"}  # search's rerank step
    assert arns and all(a in {f"arn:aws:bedrock:us-east-1::foundation-model/{m}" for m in models} for a in arns)


def _mapping(template: dict[str, Any], construct: str) -> dict[str, Any]:
    fn = _logical(template, "AWS::Lambda::Function", f"{construct}ServiceFunction")
    (mapping,) = [r["Properties"] for r in resources_of(template, "AWS::Lambda::EventSourceMapping").values()
                  if r["Properties"]["FunctionName"] == {"Ref": fn}]
    return mapping


@pytest.mark.parametrize("construct, batch, window, retries, age, patterns", [
    ("Indexer", 100, 2, 5, 6 * 3600, INDEXER_FILTER_PATTERNS),
    ("Timeline", 50, 0, 4, 3 * 3600, TIMELINE_FILTER_PATTERNS),
])
def test_stream_mapping(built, construct, batch, window, retries, age, patterns):
    """Each consumer has its own mapping on the table's stream: partial batch failures, bisection,
    bounded retries and record age, and its own queue as the on-failure destination."""
    mapping = _mapping(built, construct)
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["MaximumRetryAttempts"] == retries
    assert mapping["MaximumRecordAgeInSeconds"] == age
    assert mapping["BatchSize"] == batch
    assert mapping["MaximumBatchingWindowInSeconds"] == window
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    assert "StreamArn" in json.dumps(mapping["EventSourceArn"])
    dlq = _logical(built, "AWS::SQS::Queue", f"{construct}FailedBatches")
    assert mapping["DestinationConfig"] == {"OnFailure": {"Destination": {"Fn::GetAtt": [dlq, "Arn"]}}}
    patterns_ = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert patterns_ == list(patterns) == list(CHANGE_FILTER_PATTERNS)


def test_each_consumer_sends_only_to_its_own_queue(built):
    for construct, other in (("Indexer", "timeline-dlq"), ("Timeline", "dlq")):
        sends = {r for a, r in _grants(built, f"{construct}ServiceRole") if a == "sqs:SendMessage"}
        assert len(sends) == 1 and other not in sends


def test_dead_letter_queues_are_encrypted_and_tls_only(built):
    queues = resources_of(built, "AWS::SQS::Queue")
    assert sorted(q["Properties"]["QueueName"] for q in queues.values()) == ["fn-indexer-failed", "fn-timeline-failed"]
    for queue in queues.values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True
        assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 86400
    policies = resources_of(built, "AWS::SQS::QueuePolicy").values()
    assert len(policies) == 2
    for policy in policies:
        (deny,) = policy["Properties"]["PolicyDocument"]["Statement"]
        assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


# -- the filter, evaluated: it may drop only what change_from_stream_record ignores ------------


def _matches(pattern: Any, value: Any) -> bool:
    """Lambda's filter semantics for the subset used here (exact strings, anything-but)."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(k in value and _matches(p, value[k]) for k, p in pattern.items())
    assert isinstance(pattern, list)
    for option in pattern:
        if isinstance(option, dict) and "anything-but" in option:
            if value not in option["anything-but"]:
                return True
        elif value == option:
            return True
    return False


def _image(**attrs: Any) -> dict[str, Any]:
    base = {"rt": "item", "tenant": "t", "ns": "a", "key": "k", "id": "i1", "version": 1, "pa": "{}",
            "ixf": "null", "cat": 1, "uat": 1, "knd": "add", "chg": "write"}
    base.update(attrs)
    out = {}
    for k, v in base.items():
        if v is None:
            continue
        out[k] = {"N": str(v)} if isinstance(v, int) else {"S": v}
    return out


def _record(event: str, new: dict | None, old: dict | None, seq: int = 1, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"SequenceNumber": str(seq)}
    if new is not None:
        data["NewImage"] = new
    if old is not None:
        data["OldImage"] = old
    return {"eventName": event, "dynamodb": data, **extra}


RECORDS = {
    "insert item": _record("INSERT", _image(), None),
    "update (new version)": _record("MODIFY", _image(version=2, id="i2", knd="update"), _image()),
    "delete (tombstone write)": _record("MODIFY", _image(version=2, id="i2", **{"del": "delete"}), _image()),
    "index mark": _record("MODIFY", _image(chg="index", idx='["text"]'), _image()),
    "attempt mark": _record("MODIFY", _image(chg="attempt", ixa="batch"), _image()),
    "quarantine": _record("MODIFY", _image(chg="quarantine", qrs="indexing it raised ValueError", qat=2), _image()),
    "retry": _record("MODIFY", _image(chg="retry"), _image(chg="quarantine", qrs="x", qat=2)),
    "ttl refresh": _record("MODIFY", _image(chg="refresh", exp=5), _image(exp=4)),
    "ttl expiry": _record("REMOVE", None, _image(exp=1),
                          userIdentity={"type": "Service", "principalId": "dynamodb.amazonaws.com"}),
    "tombstone purge": _record("REMOVE", None, _image(**{"del": "delete"})),
    "erasure mark": _record("MODIFY", _image(chg="erase"), _image()),
    "erasure removal": _record("REMOVE", None, _image(chg="erase")),
    "registry row": _record("INSERT", {"pk": {"S": "T#t#R"}, "sk": {"S": "a"}, "rt": {"S": "namespace"}}, None),
    "tenant key row": _record("INSERT", {"pk": {"S": "T#t#KEY"}, "sk": {"S": "DEK"}, "rt": {"S": "key"}}, None),
    "config rewrite": _record("MODIFY", {"pk": {"S": "T#t#CFG"}, "sk": {"S": "s"}, "rt": {"S": "config"}},
                              {"pk": {"S": "T#t#CFG"}, "sk": {"S": "s"}, "rt": {"S": "config"}}),
}


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_filter_never_drops_a_change(name):
    record = RECORDS[name]
    passes = any(_matches(p, record) for p in INDEXER_FILTER_PATTERNS)
    change = change_from_stream_record(record)
    if not passes:
        assert change is None, f"the filter drops {name!r}, which is a change"


def test_filter_drops_index_marks_and_refreshes_and_keeps_changes():
    kept = {n for n, r in RECORDS.items() if any(_matches(p, r) for p in INDEXER_FILTER_PATTERNS)}
    assert kept == {"insert item", "update (new version)", "delete (tombstone write)", "ttl expiry",
                    "tombstone purge", "erasure removal", "quarantine", "retry"}
    assert change_from_stream_record(RECORDS["erasure removal"]) is None  # the erasure retired its indexes
    assert change_from_stream_record(RECORDS["quarantine"]).kind == "index_failed"  # the timeline's event
    assert change_from_stream_record(RECORDS["retry"]).kind == "index_retry"  # the indexer's work


def test_code_asset_is_only_the_package_and_functions(tmp_path):
    """The code asset is what `package_code` builds (CDK's local bundling; the template tests skip
    bundling): `functions/` and `memsvc/`, with bytecode for the Lambda runtime's Python when this
    machine has one, naming its files as Lambda sees them (`/var/task/...`)."""
    package_code(PROJECT_ROOT, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["functions", "memsvc"]
    files = [p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()]
    assert {Path("functions/api.py"), Path("functions/indexer.py"), Path("functions/timeline.py")} <= set(files)
    assert Path("memsvc/policies/authz.rego") in files  # package data the policy engine loads
    sources = [f for f in files if f.suffix == ".py"]
    compiled = [f for f in files if f.suffix == ".pyc"]
    if lambda_python() is None:
        assert compiled == []
    else:
        tag = "cpython-" + LAMBDA_PYTHON.replace(".", "")
        assert {f.parent.parent / f"{f.name.split('.')[0]}.py" for f in compiled} == set(sources)
        assert all(f.parent.name == "__pycache__" and f".{tag}." in f.name for f in compiled)
        api_pyc = (tmp_path / "functions" / "__pycache__" / f"api.{tag}.pyc").read_bytes()
        assert b"/var/task/functions/api.py" in api_pyc and str(tmp_path).encode() not in api_pyc
    size = sum((tmp_path / f).stat().st_size for f in files)
    assert size < 5 * 2**20, f"the code asset is {size} bytes"


# The DynamoDB adapters' shared call routines (`dynamo_store`): one named operation each.
_DYNAMO_CALLS = (r'_call\(\s*"(\w+)"', r'call_table\(\s*[\w.]+,\s*[\w.]+,\s*"(\w+)"', r"self\._db\.(\w+)\(")
_DYNAMO_HELPERS = {"batch_get_rows(": "BatchGetItem", "query_pages(": "Query", "transact_or_cancelled(": "TransactWriteItems"}


def _calls(path: str, patterns: tuple[str, ...], helpers: dict[str, str] | None = None) -> set[str]:
    source = (PROJECT_ROOT / path).read_text()
    found = {op for call, op in (helpers or {}).items() if re.search(r"(?<!def )" + re.escape(call), source)}
    for pattern in patterns:
        for name in re.findall(pattern, source):
            found.add("".join(part.title() for part in name.split("_")) if "_" in name or name.islower() else name)
    return found


def test_the_api_role_covers_every_call_the_aws_adapters_make(built):
    """If an adapter starts making a new call, this fails until the role grants it (and the
    reviewer decides which function needs it)."""
    calls = {
        "dynamodb": _calls("memsvc/adapters/aws/dynamo_store.py", _DYNAMO_CALLS, _DYNAMO_HELPERS),
        "s3vectors": _calls("memsvc/adapters/aws/s3vectors_index.py", (r'_call\(\s*"(\w+)"',)),
        "kms": _calls("memsvc/adapters/aws/kms_keys.py", (r"self\._client\.(\w+)\(",)),
        "bedrock": _calls("memsvc/adapters/aws/titan.py", (r"self\._client\.(\w+)\(",)),
    }
    rerank = _calls("memsvc/adapters/aws/bedrock_rerank.py", (r"self\._client\.(\w+)\(",))
    assert calls["dynamodb"] == {"GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem"}
    sessions = _calls("memsvc/adapters/aws/dynamo_sessions.py", _DYNAMO_CALLS, _DYNAMO_HELPERS)
    assert sessions == {"GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"}
    # IAM has no TransactWriteItems action: each action inside is authorized as its own operation.
    inside = set(re.findall(r'\{"(Put|Update|Delete|ConditionCheck)": ', (
        PROJECT_ROOT / "memsvc/adapters/aws/dynamo_sessions.py").read_text()))
    as_iam = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}
    calls["dynamodb"] |= (sessions - {"TransactWriteItems"}) | {as_iam[a] for a in inside}
    erasure = _calls("memsvc/adapters/aws/dynamo_user_erasure.py",
                     (*_DYNAMO_CALLS, r'conditional_write\(\s*[\w.]+,\s*[\w.]+,\s*"(\w+)"'), _DYNAMO_HELPERS)
    # GetItem: a transfer job's row, to see whether its file may hold the user
    assert erasure == {"GetItem", "Query", "UpdateItem", "DeleteItem", "BatchWriteItem"}
    calls["dynamodb"] |= erasure
    calls["events"] = _calls("memsvc/adapters/aws/eventbridge_bus.py", (r"self\._client\.(\w+)\(",))
    assert calls["s3vectors"] == {"PutVectors", "DeleteVectors", "QueryVectors", "GetVectors", "GetIndex"}
    assert calls["kms"] == {"GenerateDataKey", "Decrypt"}
    assert calls["bedrock"] == {"InvokeModel"}
    assert rerank == {"Rerank"}  # bedrock-agent-runtime's, authorized as bedrock:Rerank
    calls["bedrock"] |= rerank
    granted = {action for action, _ in _grants(built, "ApiServiceRole")}
    wanted = {f"{service}:{op}" for service, ops in calls.items() for op in ops}
    assert wanted <= granted, sorted(wanted - granted)


def test_the_graph_store_makes_only_the_keyword_tables_calls(built):
    """The knowledge graph shares the keyword index's table (docs/aws-design.md): what its adapter
    calls, read from its code, must be what both writers of that table (the API, the indexer) hold."""
    calls = _calls("memsvc/adapters/aws/dynamo_graph.py", _DYNAMO_CALLS, _DYNAMO_HELPERS)
    assert calls == {"GetItem", "Query", "BatchGetItem", "UpdateItem", "DeleteItem", "TransactWriteItems"}
    inside = set(re.findall(r'\{"(Put|Update|Delete|ConditionCheck)": ', (
        PROJECT_ROOT / "memsvc/adapters/aws/dynamo_graph.py").read_text()))
    assert inside == {"Put", "Update", "Delete"}
    as_iam = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem"}
    wanted = {f"dynamodb:{op}" for op in (calls - {"TransactWriteItems"}) | {as_iam[a] for a in inside}}
    for role in ("ApiServiceRole", "IndexerServiceRole"):
        assert {(action, "keyword-table") for action in wanted} <= _grants(built, role), role


def test_the_timeline_role_covers_every_call_its_adapters_make(built):
    """The event log's record path and the publisher, read from their code: if either starts
    making a new call, this fails until the role grants it. (Query is the log's scan: the API's.)"""
    source = (PROJECT_ROOT / "memsvc/adapters/aws/dynamo_timeline.py").read_text()
    log_calls = _calls("memsvc/adapters/aws/dynamo_timeline.py", _DYNAMO_CALLS, _DYNAMO_HELPERS)
    assert log_calls == {"GetItem", "Query", "BatchGetItem", "TransactWriteItems"}
    # IAM has no TransactWriteItems action: each action inside is authorized as its own operation.
    inside = set(re.findall(r'\{"(Put|Update|Delete|ConditionCheck)": ', source))
    assert inside == {"Put", "Update"}
    as_iam = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}
    publisher = _calls("memsvc/adapters/aws/eventbridge.py", (r"self\._client\.(\w+)\(",))
    assert publisher == {"PutEvents"}

    timeline = {action for action, _ in _grants(built, "TimelineServiceRole")}
    record_path = {"GetItem", "BatchGetItem"} | {as_iam[a] for a in inside}
    assert {f"dynamodb:{op}" for op in record_path} | {"events:PutEvents"} <= timeline
    api = {action for action, _ in _grants(built, "ApiServiceRole")}
    assert {"dynamodb:Query", "dynamodb:GetItem", "dynamodb:BatchGetItem"} <= api  # the events route's scan
