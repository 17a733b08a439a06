"""The router over API Gateway v2 events, in-process (no HTTP)."""

from __future__ import annotations

import json

from memsvc.local_server import build_event, stringify_claims


def call(app, method, path, query="", body=None, claims=None):
    authorizer = {"jwt": {"claims": stringify_claims(claims), "scopes": None}} if claims else None
    event = build_event(method=method, path=path, raw_query=query, headers={}, source_ip="127.0.0.1",
                        body=json.dumps(body) if body is not None else None, authorizer=authorizer)
    response = app.router.handle(event)
    payload = json.loads(response["body"]) if response["body"] else None
    return response["statusCode"], payload, response["headers"]


ALICE = {"sub": "alice", "tenant_id": "acme"}
ADMIN = {"sub": "root", "tenant_id": "acme", "roles": ["admin"]}


def test_every_route_resolves(local_app):
    ns = "ns=user&ns=alice&ns=n"
    assert call(local_app, "PUT", "/v1/memories", body={"namespace": ["user", "alice", "n"], "key": "k",
                                                        "value": {"text": "hi"}}, claims=ALICE)[0] == 200
    assert call(local_app, "GET", "/v1/memories", f"{ns}&key=k", claims=ALICE)[0] == 200
    assert call(local_app, "POST", "/v1/memories/search", body={"namespace_prefix": []}, claims=ALICE)[0] == 200
    assert call(local_app, "GET", "/v1/memories/namespaces", claims=ALICE)[1] == {"namespaces": [["user", "alice", "n"]]}
    memory_id = call(local_app, "GET", "/v1/memories", f"{ns}&key=k", claims=ALICE)[1]["id"]
    for method, path in (("GET", "/admin/v1/memories/policies"), ("GET", "/admin/v1/memories/index/status"),
                         ("POST", "/admin/v1/memories/index/trigger"), ("GET", "/admin/v1/memories/settings")):
        assert call(local_app, method, path, claims=ADMIN)[0] == 200, path
    assert call(local_app, "DELETE", f"/admin/v1/memories/{memory_id}", claims=ADMIN)[0] == 204
    assert call(local_app, "DELETE", "/v1/memories", f"{ns}&key=k", claims=ALICE)[0] == 204
    assert call(local_app, "GET", "/health")[1]["status"] == "healthy"
    assert "/admin/v1/memories/{id}" in call(local_app, "GET", "/openapi.json")[1]["paths"]


def test_a_reserved_word_is_not_a_memory_id(local_app):
    status, body, headers = call(local_app, "DELETE", "/admin/v1/memories/settings", claims=ADMIN)
    assert status == 405 and headers["allow"] == "GET, PUT"


def test_repeated_params_come_from_the_raw_query_string(local_app):
    ns = ["user", "alice", "a,b"]
    call(local_app, "PUT", "/v1/memories", body={"namespace": ns, "key": "k", "value": {}}, claims=ALICE)
    status, body, _ = call(local_app, "GET", "/v1/memories", "ns=user&ns=alice&ns=a%2Cb&key=k", claims=ALICE)
    assert status == 200 and body["namespace"] == ns


def test_a_long_unknown_path_or_method_is_cut_short_in_the_message(local_app):
    status, body, _ = call(local_app, "GET", "/nope/" + "x" * 8000)
    assert status == 404 and len(body["error"]["message"]) < 250
    assert body["error"]["message"].startswith("no route for /nope/xxx")
    status, body, _ = call(local_app, "Y" * 8000, "/v1/memories", "ns=a&key=k", claims=ALICE)
    assert status == 405 and len(body["error"]["message"]) < 250


def test_unknown_route_and_missing_identity(local_app):
    assert call(local_app, "GET", "/nope")[0] == 404
    status, body, _ = call(local_app, "GET", "/v1/memories", "ns=a&key=k")
    assert status == 401 and body["error"]["code"] == "UNAUTHORIZED"


def test_an_unexpected_error_is_a_500_without_details(local_app, monkeypatch):
    monkeypatch.setattr(local_app.services.memories, "get", lambda *a, **k: 1 / 0)
    status, body, headers = call(local_app, "GET", "/v1/memories", "ns=user&ns=alice&key=k", claims=ALICE)
    assert status == 500 and body["error"]["code"] == "INTERNAL"
    assert "ZeroDivision" not in json.dumps(body) and body["error"]["details"]["request_id"] == headers["x-request-id"]


def test_a_base64_body_is_decoded_as_strict_utf8(local_app):
    import base64

    def put(raw: bytes) -> tuple[int, dict]:
        event = build_event(method="PUT", path="/v1/memories", raw_query="", headers={}, source_ip="127.0.0.1",
                            body=None, authorizer={"jwt": {"claims": ALICE, "scopes": None}})
        event.update(body=base64.b64encode(raw).decode(), isBase64Encoded=True)
        response = local_app.router.handle(event)
        return response["statusCode"], json.loads(response["body"])

    status, body = put(b'{"namespace":["user","alice"],"key":"k","value":{"t":"caf\xe9"}}')
    assert (status, body["error"]["details"]) == (400, {"field": "body"})
    status, body = put('{"namespace":["user","alice"],"key":"k","value":{"t":"café"}}'.encode())
    assert status == 200, body


def test_the_local_server_hands_a_non_utf8_body_over_as_api_gateway_does():
    event = build_event(method="PUT", path="/", raw_query="", headers={}, source_ip="::1", authorizer=None,
                        body=b"\xff")
    assert (event["body"], event["isBase64Encoded"]) == ("/w==", True)
    event = build_event(method="PUT", path="/", raw_query="", headers={}, source_ip="::1", authorizer=None,
                        body="é".encode())
    assert (event["body"], event["isBase64Encoded"]) == ("é", False)


def test_recall_answers_the_contracts_shape(local_app):
    body = {"namespace": ["user", "alice", "memories"], "key": "tea", "index_fields": ["content"],
            "value": {"content": "alice drinks green tea", "type": "preference", "source": "chat"}}
    assert call(local_app, "PUT", "/v1/memories", body=body, claims=ALICE)[0] == 200
    local_app.workers.run_cycle("indexer")
    status, answer, headers = call(local_app, "POST", "/v1/memories/recall", body={"query": "green tea"}, claims=ALICE)
    assert status == 200
    [memory] = answer["memories"]
    assert {"id", "namespace", "key", "layer", "content", "type", "relevance", "match", "importance", "pinned", "tags",
            "category", "source", "created_at", "updated_at"} <= set(memory)
    assert (memory["layer"], memory["content"], memory["type"], memory["source"]) == (
        "user", "alice drinks green tea", "preference", "chat")
    assert set(answer["metadata"]) >= {"count", "total_count", "truncated", "token_count", "token_budget",
                                       "searched_layers", "query_embedding_ms", "retrieval_ms"}
    assert answer["metadata"]["count"] == 1 and answer["metadata"]["token_budget"] == 1000
    assert answer["metadata"]["retrieval_ms"] > 0
    status, answer, _ = call(local_app, "POST", "/v1/memories/recall", body={"query": "x", "layers": ["session"]},
                             claims=ALICE)
    assert status == 400 and answer["error"]["code"] == "MISSING_IDENTIFIER"
    assert answer["error"]["details"] == {"layer": "session", "missing": ["session_id"]}
