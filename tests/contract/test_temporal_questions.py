"""Questions that name a time (issue 25) on both backends: search and recall rank the memory whose
valid time meets the named time above one with the same words from another time; a plain item
states its valid time in its value (`valid_from`/`valid_to`) or counts from its creation; a query
that names no time, or `temporal: false`, ranks as before; `as_of` reads a plain item's stated
valid time too; and the boost never reaches another user's or tenant's memories."""

from __future__ import annotations

import pytest

from memsvc.core.errors import Forbidden
from memsvc.core.models import Caller
from memsvc.service.memories import PutMemory
from memsvc.service.recall import RecallQuery
from memsvc.service.search import SearchQuery
from memsvc.service.tenant_config import SettingsPatch
from tests.conftest import alice, bob

NS = ["user", "alice", "memories"]
TRIP = "we drove the coast highway on a long road trip"
LAKES = "we took a road trip to the lakes"  # a weaker match of ASKED than TRIP (and no near-duplicate of it)
ASKED = "which road trip did we take in July"


def day(iso: str) -> dict[str, str]:
    """A valid time of one day."""
    return {"valid_from": f"{iso}T00:00:00Z", "valid_to": f"{iso}T23:59:59Z"}


@pytest.fixture
def app(backend):
    """Recall's adaptive cut off: these tests are about order, not how close the race is."""
    backend.settings.update("acme", SettingsPatch(recall_cut_gap=1.0, recall_cut_margin=1.0))
    return backend


def put(app, key, value, caller=None, namespace=None):
    namespace = namespace or ["user", (caller or alice()).user_id, "memories"]
    app.memories.put(caller or alice(), PutMemory(namespace=namespace, key=key, value=value))


def searched(app, caller=None, **kw) -> list[str]:
    kw.setdefault("namespace_prefix", ["user", "alice"])
    return [m.key for m in app.search.search(caller or alice(), SearchQuery.parse(kw))]


def scores(app, **kw) -> list[tuple[str, float]]:
    kw.setdefault("namespace_prefix", ["user", "alice"])
    return [(m.key, m.score) for m in app.search.search(alice(), SearchQuery.parse(kw))]


def recalled(app, caller=None, **kw) -> list[str]:
    found = app.app.services.recall.recall(caller or alice(), RecallQuery.parse(kw))
    return [r.memory.key for r in found.memories]


@pytest.fixture
def two_trips(app):
    """The same words twice: valid on a day of July 2023 (written first, so older) and of March
    2023. Without a time, the tie goes to the newer, March."""
    put(app, "july", {"text": TRIP, **day("2023-07-24")})
    app.clock.advance(60)
    put(app, "march", {"text": TRIP, **day("2023-03-10")})
    app.drain()


class TestPlainItems:
    @pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
    def test_a_month_named_ranks_the_item_valid_then_first(self, app, two_trips, mode):
        assert searched(app, query=ASKED, mode=mode) == ["july", "march"]
        assert searched(app, query="which road trip did we take in March", mode=mode) == ["march", "july"]
        assert searched(app, query="which road trip did we take in the summer of 2023", mode=mode) == [
            "july", "march"]

    def test_without_a_time_or_opted_out_nothing_changes(self, app, two_trips):
        assert searched(app, query="which road trip did we take") == ["march", "july"]
        assert searched(app, query=ASKED, temporal=False) == ["march", "july"]
        plain = scores(app, query="which road trip did we take")
        assert plain[0][1] == plain[1][1]  # a tie: no boost for either
        boosted = scores(app, query=ASKED)
        assert 0 < boosted[1][1] < boosted[0][1] <= 1  # scores stay on 0..1

    def test_a_named_time_outside_every_item_changes_nothing(self, app, two_trips):
        assert searched(app, query="which road trip did we take in 2019") == ["march", "july"]

    def test_an_item_without_valid_time_counts_from_its_creation(self, app):
        put(app, "january", {"text": TRIP})  # the clock: 1 January 2026
        app.clock.advance(70 * 86_400)  # mid-March 2026
        put(app, "later", {"text": TRIP})
        app.drain()
        assert searched(app, query="which road trip did we take") == ["later", "january"]
        assert searched(app, query="which road trip did we take in January") == ["january", "later"]
        assert searched(app, query="which road trip did we take two months ago") == ["january", "later"]
        assert searched(app, query="which road trip did we take last month") == ["later", "january"]  # February
        assert searched(app, query="which road trip did we take in January 2025") == ["later", "january"]

    def test_as_of_reads_a_plain_items_stated_valid_time(self, app, two_trips):
        assert searched(app, query="road trip", as_of="2023-07-24T12:00:00Z") == ["july"]
        assert searched(app, query="road trip", as_of="2025-01-01T00:00:00Z") == []  # both ended
        put(app, "undated", {"text": TRIP})
        app.drain()
        assert searched(app, query="road trip", as_of="2025-01-01T00:00:00Z") == []  # created 2026


class TestTypedMemoriesAndRecall:
    def test_recall_ranks_the_memory_valid_then_first(self, app):
        put(app, "july", {"content": LAKES, "type": "note", **day("2023-07-24")})
        put(app, "march", {"content": TRIP, "type": "note", **day("2023-03-10")})
        app.drain()
        assert recalled(app, query="which road trip did we take") == ["march", "july"]
        assert recalled(app, query=ASKED) == ["july", "march"]
        assert recalled(app, query=ASKED, temporal=False) == ["march", "july"]
        assert searched(app, query=ASKED) == ["july", "march"]

    def test_an_open_memory_counts_from_its_start(self, app):
        # Held from 2020 on, still: it held in July 2023 too, but began long before.
        put(app, "open", {"content": TRIP, "type": "fact", "valid_from": "2020-01-01T00:00:00Z"})
        put(app, "begun", {"content": LAKES, "type": "fact", "valid_from": "2023-07-03T00:00:00Z"})
        app.drain()
        assert recalled(app, query="which road trip did we take") == ["open", "begun"]
        # Boosted as held in July too, the better match would stay first.
        assert recalled(app, query=ASKED) == ["begun", "open"]


class TestIsolation:
    def test_a_named_time_never_reaches_another_users_or_tenants_memories(self, app, two_trips):
        put(app, "bobs", {"text": TRIP, **day("2023-07-24")}, caller=bob())
        other = Caller(tenant_id="globex", user_id="alice", roles=("user",))
        put(app, "globex", {"text": TRIP, **day("2023-07-24")}, caller=other)
        app.drain()
        assert searched(app, query=ASKED, namespace_prefix=[]) == ["july", "march"]
        found = recalled(app, query=ASKED)  # the same words twice: recall collapses them to the better
        assert found == ["july"]
        with pytest.raises(Forbidden):
            searched(app, query=ASKED, namespace_prefix=["user", "bob"])
        with pytest.raises(Forbidden):
            recalled(app, query=ASKED, identifiers={"user_id": "bob"})
        assert searched(app, bob(), query=ASKED, namespace_prefix=["user", "bob"]) == ["bobs"]
        assert searched(app, other, query=ASKED, namespace_prefix=[]) == ["globex"]
