"""A second `memsvc serve` on its own data dir: what it stores survives a restart, and what it
stores on disk holds no plaintext value or attributes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.api.helpers import client_for, delete, get, namespaces_ok, put_ok, search_ok, sync_index, unique_tenant
from tests.conftest import start_server, stop_server

pytestmark = pytest.mark.slow

SECRET_VALUE = "zebra-secret-7731"
SECRET_ATTRIBUTE = "okapi-attr-9921"
PLAIN_KEY = "durable-key-5521"  # keys are plaintext metadata: a sanity check that the grep reads the data


def _grep(data_dir: Path, needle: str) -> list[str]:
    """Every file under data_dir whose raw bytes contain needle (as UTF-8 or UTF-16)."""
    forms = {needle.encode("utf-8"), needle.encode("utf-16-le"), needle.encode("utf-16-be")}
    hits = []
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        if any(form in raw for form in forms):
            hits.append(str(path.relative_to(data_dir)))
    return hits


@pytest.mark.parametrize("backend", [
    "local",
    pytest.param("aws", marks=pytest.mark.skip(
        reason="local-only by nature: the aws test backend keeps its state in moto, inside the server "
               "process, so a restart starts empty (on AWS, durability is DynamoDB's and S3 Vectors')")),
])
def test_data_survives_a_restart_and_is_encrypted_at_rest(tmp_path, backend):
    data_dir = tmp_path / "data"
    tenant, user = unique_tenant("durable"), "dora"
    home = ["user", user]
    server = start_server(data_dir, backend)
    try:
        with client_for(server, user, tenant=tenant) as me, \
                client_for(server, "root", tenant=tenant, roles=["admin"]) as admin:
            capital = put_ok(me, home + ["facts"], PLAIN_KEY,
                             {"text": "The capital of France is Paris", "secret": SECRET_VALUE},
                             attributes={"note": SECRET_ATTRIBUTE}, sync_index=True)
            put_ok(me, home + ["facts"], "bread", {"text": "Sourdough bread needs a starter culture"},
                   sync_index=True)
            counter = [put_ok(me, home + ["counters"], "counter", {"n": n}) for n in range(3)]
            long_ttl = put_ok(me, home + ["ttl"], "long", {"x": 1}, ttl_seconds=3600)
            short_ttl = put_ok(me, home + ["short"], "short", {"x": 1}, ttl_seconds=1)
            short_written = time.monotonic()
            put_ok(me, home + ["gone"], "gone", {"x": 1})
            assert delete(me, home + ["gone"], "gone").status_code == 204
            put_ok(me, home + ["facts"], "later", {"text": "Written without sync_index: the indexer picks it up"})
            sync_index(admin)
            before = {i["key"]: i for i in search_ok(me, home, query="What is the capital of France?", limit=10)}
            assert list(before)[0] == PLAIN_KEY
            assert set(before) == {PLAIN_KEY, "bread", "later"}
            items_before = {i["key"]: i for i in search_ok(me, home, limit=100)}
    finally:
        stop_server(server)

    for needle in (SECRET_VALUE, SECRET_ATTRIBUTE):
        assert _grep(data_dir, needle) == [], f"{needle!r} is stored in plaintext"
    assert _grep(data_dir, PLAIN_KEY), "the grep found not even the plaintext key: is it reading the data dir?"

    delay = short_written + 1.2 - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    server = start_server(data_dir, backend)
    try:
        with client_for(server, user, tenant=tenant) as me:
            item = get(me, home + ["facts"], PLAIN_KEY).json()
            assert item["value"] == {"text": "The capital of France is Paris", "secret": SECRET_VALUE}
            assert item["attributes"] == {"note": SECRET_ATTRIBUTE}
            for field in ("id", "version", "created_at", "updated_at", "expires_at"):
                assert item[field] == capital[field], field

            count = get(me, home + ["counters"], "counter").json()
            assert count["version"] == 3 and count["value"] == {"n": 2}
            assert count["id"] == counter[2]["id"] and count["created_at"] == counter[0]["created_at"]
            assert get(me, home + ["ttl"], "long").json()["expires_at"] == long_ttl["expires_at"]
            assert short_ttl["expires_at"] is not None
            assert get(me, home + ["short"], "short").status_code == 404
            assert get(me, home + ["gone"], "gone").status_code == 404

            assert namespaces_ok(me, prefix=home) == [home + ["counters"], home + ["facts"], home + ["ttl"]]
            items_after = {i["key"]: i for i in search_ok(me, home, limit=100)}
            assert set(items_after) == set(items_before) - {"short"}
            for key, after in items_after.items():
                assert after == items_before[key], key

            # the vectors came back without re-indexing: same ranking, same scores
            after = search_ok(me, home, query="What is the capital of France?", limit=10)
            assert [i["key"] for i in after] == list(before)
            for hit in after:
                assert hit["score"] == pytest.approx(before[hit["key"]]["score"], abs=1e-4)
                assert hit["id"] == before[hit["key"]]["id"]
            assert search_ok(me, home, query="baking bread")[0]["key"] == "bread"

            # versions keep counting from where they were
            assert put_ok(me, home + ["counters"], "counter", {"n": 3})["version"] == 4
            assert put_ok(me, home + ["facts"], PLAIN_KEY, {"text": "Paris", "secret": SECRET_VALUE})[
                "created_at"] == capital["created_at"]
    finally:
        stop_server(server)

    for needle in (SECRET_VALUE, SECRET_ATTRIBUTE):
        assert _grep(data_dir, needle) == [], f"{needle!r} is stored in plaintext"
