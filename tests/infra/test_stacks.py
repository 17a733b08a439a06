"""Both assembled environments: what each must contain, every route's authorizer, IAM hygiene,
and that dev and prod differ only where `infra/config.py` says they do."""

from __future__ import annotations

import inspect
import json

import pytest
from aws_cdk.aws_logs import RetentionDays

from infra.config import ENVIRONMENTS, EnvConfig, config_for
from infra.nag import flatten_cfn_reference
from infra.routes import service_routes
from infra.stack import MemsvcStack
from tests.infra.helpers import as_list, only, resources_of, statements

ENVS = sorted(ENVIRONMENTS)
RETENTION_DAYS = {RetentionDays.TWO_WEEKS: 14, RetentionDays.ONE_MONTH: 30, RetentionDays.THREE_MONTHS: 90,
                  RetentionDays.ONE_YEAR: 365}

# Actions that have no resource-level permissions: "*" is the only resource they accept.
RESOURCELESS_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "dynamodb:ListStreams",
                        "bedrock:Rerank"}  # its model is limited by InvokeModel on the model's ARN
# CDK's handler that copies the console's files at deploy time (test_console_stack.py checks it).
CONSOLE_FILES_HANDLER = "CustomCDKBucketDeployment"


def _service_functions(template: dict) -> dict[str, dict]:
    """The stack's own functions: every one but CDK's console-files handler."""
    return {k: r for k, r in resources_of(template, "AWS::Lambda::Function").items()
            if not k.startswith(CONSOLE_FILES_HANDLER)}


def test_both_environments_exist_and_only_config_selects_them():
    assert set(ENVIRONMENTS) == {"dev", "prod"}
    params = inspect.signature(MemsvcStack.__init__).parameters
    assert [p for p in params if params[p].kind is inspect.Parameter.KEYWORD_ONLY] == ["config"]
    assert params["config"].annotation in (EnvConfig, "EnvConfig")
    with pytest.raises(ValueError, match="unknown environment"):
        config_for("staging")
    with pytest.raises(ValueError):
        EnvConfig(**{**ENVIRONMENTS["dev"].__dict__, "vector_dimension": 768})


@pytest.mark.parametrize("env", ENVS)
def test_each_environment_has_the_whole_service(assembly, env):
    t = assembly.templates[env]
    counts: dict[str, int] = {}
    for resource in t["Resources"].values():
        counts[resource["Type"]] = counts.get(resource["Type"], 0) + 1
    expected = {
        "AWS::DynamoDB::GlobalTable": 2, "AWS::S3Vectors::VectorBucket": 1, "AWS::S3Vectors::Index": 1,
        "AWS::Events::EventBus": 1, "AWS::Events::Archive": 1, "AWS::KMS::Key": 3,
        "AWS::Lambda::Function": 7, "AWS::Lambda::LayerVersion": 2, "AWS::Lambda::EventSourceMapping": 3,
        "AWS::SQS::Queue": 4, "AWS::ApiGatewayV2::Api": 2, "AWS::ApiGatewayV2::Stage": 2,
        "AWS::ApiGatewayV2::Authorizer": 1, "AWS::Cognito::UserPool": 1, "AWS::Cognito::UserPoolClient": 2,
        "AWS::SNS::Topic": 1, "AWS::CloudWatch::Dashboard": 1, "AWS::IAM::Role": 8,
        "AWS::S3::Bucket": 1, "AWS::CloudFront::Distribution": 1,  # the console (and its files' handler)
        "AWS::IAM::ManagedPolicy": 1, "AWS::Events::Rule": 1,  # the session retention schedule
        "AWS::Scheduler::Schedule": 1,  # the reflection schedule
    }
    for type_, n in expected.items():
        assert counts.get(type_) == n, f"{env}: {type_} x{counts.get(type_)}, expected {n}"
    assert counts["AWS::ApiGatewayV2::Route"] == 2 * len(service_routes())
    # 2 APIs x (5xx, p99) + 6 functions x (errors, throttles) + 2 stream consumers x (iterator age, DLQ)
    # + the remember queue's DLQ + the indexer's quarantines + the api's embedding failures and degraded searches
    assert counts["AWS::CloudWatch::Alarm"] == 24
    # No Lambda function the stack did not write itself (no custom-resource helpers) but CDK's
    # console-files handler, its seventh.
    assert {f["Properties"]["FunctionName"] for f in _service_functions(t).values()} == {
        f"memsvc-{env}-api", f"memsvc-{env}-indexer", f"memsvc-{env}-timeline", f"memsvc-{env}-remember",
        f"memsvc-{env}-session-retention", f"memsvc-{env}-reflection"}
    assert {r["Properties"]["TableName"] for r in resources_of(t, "AWS::DynamoDB::GlobalTable").values()} == {
        f"memsvc-{env}-items", f"memsvc-{env}-keywords"}


@pytest.mark.parametrize("env", ENVS)
def test_every_route_of_both_apis_has_its_authorizer(assembly, env):
    t = assembly.templates[env]
    apis = {p["Properties"]["Name"]: logical for logical, p in resources_of(t, "AWS::ApiGatewayV2::Api").items()}
    assert set(apis) == {f"memsvc-{env}-jwt", f"memsvc-{env}-iam"}
    (jwt_authorizer,) = resources_of(t, "AWS::ApiGatewayV2::Authorizer").items()
    assert jwt_authorizer[1]["Properties"]["ApiId"] == {"Ref": apis[f"memsvc-{env}-jwt"]}
    want = {r.route_key for r in service_routes()}
    for api_name, logical in apis.items():
        routes = {r["Properties"]["RouteKey"]: r["Properties"] for r in resources_of(t, "AWS::ApiGatewayV2::Route").values()
                  if r["Properties"]["ApiId"] == {"Ref": logical}}
        assert set(routes) == want, api_name
        for key, route in routes.items():
            if key == "GET /health":
                assert route["AuthorizationType"] == "NONE"
            elif api_name.endswith("-jwt"):
                assert route["AuthorizationType"] == "JWT" and route["AuthorizerId"] == {"Ref": jwt_authorizer[0]}, key
            else:
                assert route["AuthorizationType"] == "AWS_IAM" and "AuthorizerId" not in route, key
    issuer = jwt_authorizer[1]["Properties"]["JwtConfiguration"]
    pool = next(iter(resources_of(t, "AWS::Cognito::UserPool")))
    clients = [{"Ref": client} for client in resources_of(t, "AWS::Cognito::UserPoolClient")]
    assert issuer == {"Issuer": {"Fn::GetAtt": [pool, "ProviderURL"]}, "Audience": clients}  # service, console


def _authenticated_tops() -> tuple[str, ...]:
    from infra.constructs.api import authenticated_paths
    from infra.routes import service_routes

    return tuple(f"/$default/*{path}" for path in authenticated_paths(service_routes()))


_AUTHENTICATED_TOPS = _authenticated_tops()


@pytest.mark.parametrize("env", ENVS)
def test_iam_statements_name_their_resources(assembly, env):
    t = assembly.templates[env]
    found = 0
    for logical, resource in t["Resources"].items():
        if resource["Type"] not in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy") or \
                logical.startswith(CONSOLE_FILES_HANDLER):
            continue
        for st in resource["Properties"]["PolicyDocument"]["Statement"]:
            found += 1
            assert st["Effect"] == "Allow", logical
            actions = as_list(st["Action"])
            resources = as_list(st["Resource"])
            for action in actions:
                assert "*" not in action, f"{logical}: wildcard action {action}"
            if "*" in resources:
                assert resources == ["*"] and set(actions) <= RESOURCELESS_ACTIONS, f"{logical}: {actions} on *"
            for r in resources:
                flat = flatten_cfn_reference(r)
                if r != "*" and "*" in flat:
                    # Only the IAM API's invoke policy: the authenticated routes by the first
                    # segment of their paths (/v1, /admin, /store), no public one among them.
                    assert logical.startswith("IamApiInvokePolicy"), f"{logical}: {flat}"
                    assert any(flat.endswith(suffix) for suffix in _AUTHENTICATED_TOPS), flat
    assert found >= 15


@pytest.mark.parametrize("env", ENVS)
def test_no_environment_has_a_default_tenant(assembly, env):
    """A token without a tenant claim (a Cognito access token) is a 401 on AWS, not tenant `default`."""
    assert ENVIRONMENTS[env].default_tenant is None
    for fn in _service_functions(assembly.templates[env]).values():
        assert "MEMSVC_DEFAULT_TENANT" not in fn["Properties"]["Environment"]["Variables"]


@pytest.mark.parametrize("env", ENVS)
def test_only_the_timeline_the_api_and_remember_publish_and_only_to_the_bus(assembly, env):
    """The timeline publishes memory events; the API the workflow events (session close, plan
    status, task-context deletion); the API and the remember function an extraction's
    `memory.candidate` and `memory.error`."""
    t = assembly.templates[env]
    bus = next(iter(resources_of(t, "AWS::Events::EventBus")))
    found = [(logical, st) for logical, r in resources_of(t, "AWS::IAM::Policy").items()
             for st in r["Properties"]["PolicyDocument"]["Statement"]
             if any(a.startswith("events:") for a in as_list(st["Action"]))]
    assert sorted(logical.split("ServiceRole")[0] for logical, _ in found) == ["Api", "Remember", "Timeline"]
    for _, st in found:
        assert (as_list(st["Action"]), st["Resource"]) == (["events:PutEvents"], {"Fn::GetAtt": [bus, "Arn"]})
    for name in ("timeline", "api", "remember"):
        function = [f["Properties"] for f in _service_functions(t).values()
                    if f["Properties"]["FunctionName"] == f"memsvc-{env}-{name}"][0]
        assert function["Environment"]["Variables"]["MEMSVC_EVENT_BUS_NAME"] == {"Ref": bus}
    # ...and the timeline never gets the envelope key (it copies ciphertext, never decrypts)
    envelope = next(k for k, r in resources_of(t, "AWS::KMS::Key").items() if k.startswith("KeysEnvelopeKey"))
    for st in statements(t, "TimelineServiceRole"):
        assert envelope not in json.dumps(st["Resource"])


@pytest.mark.parametrize("env", ENVS)
def test_the_keyword_table_is_read_and_written_by_the_api_the_indexer_and_remember_only(assembly, env):
    """Its own table: no stream (postings never reach the stream consumers), the storage key,
    point-in-time recovery; every function knows its name, the timeline has no access to it."""
    t = assembly.templates[env]
    (logical, table), = [(k, r["Properties"]) for k, r in resources_of(t, "AWS::DynamoDB::GlobalTable").items()
                         if k.startswith("KeywordsTable")]
    assert "StreamSpecification" not in table and "GlobalSecondaryIndexes" not in table
    assert "TimeToLiveSpecification" not in table
    (replica,) = table["Replicas"]
    assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    storage = next(k for k in resources_of(t, "AWS::KMS::Key") if k.startswith("KeysStorageKey"))
    assert replica["SSESpecification"]["KMSMasterKeyId"] == {"Fn::GetAtt": [storage, "Arn"]}
    readers = set()
    for role in ("ApiServiceRole", "IndexerServiceRole", "TimelineServiceRole", "RememberServiceRole"):
        for st in statements(t, role):
            if logical in json.dumps(st["Resource"]):
                assert as_list(st["Resource"]) == [{"Fn::GetAtt": [logical, "Arn"]}]
                readers.add(role)
    # remember indexes the memory it writes inline, as the API's sync_index does
    assert readers == {"ApiServiceRole", "IndexerServiceRole", "RememberServiceRole"}
    for fn in _service_functions(t).values():
        assert fn["Properties"]["Environment"]["Variables"]["MEMSVC_KEYWORD_TABLE_NAME"] == {"Ref": logical}


@pytest.mark.parametrize("env", ENVS)
def test_remember_reads_a_memorys_history_for_the_export_and_import_steps(assembly, env):
    t = assembly.templates[env]
    indexes = {json.dumps(r) for st in statements(t, "RememberServiceRole") if st["Action"] == "dynamodb:Query"
               for r in as_list(st["Resource"]) if "/index/" in json.dumps(r)}
    assert len(indexes) == 4 and any('"/index/history"' in r for r in indexes), indexes


@pytest.mark.parametrize("env", ENVS)
def test_both_stream_consumers_have_their_own_mapping_queue_and_alarms(assembly, env):
    t = assembly.templates[env]
    functions = {r["Properties"]["FunctionName"]: k for k, r in _service_functions(t).items()}
    mappings = {m["Properties"]["FunctionName"]["Ref"]: m["Properties"]
                for m in resources_of(t, "AWS::Lambda::EventSourceMapping").values()
                if m["Properties"]["FunctionName"]["Ref"] != functions[f"memsvc-{env}-remember"]}
    assert set(mappings) == {functions[f"memsvc-{env}-indexer"], functions[f"memsvc-{env}-timeline"]}
    destinations = {json.dumps(m["DestinationConfig"]) for m in mappings.values()}
    assert len(destinations) == 2
    assert {m["EventSourceArn"]["Fn::GetAtt"][1] for m in mappings.values()} == {"StreamArn"}
    alarms = {a["Properties"]["AlarmName"] for a in resources_of(t, "AWS::CloudWatch::Alarm").values()}
    for consumer in ("indexer", "timeline"):
        for alarm in ("errors", "throttles", "iterator-age", "dlq"):
            assert f"memsvc-{env}-{consumer}-{alarm}" in alarms
    assert f"memsvc-{env}-indexer-quarantined" in alarms
    assert f"memsvc-{env}-api-embedding-failures" in alarms
    assert f"memsvc-{env}-api-degraded-searches" in alarms


def test_prod_retains_and_protects_dev_cleans_up(assembly):
    for env, retain in (("dev", False), ("prod", True)):
        t = assembly.templates[env]
        policy = "Retain" if retain else "Delete"
        for type_ in ("AWS::DynamoDB::GlobalTable", "AWS::S3Vectors::VectorBucket", "AWS::S3Vectors::Index",
                      "AWS::KMS::Key", "AWS::Cognito::UserPool", "AWS::Logs::LogGroup", "AWS::Events::Archive"):
            for logical, resource in resources_of(t, type_).items():
                assert resource.get("DeletionPolicy") == policy, f"{env} {logical}"
        for table in resources_of(t, "AWS::DynamoDB::GlobalTable").values():
            assert table["Properties"]["Replicas"][0]["DeletionProtectionEnabled"] is retain
        assert only(t, "AWS::Cognito::UserPool")["DeletionProtection"] == ("ACTIVE" if retain else "INACTIVE")
    assert assembly.stacks["prod"].termination_protection is True
    assert assembly.stacks["dev"].termination_protection is False


def test_environments_differ_as_configured(assembly):
    for env in ENVS:
        config = ENVIRONMENTS[env]
        t = assembly.templates[env]
        assert only(t, "AWS::S3Vectors::Index")["Dimension"] == config.vector_dimension
        groups = [g["Properties"]["RetentionInDays"] for g in resources_of(t, "AWS::Logs::LogGroup").values()]
        assert set(groups) == {RETENTION_DAYS[config.log_retention], RETENTION_DAYS[config.access_log_retention]}
        api = [f["Properties"] for f in _service_functions(t).values()
               if f["Properties"]["FunctionName"].endswith("-api")][0]
        assert api.get("ReservedConcurrentExecutions") == config.api_reserved_concurrency
        assert api["Environment"]["Variables"]["LOG_LEVEL"] == config.log_level
        fns = {f["Properties"]["FunctionName"]: k for k, f in _service_functions(t).items()}
        mappings = {m["Properties"]["FunctionName"]["Ref"]: m["Properties"]
                    for m in resources_of(t, "AWS::Lambda::EventSourceMapping").values()}
        for consumer, stream in (("indexer", config.indexer_stream), ("timeline", config.timeline_stream)):
            mapping = mappings[fns[f"memsvc-{env}-{consumer}"]]
            assert mapping["ParallelizationFactor"] == stream.parallelization_factor
            assert mapping["BatchSize"] == stream.batch_size
            assert mapping["MaximumBatchingWindowInSeconds"] == stream.batching_window_seconds
        for stage in resources_of(t, "AWS::ApiGatewayV2::Stage").values():
            assert stage["Properties"]["DefaultRouteSettings"] == {
                "ThrottlingRateLimit": config.api_throttle.rate_per_second,
                "ThrottlingBurstLimit": config.api_throttle.burst}
        alarms = {a["Properties"]["AlarmName"]: a["Properties"] for a in resources_of(t, "AWS::CloudWatch::Alarm").values()}
        assert alarms[f"memsvc-{env}-jwt-api-5xx"]["Threshold"] == config.alarms.api_5xx_per_5min
        assert only(t, "AWS::Events::Archive")["RetentionDays"] == config.event_archive_retention_days
    dev, prod = ENVIRONMENTS["dev"], ENVIRONMENTS["prod"]
    assert prod.alarms.api_5xx_per_5min <= dev.alarms.api_5xx_per_5min
    assert prod.alarms.stream_iterator_age_seconds <= dev.alarms.stream_iterator_age_seconds


def test_environments_have_the_same_shape(assembly):
    """Same resources under the same logical ids (Lambda permissions aside: CDK puts the stack
    name in theirs)."""
    def shape(env: str) -> dict[str, str]:
        return {k: r["Type"] for k, r in assembly.templates[env]["Resources"].items()
                if r["Type"] != "AWS::Lambda::Permission"}

    assert shape("dev") == shape("prod")
    # the two APIs' invoke permissions, and the retention schedule's
    assert len(resources_of(assembly.templates["dev"], "AWS::Lambda::Permission")) == len(
        resources_of(assembly.templates["prod"], "AWS::Lambda::Permission")) == 3
    assert sorted(assembly.templates["dev"]["Outputs"]) == sorted(assembly.templates["prod"]["Outputs"])


def test_nothing_but_the_config_selects_what_is_deployed():
    """No construct or stack reads the environment, CDK context or the CLI's account: the only
    input is `EnvConfig` (and `-c env=` choosing which one, in infra/app.py)."""
    from infra.stack import PROJECT_ROOT

    offenders = []
    for path in sorted((PROJECT_ROOT / "infra").rglob("*.py")):
        source = path.read_text()
        for needle in ("os.environ", "getenv", "try_get_context", "CDK_DEFAULT_"):
            if needle in source and not (path.name == "app.py" and needle == "try_get_context"):
                offenders.append(f"{path.relative_to(PROJECT_ROOT)}: {needle}")
    assert offenders == []


@pytest.mark.parametrize("env", ENVS)
def test_outputs(assembly, env):
    outputs = assembly.templates[env]["Outputs"]
    assert {"JwtApiUrl", "IamApiUrl", "IamInvokePolicyArn", "JwtIssuer", "JwtAudience", "UserPoolId",
            "UserPoolClientId", "TableName", "KeywordTableName", "VectorBucketName", "VectorIndexName", "EventBusName",
            "AlarmTopicArn", "DashboardName"} <= set(outputs)
    tables = {k.split("Table")[0]: k for k in resources_of(assembly.templates[env], "AWS::DynamoDB::GlobalTable")}
    assert outputs["TableName"]["Value"] == {"Ref": tables["Items"]}
    assert outputs["KeywordTableName"]["Value"] == {"Ref": tables["Keywords"]}


def test_an_external_issuer_replaces_the_user_pool(tmp_path):
    from infra.config import ExternalJwtIssuer
    from tests.infra.helpers import new_app

    config = EnvConfig(**{**ENVIRONMENTS["dev"].__dict__, "name": "ext", "console": False,
                          "jwt_issuer": ExternalJwtIssuer("https://login.example.com/", ("memsvc",))})
    app = new_app(tmp_path)
    MemsvcStack(app, "Ext", config=config)
    t = json.loads(json.dumps(app.synth().get_stack_by_name("memsvc-ext").template))
    assert not resources_of(t, "AWS::Cognito::UserPool")
    assert only(t, "AWS::ApiGatewayV2::Authorizer")["JwtConfiguration"] == {
        "Issuer": "https://login.example.com/", "Audience": ["memsvc"]}
    assert t["Outputs"]["JwtIssuer"]["Value"] == "https://login.example.com/"
    assert "UserPoolId" not in t["Outputs"]


def test_env_context_selects_one_environment():
    import aws_cdk as cdk

    from infra.app import selected_environments

    assert selected_environments(cdk.App(context={"env": "prod"})) == ["prod"]
    assert selected_environments(cdk.App()) == ENVS
    with pytest.raises(ValueError, match="unknown environment"):
        selected_environments(cdk.App(context={"env": "qa"}))


@pytest.mark.parametrize("env", ENVS)
def test_no_function_reserves_concurrency_a_small_account_cannot_spare(assembly, env):
    """Lambda refuses a reservation leaving under 100 unreserved executions; a new account's quota
    can be 10, so no environment reserves any unless its config names a quota that allows it."""
    reserved = {f["Properties"]["FunctionName"]: f["Properties"]["ReservedConcurrentExecutions"]
                for f in _service_functions(assembly.templates[env]).values()
                if "ReservedConcurrentExecutions" in f["Properties"]}
    assert reserved == {}


def test_a_reservation_must_leave_the_account_100_unreserved():
    dev = ENVIRONMENTS["dev"].__dict__
    with pytest.raises(ValueError, match="account_concurrency_quota"):
        EnvConfig(**{**dev, "api_reserved_concurrency": 100})
    with pytest.raises(ValueError, match="at least 200"):
        EnvConfig(**{**dev, "api_reserved_concurrency": 100, "account_concurrency_quota": 199})
    assert EnvConfig(**{**dev, "api_reserved_concurrency": 100, "account_concurrency_quota": 200})


@pytest.mark.parametrize("env", ENVS)
def test_remember_queue_dead_letters_and_who_may_use_it(assembly, env):
    """`wait: false`: the API sends to the remember queue; the remember function consumes it
    (partial batch failures) and sends extractions' follow-ups, and what fails 5 times moves to the
    encrypted dead-letter queue."""
    t = assembly.templates[env]
    queues = {k: r["Properties"] for k, r in resources_of(t, "AWS::SQS::Queue").items()}
    (queue_id,) = [k for k, q in queues.items() if q.get("QueueName") == f"memsvc-{env}-remember"]
    (dlq_id,) = [k for k, q in queues.items() if q.get("QueueName") == f"memsvc-{env}-remember-dlq"]
    queue = queues[queue_id]
    assert queue["RedrivePolicy"] == {"deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]}, "maxReceiveCount": 5}
    assert queue["SqsManagedSseEnabled"] is True and queues[dlq_id]["SqsManagedSseEnabled"] is True
    functions = {r["Properties"]["FunctionName"]: (k, r["Properties"]) for k, r in
                 _service_functions(t).items()}
    remember_id, remember = functions[f"memsvc-{env}-remember"]
    assert remember["Handler"] == "functions.remember.handler"
    assert queue["VisibilityTimeout"] == 6 * remember["Timeout"]
    (mapping,) = [m["Properties"] for m in resources_of(t, "AWS::Lambda::EventSourceMapping").values()
                  if m["Properties"]["FunctionName"]["Ref"] == remember_id]
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # The API sends, and so does the remember function: queued extractions queue their follow-ups.
    for name, role in (("api", "ApiServiceRole"), ("remember", "RememberServiceRole")):
        variables = functions[f"memsvc-{env}-{name}"][1]["Environment"]["Variables"]
        assert variables["MEMSVC_REMEMBER_QUEUE_URL"] == {"Ref": queue_id}
        sends = [st for st in statements(t, role) if "sqs:SendMessage" in as_list(st["Action"])]
        assert [as_list(st["Resource"]) for st in sends] == [[{"Fn::GetAtt": [queue_id, "Arn"]}]]
    judge = [st for role in ("ApiServiceRole", "RememberServiceRole") for st in statements(t, role)
             if "amazon.nova-micro-v1:0" in json.dumps(st["Resource"])]
    assert len(judge) == 2 and all(as_list(st["Action"]) == ["bedrock:InvokeModel"] for st in judge)
