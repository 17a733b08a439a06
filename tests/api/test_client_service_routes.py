"""`MemsvcClient.health`, `openapi` and `metrics` (and their async twins) against the live servers."""

from __future__ import annotations

import asyncio

import pytest

from memsvc_client import AsyncMemsvcClient, MemsvcClient, NotFoundError


def test_the_client_reads_the_services_health_and_its_openapi_document(live_server, uid):
    with MemsvcClient(live_server.url, live_server.token(uid)) as client:
        health = client.health()
        document = client.openapi()
    assert health["status"] in ("healthy", "degraded") and {"store", "embedder"} <= health["components"].keys()
    assert document["openapi"].startswith("3.") and "/v1/memories/recall" in document["paths"]

    async def run():
        async with AsyncMemsvcClient(live_server.url, live_server.token(uid)) as client:
            return await client.health(), await client.openapi()

    again, same_document = asyncio.run(run())
    assert again["status"] == health["status"] and same_document["paths"].keys() == document["paths"].keys()


def test_the_client_reads_the_metrics_as_text_where_they_are_served(live_server, uid):
    with MemsvcClient(live_server.url, live_server.token(uid)) as client:
        if live_server.backend == "aws":  # published to CloudWatch as EMF there, not served
            with pytest.raises(NotFoundError):
                client.metrics()
            return
        text = client.metrics()
    assert isinstance(text, str) and "# TYPE memory_operations_total counter" in text
