"""The client's valid time and `as_of` (issue 25): the fields reach the bodies as given, and the
agent tool `query_memory` passes the model's `as_of`."""

from __future__ import annotations

import httpx

from memsvc_client.tools import tool_specs
from tests.langgraph.test_tools import RECALLED, REMEMBERED, Service, client_for


def test_remember_recall_and_search_send_the_times():
    service = Service(httpx.Response(200, json=RECALLED))
    client = client_for(service)
    client.recall("where did I live", as_of="2021-01-01T00:00:00Z")
    assert service.body()["as_of"] == "2021-01-01T00:00:00Z"
    client.search(["user"], query="home", as_of="2021-01-01T00:00:00Z")
    assert service.body()["as_of"] == "2021-01-01T00:00:00Z"
    client.search(["user"])
    assert "as_of" not in service.body()

    service.answer = httpx.Response(200, json=REMEMBERED)
    client.remember("I live in Berlin", valid_from="2020-01-01T00:00:00Z", valid_to="2023-05-01T00:00:00Z")
    body = service.body()
    assert (body["valid_from"], body["valid_to"]) == ("2020-01-01T00:00:00Z", "2023-05-01T00:00:00Z")


def test_query_memory_passes_as_of_only_when_the_model_gives_it():
    service = Service(httpx.Response(200, json=RECALLED))
    query_memory, _ = tool_specs(client_for(service))
    assert "as_of" in query_memory["input_schema"]["properties"]
    assert query_memory["input_schema"]["required"] == ["query"]
    query_memory["call"]({"query": "where did I live", "as_of": "2021-01-01T00:00:00Z"})
    assert service.body()["as_of"] == "2021-01-01T00:00:00Z"
    query_memory["call"]({"query": "where do I live"})
    assert "as_of" not in service.body()
