"""`DynamoKeywordIndex` on moto: the `KeywordIndex` port's semantics (the same scores as the local
adapter), prefix scoping, tenant walls, pushdown, idempotence, crashes between the steps of a put
or a delete, the caps, and the tenant wipe."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from benchmarks.keyword_costs import CapacityMeter, item_size, measure_batch, measure_one
from memsvc.adapters.aws.dynamo_keywords import (MAX_TERMS_PER_DOC, SHARDS, DynamoKeywordIndex, _record_item,
                                                 _shard, keyword_table_definition)
from memsvc.adapters.local.keyword_index import LocalKeywordIndex
from memsvc.core.crypto import term_ids
from memsvc.core.errors import ProviderError, RateLimited
from memsvc.core.filters import Filter, parse_filter
from memsvc.core.keywords import bm25, idf, term_counts
from memsvc.core.models import KeywordDoc
from tests.fakes.aws_stack import InjectedFailure, keyword_table_on_moto

TABLE = "keywords-test"
DATA_KEY = bytes(range(32))
NONE = Filter(())
_ids = itertools.count()

CORPUS = [
    (("user", "alice", "notes"), "Python uses indentation for blocks; Python is readable", {"sub": "alice"}),
    (("user", "alice", "notes"), "The deploy of release 3.12.1 failed on INC-20931", {"sub": "alice"}),
    (("user", "alice", "prefs"), "Alice prefers dark mode and short answers", {"sub": "alice"}),
    (("user", "alice"), "Blocks of Python code run in the notebook", {"sub": "alice"}),
    (("user", "alicia"), "Alicia writes Rust, not Python", {"sub": "alicia"}),
    (("user", "bob", "notes"), "Bob's deploy pipeline uses blocks and stages", {"sub": "bob"}),
    (("team", "infra"), "Incident INC-20931: the deploy of 3.12.1 rolled back", {}),
    (("team", "infra"), "Runbook: restart the deploy workers, then check the queue", {}),
    (("team", "infra", "old"), "Legacy deploy scripts in Perl", {}),
    (("a%2Fb",), "A namespace with a percent sign and Python", {}),
    (("a/b",), "A namespace with a slash and Python deploy", {}),
]


def hashed(text: str) -> tuple[dict[str, int], int]:
    counts = term_counts([text])
    return dict(zip(term_ids(DATA_KEY, counts), counts.values())), sum(counts.values())


def query_terms(text: str) -> list[str]:
    return term_ids(DATA_KEY, term_counts([text]))


def doc(ns: tuple[str, ...], text: str, attributes: dict[str, Any] | None = None, *, tenant: str = "acme",
        memory_id: str | None = None) -> KeywordDoc:
    terms, length = hashed(text)
    n = next(_ids)
    return KeywordDoc(tenant=tenant, namespace=ns, key=f"k{n}", memory_id=memory_id or f"mem-{n:05d}", version=1,
                      policy_attributes=attributes or {}, terms=terms, length=length)


@pytest.fixture
def client() -> Iterator[Any]:
    with keyword_table_on_moto(TABLE) as c:
        yield c


@pytest.fixture
def index(client) -> DynamoKeywordIndex:
    index = DynamoKeywordIndex(client, TABLE)
    index.sleeps = []
    index.sleep = index.sleeps.append
    index.random = lambda: 1.0  # backoff at its ceiling
    return index


def fail(client, operation: str, code: str = "InternalServerError", *, status: int = 500,
         when: Callable[[dict[str, Any]], bool] | None = None) -> InjectedFailure:
    return InjectedFailure(client, operation, code=code, status=status, when=when)


def rows(client, table: str = TABLE) -> dict[tuple[str, str], dict[str, Any]]:
    """The whole table (test only: the adapter never scans)."""
    out = {}
    for page in client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        for row in page["Items"]:
            out[(row["pk"]["S"], row["sk"]["S"])] = row
    return out


def content(client, table: str = TABLE) -> dict[tuple[str, str], dict[str, Any]]:
    """The table without statistics rows that count nothing (a delete leaves them at zero)."""
    return {k: r for k, r in rows(client, table).items()
            if "#S#" not in k[0] or (r["n"]["N"], r["len"]["N"]) != ("0", "0")}


def statistics(client, tenant: str = "acme") -> dict[str, tuple[int, int]]:
    """(documents, length) per prefix sort key, summed over the shards; zero rows left out."""
    out: dict[str, tuple[int, int]] = {}
    for (pk, sk), row in rows(client).items():
        if pk.startswith(f"T#{tenant}#S#"):
            n, length = out.get(sk, (0, 0))
            out[sk] = (n + int(row["n"]["N"]), length + int(row["len"]["N"]))
    return {sk: v for sk, v in out.items() if v != (0, 0)}


def postings_of(client, memory_id: str) -> set[tuple[str, str]]:
    return {k for k in rows(client) if "#W#" in k[0] and k[1].endswith("\x1f" + memory_id)}


# -- the port's semantics ---------------------------------------------------------------------


QUERIES = ["python blocks", "deploy INC-20931 3.12.1", "dark mode answers", "unknownword", "the of"]


@pytest.mark.parametrize("prefix", [(), ("user",), ("user", "alice"), ("user", "alice", "notes"), ("team",),
                                    ("a%2Fb",), ("nobody",)])
def test_scores_equal_the_local_adapters(index, tmp_path, prefix):
    docs = [doc(ns, text, attrs) for ns, text, attrs in CORPUS]
    local = LocalKeywordIndex(tmp_path / "keywords.db")
    local.put_many(docs)
    index.put_many(docs)
    by_id = {d.memory_id: d for d in docs}
    for query in QUERIES:
        terms = query_terms(query)
        want = local.query("acme", prefix, NONE, terms, 50)
        got = index.query("acme", prefix, NONE, terms, 50)
        assert {h.memory_id: h.score for h in got.hits} == pytest.approx(
            {h.memory_id: h.score for h in want.hits}, rel=1e-6), query
        assert got.query_weight == pytest.approx(want.query_weight, rel=1e-6), query
        assert [h.score for h in got.hits] == sorted((h.score for h in got.hits), reverse=True)
        assert all((h.namespace, h.key, h.version) == (by_id[h.memory_id].namespace, by_id[h.memory_id].key, 1)
                   for h in got.hits)
    if prefix == ("user", "alice"):  # the comparison is not vacuous
        python_blocks = index.query("acme", prefix, NONE, query_terms("python blocks"), 50)
        assert len(python_blocks.hits) == 2 and python_blocks.query_weight > 0


def test_top_k_keeps_the_best(index):
    docs = [doc(("n",), "python " * (i + 1) + "filler words here") for i in range(6)]
    index.put_many(docs)
    result = index.query("acme", (), NONE, query_terms("python"), 3)
    assert [h.memory_id for h in result.hits] == [d.memory_id for d in docs[::-1][:3]]


def test_a_prefix_never_crosses_a_segment_boundary(index):
    index.put_many([doc(ns, "shared word") for ns in
                    [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("a b",), ("a%",), ("b", "a")]])

    def found(prefix):
        return sorted(h.namespace for h in index.query("acme", prefix, NONE, query_terms("shared"), 50).hits)

    assert found(("a",)) == [("a",), ("a", "b"), ("a", "b", "c")]
    assert found(("a", "b")) == [("a", "b"), ("a", "b", "c")]
    assert found(("ab",)) == [("ab",)]
    assert found(("a%",)) == [("a%",)]
    assert found(("a", "b", "c", "d")) == []
    assert len(found(())) == 7


def test_statistics_are_those_of_the_prefix(index):
    """A document outside the prefix changes no score inside it."""
    inside = doc(("user", "alice"), "python python rust")
    index.put_many([inside, doc(("user", "alice", "deep"), "go")])
    before = index.query("acme", ("user", "alice"), NONE, query_terms("python"), 5)
    index.put_many([doc(("user", "alicia"), "python " * 40), doc(("team",), "python java")])
    after = index.query("acme", ("user", "alice"), NONE, query_terms("python"), 5)
    assert after == before
    n, avg = 2, (3 + 1) / 2
    assert before.hits[0].score == pytest.approx(bm25(2, 1, n, 3, avg))
    assert before.query_weight == pytest.approx(idf(1, n))


def test_tenants_are_walls(index):
    index.put_many([doc(("user", "alice"), "secret python words", tenant="acme"),
                    doc(("user", "alice"), "python", tenant="other")])
    acme = index.query("acme", (), NONE, query_terms("python secret"), 10)
    other = index.query("other", (), NONE, query_terms("python secret"), 10)
    assert [h.memory_id for h in acme.hits] != [h.memory_id for h in other.hits]
    assert len(acme.hits) == len(other.hits) == 1
    assert other.hits[0].score == pytest.approx(bm25(1, 1, 1, 1, 1.0))  # acme's document counts for nothing
    assert index.query("nobody", (), NONE, query_terms("python"), 10).hits == []
    index.delete_tenant("acme")
    assert index.query("other", (), NONE, query_terms("python secret"), 10) == other


def test_pushdown_admits_and_counts_only_matching_postings(index):
    docs = [doc(("team",), "python deploy", {"sub": "alice", "level": 3}),
            doc(("team",), "python", {"sub": "bob", "level": 5}),
            doc(("team",), "python", {}),
            doc(("team",), "rust deploy", {"sub": "alice", "level": 1})]
    index.put_many(docs)
    pushdown = parse_filter({"sub": "alice"})
    result = index.query("acme", ("team",), pushdown, query_terms("python"), 10)
    assert [h.memory_id for h in result.hits] == [docs[0].memory_id]
    n, avg = 4, (2 + 1 + 1 + 2) / 4  # the prefix's documents; df among those the pushdown admits
    assert result.hits[0].score == pytest.approx(bm25(1, 1, n, 2, avg))
    assert result.query_weight == pytest.approx(idf(1, n))
    ranged = index.query("acme", ("team",), parse_filter({"level": {"gte": 3}}), query_terms("python deploy"), 10)
    assert {h.memory_id for h in ranged.hits} == {docs[0].memory_id, docs[1].memory_id}
    assert index.query("acme", ("team",), parse_filter({"sub": "carol"}), query_terms("python"), 10).hits == []


def test_an_empty_tenant_or_prefix_has_no_weight(index):
    assert index.query("acme", (), NONE, query_terms("python"), 10) == index.query("acme", (), NONE, [], 10)
    assert index.query("acme", (), NONE, query_terms("python"), 10).query_weight == 0.0
    index.put_many([doc(("a",), "python")])
    assert index.query("acme", ("b",), NONE, query_terms("python"), 10).query_weight == 0.0
    assert index.query("acme", ("a",), NONE, [], 10).hits == []


def test_repeated_terms_count_once(index):
    index.put_many([doc(("a",), "python rust"), doc(("a",), "rust")])
    once = index.query("acme", (), NONE, query_terms("python"), 10)
    twice = index.query("acme", (), NONE, query_terms("python") * 2, 10)
    assert twice == once


# -- writes: idempotent, exact, no orphans ------------------------------------------------------


def test_put_twice_changes_nothing(index, client):
    docs = [doc(ns, text, attrs) for ns, text, attrs in CORPUS]
    index.put_many(docs + docs[:3])  # repeated in one call too
    first = rows(client)
    index.put_many(docs)
    assert rows(client) == first
    assert statistics(client)["P#"] == (len(docs), sum(d.length for d in docs))
    assert statistics(client)["P#user\x1ealice"] == (4, sum(d.length for d in docs[:4]))


def test_a_put_records_counts_and_posts_each_document(index, client):
    d = doc(("user", "alice", "notes"), "python python blocks", {"sub": "alice"})
    index.put_many([d])
    table = rows(client)
    records = [r for (pk, _), r in table.items() if "#D#" in pk]
    assert len(records) == 1 and records[0]["counted"] == {"BOOL": True}
    assert len(postings_of(client, d.memory_id)) == len(d.terms) == 2
    assert statistics(client) == {sk: (1, 3) for sk in
                                  ("P#", "P#user", "P#user\x1ealice", "P#user\x1ealice\x1enotes")}
    assert not any("python" in pk + sk for pk, sk in table)  # blind terms only


def test_delete_twice_and_absent_ids(index, client):
    docs = [doc(ns, text, attrs) for ns, text, attrs in CORPUS]
    index.put_many(docs)
    index.delete_many("acme", [docs[0].memory_id, docs[1].memory_id, "never-indexed"])
    after_first = rows(client)
    index.delete_many("acme", [docs[0].memory_id, docs[1].memory_id])
    assert rows(client) == after_first
    assert not postings_of(client, docs[0].memory_id) and not postings_of(client, docs[1].memory_id)
    rest = docs[2:]
    assert statistics(client)["P#"] == (len(rest), sum(d.length for d in rest))
    assert "P#user\x1ealice\x1enotes" not in statistics(client)
    index.delete_many("acme", [])
    index.delete_many("other", [docs[2].memory_id])  # another tenant's id reaches nothing
    assert rows(client) == after_first


def test_deleting_everything_leaves_no_posting_and_zero_statistics(index, client):
    docs = [doc(ns, text, attrs) for ns, text, attrs in CORPUS]
    index.put_many(docs)
    index.delete_many("acme", [d.memory_id for d in docs])
    assert all("#S#" in pk for pk, _ in rows(client))
    assert statistics(client) == {}


def clean_run(client, docs: list[KeywordDoc]) -> dict:
    """The table that putting `docs` once, without a failure, leaves (in a table of its own)."""
    client.create_table(**keyword_table_definition("clean"))
    DynamoKeywordIndex(client, "clean").put_many(docs)
    return content(client, "clean")


@pytest.mark.parametrize("operation", ["PutItem", "BatchWriteItem", "TransactWriteItems"])
def test_a_put_that_fails_midway_is_completed_by_its_retry(index, client, operation):
    docs = [doc(ns, text, attrs) for ns, text, attrs in CORPUS]
    calls = itertools.count()
    # Fail the operation from its second call on: some documents are past the step, some not.
    failure = fail(client, operation, when=lambda body: next(calls) >= 1)
    with pytest.raises(ProviderError):
        index.put_many(docs)
    failure.remove()
    assert failure.count > 0
    index.put_many(docs)
    assert content(client) == clean_run(client, docs)


@pytest.mark.parametrize("operation", ["BatchWriteItem", "TransactWriteItems"])
def test_a_delete_that_fails_midway_is_completed_by_its_retry(index, client, operation):
    docs = [doc(ns, text, attrs) for ns, text, attrs in CORPUS]
    index.put_many(docs)
    failure = fail(client, "TransactWriteItems")  # two puts stop before counting: uncounted records
    with pytest.raises(ProviderError):
        index.put_many([doc(("x",), "half indexed one"), doc(("x",), "half indexed two")])
    failure.remove()
    uncounted = [r["sk"]["S"] for (pk, _), r in rows(client).items() if "#D#" in pk and r["counted"] == {"BOOL": False}]
    gone = [d.memory_id for d in docs[:6]] + uncounted
    assert len(uncounted) == 2
    calls = itertools.count()
    failure = fail(client, operation, when=lambda body: next(calls) >= 1)
    with pytest.raises(ProviderError):
        index.delete_many("acme", gone)
    failure.remove()
    assert failure.count > 0
    index.delete_many("acme", gone)
    assert content(client) == clean_run(client, docs[6:])


class Intercept:
    """A client proxy that runs `before[name]()` once before the first call of that method."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.before: dict[str, Callable[[], None]] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        hook = self.before.pop(name, None)
        if hook is None:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            hook()
            return attr(*args, **kwargs)

        return call


def test_a_delete_between_a_puts_postings_and_its_count_leaves_nothing(client):
    """The version is deleted after the put wrote its record (so the delete finds it, uncounted,
    and removes what postings there were) and then the put's postings land: the put's count
    finds no record, and removes its own postings."""
    proxy = Intercept(client)
    writer, deleter = DynamoKeywordIndex(proxy, TABLE), DynamoKeywordIndex(client, TABLE)
    d = doc(("a",), "python rust go")
    proxy.before["transact_write_items"] = lambda: deleter.delete_many("acme", [d.memory_id])
    writer.put_many([d])
    assert rows(client) == {}


def test_a_put_that_counts_while_a_delete_runs_is_deleted_whole(client):
    """The delete read the record uncounted and removed its postings; a put then wrote them and
    counted it: the delete's transaction fails its condition, it reads the record again, removes
    the postings again and deletes the record counted."""
    proxy = Intercept(client)
    index = DynamoKeywordIndex(proxy, TABLE)
    d = doc(("a",), "python rust go")
    failure = fail(client, "TransactWriteItems")
    with pytest.raises(ProviderError):
        index.put_many([d])
    failure.remove()
    proxy.before["transact_write_items"] = lambda: DynamoKeywordIndex(client, TABLE).put_many([d])
    index.delete_many("acme", [d.memory_id])
    assert statistics(client) == {}
    assert [k for k in rows(client) if "#S#" not in k[0]] == []


def test_concurrent_puts_and_deletes_of_one_version_count_it_once(client):
    docs = [doc(("a", str(i % 3)), f"python rust word{i}") for i in range(12)]
    with ThreadPoolExecutor(6) as pool:
        list(pool.map(lambda _: DynamoKeywordIndex(client, TABLE).put_many(docs), range(6)))
    assert statistics(client)["P#"] == (12, sum(d.length for d in docs))
    with ThreadPoolExecutor(6) as pool:
        list(pool.map(lambda _: DynamoKeywordIndex(client, TABLE).delete_many("acme", [d.memory_id for d in docs]),
                      range(6)))
    assert statistics(client) == {}
    assert [k for k in rows(client) if "#S#" not in k[0]] == []


class Counting:
    """A client proxy counting calls and keeping each transaction's actions."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.transactions: list[list[dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name != "transact_write_items":
            return attr

        def call(**kwargs: Any) -> Any:
            self.transactions.append(kwargs["TransactItems"])
            return attr(**kwargs)

        return call


def ids_in_shard(shard: int, count: int) -> list[str]:
    return list(itertools.islice((m for m in (f"mem-{i:06d}" for i in itertools.count()) if _shard(m) == shard),
                                 count))


def test_one_transaction_per_shard_with_merged_statistics(client):
    counting = Counting(client)
    docs = [doc(("user", "alice", "notes"), f"python word{i}", memory_id=f"mem-{i:04d}") for i in range(40)]
    DynamoKeywordIndex(counting, TABLE).put_many(docs)
    shards = {_shard(d.memory_id) for d in docs}
    assert len(counting.transactions) == len(shards) > 1
    for actions in counting.transactions:
        records = [a for a in actions if "#D#" in a["Update"]["Key"]["pk"]["S"]]
        assert len(actions) == len(records) + 4  # the root and three ancestors, once each
    assert statistics(client)["P#user\x1ealice"] == (40, sum(d.length for d in docs))


def test_a_transaction_stays_within_its_limits(client):
    counting = Counting(client)
    deep = [doc(tuple(f"s{i}-{j}" for j in range(10)), "python", memory_id=m)
            for i, m in enumerate(ids_in_shard(3, 20))]
    DynamoKeywordIndex(counting, TABLE).put_many(deep)
    assert len(counting.transactions) > 1 and all(len(t) <= 100 for t in counting.transactions)
    assert statistics(client)["P#"] == (20, 20)
    counting.transactions.clear()
    DynamoKeywordIndex(counting, TABLE).delete_many("acme", [d.memory_id for d in deep])
    assert len(counting.transactions) > 1 and all(len(t) <= 100 for t in counting.transactions)
    assert content(client) == {}


def test_a_contended_transaction_is_retried_with_backoff(index, client):
    failure = fail(client, "TransactWriteItems", "TransactionCanceledException", status=400,
                   when=lambda body: failure.count < 2)
    d = doc(("a",), "python")
    index.put_many([d])
    failure.remove()
    assert failure.count == 2 and index.sleeps == [0.05, 0.1]
    assert statistics(client)["P#"] == (1, 1)


def test_a_transaction_that_stays_contended_is_rate_limited(index, client):
    failure = fail(client, "TransactWriteItems", "TransactionCanceledException", status=400)
    with pytest.raises(RateLimited):
        index.put_many([doc(("a",), "python")])
    failure.remove()
    assert len(index.sleeps) == 8
    assert max(index.sleeps) <= 1.0


def test_unprocessed_items_are_written_again(index, client):
    class Unprocessing:
        """Leaves the last item of the first BatchWriteItem unprocessed, as a throttled batch does."""

        def __init__(self) -> None:
            self.left = 1

        def __getattr__(self, name: str) -> Any:
            attr = getattr(client, name)
            if name != "batch_write_item":
                return attr

            def call(RequestItems):
                if self.left:
                    self.left -= 1
                    (table, requests), = RequestItems.items()
                    client.batch_write_item(RequestItems={table: requests[:-1]})
                    return {"UnprocessedItems": {table: requests[-1:]}}
                return attr(RequestItems=RequestItems)

            return call

    flaky = DynamoKeywordIndex(Unprocessing(), TABLE)
    flaky.sleep = lambda s: None
    d = doc(("a",), "python rust go java")
    flaky.put_many([d])
    assert len(postings_of(client, d.memory_id)) == 4


def test_aws_errors_are_mapped(index, client):
    fail(client, "Query", "ProvisionedThroughputExceededException", status=400)
    with pytest.raises(RateLimited):
        index.query("acme", (), NONE, query_terms("python"), 10)
    fail(client, "PutItem", "AccessDeniedException", status=400)
    with pytest.raises(ProviderError) as failed:
        index.put_many([doc(("a",), "python")])
    assert failed.value.details["aws_error_code"] == "AccessDeniedException"


# -- caps -----------------------------------------------------------------------------------


def test_a_big_document_keeps_its_most_frequent_terms(client):
    index = DynamoKeywordIndex(client, TABLE, max_terms_per_doc=40)
    terms = {f"{i:016x}": 1 for i in range(60)}
    frequent = {f"{i:016x}" for i in range(0, 60, 3)}
    terms.update({t: 3 for t in frequent})
    big = KeywordDoc("acme", ("docs",), "big", "mem-big", 1, {}, terms, sum(terms.values()))
    index.put_many([big])
    (record,) = [r for (pk, _), r in rows(client).items() if "#D#" in pk]
    kept = set(record["terms"]["M"])
    assert len(kept) == 40 and frequent <= kept
    assert len(postings_of(client, "mem-big")) == 40
    assert statistics(client)["P#"] == (1, big.length)  # the length of the whole text
    index.delete_many("acme", ["mem-big"])
    assert content(client) == {}


def test_the_largest_document_record_fits_an_item():
    """At the cap, with the longest namespace and key and large frequencies, a record stays far
    below DynamoDB's 400 KB (sizes by DynamoDB's rules, `benchmarks.keyword_costs.item_size`)."""
    terms = {f"{i:016x}": 100_000 + i for i in range(MAX_TERMS_PER_DOC)}
    big = KeywordDoc("t" * 128, ("n" * 290, "%" * 290, "x" * 290), "k" * 1024, "m" * 36, 10**9,
                     {"namespace": "n" * 290, "sub": "%" * 290}, terms, 10**9)
    assert item_size(_record_item(big, counted=True)) < 200_000


def test_a_term_past_the_posting_cap_is_left_out(client):
    index = DynamoKeywordIndex(client, TABLE, max_postings_per_term=5)
    common = [doc(("wide", str(i % 2)), "common rare" if i == 0 else "common") for i in range(6)]
    index.put_many(common)
    wide = index.query("acme", ("wide",), NONE, query_terms("common rare"), 10)
    assert [h.memory_id for h in wide.hits] == [common[0].memory_id]  # by `rare` alone
    assert wide.query_weight == pytest.approx(idf(1, 6))
    assert wide.hits[0].score == pytest.approx(bm25(1, 1, 6, 2, 7 / 6))
    narrow = index.query("acme", ("wide", "1"), NONE, query_terms("common"), 10)  # 3 postings: within the cap
    assert len(narrow.hits) == 3


def test_delete_tenant_removes_everything_of_the_tenant_only(index, client):
    docs = [doc(ns, text, attrs) for ns, text, attrs in CORPUS]
    index.put_many(docs + [doc(("x",), "python", tenant="other")])
    other = {k: r for k, r in rows(client).items() if k[0].startswith("T#other#")}
    assert index.delete_tenant("acme") == len(docs)
    assert rows(client) == other
    assert index.delete_tenant("acme") == 0
    assert index.query("acme", (), NONE, query_terms("python"), 10).hits == []


def test_delete_tenant_reaches_every_shard(client):
    index = DynamoKeywordIndex(client, TABLE)
    docs = [doc(("n", str(i % 5)), f"word{i} shared") for i in range(3 * SHARDS)]
    index.put_many(docs)
    shards = {pk for pk, _ in rows(client) if "#D#" in pk}
    assert len(shards) > SHARDS // 2
    assert index.delete_tenant("acme") == len(docs)
    assert rows(client) == {}


def test_ping(index, client):
    index.ping()
    fail(client, "GetItem", "ResourceNotFoundException", status=400)
    with pytest.raises(ProviderError):
        index.ping()


def test_the_stacks_keyword_index_has_its_own_table_without_a_stream(stack):
    """On the test stack (and so on `tests.fakes.aws_server`), the index writes its own table: no
    stream of it exists, and nothing it writes reaches the item table's stream consumers."""
    from tests.fakes.aws_stack import KEYWORD_TABLE, TABLE

    d = doc(("user", "alice"), "python rust")
    stack.keywords.put_many([d])
    assert [h.memory_id for h in stack.keywords.query("acme", (), NONE, query_terms("python"), 5).hits] == [d.memory_id]
    db = stack.clients.dynamodb
    assert "StreamSpecification" not in db.describe_table(TableName=KEYWORD_TABLE)["Table"]
    assert stack.read_stream(queue_for=()) == []
    assert db.scan(TableName=TABLE, Select="COUNT")["Count"] == 0
    stack.keywords.ping()


def test_the_costs_follow_the_formula_of_the_design(client):
    """docs/aws-design.md, "Keyword index: Costs", on a fact of one-KB record (T postings, R = 1,
    depth 3), by `benchmarks.keyword_costs.CapacityMeter`."""
    meter = CapacityMeter(client)
    index = DynamoKeywordIndex(meter, TABLE)
    fact = doc(("user", "alice", "notes"), "Alice moved to Lisbon in March and now works remotely for the "
               "design team on the billing dashboard", {"namespace": "user", "sub": "alice"})
    assert item_size(_record_item(fact, counted=True)) <= 1024
    t, depth = len(fact.terms), 3
    _, measured = measure_one(index, meter, fact)
    assert measured.index == t + 1 + 2 + 2 * (depth + 1)
    assert measured.replay == 1
    # Reads: its record, and its field-token record (absent here: the fact was indexed without one).
    assert (measured.delete_writes, measured.delete_reads) == (t + 2 + 2 * (depth + 1), 1 + 1)
    assert measured.requests == {"put_item": 1, "batch_write_item": 1, "transact_write_items": 1}
    index.put_many([fact])
    meter.reset()
    index.query("acme", ("user", "alice"), NONE, query_terms("Lisbon"), 10)
    assert meter.read_units == 8 + 0.5  # 16 statistics rows, one page of postings


def test_a_batch_shares_its_statistics_rows(client):
    meter = CapacityMeter(client)
    index = DynamoKeywordIndex(meter, TABLE)
    notes = [doc(("user", "alice", "notes"), f"note number{i} about python") for i in range(40)]
    measured = measure_batch(index, meter, notes)
    rows_touched = len({_shard(d.memory_id) for d in notes}) * 4
    postings = sum(len(d.terms) for d in notes)
    assert measured.index * 40 == pytest.approx(postings + 40 * (1 + 2) + 2 * rows_touched)
