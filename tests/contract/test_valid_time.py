"""Valid time and `as_of` (issue 25) on both backends: remember writes `valid_from`/`valid_to`, a
supersession closes the older memory's `valid_to`, and recall and search with `as_of` answer
what held then (before, between and after the versions of a supersede chain); bad times are a
400 that writes nothing; `as_of` never reaches another user's or tenant's memories."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest

from memsvc.core.errors import Forbidden, InvalidArgument
from memsvc.core.models import Caller
from memsvc.service.feedback import GiveFeedback
from memsvc.service.memories import PutMemory
from memsvc.service.recall import RecallQuery
from memsvc.service.remember import RememberMemory
from memsvc.service.sealing import Sealer
from memsvc.service.search import SearchQuery
from memsvc.service.tenant_config import SettingsPatch
from tests.conftest import admin, alice, bob

NS = ["user", "alice", "memories"]
BERLIN, MUNICH, LISBON = "I live in Berlin", "I live in Munich", "I live in Lisbon"
QUERY = "where do I live"


@pytest.fixture
def app(backend):
    """Remember's thresholds as test_remember.py sets them (bag-of-words cosines), and recall's
    adaptive cut off: these tests are about which memories held, not how close they race."""
    backend.settings.update("acme", SettingsPatch(semantic_auto_update=0.9, semantic_check_low=0.6,
                                                  episodic_auto_update=0.92, episodic_check_low=0.6,
                                                  recall_cut_gap=1.0, recall_cut_margin=1.0))
    return backend


def remember(app, content, caller=None, **kw):
    return app.app.services.remember.remember(caller or alice(), RememberMemory(content=content, **kw))


def recalled(app, caller=None, **kw) -> list[str]:
    kw.setdefault("query", QUERY)
    found = app.app.services.recall.recall(caller or alice(), RecallQuery.parse(kw))
    return sorted(r.content for r in found.memories)


def searched(app, caller=None, **kw) -> list[str]:
    kw.setdefault("namespace_prefix", ["user", "alice"])
    found = app.search.search(caller or alice(), SearchQuery.parse(kw))
    return sorted(m.value.get("content") or m.value.get("text") for m in found)


def stored(app, key, caller=None):
    return app.memories.get(caller or alice(), NS, key).value


@pytest.fixture
def chain(app):
    """Berlin from 2020, Munich from May 2023, Lisbon from March 2025, remembered on three days
    of January 2026 (the clock): each supersedes the one before."""
    berlin = remember(app, BERLIN, valid_from="2020-01-01T00:00:00Z")
    app.clock.advance(86_400)
    munich = remember(app, MUNICH, valid_from="2023-05-01T00:00:00+02:00")
    app.clock.advance(86_400)
    lisbon = remember(app, LISBON, valid_from="2025-03-01T00:00:00Z")
    assert (munich.action, lisbon.action) == ("superseded", "superseded")
    app.drain()
    return berlin.memory.key, munich.memory.key, lisbon.memory.key


class TestSupersedeChain:
    def test_each_supersession_closes_the_older_at_the_newer_start(self, app, chain):
        berlin, munich, lisbon = chain
        assert stored(app, berlin)["valid_from"] == "2020-01-01T00:00:00.000000Z"
        assert stored(app, berlin)["valid_to"] == "2023-04-30T22:00:00.000000Z"  # stored in UTC
        assert stored(app, munich)["valid_to"] == "2025-03-01T00:00:00.000000Z"
        assert "valid_to" not in stored(app, lisbon)
        # The tag stays: current recall and remember's neighbours still go by it.
        assert "superseded" in stored(app, berlin)["tags"] and stored(app, berlin)["superseded_by"] == munich

    @pytest.mark.parametrize(("as_of", "expected"), [
        ("2019-06-01T00:00:00Z", []),  # before every version
        ("2021-06-01T00:00:00Z", [BERLIN]),
        ("2023-04-30T22:00:00Z", [MUNICH]),  # the interval is half-open: Munich from its first instant
        ("2023-04-30T21:59:59Z", [BERLIN]),
        ("2024-01-01T12:00:00+05:00", [MUNICH]),
        ("2025-06-01T00:00:00Z", [LISBON]),
        ("2030-01-01T00:00:00Z", [LISBON]),  # after the last: the open one
    ])
    def test_as_of_before_between_and_after_the_versions(self, app, chain, as_of, expected):
        assert recalled(app, as_of=as_of) == expected
        assert recalled(app, as_of=as_of, include_superseded=True) == expected  # as_of decides alone
        assert searched(app, query=QUERY, as_of=as_of) == expected
        assert searched(app, as_of=as_of) == expected  # a search by filter too

    def test_without_as_of_nothing_changes(self, app, chain):
        assert recalled(app) == [LISBON]
        assert recalled(app, include_superseded=True) == [BERLIN, LISBON, MUNICH]
        assert searched(app) == [BERLIN, LISBON, MUNICH]

    def test_without_valid_from_the_write_times_count(self, app):
        berlin = remember(app, BERLIN)  # 2026-01-01T00:00
        app.clock.advance(3600)
        remember(app, MUNICH)  # 01:00: Berlin held until then
        app.drain()
        assert stored(app, berlin.memory.key)["valid_to"] == "2026-01-01T01:00:00.000000Z"
        assert "valid_from" not in stored(app, berlin.memory.key)
        assert recalled(app, as_of="2025-12-31T23:59:59Z") == []  # neither was stated yet
        assert recalled(app, as_of="2026-01-01T00:30:00Z") == [BERLIN]
        assert recalled(app, as_of="2026-01-01T01:00:00Z") == [MUNICH]

    def test_a_superseded_memory_without_valid_to_ends_when_it_was_tagged(self, app):
        """Data superseded before valid time existed: its last write is when it stopped holding."""
        def put(key, **value):
            app.memories.put(alice(), PutMemory(namespace=NS, key=key, index_fields=["content"],
                                                value={"type": "fact", **value}))

        put("old", content=BERLIN)
        app.clock.advance(3600)
        put("old", content=BERLIN, tags=["superseded"], superseded_by="new")  # tagged at 01:00
        put("new", content=MUNICH)
        app.drain()
        assert recalled(app, as_of="2026-01-01T00:30:00Z") == [BERLIN]
        assert recalled(app, as_of="2026-01-01T01:00:00Z") == [MUNICH]

    def test_a_stated_end_and_plain_items(self, app):
        remember(app, "I am in Tokyo for work", valid_from="2026-03-01T00:00:00Z", valid_to="2026-03-08T00:00:00Z")
        app.memories.put(alice(), PutMemory(namespace=NS, key="n",
                                            value={"text": "the flat in Tokyo has the code 4411"}))
        app.drain()
        assert recalled(app, query="Tokyo", as_of="2026-03-02T00:00:00Z") == [
            "I am in Tokyo for work", "the flat in Tokyo has the code 4411"]
        assert recalled(app, query="Tokyo", as_of="2026-03-08T00:00:00Z") == ["the flat in Tokyo has the code 4411"]
        # A plain item counts from its creation (2026-01-01T00:00): not before.
        assert recalled(app, query="Tokyo", as_of="2025-12-31T00:00:00Z") == []

    def test_an_update_keeps_the_earliest_start(self, app):
        a = "The user prefers Python for scripting tasks at work"
        b = "The user prefers Python for scripting tasks at work daily"
        first = remember(app, a, valid_from="2024-01-01T00:00:00Z")
        second = remember(app, b, valid_from="2025-01-01T00:00:00Z")
        assert second.action == "updated" and second.memory.value["valid_from"] == "2024-01-01T00:00:00.000000Z"
        earlier = remember(app, a + " daily too", valid_from="2021-01-01T00:00:00Z")
        assert earlier.action == "updated" and earlier.memory.key == first.memory.key
        assert earlier.memory.value["valid_from"] == "2021-01-01T00:00:00.000000Z"

    def test_outdated_feedback_closes_the_validity_now_and_wrong_only_tags(self, app):
        old = remember(app, BERLIN, valid_from="2020-01-01T00:00:00Z")
        app.clock.advance(86_400)
        feedback = app.app.services.feedback
        outdated = feedback.give(alice(), GiveFeedback(id=old.memory.id, signal="outdated")).memory
        assert outdated.value["valid_to"] == "2026-01-02T00:00:00.000000Z"
        wrong = remember(app, "My favourite colour is teal")
        wronged = feedback.give(alice(), GiveFeedback(id=wrong.memory.id, signal="wrong")).memory
        assert "valid_to" not in wronged.value and "superseded" in wronged.value["tags"]
        app.drain()
        assert recalled(app, as_of="2025-06-01T00:00:00Z") == [BERLIN]
        assert recalled(app, as_of="2026-01-03T00:00:00Z") == []


class TestBoundsOnTheRow:
    """Each version's row carries its interval in plaintext (`StoredItem.valid_start`/`valid_end`),
    so `as_of` rejects what did not hold then without decrypting it."""

    def test_each_version_row_carries_the_interval_its_value_states(self, app, chain):
        berlin, munich, lisbon = (app.store.get("acme", tuple(NS), key) for key in chain)
        utc = timezone.utc
        assert (berlin.valid_start, berlin.valid_end) == (datetime(2020, 1, 1, tzinfo=utc),
                                                          datetime(2023, 4, 30, 22, tzinfo=utc))
        assert munich.valid_end == lisbon.valid_start == datetime(2025, 3, 1, tzinfo=utc)
        assert lisbon.valid_end is None

    def test_what_the_bounds_rule_out_is_never_decrypted(self, app, chain, monkeypatch):
        opened = []
        real = Sealer.open_item
        monkeypatch.setattr(Sealer, "open_item", lambda self, item: opened.append(item.key) or real(self, item))
        assert recalled(app, as_of="2019-06-01T00:00:00Z") == []
        assert searched(app, query=QUERY, as_of="2019-06-01T00:00:00Z") == []
        assert opened == []
        assert recalled(app, as_of="2021-06-01T00:00:00Z") == [BERLIN]
        assert set(opened) == {chain[0]}

    def test_a_row_from_before_the_bounds_is_decided_on_its_value(self, app):
        value = {"type": "fact", "content": BERLIN, "valid_from": "2020-01-01T00:00:00Z",
                 "valid_to": "2023-01-01T00:00:00Z"}
        app.memories.put(alice(), PutMemory(namespace=NS, key="old", value=value, index_fields=["content"]))
        first = app.store.get("acme", tuple(NS), "old")
        row = app.memories.build_version("acme", tuple(NS), "old", value, old=first, attributes=None,
                                         policy_attributes=first.policy_attributes, index_fields=["content"],
                                         ttl_seconds=None)
        app.store.write(dataclasses.replace(row, valid_start=None, valid_end=None), kind="update", old=first)
        app.drain()
        assert app.store.get("acme", tuple(NS), "old").valid_start is None
        assert recalled(app, as_of="2021-06-01T00:00:00Z") == [BERLIN]
        assert recalled(app, as_of="2019-06-01T00:00:00Z") == []
        assert recalled(app, as_of="2024-06-01T00:00:00Z") == []


class TestBadTimes:
    @pytest.mark.parametrize("fields", [
        {"valid_from": "2026-01-01T00:00:00"},  # no offset
        {"valid_from": "2026-01-01"},
        {"valid_to": "yesterday"},
        {"valid_from": 1767225600},
        {"valid_from": "2026-02-01T00:00:00Z", "valid_to": "2026-01-01T00:00:00Z"},
        {"valid_from": "2026-01-01T00:00:00Z", "valid_to": "2026-01-01T01:00:00+01:00"},  # the same instant
    ])
    def test_remember_refuses_and_writes_nothing(self, app, fields):
        with pytest.raises(InvalidArgument) as raised:
            app.app.services.remember.remember(alice(), RememberMemory.parse({"content": BERLIN, **fields}))
        assert raised.value.details.get("field") in ("valid_from", "valid_to")
        assert searched(app) == []

    @pytest.mark.parametrize("as_of", ["2026-01-01", "2026-01-01T00:00:00", "now", 0, "2026-13-01T00:00:00Z"])
    def test_recall_and_search_refuse_a_bad_as_of(self, app, as_of):
        with pytest.raises(InvalidArgument):
            RecallQuery.parse({"query": QUERY, "as_of": as_of})
        with pytest.raises(InvalidArgument):
            SearchQuery.parse({"namespace_prefix": [], "as_of": as_of})


class TestIsolation:
    def test_as_of_never_reaches_another_users_or_tenants_memories(self, app):
        remember(app, "I live in Paris", caller=bob(), valid_from="2020-01-01T00:00:00Z")
        other = Caller(tenant_id="globex", user_id="alice", roles=("user",))
        remember(app, "I live in Rome", caller=other, valid_from="2020-01-01T00:00:00Z")
        remember(app, BERLIN, valid_from="2020-01-01T00:00:00Z")
        app.drain()
        as_of = "2021-01-01T00:00:00Z"
        assert recalled(app, as_of=as_of) == [BERLIN]
        assert recalled(app, as_of=as_of, include_superseded=True) == [BERLIN]
        assert searched(app, namespace_prefix=[], as_of=as_of) == [BERLIN]
        assert searched(app, namespace_prefix=[], query=QUERY, as_of=as_of) == [BERLIN]
        with pytest.raises(Forbidden):
            recalled(app, as_of=as_of, identifiers={"user_id": "bob"})
        with pytest.raises(Forbidden):
            searched(app, namespace_prefix=["user", "bob"], as_of=as_of)
        assert recalled(app, admin("globex"), as_of=as_of, identifiers={"user_id": "alice"}) == ["I live in Rome"]
        assert recalled(app, bob(), as_of=as_of) == ["I live in Paris"]
