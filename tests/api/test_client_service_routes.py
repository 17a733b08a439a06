"""`MemsvcClient.health` and `openapi` (and their async twins) against the live servers."""

from __future__ import annotations

import asyncio

from memsvc_client import AsyncMemsvcClient, MemsvcClient


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
