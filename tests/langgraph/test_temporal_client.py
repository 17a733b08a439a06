"""The client's opt-out of the ranking by a time the query names (issue 25): `temporal` reaches
the search and recall bodies only when given."""

from __future__ import annotations

import httpx

from tests.langgraph.test_tools import RECALLED, Service, client_for


def test_temporal_is_sent_only_when_given():
    service = Service(httpx.Response(200, json=RECALLED))
    client = client_for(service)
    client.recall("what did I do in July", temporal=False)
    assert service.body()["temporal"] is False
    client.recall("what did I do in July")
    assert "temporal" not in service.body()
    client.search(["user"], query="what did I do in July", temporal=False)
    assert service.body()["temporal"] is False
    client.search(["user"], query="what did I do in July")
    assert "temporal" not in service.body()
