"""`DynamoKeywordIndex.replace_many` on moto: a document replaced in place (a message whose turn
before changed) is found by a search at every step, leaves exactly its new postings and the
statistics a clean put of it would, loses to a delete that overlaps it, and of two replacements
at once the one that finishes last stands, whole. Steps are interleaved by a client proxy that
runs a search, a delete or another replacement just before a chosen call: no timing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from memsvc.adapters.aws.dynamo_keywords import DynamoKeywordIndex
from memsvc.adapters.local.keyword_index import LocalKeywordIndex
from memsvc.core.errors import ProviderError
from memsvc.core.models import KeywordDoc
from tests.aws.test_dynamo_keywords import (CORPUS, NONE, QUERIES, TABLE, clean_run, client, content, doc,  # noqa: F401
                                            fail, hashed, postings_of, query_terms, rows, statistics)

OLD = "Lovely, send pictures of the flamingos at the lagoon"
NEW = "Lovely, send pictures of the herons on the pier please"
OTHER = "Lovely, send pictures of the pelicans"
WRITES = ("update_item", "batch_write_item", "transact_write_items", "put_item", "delete_item")


def rewritten(d: KeywordDoc, text: str) -> KeywordDoc:
    terms, length = hashed(text)
    return replace(d, terms=terms, length=length)


def found(index: DynamoKeywordIndex, d: KeywordDoc, text: str) -> bool:
    return d.memory_id in {h.memory_id for h in index.query(d.tenant, (), NONE, query_terms(text), 50).hits}


class Before:
    """A client proxy that runs `hook(name)` before each call of the methods in `names`."""

    def __init__(self, client: Any, names: tuple[str, ...], hook: Callable[[str], None]) -> None:
        self._client, self._names, self._hook = client, names, hook

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name not in self._names:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._hook(name)
            return attr(*args, **kwargs)

        return call


class Once:
    """`action()` once, just before the `nth` call (from 0) of `method`."""

    def __init__(self, method: str, action: Callable[[], None], nth: int = 0) -> None:
        self.method, self.action, self.nth, self.done = method, action, nth, False

    def __call__(self, name: str) -> None:
        if name != self.method or self.done:
            return
        if self.nth:
            self.nth -= 1
            return
        self.done = True
        self.action()


def postings(client, d: KeywordDoc) -> dict[str, tuple[int, int]]:
    """The version's postings: term -> (tf, document length)."""
    return {pk.rsplit("#W#", 1)[1]: (int(rows(client)[(pk, sk)]["tf"]["N"]), int(rows(client)[(pk, sk)]["dl"]["N"]))
            for pk, sk in postings_of(client, d.memory_id)}


def assert_whole(client, d: KeywordDoc) -> None:
    """The version's postings, record and statistics are those of a clean put of `d` alone."""
    assert postings(client, d) == {t: (tf, d.length) for t, tf in d.terms.items()}
    record = [r for (pk, _), r in rows(client).items() if "#D#" in pk]
    assert len(record) == 1 and "more" not in record[0]
    assert statistics(client) == {sk: v for sk, v in _statistics_of(client, d).items()}


def _statistics_of(client, d: KeywordDoc) -> dict[str, tuple[int, int]]:
    clean = clean_run(client, [d])
    out: dict[str, tuple[int, int]] = {}
    for (pk, sk), row in clean.items():
        if "#S#" in pk:
            n, length = out.get(sk, (0, 0))
            out[sk] = (n + int(row["n"]["N"]), length + int(row["len"]["N"]))
    return {sk: v for sk, v in out.items() if v != (0, 0)}


def test_the_replaced_document_is_found_by_its_own_words_at_every_step(client):
    searcher = DynamoKeywordIndex(client, TABLE)
    old = doc(("user", "alice", "sessions"), OLD)
    new = rewritten(old, NEW)
    searcher.put_many([old])
    seen: list[tuple[str, bool]] = []
    probe = lambda name: seen.append((name, found(searcher, old, "send pictures")))  # noqa: E731
    index = DynamoKeywordIndex(Before(client, WRITES, probe), TABLE)
    index.replace_many([new])
    seen.append(("done", found(searcher, old, "send pictures")))
    assert [name for name, _ in seen][:2] == ["update_item", "batch_write_item"]  # widened, then written
    assert all(ok for _, ok in seen), seen
    assert found(searcher, new, "herons pier") and not found(searcher, new, "flamingos lagoon")
    assert_whole(client, new)


def test_a_replacement_with_the_same_document_writes_nothing(client):
    index = DynamoKeywordIndex(client, TABLE)
    d = doc(("a",), OLD)
    index.put_many([d])
    calls: list[str] = []
    DynamoKeywordIndex(Before(client, WRITES, calls.append), TABLE).replace_many([d])
    assert calls == []


def test_a_replacement_of_an_absent_document_puts_it(client):
    d = doc(("a",), NEW)
    DynamoKeywordIndex(client, TABLE).replace_many([d])
    assert_whole(client, d)


@pytest.mark.parametrize("step", [("update_item", 0), ("batch_write_item", 0), ("batch_write_item", 1),
                                  ("transact_write_items", 0)],
                         ids=["before-widening", "before-the-new-postings", "before-the-stale-deletes",
                              "before-narrowing"])
def test_a_delete_that_overlaps_a_replacement_wins(client, step):
    old = doc(("user", "alice", "sessions"), OLD)
    DynamoKeywordIndex(client, TABLE).put_many([old])
    deleter = DynamoKeywordIndex(client, TABLE)
    hook = Once(step[0], lambda: deleter.delete_many("acme", [old.memory_id]), nth=step[1])
    DynamoKeywordIndex(Before(client, WRITES, hook), TABLE).replace_many([rewritten(old, NEW)])
    assert hook.done
    assert statistics(client) == {}
    assert [k for k in rows(client) if "#S#" not in k[0]] == []  # no posting, no record


@pytest.mark.parametrize("step", [("batch_write_item", 0), ("batch_write_item", 1), ("transact_write_items", 0)],
                         ids=["before-its-postings", "before-its-stale-deletes", "before-its-narrowing"])
def test_of_two_replacements_at_once_the_last_to_finish_stands_whole(client, step):
    old = doc(("user", "alice", "sessions"), OLD)
    DynamoKeywordIndex(client, TABLE).put_many([old])
    first, second = rewritten(old, NEW), rewritten(old, OTHER)
    hook = Once(step[0], lambda: DynamoKeywordIndex(client, TABLE).replace_many([second]), nth=step[1])
    index = DynamoKeywordIndex(Before(client, WRITES, hook), TABLE)
    index.sleep = lambda seconds: None
    index.replace_many([first])
    assert hook.done
    assert_whole(client, first)  # the first finished last: it started again from the second's record


def test_a_replacement_that_failed_midway_is_deleted_whole_and_finished_by_its_retry(client):
    old = doc(("user", "alice", "sessions"), OLD)
    index = DynamoKeywordIndex(client, TABLE)
    index.put_many([old])
    new = rewritten(old, NEW)
    failure = fail(client, "TransactWriteItems")
    with pytest.raises(ProviderError):
        index.replace_many([new])
    failure.remove()
    assert postings(client, new).keys() == new.terms.keys()  # written; the stale ones deleted; not narrowed
    index.replace_many([new])
    assert_whole(client, new)
    failure = fail(client, "TransactWriteItems")
    with pytest.raises(ProviderError):
        index.replace_many([old])
    failure.remove()
    index.delete_many("acme", [old.memory_id])  # the record covers both documents' terms
    assert statistics(client) == {}
    assert [k for k in rows(client) if "#S#" not in k[0]] == []


def test_scores_after_replacements_equal_the_local_adapters(client, tmp_path):
    docs = [doc(ns, text, attrs) for ns, text, attrs in CORPUS]
    again = [rewritten(d, f"{text} and now the deploy runbook mentions Python") for d, (_, text, _) in
             zip(docs[::3], CORPUS[::3])]
    local = LocalKeywordIndex(tmp_path / "keywords.db")
    index = DynamoKeywordIndex(client, TABLE)
    for kw in (local, index):
        kw.put_many(docs)
        kw.replace_many(again)
    for prefix in [(), ("user",), ("team", "infra")]:
        for query in QUERIES + ["runbook mentions"]:
            want = local.query("acme", prefix, NONE, query_terms(query), 50)
            got = index.query("acme", prefix, NONE, query_terms(query), 50)
            assert {h.memory_id: h.score for h in got.hits} == pytest.approx(
                {h.memory_id: h.score for h in want.hits}, rel=1e-6), (prefix, query)
            assert got.query_weight == pytest.approx(want.query_weight, rel=1e-6)


def test_a_delete_that_read_the_record_before_a_replacement_that_then_failed_leaves_nothing(client):
    """The delete removed the postings it read of, then a replacement widened the record, wrote
    its postings and failed before narrowing: the delete's transaction finds the record replaced
    (`rev`), removes what it now covers, and deletes it."""
    old = doc(("user", "alice", "sessions"), OLD)
    DynamoKeywordIndex(client, TABLE).put_many([old])

    def replace_and_fail() -> None:
        narrowing = fail(client, "TransactWriteItems", when=lambda body: "Delete" not in body["TransactItems"][0])
        with pytest.raises(ProviderError):
            DynamoKeywordIndex(client, TABLE).replace_many([rewritten(old, NEW)])
        narrowing.remove()
        assert postings(client, old)  # the new postings, and a record that covers them

    hook = Once("transact_write_items", replace_and_fail)
    DynamoKeywordIndex(Before(client, WRITES, hook), TABLE).delete_many("acme", [old.memory_id])
    assert hook.done
    assert statistics(client) == {}
    assert [k for k in rows(client) if "#S#" not in k[0]] == []


@pytest.mark.parametrize("step", [("batch_write_item", 0), ("transact_write_items", 0)],
                         ids=["before-its-postings", "before-its-count"])
def test_a_put_whose_postings_land_after_a_replacement_leaves_the_replacement_whole(client, step):
    # A put's postings are written without a condition: ones that land after a replacement of the
    # version (a second indexer run) would bring back the old document's terms and lengths.
    old = doc(("user", "alice", "sessions"), OLD)
    new = rewritten(old, NEW)
    hook = Once(step[0], lambda: DynamoKeywordIndex(client, TABLE).replace_many([new]), nth=step[1])
    put = DynamoKeywordIndex(Before(client, WRITES, hook), TABLE)
    put.sleep = lambda seconds: None
    put.put_many([old])
    assert hook.done
    assert_whole(client, new)
    searcher = DynamoKeywordIndex(client, TABLE)
    assert found(searcher, new, "herons pier") and not found(searcher, new, "flamingos lagoon")
