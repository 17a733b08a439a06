"""The service over each backend's real adapters, in-process: fake embedder, manual clock."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from memsvc.core.errors import Conflict, EmbeddingFailed, Forbidden, InternalError, InvalidArgument, NotFound
from memsvc.service.admin import IndexRun
from memsvc.service.memories import PutMemory
from memsvc.service.search import ListNamespaces, SearchQuery
from tests.conftest import admin, alice, bob

NS = ["user", "alice", "notes"]


def put(app, key="k", value=None, caller=None, **kw):
    return app.memories.put(caller or alice(), PutMemory(namespace=kw.pop("namespace", NS), key=key,
                                                        value=value if value is not None else {"text": "hello"}, **kw))


def drain(app):
    app.drain()


def search(app, caller=None, **kw):
    kw.setdefault("namespace_prefix", ["user", "alice"])
    return app.search.search(caller or alice(), SearchQuery(**kw))


class TestWrites:
    def test_versions_and_timestamps(self, backend, clock):
        first = put(backend, value={"text": "one"})
        clock.advance(5)
        second = put(backend, value={"text": "two"})
        assert (first.version, second.version) == (1, 2)
        assert second.id != first.id
        assert second.created_at == first.created_at
        assert second.updated_at > first.updated_at
        got = backend.memories.get(alice(), NS, "k")
        assert got.value == {"text": "two"} and got.version == 2

    def test_delete_is_idempotent_and_keeps_the_version_counter(self, backend):
        put(backend)
        backend.memories.delete(alice(), NS, "k")
        backend.memories.delete(alice(), NS, "k")
        with pytest.raises(NotFound):
            backend.memories.get(alice(), NS, "k")
        again = put(backend)
        assert again.version == 3  # 1 put, 2 tombstone, 3 the new put: replays can't confuse versions

    def test_conflicting_writer_is_retried_not_lost(self, backend):
        put(backend)
        real_write = backend.store.write
        calls = {"n": 0}

        def racing_write(item, *, kind, old):
            calls["n"] += 1
            if calls["n"] == 1:  # another writer lands first
                real_write(dataclasses.replace(item, id="other", version=old.version + 1), kind="update", old=old)
            return real_write(item, kind=kind, old=old)

        backend.store.write = racing_write
        result = put(backend, value={"text": "mine"})
        assert result.version == 3
        assert backend.memories.get(alice(), NS, "k").value == {"text": "mine"}

    def test_get_many_finds_each_stored_item_once_and_skips_the_rest(self, backend):
        for n in range(450):
            put(backend, key=f"k{n}", namespace=NS if n % 2 else ["user", "alice", "other/ns"])
        refs = [(NS if n % 2 else ("user", "alice", "other/ns"), f"k{n}") for n in range(460)]
        found = backend.store.get_many("acme", [*refs, *refs[:5], (("user", "bob"), "k1")])
        assert sorted(found) == sorted((tuple(ns), key) for ns, key in refs[:450])
        assert all(item.key == key and item.namespace == ns for (ns, key), item in found.items())

    def test_store_rejects_a_stale_version(self, backend):
        put(backend)
        item = backend.store.get("acme", tuple(NS), "k")
        with pytest.raises(Conflict):
            backend.store.write(dataclasses.replace(item, version=2), kind="update", old=None)

    def test_concurrent_writers_lose_nothing(self, backend):
        """Every write either lands with its own version or is refused as a retryable CONFLICT;
        none is silently lost."""
        landed, refused, errors = [], [], []

        def writer(n):
            for i in range(25):
                try:
                    landed.append(put(backend, key="shared", value={"text": f"w{n} {i}"}).version)
                except Conflict:
                    refused.append((n, i))
                except Exception as exc:  # pragma: no cover - the assertion below reports it
                    errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(landed) + len(refused) == 200 and len(refused) <= 10
        assert sorted(landed) == list(range(1, len(landed) + 1))
        assert backend.memories.get(alice(), NS, "shared").version == len(landed)
        assert len([c for c in backend.changes() if c.new.key == "shared"]) == len(landed)

    def test_rejected_write_changes_nothing(self, backend):
        put(backend, value={"text": "keep"})
        with pytest.raises(InvalidArgument):
            put(backend, value={"text": "x"}, ttl_seconds=0)
        with pytest.raises(Forbidden):
            put(backend, value={"text": "x"}, caller=bob())
        got = backend.memories.get(alice(), NS, "k")
        assert (got.value, got.version) == ({"text": "keep"}, 1)


class TestExpiry:
    def test_expired_is_hidden_before_the_sweeper_runs(self, backend, clock):
        put(backend, ttl_seconds=10)
        clock.advance(11)
        with pytest.raises(NotFound):
            backend.memories.get(alice(), NS, "k")
        assert search(backend) == []
        assert backend.search.list_namespaces(alice(), ListNamespaces()) == []

    def test_expiry_records_an_expired_change_and_vectors_go(self, backend, clock):
        written = put(backend, value={"text": "ephemeral cats"}, ttl_seconds=10, sync_index=True)
        assert backend.memory_ids("acme") == {written.id}
        clock.advance(11)
        backend.sweep()
        changes = backend.changes()
        assert [c.kind for c in changes] == ["add", "expired"]
        drain(backend)
        assert backend.memory_ids("acme") == set()

    def test_refreshed_item_is_not_expired_by_a_stale_sweep(self, local_only, clock):
        from memsvc.service.sweeper import Sweeper

        backend = local_only
        put(backend, ttl_seconds=10)
        clock.advance(11)
        stale = backend.store.expired(clock.now(), 10)
        put(backend, ttl_seconds=100)  # the key is written again before the sweep lands
        backend.store.expired = lambda now, limit: stale
        Sweeper(backend.store, backend.settings, clock).sweep()
        assert backend.memories.get(alice(), NS, "k").version == 2


class TestEncryption:
    def test_ciphertext_bound_to_its_item(self, backend):
        put(backend, key="a", value={"text": "secret a"})
        put(backend, key="b", value={"text": "secret b"})
        a = backend.store.get("acme", tuple(NS), "a")
        b = backend.store.get("acme", tuple(NS), "b")
        forged = dataclasses.replace(b, value_ct=a.value_ct, version=b.version + 1)
        backend.store.write(forged, kind="update", old=b)
        with pytest.raises(InternalError):
            backend.memories.get(alice(), NS, "b")
        assert backend.memories.get(alice(), NS, "a").value == {"text": "secret a"}

    def test_nonce_is_fresh_per_write(self, backend):
        put(backend, value={"text": "same"})
        one = backend.store.get("acme", tuple(NS), "k").value_ct
        put(backend, value={"text": "same"})
        two = backend.store.get("acme", tuple(NS), "k").value_ct
        assert one[1:13] != two[1:13]

    def test_each_tenant_has_its_own_data_key(self, backend):
        put(backend)
        put(backend, caller=dataclasses.replace(alice(), tenant_id="globex"))
        assert backend.store.get_wrapped_key("acme") != backend.store.get_wrapped_key("globex")

    def test_no_plaintext_at_rest(self, backend):
        put(backend, value={"text": "zebra-secret-7731"}, attributes={"tag": "okapi-hidden-42"}, sync_index=True)
        drain(backend)
        if backend.local is not None:
            blobs = [p.read_bytes() for p in backend.data_dir.rglob("*") if p.is_file()]
        else:  # every table row and every vector's metadata, as stored
            db, s3v = backend.aws.clients.dynamodb, backend.aws.clients.s3vectors
            blobs = [repr(db.scan(TableName="memsvc-test")["Items"]).encode(),
                     repr(s3v.list_vectors(vectorBucketName="memsvc-test-vectors", indexName="memories",
                                           returnMetadata=True)["vectors"]).encode()]
        assert any(b"zebra" not in blob for blob in blobs) and blobs
        for blob in blobs:
            assert b"zebra-secret-7731" not in blob
            assert b"okapi-hidden-42" not in blob


    def test_field_names_of_values_are_not_plaintext_at_rest(self, backend):
        """Indexed fields, the change feed and the vectors name a value's fields by keyed hash."""
        put(backend, key="f", value={"wombatfield": {"quokkapath": "quiet room"}})
        feed = backend.changes()
        drain(backend)
        put(backend, key="f", value={"wombatfield": {"quokkapath": "high floor"}})  # retires the vectors
        feed += backend.changes()  # the update's change names the fields its old version indexed
        assert len(feed[-1].old.indexed_fields) == 1
        drain(backend)
        assert [m.key for m in search(backend, query="high floor")] == ["f"]
        if backend.local is not None:
            blobs = [p.read_bytes() for p in backend.data_dir.rglob("*") if p.is_file()]
        else:
            db, s3v = backend.aws.clients.dynamodb, backend.aws.clients.s3vectors
            blobs = [repr(db.scan(TableName="memsvc-test")["Items"]).encode(),
                     repr(s3v.list_vectors(vectorBucketName="memsvc-test-vectors", indexName="memories",
                                           returnMetadata=True)["vectors"]).encode()]
        blobs.append(repr(feed).encode())
        for blob in blobs:
            assert b"wombatfield" not in blob and b"quokkapath" not in blob


class TestIndexing:
    def test_sync_index_then_feed_does_not_embed_again(self, backend):
        put(backend, value={"text": "python indentation"}, sync_index=True)
        calls = len(backend.embedder.calls)
        assert [m.key for m in search(backend, query="python")] == ["k"]
        drain(backend)
        assert len(backend.embedder.calls) == calls + 1  # only the query was embedded

    def test_an_older_change_never_overwrites_a_newer_vector(self, backend):
        put(backend, value={"text": "old cats"})
        put(backend, value={"text": "new dogs"})
        v1, v2 = backend.changes()
        indexer = backend.indexer
        assert indexer.apply([v2]) == set()
        assert indexer.apply([v1]) == set()  # replayed out of order
        assert backend.memory_ids("acme") == {v2.new.id}
        found = search(backend, query="cats")
        assert [(m.key, m.version, m.value) for m in found] == [("k", 2, {"text": "new dogs"})]
        assert found[0].score == pytest.approx(0.0, abs=1e-6)  # ranked by the new text, not the old

    def test_delete_wins_over_a_replayed_write(self, backend):
        put(backend, value={"text": "delete me"})
        backend.memories.delete(alice(), NS, "k")
        add, delete = backend.changes()
        indexer = backend.indexer
        indexer.apply([delete])
        indexer.apply([add, add])
        assert backend.memory_ids("acme") == set()

    def test_update_replaces_stale_vectors(self, backend):
        put(backend, value={"text": "alpha beta"})
        drain(backend)
        put(backend, value={"text": "gamma delta"})
        hits = search(backend, query="alpha")  # before the indexer catches up: stale vector dropped
        assert hits == []
        drain(backend)
        assert [m.value for m in search(backend, query="gamma")] == [{"text": "gamma delta"}]

    def test_an_old_versions_better_vector_never_hides_the_current_one(self, backend):
        put(backend, value={"text": "quantum physics"}, sync_index=True)
        current = put(backend, value={"text": "quantum cooking"}, sync_index=True)
        # before the indexer retires v1's vectors, v1 matches the query better than v2 does
        found = search(backend, query="quantum physics")
        assert [(m.id, m.value) for m in found] == [(current.id, {"text": "quantum cooking"})]
        assert found[0].score < 0.99

    def test_index_fields_pick_what_is_searchable(self, backend):
        put(backend, key="a", value={"title": "zebra", "body": "giraffe"}, index_fields=["title"])
        put(backend, key="b", value={"title": "zebra giraffe"}, index_fields=False)
        put(backend, key="c", value={"title": "zebra giraffe"}, index_fields=[])  # no path: as false
        drain(backend)
        giraffe = search(backend, query="giraffe")
        assert [(m.key, round(m.score, 6)) for m in giraffe] == [("a", 0.0)]  # body not indexed; b, c never
        assert [(m.key, round(m.score, 6)) for m in search(backend, query="zebra")] == [("a", 1.0)]
        assert [(m.key, round(m.score, 6)) for m in search(backend, query="zebra", mode="keyword")] == [("a", 1.0)]
        assert {m.key for m in search(backend)} == {"a", "b", "c"}

    def test_max_pooling_scores_the_best_field(self, backend):
        put(backend, key="multi", value={"a": "unrelated words here", "b": "quantum physics"})
        put(backend, key="single", value={"a": "quantum unrelated"})
        drain(backend)
        found = search(backend, query="quantum physics")
        assert [m.key for m in found] == ["multi", "single"]
        assert found[0].score == pytest.approx(1.0, abs=1e-5)

    def test_failing_embedder_retries_then_parks(self, local_only):
        backend = local_only
        put(backend, key="poison", value={"text": "x"})
        put(backend, key="fine", value={"text": "y"})
        backend.embedder.fail_next = 10_000
        for _ in range(5):
            drain(backend)
        assert [seq for seq, _ in backend.store.dead_letters("indexer")] == [1]
        backend.embedder.fail_next = 0
        drain(backend)
        assert backend.admin.index_status(admin()).pending == 1  # the parked one, still visible
        assert len(backend.store.get("acme", tuple(NS), "fine").indexed_fields) == 1

    def test_transient_failure_loses_nothing(self, backend):
        put(backend, value={"text": "retry me"})
        backend.embedder.fail_next = 2  # the batch and the item-by-item retry
        drain(backend)
        assert backend.admin.index_status(admin()).pending == 1
        drain(backend)
        assert backend.admin.index_status(admin()).pending == 0
        assert [m.key for m in search(backend, query="retry")] == ["k"]

    def test_sync_index_failure_keeps_the_write(self, backend):
        backend.embedder.fail_next = 1
        with pytest.raises(EmbeddingFailed):
            put(backend, value={"text": "kept anyway"}, sync_index=True)
        assert backend.memories.get(alice(), NS, "k").value == {"text": "kept anyway"}
        drain(backend)
        assert [m.key for m in search(backend, query="kept")] == ["k"]


class TestIndexBookkeeping:
    def test_update_retires_the_old_versions_vectors(self, backend):
        first = put(backend, value={"text": "alpha"}, sync_index=True)
        second = put(backend, value={"text": "beta"}, sync_index=True)
        assert backend.memory_ids("acme") == {first.id, second.id}
        drain(backend)
        assert backend.memory_ids("acme") == {second.id}

    def test_intermediate_versions_in_one_batch_are_all_retired(self, backend):
        put(backend, value={"text": "one"}, sync_index=True)
        put(backend, value={"text": "two"}, sync_index=True)
        last = put(backend, value={"text": "three"})
        drain(backend)
        assert backend.memory_ids("acme") == {last.id}

    def test_a_write_that_loses_the_race_cleans_up(self, backend):
        stale = put(backend, value={"text": "stale"})
        item = backend.store.get("acme", tuple(NS), "k")
        newer = put(backend, value={"text": "newer"})
        backend.indexer.index_items([item])  # embedded v1 while v2 landed
        assert stale.id not in backend.memory_ids("acme")
        drain(backend)
        assert backend.memory_ids("acme") == {newer.id}

    def test_pending_and_trigger(self, backend):
        put(backend, key="a")
        put(backend, key="b", index_fields=False)
        put(backend, key="c", ttl_seconds=5)
        assert backend.admin.index_status(admin()).pending == 3 - 1
        result = backend.admin.index_trigger(admin())
        assert result == IndexRun(processed=2, pending=0, quarantined=0)
        assert backend.admin.index_trigger(admin("globex")) == IndexRun(processed=0, pending=0, quarantined=0)

    def test_replayed_changes_write_nothing_twice(self, backend):
        put(backend, value={"text": "once"})
        changes = backend.changes()
        indexer = backend.indexer
        indexer.apply(changes)
        calls = len(backend.embedder.calls)
        indexer.apply(changes)
        assert len(backend.embedder.calls) == calls


class TestSearchAndScope:
    def test_policy_attributes_decide_their_keys_without_decryption(self, backend):
        put(backend, key="a", value={"meta": {"n": 10}, "namespace": "mine"})
        put(backend, key="b", value={"meta": {"n": 9}})
        assert [m.key for m in search(backend, filter={"meta.n": {"gt": 9}})] == ["a"]
        # "namespace" is a policy attribute ("user"): it decides, the value's own field doesn't
        assert {m.key for m in search(backend, filter={"namespace": "user"})} == {"a", "b"}
        assert search(backend, filter={"namespace": "mine"}) == []
        opened = []
        real_open = backend.sealer.open_item
        backend.sealer.open_item = lambda item: opened.append(item.key) or real_open(item)
        assert search(backend, filter={"sub": "nobody"}) == []
        assert opened == []  # rejected on plaintext attributes: nothing was decrypted

    def test_semantic_search_decrypts_only_what_the_attributes_admit(self, backend):
        put(backend, key="a", value={"text": "tea in the morning"})
        put(backend, key="b", value={"text": "tea at night"})
        backend.drain()
        opened = []
        real_open = backend.sealer.open_item
        backend.sealer.open_item = lambda item: opened.append(item.key) or real_open(item)
        assert search(backend, query="tea", filter={"sub": "nobody"}) == []
        assert opened == []  # every hit was rejected on its plaintext attributes
        assert {m.key for m in search(backend, query="tea", filter={"sub": "alice"})} == {"a", "b"}
        assert sorted(opened) == ["a", "b"]  # admitted hits are opened once, for the check and the answer

    def test_deep_nesting_is_a_clear_400(self, backend):
        deep = {}
        node = deep
        for _ in range(40):
            node["a"] = {}
            node = node["a"]
        with pytest.raises(InvalidArgument, match="nested more than 32"):
            put(backend, value=deep)
        with pytest.raises(InvalidArgument, match="nested more than 32"):
            search(backend, filter={"x": deep})

    def test_non_admin_is_narrowed_and_walled(self, backend):
        put(backend, key="mine")
        put(backend, key="theirs", namespace=["user", "bob", "x"], caller=bob())
        assert [m.key for m in search(backend, namespace_prefix=[])] == ["mine"]
        with pytest.raises(Forbidden):
            search(backend, namespace_prefix=["user", "bob"])
        assert {m.key for m in search(backend, caller=admin(), namespace_prefix=[])} == {"mine", "theirs"}
        assert search(backend, caller=admin("globex"), namespace_prefix=[]) == []

    def test_boundary_never_crossed(self, backend):
        put(backend, key="trap", namespace=["user", "aliced", "n"], caller=admin())
        put(backend, key="ok")
        assert [m.key for m in search(backend, caller=admin(), namespace_prefix=["user", "alice"])] == ["ok"]
        ns = backend.search.list_namespaces(admin(), ListNamespaces(prefix=["user", "alice"]))
        assert ns == [tuple(NS)]

    def test_list_namespaces_wildcards_and_depth(self, backend):
        for ns in (["user", "alice", "a", "x"], ["user", "alice", "b", "x"], ["user", "alice", "b", "y"]):
            put(backend, namespace=ns)
        svc = backend.search
        assert svc.list_namespaces(alice(), ListNamespaces(max_depth=3)) == [("user", "alice", "a"), ("user", "alice", "b")]
        assert svc.list_namespaces(alice(), ListNamespaces(prefix=["user", "*", "b"])) == [
            ("user", "alice", "b", "x"), ("user", "alice", "b", "y")]
        assert svc.list_namespaces(alice(), ListNamespaces(suffix=["x"])) == [("user", "alice", "a", "x"), ("user", "alice", "b", "x")]
        assert svc.list_namespaces(alice(), ListNamespaces(limit=1, offset=1)) == [("user", "alice", "b", "x")]


class TestRefreshTtl:
    def test_get_and_search_refresh_the_ttl_without_a_new_version(self, backend, clock):
        put(backend, ttl_seconds=100, sync_index=True)
        clock.advance(60)
        got = backend.memories.get(alice(), NS, "k", refresh_ttl=True)
        assert got.version == 1 and got.expires_at == clock.now() + __import__("datetime").timedelta(seconds=100)
        clock.advance(60)  # past the original expiry, within the refreshed one
        assert backend.memories.get(alice(), NS, "k").version == 1
        found = search(backend, query="hello", refresh_ttl=True)
        assert found[0].expires_at == clock.now() + __import__("datetime").timedelta(seconds=100)
        clock.advance(99)
        assert backend.memories.get(alice(), NS, "k").value == {"text": "hello"}
        assert [c.kind for c in backend.changes()] == ["add"]  # refresh wrote no change record

    def test_plain_reads_do_not_refresh(self, backend, clock):
        put(backend, ttl_seconds=100)
        clock.advance(60)
        backend.memories.get(alice(), NS, "k")
        clock.advance(41)
        with pytest.raises(NotFound):
            backend.memories.get(alice(), NS, "k")
