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
def embedded(app, monkeypatch):
    """The texts the search embeds, in order."""
    texts: list[str] = []
    inner = app.search.embed
    monkeypatch.setattr(app.search, "embed", lambda text: texts.append(text) or inner(text))
    return texts


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


class TestBounds:
    """The boost's reach (`BOOST_DEPTH`, shortened here so that a few dozen items pass it) is the
    same for every page: the pages of a query partition one ranking; its cost is the page's and at
    most the reach more; and no stored or asked time makes it fail."""

    @pytest.fixture
    def many_trips(self, app):
        """30 matches of "road trip" dated in March, and a weaker one (of "trip" alone) in July."""
        for n in range(30):
            put(app, f"m{n:02d}", {"text": f"road trip x{n}", **day("2023-03-10")})
        put(app, "july", {"text": "trip " + " ".join(f"w{n}" for n in range(12)), **day("2023-07-10")})
        app.drain()

    @staticmethod
    def pages(app, query: str, mode: str, size: int) -> list[str]:
        return [key for offset in range(0, 40, size)
                for key in searched(app, query=query, mode=mode, offset=offset, limit=size)]

    @pytest.mark.parametrize("mode", ["keyword", "hybrid"])
    @pytest.mark.parametrize("depth", [40, 20])  # the July item within the boost's reach, and past it
    def test_the_pages_of_a_query_partition_one_ranking(self, app, many_trips, monkeypatch, mode, depth):
        monkeypatch.setattr("memsvc.service.search.BOOST_DEPTH", depth)
        query = "road trip in July"
        whole = searched(app, query=query, mode=mode, limit=100)
        assert sorted(whole) == sorted([f"m{n:02d}" for n in range(30)] + ["july"])
        for size in (1, 7, 10, 31):
            assert self.pages(app, query, mode, size) == whole, size
        if mode == "keyword":  # the weakest match unboosted: lifted to the top only within the reach
            assert searched(app, query=query, mode=mode, temporal=False, limit=100)[-1] == "july"
            assert whole.index("july") == (0 if depth == 40 else 30)
            assert searched(app, query=query, mode=mode, limit=1) == whole[:1]

    def test_a_boosted_page_opens_at_most_the_reach_more_and_does_linear_work(self, app, monkeypatch):
        """Counted, never timed: the values decrypted, and the heap steps that find the page's
        least score (a step per candidate opened, where a sort of the page per candidate was
        quadratic)."""
        import heapq

        import memsvc.service.search as search_module
        for n in range(150):
            put(app, f"k{n:03d}", {"text": f"road trip number {n} " + "x " * (n % 13), **day("2023-03-10")})
        app.drain()
        monkeypatch.setattr(search_module, "BOOST_DEPTH", 20)
        opened, steps = [], []
        inner = search_module.open_memory
        monkeypatch.setattr(search_module, "open_memory", lambda *a: opened.append(1) or inner(*a))

        class CountingHeap:
            def __getattr__(self, name):
                def step(*args, **kwargs):
                    steps.append(len(args[1]) if name in ("nlargest", "nsmallest") else 1)
                    return getattr(heapq, name)(*args, **kwargs)
                return step

        monkeypatch.setattr(search_module, "heapq", CountingHeap())
        counts = {}
        for temporal in (False, True):
            opened.clear(), steps.clear()
            found = searched(app, query="road trip in July", mode="keyword", offset=60, limit=10, temporal=temporal)
            assert len(found) == 10
            counts[temporal] = (len(opened), len(steps))
        assert counts[False][0] <= 70  # S3 Vectors' largest page is 100: a page within it, on both backends
        assert counts[True][0] <= counts[False][0] + 20  # at most the reach more
        assert counts[True][1] <= counts[True][0]  # a heap step per opened candidate at most

    def test_the_last_instant_of_the_calendar_is_ranked_never_an_error(self, app, two_trips):
        put(app, "last", {"text": TRIP, "valid_from": "9999-12-31T23:59:59.999999Z"})
        put(app, "typed", {"content": TRIP, "type": "note", "valid_from": "9999-12-31T23:59:59.999999Z"})
        app.drain()
        for query in (ASKED, "which road trip did we take in December", "which road trip did we take in 2025",
                      "which road trip did we take since 2020", "which road trip did we take on 9999-12-31"):
            assert sorted(searched(app, query=query)) == ["july", "last", "march", "typed"], query
            recalled(app, query=query, min_score=0)
        # December: the items valid from the last instant are of it, and ranked first
        assert set(searched(app, query="which road trip did we take in December")[:2]) == {"last", "typed"}


class TestWholeQueryFallback:
    """The query's vector leaves the time's words out (`TimeBoost.embed_text`) only where the boost
    can act: when none of the ranking's first page is of the named time (memories that say the
    month in their words, stated later), it is ranked again by the whole query's vector, so the
    answer is the one without a boost. One embedding more, never for a keyword query."""

    def test_a_ranking_with_memories_of_the_time_keeps_the_vector_without_its_words(self, app, two_trips, embedded):
        assert searched(app, query=ASKED) == ["july", "march"]
        assert embedded == ["which road trip did we take"]

    def test_a_ranking_without_them_is_the_whole_querys(self, app, embedded):
        put(app, "said", {"text": "in July we drove the coast highway"})  # created in January 2026
        put(app, "other", {"text": TRIP})
        app.drain()
        for mode in ("hybrid", "semantic"):
            embedded.clear()
            assert scores(app, query=ASKED, mode=mode) == scores(app, query=ASKED, mode=mode, temporal=False)
            assert embedded == ["which road trip did we take", ASKED, ASKED]  # the last: temporal false
            for size in (1, 2):  # decided on the first page whatever the page: one ranking
                assert [k for offset in (0, 1) for k in searched(app, query=ASKED, mode=mode, offset=offset,
                                                                 limit=size)][:2] == searched(app, query=ASKED,
                                                                                              mode=mode)
        embedded.clear()
        assert searched(app, query=ASKED, mode="keyword") == searched(app, query=ASKED, mode="keyword", temporal=False)
        assert embedded == []
        embedded.clear()
        assert recalled(app, query=ASKED, min_score=0) == recalled(app, query=ASKED, min_score=0, temporal=False)
        assert embedded == ["which road trip did we take", ASKED, ASKED]

    def test_a_failing_whole_query_embedding_is_a_degraded_answer(self, app, embedded, monkeypatch):
        from memsvc.core.errors import EmbeddingFailed
        put(app, "said", {"text": "in July we drove the coast highway"})
        app.drain()
        inner = app.search.embed

        def embed(text):
            if text == ASKED:
                raise EmbeddingFailed("down")
            return inner(text)

        monkeypatch.setattr(app.search, "embed", embed)
        answer = app.search.answer(alice(), SearchQuery.parse({"namespace_prefix": ["user", "alice"], "query": ASKED}))
        assert [m.key for m in answer.memories] == ["said"] and answer.degraded  # by keywords, and said so


class TestATimeNoMemoryIsOf:
    """A time (not a month of any year) after every memory of the tenant, or before all of them:
    where the store can tell (`ItemStore.time_span`: locally; not on DynamoDB), the query is
    ranked as one naming no time straight away, by its whole vector alone. The answer is the one
    the boosted round comes to when its first page holds none of that time."""

    @pytest.fixture
    def trips(self, app):
        put(app, "coast", {"text": TRIP})  # of their writing: January 2026
        put(app, "lakes", {"text": LAKES})
        put(app, "planned", {"text": "a road trip to the mountains", **day("2026-03-02")})  # stated: March 2026
        app.drain()

    @pytest.mark.parametrize("when", ["in 2019", "in 2031", "next year", "last year"])
    def test_its_answer_is_the_one_without_the_time(self, app, trips, embedded, when):
        asked = f"which road trip did we take {when}"
        for mode in ("hybrid", "semantic", "keyword"):
            assert scores(app, query=asked, mode=mode) == scores(app, query=asked, mode=mode, temporal=False), mode
        assert recalled(app, query=asked, min_score=0) == recalled(app, query=asked, min_score=0, temporal=False)

    def test_locally_the_query_is_embedded_once_whole(self, app, trips, embedded):
        asked = "which road trip did we take in 2031"
        searched(app, query=asked)
        recalled(app, query=asked, min_score=0)
        if app.name == "local":
            assert embedded == [asked, asked]  # one embedding each, of the query as asked
        else:  # DynamoDB cannot tell: the boosted round, then the whole query
            assert embedded == ["which road trip did we take", asked, "which road trip did we take", asked]

    def test_a_time_some_memory_is_of_keeps_its_boost(self, app, trips, embedded):
        asked = "which road trip did we take in March 2026"
        assert searched(app, query=asked)[0] == "planned"
        assert embedded[0] == "which road trip did we take"  # the vector without the time's words

    def test_a_memory_stating_a_later_time_keeps_the_boost_for_the_whole_tenant(self, app, trips, embedded):
        put(app, "future", {"text": "a road trip to the desert", **day("2031-05-01")}, caller=bob())
        app.drain()
        asked = "which road trip did we take in 2031"
        searched(app, query=asked)
        assert embedded[0] == "which road trip did we take"  # bob's memory is of 2031: no skip
