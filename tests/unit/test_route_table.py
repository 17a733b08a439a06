"""The route table is the only declaration of the HTTP API: the OpenAPI document and API
Gateway's routes come from it, and the document is as strict as the parser."""

from __future__ import annotations

import json
import re

import jsonschema_rs
import pytest

from infra.routes import service_routes
from memsvc.api.openapi import openapi_document
from memsvc.api.routes import ROUTES
from memsvc.core.errors import InvalidArgument
from memsvc.core.filters import parse_filter
from memsvc.core.validation import WHITESPACE
from memsvc.service.search import FILTER_SCHEMA

DOC = openapi_document(ROUTES)
SCHEMAS = DOC["components"]["schemas"]


def test_every_row_is_in_the_document_and_in_api_gateway():
    rows = {(r.method, r.path.replace(":uuid", "")) for r in ROUTES}
    documented = {(m.upper(), p) for p, ops in DOC["paths"].items() for m in ops}
    assert documented == rows
    assert {(r.method, r.path) for r in service_routes()} == rows


def test_the_document_says_what_the_parser_refuses():
    put = SCHEMAS["PutMemoryBody"]
    assert put["additionalProperties"] is False
    assert put["properties"]["namespace"]["minItems"] == 1
    assert put["properties"]["namespace"]["items"]["minLength"] == 1
    assert put["properties"]["key"]["minLength"] == 1
    assert SCHEMAS["SearchBody"]["properties"]["query"]["pattern"] == f"[^{WHITESPACE}]"
    names = SCHEMAS["PoliciesBody"]["properties"]["policies"]["propertyNames"]["pattern"]
    assert names.startswith("^") and names.endswith(r"\.rego$")
    settings = SCHEMAS["SettingsBody"]
    assert settings["additionalProperties"] is False and set(settings["properties"]) == {
        "max_depth", "tombstone_retention_days", "keyword_index", "rerank", "semantic_auto_update", "semantic_check_low",
        "episodic_auto_update", "episodic_check_low", "episodic_merge_window_hours", "neighbors_k",
        "remember_per_hour", "judge_model_id", "recall_weights", "decay_rate_per_day", "recall_min_match",
        "recall_cut_gap", "recall_cut_margin",
        "promote_important", "promotion_threshold", "promote_to", "session_auto_delete", "session_retention_days",
        # issue 24: extraction, then reflection
        "session_extract", "extract_every_messages", "extract_idle_seconds", "extraction_model_id",
        "reflection_enabled", "reflection_interval_hours", "reflection_max_memories", "archive_below",
        "archive_after_days", "reflection_exempt_layers", "profile_token_budget"}
    remember = SCHEMAS["RememberBody"]
    assert remember["additionalProperties"] is False and remember["required"] == ["content"]
    assert remember["properties"]["content"]["pattern"] == f"[^{WHITESPACE}]"
    recall = SCHEMAS["RecallBody"]
    assert recall["additionalProperties"] is False and recall["required"] == ["query"]
    assert (recall["properties"]["limit"]["minimum"], recall["properties"]["limit"]["maximum"]) == (1, 50)
    assert recall["properties"]["token_budget"]["maximum"] == 8000
    get_params = {p["name"]: p for p in DOC["paths"]["/v1/memories"]["get"]["parameters"]}
    assert get_params["ns"]["required"] and get_params["ns"]["schema"]["minItems"] == 1
    assert get_params["key"]["schema"]["minLength"] == 1
    limit = {p["name"]: p for p in DOC["paths"]["/v1/memories/events"]["get"]["parameters"]}["limit"]
    assert (limit["schema"]["minimum"], limit["schema"]["maximum"]) == (1, 200)


@pytest.mark.parametrize("body", [
    {"namespace": [], "key": "k", "value": {}},
    {"namespace": ["a"], "key": "", "value": {}},
    {"namespace": ["a", ""], "key": "k", "value": {}},
    {"namespace": ["a"], "key": "k", "value": {}, "index_fields": 0},
    {"namespace": ["a"], "key": "k", "value": {}, "extra": 1},
])
def test_what_the_document_refuses_the_parser_refuses(body):
    row = next(r for r in ROUTES if (r.method, r.path) == ("PUT", "/v1/memories"))
    with pytest.raises(InvalidArgument):
        row.body.parse(body)


def test_every_path_template_parameter_is_declared_and_only_uuids_say_uuid():
    for path, ops in DOC["paths"].items():
        names = set(re.findall(r"\{(\w+)\}", path))
        for op in ops.values():
            declared = {p["name"]: p["schema"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert set(declared) == names, path
    memory = DOC["paths"]["/admin/v1/memories/{id}"]["delete"]["parameters"][0]["schema"]
    session = DOC["paths"]["/v1/memory/sessions/{id}"]["get"]["parameters"][0]["schema"]
    assert memory.get("format") == "uuid" and "format" not in session


def test_remember_documents_its_202_and_every_operation_its_error_codes():
    remember = DOC["paths"]["/v1/memories/remember"]["post"]["responses"]
    assert remember["202"]["content"]["application/json"]["schema"]["$ref"].endswith("/RememberAcceptedOut")
    assert "RememberAcceptedOut" in SCHEMAS
    for code in ("409", "412", "422", "429", "503"):
        assert code in remember


def test_the_document_states_the_rules_across_fields():
    """Issue 22: every rule JSON Schema can state is in the document."""
    search = SCHEMAS["SearchBody"]
    assert search["dependentRequired"] == {"mode": ["query"], "min_score": ["query"]}
    assert not any(s.get("type") == "null" for name in ("query", "mode", "min_score")
                   for s in search["properties"][name].get("anyOf", ()))  # absent has one spelling
    endpoint = SCHEMAS["Endpoint"]
    assert endpoint["oneOf"] == [{"required": ["entity"]}, {"required": ["memory"]}]
    ref, = DOC["paths"]["/v1/memory/semantic"]["get"]["parameters"]
    assert (ref["style"], ref["explode"]) == ("form", True)
    assert ref["schema"]["oneOf"] == [{"required": ["external_id"]}, {"required": ["content_hash"]}]
    for body in ("RecallBody", "RememberBody"):
        identifiers = SCHEMAS[body]["properties"]["identifiers"]
        assert identifiers["additionalProperties"] is False and set(identifiers["properties"]) == {
            "agent_id", "user_id", "session_id", "project_id", "team_id", "org_id"}
        assert any(rule["if"]["properties"] and rule["then"]["required"] == ["identifiers"]
                   for rule in SCHEMAS[body]["allOf"])
    assert SCHEMAS["RecallBody"]["dependentSchemas"]["namespace_prefix"]
    index_fields = SCHEMAS["PutMemoryBody"]["properties"]["index_fields"]["anyOf"][0]
    assert "minItems" not in index_fields  # [] embeds nothing, as `false` (LangGraph's `index=[]`)
    assert index_fields["maxItems"] == 64 and index_fields["items"]["pattern"]
    assert SCHEMAS["PutEntity"]["properties"]["name"]["pattern"].startswith(f"[^{WHITESPACE}")
    ttl = SCHEMAS["PutMemoryBody"]["properties"]["ttl_seconds"]["anyOf"][0]
    assert ttl["type"] == "integer" and ttl["minimum"] == 1 and "ge" not in ttl
    settings = SCHEMAS["SettingsBody"]["properties"]
    assert (settings["semantic_auto_update"]["type"], settings["max_depth"]["type"]) == ("number", "integer")
    assert "default" not in settings["max_depth"]  # absent means keep; null is refused


# (The rules across fields are the services' to check: tests/api/test_schemathesis.py holds the
# server to them, negative examples included.)
@pytest.mark.parametrize(("model", "body"), [
    ("SearchBody", {"namespace_prefix": [], "query": None}),  # absent has one spelling
    ("SearchBody", {"namespace_prefix": [], "query": "\x85"}),  # blank: U+0085 is White_Space
    ("RecallBody", {"query": "x", "layers": None}),
    ("PutMemoryBody", {"namespace": ["a"], "key": "k", "value": {}, "ttl_seconds": 1.5}),
])
def test_what_the_new_field_rules_refuse_the_parser_refuses(model, body):
    row = next(r for r in ROUTES if r.body is not None and r.body.__name__ == model)
    with pytest.raises(InvalidArgument):
        row.body.parse(body)


def test_an_integer_may_be_written_as_a_number_without_a_fraction():
    """JSON Schema's "integer" takes 10.0, and so does the parser."""
    row = next(r for r in ROUTES if (r.method, r.path) == ("POST", "/v1/memories/search"))
    assert row.body.parse({"namespace_prefix": [], "limit": 10.0}).limit == 10


def test_the_served_document_is_the_route_table_s(local_app):
    """Built once (it is the same for every request), and the same as the table's."""
    from tests.unit.test_router import call

    status, served, headers = call(local_app, "GET", "/openapi.json")
    assert status == 200 and headers["content-type"] == "application/json"
    assert served == json.loads(json.dumps(DOC))



@pytest.mark.parametrize("condition", [{"eq": 1}, {"$in": [1, 2]}, {"gte": "2024-05-01"}, {"x": 1}, {"eqx": 1},
                                       {"in\n": 1}, {}, 7, [1, 2], None, {"$numberDouble": "NaN"}])
def test_the_filter_schema_admits_what_the_parser_takes(condition):
    parse_filter({"a": condition})
    assert jsonschema_rs.validator_for({"type": "object", **FILTER_SCHEMA}).is_valid({"a": condition})


@pytest.mark.parametrize("condition", [{"in": 1}, {"$x": 1}, {"x": 1, "eq": 2}])
def test_the_filter_schema_refuses_what_the_parser_refuses(condition):
    assert not jsonschema_rs.validator_for({"type": "object", **FILTER_SCHEMA}).is_valid({"a": condition})
    with pytest.raises(InvalidArgument):
        parse_filter({"a": condition})


def test_the_document_states_the_defaults_and_the_retry_after_header_the_contract_names():
    """API-AGENT.md's defaults (`data={}`, `sub_tasks=[]`, ...; remember's `layer` user) and
    API.md's "429 with Retry-After" are in the document, as the server applies them."""
    defaults = {("CreateTaskContext", "data"): {}, ("CreateTaskContext", "sub_tasks"): [],
                ("CreateTaskContext", "state"): {}, ("CreatePlan", "goal_data"): {}, ("CreatePlan", "state"): {},
                ("CreateSessionBody", "metadata"): {}, ("UpsertSemanticBody", "metadata"): {},
                ("RememberBody", "layer"): "user"}
    for (model, field), default in defaults.items():
        assert SCHEMAS[model]["properties"][field]["default"] == default, (model, field)
    for path, operations in DOC["paths"].items():
        for method, op in operations.items():
            if "security" in op:  # every route behind an identity can be rate limited
                assert op["responses"]["429"]["headers"]["Retry-After"]["schema"]["pattern"] == "^[0-9]+$", (method, path)
