"""`memsvc.aws_restore` on moto: both tables restored into new ones set up as the stack's, a new
vector index, and every live item indexed again by the real indexer, so the restored deployment
answers get, search, history and the graph as the original did.

moto's RestoreTableToPointInTime copies the table as it is now, whatever the time asked: what is
tested here is everything around it (the recovery window, the settings a restore does not copy,
the rebuild); DynamoDB's own restore to a second in the past is not testable offline."""

from __future__ import annotations

import io
import zipfile
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import Stubber

from memsvc.adapters.aws.dynamo_graph import DynamoGraphStore
from memsvc.adapters.aws.dynamo_keywords import DynamoKeywordIndex
from memsvc.adapters.aws.point_in_time import PointInTimeError, PointInTimeRestore, deployed_environment
from memsvc.api.schemas import PutMemoryBody
from memsvc.aws_restore import recover
from memsvc.bootstrap import build_aws
from memsvc.cli import main
from memsvc.core.models import Caller, attempt_mark
from memsvc.service.graph import FindEntities, PutEntity
from memsvc.service.history import HistoryQuery
from memsvc.service.search import SearchQuery
from memsvc.settings import AwsSettings
from tests.fakes.aws_stack import BUCKET, INDEX, KEYWORD_TABLE, REGION, TABLE

ALICE = Caller(tenant_id="acme", user_id="alice", roles=("user",))
NOTES = ("user", "alice", "notes")
FACTS = {"paris": "The capital of France is Paris", "bread": "Sourdough bread needs a starter culture",
         "vim": "Alice edits code in vim"}


def _settings(stack) -> AwsSettings:
    key_id = stack.clients.kms.list_keys()["Keys"][0]["KeyId"]
    return AwsSettings(region=REGION, table_name=TABLE, keyword_table_name=KEYWORD_TABLE, vector_bucket=BUCKET,
                       vector_index=INDEX, kms_key_id=key_id, embedding_dimension=stack.embedder.dimension)


def _with_recovery(stack):
    """Point-in-time recovery on both tables, as the stack enables it, with a day's window ending
    now (moto's window is the instant it was enabled, another for each table); its end."""
    latest = datetime.now(timezone.utc)

    def window(parsed, **kwargs):
        recovery = parsed["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
        if recovery["PointInTimeRecoveryStatus"] == "ENABLED":
            recovery.update(EarliestRestorableDateTime=latest - timedelta(days=1), LatestRestorableDateTime=latest)

    for table in (TABLE, KEYWORD_TABLE):
        stack.clients.dynamodb.update_continuous_backups(
            TableName=table, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    stack.clients.dynamodb.meta.events.register("after-call.dynamodb.DescribeContinuousBackups", window)
    return latest


def _answers(app) -> dict:
    services = app.services
    search = services.search.answer(ALICE, SearchQuery(namespace_prefix=list(NOTES), query="baking bread"),
                                    request_id="r")
    history = services.history.history(ALICE, HistoryQuery.model_validate({"ns": list(NOTES), "key": "vim"}))
    entities = services.graph.find_entities(ALICE, FindEntities(namespace_prefix=list(NOTES), names=["Alice"]))
    return {
        "get": {key: services.memories.get(ALICE, NOTES, key).value for key in FACTS},
        "search": [(m.key, round(m.score, 4)) for m in search.memories],
        "history": [v.version for v in history.versions],
        "entities": sorted(e.name for e in entities),
    }


def test_the_restored_tables_answer_as_the_originals_did_with_their_indexes_rebuilt(stack):
    services = stack.app.services
    for key, text in FACTS.items():
        services.memories.put(ALICE, PutMemoryBody(namespace=list(NOTES), key=key, value={"text": text}))
    services.memories.put(ALICE, PutMemoryBody(namespace=list(NOTES), key="vim", value={"text": "Alice uses vim"}))
    services.graph.put_entity(ALICE, PutEntity(namespace=list(NOTES), name="Alice", type="PERSON"))
    stack.drain()
    before = _answers(stack.app)
    assert before["search"][0][0] == "bread" and before["history"] == [2, 1] and before["entities"] == ["Alice"]
    # at the time restored to, a Lambda was indexing "paris" alone: its mark says nothing of the rebuild
    stack.app.store.begin_attempts([stack.app.store.get("acme", NOTES, "paris")], attempt_mark("alone", "a-lambda"))
    at = _with_recovery(stack)

    lines: list[str] = []
    report = recover(_settings(stack), at, suffix="pitr-1", clients=stack.clients, embedder=stack.embedder,
                     progress=lines.append)

    assert (report.items, report.indexed, report.quarantined, report.failed) == (3, 3, 0, 0)
    assert report.settings.table_name == f"{TABLE}-pitr-1"
    assert report.settings.vector_index == f"{INDEX}-pitr-1"
    assert any("created the vector index" in line for line in lines)
    restored = build_aws(report.settings, clients=stack.clients, embedder=stack.embedder)
    assert _answers(restored) == before
    vectors = stack.clients.s3vectors.list_vectors(vectorBucketName=BUCKET, indexName=report.settings.vector_index,
                                                   returnMetadata=True)["vectors"]
    assert {v["metadata"]["key"] for v in vectors} == set(FACTS)


def test_the_restored_tables_get_what_a_restore_does_not_copy(stack):
    at = _with_recovery(stack)
    recover(_settings(stack), at, suffix="pitr-2", clients=stack.clients, embedder=stack.embedder)

    dynamodb = stack.clients.dynamodb
    items = dynamodb.describe_table(TableName=f"{TABLE}-pitr-2")["Table"]
    assert items["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert dynamodb.describe_time_to_live(TableName=f"{TABLE}-pitr-2")["TimeToLiveDescription"][
        "TimeToLiveStatus"] == "ENABLED"
    for table in (f"{TABLE}-pitr-2", f"{KEYWORD_TABLE}-pitr-2"):
        assert dynamodb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"][
            "PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"
    assert "StreamSpecification" not in dynamodb.describe_table(TableName=f"{KEYWORD_TABLE}-pitr-2")["Table"]


def test_a_time_outside_the_window_and_a_suffix_in_use_are_refused_before_anything_is_made(stack):
    at = _with_recovery(stack)
    with pytest.raises(PointInTimeError, match=f"{TABLE} can be restored to a time from .* not "):
        recover(_settings(stack), at + timedelta(days=1), suffix="pitr-3", clients=stack.clients,
                embedder=stack.embedder)
    assert f"{TABLE}-pitr-3" not in stack.clients.dynamodb.list_tables()["TableNames"]

    recover(_settings(stack), at, suffix="pitr-3", clients=stack.clients, embedder=stack.embedder)
    with pytest.raises(PointInTimeError, match=f"{TABLE}-pitr-3 already exists"):
        recover(_settings(stack), at, suffix="pitr-3", clients=stack.clients, embedder=stack.embedder)
    report = recover(_settings(stack), at, suffix="pitr-3", clients=stack.clients, embedder=stack.embedder,
                     resume=True)
    assert report.failed == 0


def test_a_table_without_recovery_and_a_resume_of_nothing_are_refused(stack):
    settings = _settings(stack)
    with pytest.raises(PointInTimeError, match=f"{TABLE} has no point-in-time recovery enabled"):
        recover(settings, stack.clock.now(), suffix="pitr-4", clients=stack.clients, embedder=stack.embedder)
    with pytest.raises(PointInTimeError, match=f"{TABLE}-pitr-4 does not exist: there is nothing to resume"):
        recover(settings, stack.clock.now(), suffix="pitr-4", clients=stack.clients, embedder=stack.embedder,
                resume=True)


def test_a_resume_after_a_run_cut_short_while_the_tables_restored_finishes_every_step(stack, monkeypatch):
    """The operator's session dies while the restores run (after RestoreTableToPointInTime, before
    anything else): the resume waits for the tables, sets them up, makes the index and indexes."""
    services = stack.app.services
    for key, text in FACTS.items():
        services.memories.put(ALICE, PutMemoryBody(namespace=list(NOTES), key=key, value={"text": text}))
    stack.drain()
    at = _with_recovery(stack)

    def session_dies(self, table):
        raise KeyboardInterrupt

    monkeypatch.setattr(PointInTimeRestore, "wait_active", session_dies)
    with pytest.raises(KeyboardInterrupt):
        recover(_settings(stack), at, suffix="pitr-5", clients=stack.clients, embedder=stack.embedder)
    monkeypatch.undo()
    dynamodb = stack.clients.dynamodb
    assert "StreamSpecification" not in dynamodb.describe_table(TableName=f"{TABLE}-pitr-5")["Table"]

    report = recover(_settings(stack), at, suffix="pitr-5", clients=stack.clients, embedder=stack.embedder,
                     resume=True)
    assert (report.items, report.indexed, report.failed) == (3, 3, 0)
    assert dynamodb.describe_table(TableName=f"{TABLE}-pitr-5")["Table"]["StreamSpecification"] == {
        "StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert dynamodb.describe_time_to_live(TableName=f"{TABLE}-pitr-5")["TimeToLiveDescription"][
        "TimeToLiveStatus"] == "ENABLED"
    for table in (f"{TABLE}-pitr-5", f"{KEYWORD_TABLE}-pitr-5"):
        assert dynamodb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"][
            "PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"
    restored = build_aws(report.settings, clients=stack.clients, embedder=stack.embedder)
    found = restored.services.search.answer(ALICE, SearchQuery(namespace_prefix=list(NOTES), query="baking bread"),
                                            request_id="r")
    assert found.memories[0].key == "bread"
    # and again: every step finds its work done
    again = recover(_settings(stack), at, suffix="pitr-5", clients=stack.clients, embedder=stack.embedder,
                    resume=True)
    assert (again.indexed, again.failed) == (3, 0)


def test_the_rebuild_starts_from_no_derived_row_and_keeps_the_explicit_graph(stack):
    """At the time restored to, the indexer had not yet removed the rows of a memory deleted just
    before, and a posting of a version long gone lingers: neither survives the rebuild; the live
    items' rows and the explicitly written entity do."""
    services = stack.app.services
    for key, text in FACTS.items():
        services.memories.put(ALICE, PutMemoryBody(namespace=list(NOTES), key=key, value={"text": text}))
    services.memories.put(ALICE, PutMemoryBody(namespace=list(NOTES), key="gone",
                                               value={"text": "Bob plays chess with Alice on Sundays"}))
    services.graph.put_entity(ALICE, PutEntity(namespace=list(NOTES), name="Alice", type="PERSON"))
    stack.drain()
    gone_id = stack.app.store.get("acme", NOTES, "gone").id
    services.memories.delete(ALICE, NOTES, "gone")  # deleted before T; the indexer has not seen it at T
    stale = {"pk": {"S": "T#acme#W#stale-term"}, "sk": {"S": "user\x1ealice\x1enotes\x1fm-superseded"},
             "tf": {"N": "3"}, "dl": {"N": "7"}, "v": {"N": "1"}, "k": {"S": "old"}}
    stack.clients.dynamodb.put_item(TableName=KEYWORD_TABLE, Item=stale)
    source_keywords = DynamoKeywordIndex(stack.clients.dynamodb, KEYWORD_TABLE)
    assert gone_id in source_keywords.memory_ids("acme")  # what the restored table starts from
    at = _with_recovery(stack)

    report = recover(_settings(stack), at, suffix="pitr-6", clients=stack.clients, embedder=stack.embedder)

    assert (report.items, report.indexed, report.failed) == (3, 3, 0)
    restored_table = report.settings.keyword_table_name
    live_ids = {stack.app.store.get("acme", NOTES, key).id for key in FACTS}
    assert DynamoKeywordIndex(stack.clients.dynamodb, restored_table).memory_ids("acme") == live_ids
    assert "Item" not in stack.clients.dynamodb.get_item(TableName=restored_table,
                                                         Key={"pk": stale["pk"], "sk": stale["sk"]})
    rows = [row for page in stack.clients.dynamodb.get_paginator("scan").paginate(TableName=restored_table)
            for row in page["Items"]]
    assert not [row for row in rows if gone_id in row["sk"]["S"] or gone_id in str(row.get("mid", ""))]
    graph = DynamoGraphStore(stack.clients.dynamodb, restored_table)
    assert {m.key for m in graph.derived_memories("acme")} <= set(FACTS)
    assert any(row["pk"]["S"].startswith("T#acme#FD#") for row in rows)  # the live items' field tokens
    restored = build_aws(report.settings, clients=stack.clients, embedder=stack.embedder)
    entities = restored.services.graph.find_entities(ALICE, FindEntities(namespace_prefix=list(NOTES),
                                                                         names=["Alice"]))
    assert [e.name for e in entities] == ["Alice"]
    chess = restored.services.search.answer(ALICE, SearchQuery(namespace_prefix=list(NOTES), query="chess Sundays",
                                                               mode="keyword"), request_id="r")
    assert [m.key for m in chess.memories] == []


def _stack_resources(functions: list[str]):
    """A CloudFormation client answering ListStackResources for `memsvc-dev` (moto's CloudFormation
    needs packages this project does not install)."""
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    stubber = Stubber(cloudformation)
    stubber.add_response("list_stack_resources", {"StackResourceSummaries": [
        {"LogicalResourceId": name.title(), "PhysicalResourceId": name, "ResourceType": "AWS::Lambda::Function",
         "LastUpdatedTimestamp": datetime(2026, 1, 1), "ResourceStatus": "CREATE_COMPLETE"} for name in functions]},
        {"StackName": "memsvc-dev"})
    stubber.add_client_error("list_stack_resources", "ValidationError", "Stack with id memsvc-nope does not exist",
                             expected_params={"StackName": "memsvc-nope"})
    stubber.activate()
    return cloudformation


def test_the_stack_is_read_through_its_indexer_functions_environment(stack):
    lambda_client = boto3.client("lambda", region_name=REGION)
    role = boto3.client("iam", region_name=REGION).create_role(
        RoleName="memsvc-dev", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "")
    for name, handler, env in (("memsvc-dev-api", "functions.api.handler", {"MEMSVC_TABLE_NAME": "wrong"}),
                               ("memsvc-dev-indexer", "functions.indexer.handler", {"MEMSVC_TABLE_NAME": TABLE})):
        lambda_client.create_function(FunctionName=name, Runtime="python3.12", Role=role, Handler=handler,
                                      Code={"ZipFile": code.getvalue()}, Environment={"Variables": env})
    cloudformation = _stack_resources(["memsvc-dev-api", "memsvc-dev-indexer"])

    assert deployed_environment("memsvc-dev", cloudformation=cloudformation, lambda_client=lambda_client) == {
        "MEMSVC_TABLE_NAME": TABLE}
    with pytest.raises(PointInTimeError, match="^reading the stack on memsvc-nope failed: AWS answered ValidationError$"):
        deployed_environment("memsvc-nope", cloudformation=cloudformation, lambda_client=lambda_client)


def test_the_cli_refuses_a_time_without_its_offset(capsys):
    assert main(["aws-restore", "--stack", "memsvc-dev", "--region", REGION, "--to-time", "2026-11-27T09:30"]) == 2
    assert capsys.readouterr().err == ("memsvc: --to-time '2026-11-27T09:30' is not an RFC 3339 time with its "
                                       "offset\n")
