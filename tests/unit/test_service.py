"""The service over the real local adapters, in-process: fake embedder, manual clock, no threads."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from memsvc.core.errors import Conflict, EmbeddingFailed, Forbidden, InternalError, InvalidArgument, NotFound
from memsvc.service.memories import PutMemory, SearchQuery
from tests.conftest import admin, alice, bob

NS = ["user", "alice", "notes"]


def put(app, key="k", value=None, caller=None, **kw):
    return app.service.put(caller or alice(), PutMemory(namespace=kw.pop("namespace", NS), key=key,
                                                        value=value if value is not None else {"text": "hello"}, **kw))


def drain(app):
    return app.workers.run_index_cycle()


def search(app, caller=None, **kw):
    kw.setdefault("namespace_prefix", ["user", "alice"])
    return app.service.search(caller or alice(), SearchQuery(**kw))


class TestWrites:
    def test_versions_and_timestamps(self, local_app, clock):
        first = put(local_app, value={"text": "one"})
        clock.advance(5)
        second = put(local_app, value={"text": "two"})
        assert (first.version, second.version) == (1, 2)
        assert second.id != first.id
        assert second.created_at == first.created_at
        assert second.updated_at > first.updated_at
        got = local_app.service.get(alice(), NS, "k")
        assert got.value == {"text": "two"} and got.version == 2

    def test_delete_is_idempotent_and_keeps_the_version_counter(self, local_app):
        put(local_app)
        local_app.service.delete(alice(), NS, "k")
        local_app.service.delete(alice(), NS, "k")
        with pytest.raises(NotFound):
            local_app.service.get(alice(), NS, "k")
        again = put(local_app)
        assert again.version == 3  # 1 put, 2 tombstone, 3 the new put: replays can't confuse versions

    def test_conflicting_writer_is_retried_not_lost(self, local_app):
        put(local_app)
        real_write = local_app.store.write
        calls = {"n": 0}

        def racing_write(item, *, kind, old):
            calls["n"] += 1
            if calls["n"] == 1:  # another writer lands first
                real_write(dataclasses.replace(item, id="other", version=old.version + 1), kind="update", old=old)
            return real_write(item, kind=kind, old=old)

        local_app.store.write = racing_write
        result = put(local_app, value={"text": "mine"})
        assert result.version == 3
        assert local_app.service.get(alice(), NS, "k").value == {"text": "mine"}

    def test_store_rejects_a_stale_version(self, local_app):
        put(local_app)
        item = local_app.store.get("acme", tuple(NS), "k")
        with pytest.raises(Conflict):
            local_app.store.write(dataclasses.replace(item, version=2), kind="update", old=None)

    def test_concurrent_writers_lose_nothing(self, local_app):
        errors = []

        def writer(n):
            try:
                for i in range(25):
                    put(local_app, key="shared", value={"text": f"w{n} {i}"})
            except Exception as exc:  # pragma: no cover - the assertion below reports it
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert local_app.service.get(alice(), NS, "shared").version == 200
        assert local_app.store.pending("indexer", "acme") == 200

    def test_rejected_write_changes_nothing(self, local_app):
        put(local_app, value={"text": "keep"})
        with pytest.raises(InvalidArgument):
            put(local_app, value={"text": "x"}, ttl_seconds=0)
        with pytest.raises(Forbidden):
            put(local_app, value={"text": "x"}, caller=bob())
        got = local_app.service.get(alice(), NS, "k")
        assert (got.value, got.version) == ({"text": "keep"}, 1)


class TestExpiry:
    def test_expired_is_hidden_before_the_sweeper_runs(self, local_app, clock):
        put(local_app, ttl_seconds=10)
        clock.advance(11)
        with pytest.raises(NotFound):
            local_app.service.get(alice(), NS, "k")
        assert search(local_app) == []
        assert local_app.service.list_namespaces(alice()) == []

    def test_sweeper_tombstones_and_vectors_go(self, local_app, clock):
        from memsvc.service.sweeper import Sweeper

        written = put(local_app, value={"text": "ephemeral cats"}, ttl_seconds=10, sync_index=True)
        assert local_app.vectors.memory_ids("acme") == {written.id}
        clock.advance(11)
        result = Sweeper(local_app.store, local_app.service._settings, clock).sweep()
        assert result.expired == 1
        changes = local_app.store.read("indexer", 10)
        assert [c.kind for c in changes] == ["add", "expired"]
        drain(local_app)
        assert local_app.vectors.memory_ids("acme") == set()

    def test_refreshed_item_is_not_expired_by_a_stale_sweep(self, local_app, clock):
        from memsvc.service.sweeper import Sweeper

        put(local_app, ttl_seconds=10)
        clock.advance(11)
        stale = local_app.store.expired(clock.now(), 10)
        put(local_app, ttl_seconds=100)  # the key is written again before the sweep lands
        local_app.store.expired = lambda now, limit: stale
        Sweeper(local_app.store, local_app.service._settings, clock).sweep()
        assert local_app.service.get(alice(), NS, "k").version == 2


class TestEncryption:
    def test_ciphertext_bound_to_its_item(self, local_app):
        put(local_app, key="a", value={"text": "secret a"})
        put(local_app, key="b", value={"text": "secret b"})
        a = local_app.store.get("acme", tuple(NS), "a")
        b = local_app.store.get("acme", tuple(NS), "b")
        forged = dataclasses.replace(b, value_ct=a.value_ct, version=b.version + 1)
        local_app.store.write(forged, kind="update", old=b)
        with pytest.raises(InternalError):
            local_app.service.get(alice(), NS, "b")
        assert local_app.service.get(alice(), NS, "a").value == {"text": "secret a"}

    def test_nonce_is_fresh_per_write(self, local_app):
        put(local_app, value={"text": "same"})
        one = local_app.store.get("acme", tuple(NS), "k").value_ct
        put(local_app, value={"text": "same"})
        two = local_app.store.get("acme", tuple(NS), "k").value_ct
        assert one[1:13] != two[1:13]

    def test_each_tenant_has_its_own_data_key(self, local_app):
        put(local_app)
        put(local_app, caller=dataclasses.replace(alice(), tenant_id="globex"))
        assert local_app.store.get_wrapped_key("acme") != local_app.store.get_wrapped_key("globex")

    def test_no_plaintext_on_disk(self, local_app):
        put(local_app, value={"text": "zebra-secret-7731"}, attributes={"tag": "okapi-hidden-42"}, sync_index=True)
        drain(local_app)
        for path in local_app.data_dir.rglob("*"):
            if path.is_file():
                raw = path.read_bytes()
                assert b"zebra-secret-7731" not in raw, path
                assert b"okapi-hidden-42" not in raw, path


class TestIndexing:
    def test_sync_index_then_feed_does_not_embed_again(self, local_app):
        put(local_app, value={"text": "python indentation"}, sync_index=True)
        calls = len(local_app.embedder.calls)
        assert [m.key for m in search(local_app, query="python")] == ["k"]
        drain(local_app)
        assert len(local_app.embedder.calls) == calls + 1  # only the query was embedded

    def test_an_older_change_never_overwrites_a_newer_vector(self, local_app):
        put(local_app, value={"text": "old cats"})
        put(local_app, value={"text": "new dogs"})
        v1, v2 = local_app.store.read("indexer", 10)
        indexer = local_app.service.indexer
        assert indexer.apply([v2]) == set()
        assert indexer.apply([v1]) == set()  # replayed out of order
        assert local_app.vectors.memory_ids("acme") == {v2.new.id}
        found = search(local_app, query="cats")
        assert [(m.key, m.version, m.value) for m in found] == [("k", 2, {"text": "new dogs"})]
        assert found[0].score == pytest.approx(0.0, abs=1e-6)  # ranked by the new text, not the old

    def test_delete_wins_over_a_replayed_write(self, local_app):
        put(local_app, value={"text": "delete me"})
        local_app.service.delete(alice(), NS, "k")
        add, delete = local_app.store.read("indexer", 10)
        indexer = local_app.service.indexer
        indexer.apply([delete])
        indexer.apply([add, add])
        assert local_app.vectors.memory_ids("acme") == set()

    def test_update_replaces_stale_vectors(self, local_app):
        put(local_app, value={"text": "alpha beta"})
        drain(local_app)
        put(local_app, value={"text": "gamma delta"})
        hits = search(local_app, query="alpha")  # before the indexer catches up: stale vector dropped
        assert hits == []
        drain(local_app)
        assert [m.value for m in search(local_app, query="gamma")] == [{"text": "gamma delta"}]

    def test_index_fields_pick_what_is_searchable(self, local_app):
        put(local_app, key="a", value={"title": "zebra", "body": "giraffe"}, index_fields=["title"])
        put(local_app, key="b", value={"title": "zebra giraffe"}, index_fields=False)
        drain(local_app)
        giraffe = search(local_app, query="giraffe")
        assert [(m.key, round(m.score, 6)) for m in giraffe] == [("a", 0.0)]  # body not indexed; b never
        assert [(m.key, round(m.score, 6)) for m in search(local_app, query="zebra")] == [("a", 1.0)]
        assert {m.key for m in search(local_app)} == {"a", "b"}

    def test_max_pooling_scores_the_best_field(self, local_app):
        put(local_app, key="multi", value={"a": "unrelated words here", "b": "quantum physics"})
        put(local_app, key="single", value={"a": "quantum unrelated"})
        drain(local_app)
        found = search(local_app, query="quantum physics")
        assert [m.key for m in found] == ["multi", "single"]
        assert found[0].score == pytest.approx(1.0, abs=1e-5)

    def test_failing_embedder_retries_then_parks(self, local_app):
        put(local_app, key="poison", value={"text": "x"})
        put(local_app, key="fine", value={"text": "y"})
        local_app.embedder.fail_next = 10_000
        for _ in range(5):
            drain(local_app)
        assert [seq for seq, _ in local_app.store.dead_letters("indexer")] == [1]
        local_app.embedder.fail_next = 0
        drain(local_app)
        assert local_app.store.pending("indexer", "acme") == 0
        assert local_app.store.get("acme", tuple(NS), "fine").indexed_fields == ("text",)

    def test_transient_failure_loses_nothing(self, local_app):
        put(local_app, value={"text": "retry me"})
        local_app.embedder.fail_next = 2  # the batch and the item-by-item retry
        first = drain(local_app)
        assert first.failed == 1 and local_app.store.pending("indexer", "acme") == 1
        drain(local_app)
        assert local_app.store.pending("indexer", "acme") == 0
        assert [m.key for m in search(local_app, query="retry")] == ["k"]

    def test_sync_index_failure_keeps_the_write(self, local_app):
        local_app.embedder.fail_next = 1
        with pytest.raises(EmbeddingFailed):
            put(local_app, value={"text": "kept anyway"}, sync_index=True)
        assert local_app.service.get(alice(), NS, "k").value == {"text": "kept anyway"}
        drain(local_app)
        assert [m.key for m in search(local_app, query="kept")] == ["k"]


class TestIndexBookkeeping:
    def test_update_retires_the_old_versions_vectors(self, local_app):
        first = put(local_app, value={"text": "alpha"}, sync_index=True)
        second = put(local_app, value={"text": "beta"}, sync_index=True)
        assert local_app.vectors.memory_ids("acme") == {first.id, second.id}
        drain(local_app)
        assert local_app.vectors.memory_ids("acme") == {second.id}

    def test_intermediate_versions_in_one_batch_are_all_retired(self, local_app):
        put(local_app, value={"text": "one"}, sync_index=True)
        put(local_app, value={"text": "two"}, sync_index=True)
        last = put(local_app, value={"text": "three"})
        drain(local_app)
        assert local_app.vectors.memory_ids("acme") == {last.id}

    def test_a_write_that_loses_the_race_cleans_up(self, local_app):
        stale = put(local_app, value={"text": "stale"})
        item = local_app.store.get("acme", tuple(NS), "k")
        newer = put(local_app, value={"text": "newer"})
        local_app.service.indexer.index_items([item])  # embedded v1 while v2 landed
        assert stale.id not in local_app.vectors.memory_ids("acme")
        drain(local_app)
        assert local_app.vectors.memory_ids("acme") == {newer.id}

    def test_pending_and_trigger(self, local_app):
        put(local_app, key="a")
        put(local_app, key="b", index_fields=False)
        put(local_app, key="c", ttl_seconds=5)
        assert local_app.service.index_status(admin())["pending"] == 3 - 1
        result = local_app.service.index_trigger(admin())
        assert result == {"processed": 2, "pending": 0}
        assert local_app.service.index_trigger(admin("globex")) == {"processed": 0, "pending": 0}

    def test_replayed_changes_write_nothing_twice(self, local_app):
        put(local_app, value={"text": "once"})
        changes = local_app.store.read("indexer", 10)
        indexer = local_app.service.indexer
        indexer.apply(changes)
        calls = len(local_app.embedder.calls)
        indexer.apply(changes)
        assert len(local_app.embedder.calls) == calls


class TestSearchAndScope:
    def test_filter_reads_the_value_first_then_policy_attributes(self, local_app):
        put(local_app, key="a", value={"meta": {"n": 10}, "namespace": "mine"})
        put(local_app, key="b", value={"meta": {"n": 9}})
        assert [m.key for m in search(local_app, filter={"meta.n": {"gt": 9}})] == ["a"]
        # a value field wins; where the value has none, the policy attribute ("user") answers
        assert [m.key for m in search(local_app, filter={"namespace": "mine"})] == ["a"]
        assert [m.key for m in search(local_app, filter={"namespace": "user"})] == ["b"]

    def test_deep_nesting_is_a_clear_400(self, local_app):
        deep = {}
        node = deep
        for _ in range(40):
            node["a"] = {}
            node = node["a"]
        with pytest.raises(InvalidArgument, match="nested more than 32"):
            put(local_app, value=deep)
        with pytest.raises(InvalidArgument, match="nested more than 32"):
            search(local_app, filter={"x": deep})

    def test_non_admin_is_narrowed_and_walled(self, local_app):
        put(local_app, key="mine")
        put(local_app, key="theirs", namespace=["user", "bob", "x"], caller=bob())
        assert [m.key for m in search(local_app, namespace_prefix=[])] == ["mine"]
        with pytest.raises(Forbidden):
            search(local_app, namespace_prefix=["user", "bob"])
        assert {m.key for m in search(local_app, caller=admin(), namespace_prefix=[])} == {"mine", "theirs"}
        assert search(local_app, caller=admin("globex"), namespace_prefix=[]) == []

    def test_boundary_never_crossed(self, local_app):
        put(local_app, key="trap", namespace=["user", "aliced", "n"], caller=admin())
        put(local_app, key="ok")
        assert [m.key for m in search(local_app, caller=admin(), namespace_prefix=["user", "alice"])] == ["ok"]
        ns = local_app.service.list_namespaces(admin(), prefix=["user", "alice"])
        assert ns == [tuple(NS)]

    def test_list_namespaces_wildcards_and_depth(self, local_app):
        for ns in (["user", "alice", "a", "x"], ["user", "alice", "b", "x"], ["user", "alice", "b", "y"]):
            put(local_app, namespace=ns)
        svc = local_app.service
        assert svc.list_namespaces(alice(), max_depth=3) == [("user", "alice", "a"), ("user", "alice", "b")]
        assert svc.list_namespaces(alice(), prefix=["user", "*", "b"]) == [
            ("user", "alice", "b", "x"), ("user", "alice", "b", "y")]
        assert svc.list_namespaces(alice(), suffix=["x"]) == [("user", "alice", "a", "x"), ("user", "alice", "b", "x")]
        assert svc.list_namespaces(alice(), limit=1, offset=1) == [("user", "alice", "b", "x")]


def test_imports_point_inward():
    """core <- service <- adapters/api; boto3 only in adapters/aws; the environment only in settings."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "memsvc"
    forbidden = {
        "core": ("memsvc.service", "memsvc.adapters", "memsvc.api", "memsvc.bootstrap", "boto3", "numpy"),
        "service": ("memsvc.adapters", "memsvc.api", "memsvc.bootstrap", "boto3"),
        "api": ("memsvc.adapters", "boto3"),
    }
    problems = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        source = path.read_text()
        tree = ast.parse(source)
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        layer = rel.parts[0] if len(rel.parts) > 1 else ""
        for name in names:
            if any(name == f or name.startswith(f + ".") for f in forbidden.get(layer, ())):
                problems.append(f"{rel} imports {name}")
            if name.startswith("boto3") and not str(rel).startswith("adapters/aws"):
                problems.append(f"{rel} imports boto3")
        if ("os.environ" in source or "getenv" in source) and str(rel) != "settings.py":
            problems.append(f"{rel} reads the environment")
    assert problems == []


class TestRefreshTtl:
    def test_get_and_search_refresh_the_ttl_without_a_new_version(self, local_app, clock):
        put(local_app, ttl_seconds=100, sync_index=True)
        clock.advance(60)
        got = local_app.service.get(alice(), NS, "k", refresh_ttl=True)
        assert got.version == 1 and got.expires_at == clock.now() + __import__("datetime").timedelta(seconds=100)
        clock.advance(60)  # past the original expiry, within the refreshed one
        assert local_app.service.get(alice(), NS, "k").version == 1
        found = search(local_app, query="hello", refresh_ttl=True)
        assert found[0].expires_at == clock.now() + __import__("datetime").timedelta(seconds=100)
        clock.advance(99)
        assert local_app.service.get(alice(), NS, "k").value == {"text": "hello"}
        assert local_app.store.pending("indexer", "acme") == 1  # refresh wrote no change record

    def test_plain_reads_do_not_refresh(self, local_app, clock):
        put(local_app, ttl_seconds=100)
        clock.advance(60)
        local_app.service.get(alice(), NS, "k")
        clock.advance(41)
        with pytest.raises(NotFound):
            local_app.service.get(alice(), NS, "k")
