"""The AWS keyword index: BM25 over blind terms, in its own DynamoDB table (docs/aws-design.md,
"Keyword index", has every record, access path, cost and limit).

Three kinds of record, every key starting with the tenant:

- a **posting** per (memory version, term): `T#<tenant>#W#<term>` / `<ns>\\x1f<memory id>`, with
  the term's frequency, the document's length, version, key and policy attributes. One term's
  postings under a prefix are one sort-key range of one partition, and carry all a query needs.
- a **document record** per memory version: `T#<tenant>#D#<shard>` / `<memory id>`, with its
  terms, `counted`: whether the statistics include it, and while a replacement runs `more`: the
  terms whose postings it may have written beyond them (a delete removes both), and `rev`, which
  every replacement step moves on.
- **statistics**: `T#<tenant>#S#<shard>` / `P#<encoded prefix>`: documents (`n`) and total length
  (`len`) under that prefix, for the tenant root (`P#`) and every ancestor of every namespace, so
  any scope's figures are 16 rows, however many namespaces it holds. Sharded by memory id, so
  no one row takes every write.

A put writes the record uncounted, then the postings, then counts the record in one transaction
with its statistics. A delete removes the postings, then the record, in one transaction with
its statistics if it was counted. Every step is idempotent and `counted` decides each
transaction, so a retry after a crash anywhere finishes the work, the statistics count each
document exactly once, and no posting outlives its record.

A replacement (`replace_many`: a message whose turn before changed) never leaves the version
without postings: it widens the record (`more`, `rev`), writes the new postings, deletes the stale
ones (old terms not in the new document), then narrows the record to the new terms in one
transaction with the length's change to the statistics, if `rev` is still its own. A delete
conditions on `rev` too, so one that overlaps a replacement removes whatever the record then
covers, and the replacement, finding no record, removes its own postings: the delete wins. Two
replacements of one version at once: the one whose narrowing fails starts again from the record
as it then is, so the last to finish stands, whole. A put's postings, written without a condition,
can land after a replacement of the version (another indexer run) wrote its own: the put, finding
the record replaced when it counts, writes the record's document again over them (`_rewrite`).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.dynamo_fields import DynamoFieldPostings
from memsvc.adapters.aws.dynamo_store import batch_get_rows, call_table, query_pages, transact_or_cancelled
from memsvc.adapters.aws.errors import aws_error, error_code
from memsvc.core.errors import RateLimited
from memsvc.core.filters import Filter, lookup_in
from memsvc.core.keywords import bm25, idf
from memsvc.core.models import FieldDoc, KeywordDoc, KeywordHit, KeywordResult
from memsvc.ports import FieldHolders
from memsvc.core.namespaces import ancestors, decode_namespace, encode_namespace

__all__ = ["DynamoKeywordIndex", "keyword_table_definition", "SHARDS", "MAX_TERMS_PER_DOC",
           "MAX_POSTINGS_PER_TERM"]

SHARDS = 16  # document records and statistics rows per tenant, by memory id
# A document record holds its terms: 4,000 of them (~20 bytes each) keep it far below DynamoDB's
# 400 KB item limit, and bound a document's postings (its write cost) to 4,000.
MAX_TERMS_PER_DOC = 4_000
# A term with more postings than this under the searched prefix is left out of the query (see
# `DynamoKeywordIndex.query`): reading them would cost ~3 MB and several sequential pages.
MAX_POSTINGS_PER_TERM = 20_000
MAX_ATTEMPTS = 8  # per transaction contended by another writer, or per batch left unprocessed
_BATCH_WRITE = 25  # BatchWriteItem's limit
_MAX_ACTIONS = 100  # TransactWriteItems' limits: actions, and 4 MB of items (kept to half)
_MAX_TRANSACTION_BYTES = 2_000_000
_WORKERS = 8  # requests in flight per call (the client pools 10 connections)
_ROOT = "P#"  # statistics sort keys: `P#` + the encoded prefix (`P#` alone: the whole tenant)
_DOC_END = "\x1f"  # between a posting's namespace and memory id: sorts after SEP (`\x1e`)
_LAST = "\U0010ffff"  # above any memory id, for the end of a sort-key range
_POSTING_FIELDS = {"#sk": "sk", "#tf": "tf", "#dl": "dl", "#v": "v", "#k": "k", "#pa": "pa"}
# Why DynamoDB may cancel a transaction that trying again can get through (anything else is raised).
_T = TypeVar("_T")
_R = TypeVar("_R")


def keyword_table_definition(table_name: str) -> dict[str, Any]:
    """`CreateTable` arguments: the schema the CDK stack declares and the tests create on moto.
    No stream (postings must never reach the item table's consumers), no secondary index."""
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk")],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    }


@dataclass(frozen=True)
class _Record:
    """A document record as read: the document, and whether the statistics include it."""

    doc: KeywordDoc
    counted: bool
    more: frozenset[str] = frozenset()  # terms a replacement may have written postings for
    rev: int = 0  # moved on by each replacement step (0: never replaced)

    @property
    def covered(self) -> frozenset[str]:
        """Every term this version may have a posting for: what a delete removes."""
        return frozenset(self.doc.terms) | self.more


@dataclass(frozen=True)
class _Posting:
    memory_id: str
    ns: str
    key: str
    version: int
    tf: int
    length: int
    attributes: str  # the policy attributes' JSON, "" when there are none


class DynamoKeywordIndex:
    """`KeywordIndex` on a DynamoDB table of its own. Thread-safe."""

    # Each field token is a Query: a filter listing 10,000 values made 10,000 of a search (17 s,
    # and ahead of every other search on this index's threads). As many as a query has terms
    # (`service.search.MAX_QUERY_TERMS`).
    field_tokens_per_search = 64

    def __init__(self, client: Any, table_name: str, *, max_postings_per_term: int = MAX_POSTINGS_PER_TERM,
                 max_terms_per_doc: int = MAX_TERMS_PER_DOC) -> None:
        self._db = client
        self._table = table_name
        self.max_postings_per_term = max_postings_per_term
        self.max_terms_per_doc = max_terms_per_doc
        self._pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="keyword-index")
        self.sleep: Callable[[float], None] = time.sleep  # backoff between contended attempts
        self.random: Callable[[], float] = random.random  # its jitter
        # Filters' field tokens, in this table with the same request loops.
        self._fields = DynamoFieldPostings(client, table_name, pool=self._pool, batch_write=self._batch_write,
                                           pages=self._pages, run=self._map)

    def ping(self) -> None:
        self._call("GetItem", Key={"pk": {"S": "ping"}, "sk": {"S": "ping"}})

    # -- writes ----------------------------------------------------------------------------

    def put_many(self, docs: Sequence[KeywordDoc], fields: Sequence[FieldDoc] = ()) -> None:
        self._fields.put(fields)
        unique = {(d.tenant, d.memory_id): self._capped(d) for d in docs}
        claimed = [d for d in self._map(self._claim, list(unique.values())) if d is not None]
        self._map(self._batch_write, _chunks([_posting_put(d, t, tf) for d in claimed for t, tf in d.terms.items()]))
        self._map(self._count, _transaction_groups([_Record(d, counted=False) for d in claimed]))

    def replace_many(self, docs: Sequence[KeywordDoc], fields: Sequence[FieldDoc] = ()) -> None:
        self._fields.put(fields)  # a version's field tokens never change: put again, as they are
        unique = {(d.tenant, d.memory_id): self._capped(d) for d in docs}
        self._map(self._replace, list(unique.values()))

    def delete_many(self, tenant: str, memory_ids: Sequence[str]) -> None:
        self._fields.delete(tenant, memory_ids)
        self._remove(list(self._records(tenant, memory_ids).values()))

    def delete_tenant(self, tenant: str) -> int:
        self._fields.delete_tenant(tenant)
        removed = 0
        for shard in range(SHARDS):
            for rows in self._pages(KeyConditionExpression="pk = :p",
                                    ExpressionAttributeValues={":p": {"S": f"T#{tenant}#D#{shard}"}}):
                self._remove([_record_of(tenant, row) for row in rows])
                removed += len(rows)
        self._drop_empty_statistics(tenant)
        return removed

    def field_holders(self, tenant: str, prefix: tuple[str, ...], tokens: Sequence[str]) -> FieldHolders:
        return self._fields.holders(tenant, prefix, tokens)

    def memory_ids(self, tenant: str) -> set[str]:
        """Memory ids with a document record (for tests and diagnostics: 16 Queries)."""
        return {row["sk"]["S"] for shard in range(SHARDS)
                for rows in self._pages(KeyConditionExpression="pk = :p",
                                        ExpressionAttributeValues={":p": {"S": f"T#{tenant}#D#{shard}"}})
                for row in rows}

    def _capped(self, doc: KeywordDoc) -> KeywordDoc:
        """The document with at most `max_terms_per_doc` terms, the most frequent (its length stays
        what it was: where BM25 normalises by length (`BM25_B`), it is the text's, not what is kept)."""
        if len(doc.terms) <= self.max_terms_per_doc:
            return doc
        kept = sorted(doc.terms.items(), key=lambda term: (-term[1], term[0]))[: self.max_terms_per_doc]
        return replace(doc, terms=dict(kept))

    def _claim(self, doc: KeywordDoc) -> KeywordDoc | None:
        """Step 1 of a put: the record, uncounted, unless the version has one. Returns the document
        to index (the stored one, if an earlier attempt stopped before counting it), or None when
        it is indexed already."""
        try:
            self._db.put_item(TableName=self._table, Item=_record_item(doc, counted=False),
                              ConditionExpression="attribute_not_exists(pk)",
                              ReturnValuesOnConditionCheckFailure="ALL_OLD")
            return doc
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise aws_error(exc, service="DynamoDB", operation="PutItem") from None
            old = exc.response.get("Item")
        except BotoCoreError as exc:
            raise aws_error(exc, service="DynamoDB", operation="PutItem") from None
        record = _record_of(doc.tenant, old) if old else self._records(doc.tenant, [doc.memory_id]).get(doc.memory_id)
        return None if record is None or record.counted else record.doc

    def _replace(self, doc: KeywordDoc) -> None:
        """One version's replacement (see the module's docstring): put when it has no record,
        a put that stopped before counting finished first, and started again from the record as
        it is when another replacement moved it meanwhile; a record that goes meanwhile was
        deleted, and the delete wins. Runs on a pool thread: no `_map`."""
        for attempt in range(MAX_ATTEMPTS):
            record = self._records(doc.tenant, [doc.memory_id]).get(doc.memory_id)
            if record is None:
                if attempt:
                    return
                if self._claim(doc) is doc:
                    self._write_each([_posting_put(doc, t, tf) for t, tf in doc.terms.items()])
                    self._count([_Record(doc, counted=False)])
                    return
            elif not record.counted:  # a put stopped (or runs) before its count: finish it, then replace
                self._write_each([_posting_put(record.doc, t, tf) for t, tf in record.doc.terms.items()])
                self._count([record])
            elif record.doc.terms == doc.terms and record.doc.length == doc.length and not record.more:
                return
            elif self._swap(record, doc):
                return
            else:
                self._backoff(attempt)
        raise _busy()

    def _swap(self, record: _Record, doc: KeywordDoc) -> bool:
        """Widen the record to cover the new terms, write the new postings, delete the stale ones,
        narrow the record to the new document. False when the record moved first (another
        replacement, or a put's count): the caller starts again. True when done, or when the
        version was deleted meanwhile (its delete wins: the postings written here go too)."""
        widened = record.rev + 1
        more = sorted((record.more | frozenset(doc.terms)) - frozenset(record.doc.terms))
        names = {"#m": "more"}
        values: dict[str, Any] = {":w": {"N": str(widened)}}
        if more:
            values[":m"] = {"SS": more}
        if not self._update_if({**self._if_counted(record), "UpdateExpression": (
                "SET #rv = :w, #m = :m" if more else "SET #rv = :w REMOVE #m")}, names, values):
            return False
        self._write_each([_posting_put(doc, t, tf) for t, tf in doc.terms.items()])
        self._write_each(_posting_deletes(doc, record.covered - frozenset(doc.terms)))
        narrow = {"Update": {
            "TableName": self._table, "Key": _record_key(doc.tenant, doc.memory_id),
            "UpdateExpression": "SET #t = :t, #dl = :dl, #rv = :n REMOVE #m", "ConditionExpression": "#rv = :w",
            "ExpressionAttributeNames": {"#t": "terms", "#dl": "dl", "#rv": "rev", "#m": "more"},
            "ExpressionAttributeValues": {":t": _terms_map(doc.terms), ":dl": {"N": str(doc.length)},
                                          ":n": {"N": str(widened + 1)}, ":w": {"N": str(widened)}}}}
        change = doc.length - record.doc.length
        totals = {prefix: (0, change) for prefix in ["", *ancestors(doc.namespace)]} if change else {}
        if self._transact([narrow, *self._statistics_rows(doc.tenant, doc.memory_id, totals)]):
            return True
        if doc.memory_id not in self._records(doc.tenant, [doc.memory_id]):
            self._write_each(_posting_deletes(doc))
            return True
        return False

    def _rewrite(self, written: KeywordDoc, record: _Record) -> None:
        """A put's postings of `written` landed while or after a replacement of the version ran
        (`record`, read since): the record's document is written again over them, as a replacement
        of it by itself whose record also covers `written`'s terms, so their stale postings go and
        theirs are made whole. Its races are a replacement's."""
        for attempt in range(MAX_ATTEMPTS):
            if self._swap(replace(record, more=record.more | frozenset(written.terms)), record.doc):
                return
            self._backoff(attempt)
            now = self._records(written.tenant, [written.memory_id]).get(written.memory_id)
            if now is None:  # deleted meanwhile: perhaps from what it covered before our terms
                self._write_each(_posting_deletes(written))
                return
            record = now
        raise _busy()

    def _update_if(self, update: dict[str, Any], names: dict[str, str], values: dict[str, Any]) -> bool:
        """One conditional UpdateItem (`update`: `_if_counted`'s target and condition, and the
        expression; `names` and `values` added to its own); False when the condition failed."""
        request = {**update, "ExpressionAttributeNames": {**update["ExpressionAttributeNames"], **names},
                   "ExpressionAttributeValues": {**update["ExpressionAttributeValues"], **values}}
        try:
            self._db.update_item(**request)
            return True
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise aws_error(exc, service="DynamoDB", operation="UpdateItem") from None
        except BotoCoreError as exc:
            raise aws_error(exc, service="DynamoDB", operation="UpdateItem") from None

    def _count(self, group: list[_Record]) -> None:
        """Step 3 of a put, for uncounted records of one tenant and shard: marked counted, and added
        to the statistics, in one transaction. When DynamoDB cancels it, the records say why: one
        is gone (deleted meanwhile, perhaps before our postings landed: they are removed), one is
        counted (by another writer of the same version; when by a replacement, our postings may have
        landed after its own: `_rewrite`), or none changed (a statistics row was busy in another
        transaction, or throttled: back off)."""
        pending = group
        for attempt in range(MAX_ATTEMPTS):
            marks = [{"Update": self._counting(r)} for r in pending]
            if self._transact(marks + self._statistics([r.doc for r in pending], +1)):
                return
            now = self._records(pending[0].doc.tenant, [r.doc.memory_id for r in pending])
            for r in pending:
                if r.doc.memory_id not in now:
                    self._write_each(_posting_deletes(r.doc))
                elif now[r.doc.memory_id].rev != r.rev:
                    self._rewrite(r.doc, now[r.doc.memory_id])
            still = [r for r in pending if r.doc.memory_id in now and not now[r.doc.memory_id].counted]
            if not still:
                return
            if len(still) == len(pending):
                self._backoff(attempt)
            pending = still
        raise _busy()

    def _remove(self, records: list[_Record]) -> None:
        self._map(self._batch_write, _chunks([p for r in records for p in _posting_deletes(r.doc, r.covered)]))
        self._map(self._uncount, _transaction_groups(records))

    def _uncount(self, group: list[_Record]) -> None:
        """The last step of a delete, for records of one tenant and shard whose postings are
        removed: the records deleted if still as read, and those counted taken out of the
        statistics, in one transaction. When DynamoDB cancels it, the records say why: one is gone
        (another delete), one was counted or replaced meanwhile (by a put or a replacement, which
        may have written postings after they were removed: whatever the record now covers is
        removed again), or none changed (back off)."""
        pending = group
        for attempt in range(MAX_ATTEMPTS):
            deletes = [{"Delete": self._if_counted(r)} for r in pending]
            if self._transact(deletes + self._statistics([r.doc for r in pending if r.counted], -1)):
                return
            now = self._records(pending[0].doc.tenant, [r.doc.memory_id for r in pending])
            moved = [now[r.doc.memory_id] for r in pending if r.doc.memory_id in now
                     and (now[r.doc.memory_id].counted, now[r.doc.memory_id].rev) != (r.counted, r.rev)]
            for r in moved:
                self._write_each(_posting_deletes(r.doc, r.covered))
            still = [now[r.doc.memory_id] for r in pending if r.doc.memory_id in now]
            if not still:
                return
            if not moved and len(still) == len(pending):
                self._backoff(attempt)
            pending = still
        raise _busy()

    def _counting(self, record: _Record) -> dict[str, Any]:
        """An update marking the uncounted record counted, if it is still as read."""
        target = self._if_counted(record)
        return {**target, "UpdateExpression": "SET #c = :t",
                "ExpressionAttributeValues": {**target["ExpressionAttributeValues"], ":t": {"BOOL": True}}}

    def _if_counted(self, record: _Record) -> dict[str, Any]:
        """A transaction action's target and condition: the record, still counted and replaced
        (`rev`) as read."""
        if record.rev:
            rev_condition, values = "#rv = :rv", {":rv": {"N": str(record.rev)}}
        else:
            rev_condition, values = "attribute_not_exists(#rv)", {}
        return {"TableName": self._table, "Key": _record_key(record.doc.tenant, record.doc.memory_id),
                "ConditionExpression": f"#c = :c AND {rev_condition}",
                "ExpressionAttributeNames": {"#c": "counted", "#rv": "rev"},
                "ExpressionAttributeValues": {":c": {"BOOL": record.counted}, **values}}

    def _statistics(self, docs: list[KeywordDoc], sign: int) -> list[dict[str, Any]]:
        """A transaction's updates of the statistics rows of these documents (one tenant, one shard):
        one per prefix that holds any of them, the tenant root included."""
        totals: dict[str, tuple[int, int]] = {}
        for d in docs:
            for prefix in ["", *ancestors(d.namespace)]:
                n, length = totals.get(prefix, (0, 0))
                totals[prefix] = (n + sign, length + sign * d.length)
        return self._statistics_rows(docs[0].tenant, docs[0].memory_id, totals) if docs else []

    def _statistics_rows(self, tenant: str, memory_id: str,
                         totals: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
        """Updates adding (documents, length) to each prefix's statistics row, in the shard of
        `memory_id`."""
        return [{"Update": {
            "TableName": self._table,
            "Key": {"pk": {"S": f"T#{tenant}#S#{_shard(memory_id)}"}, "sk": {"S": _ROOT + prefix}},
            "UpdateExpression": "ADD #n :n, #len :len",
            "ExpressionAttributeNames": {"#n": "n", "#len": "len"},
            "ExpressionAttributeValues": {":n": {"N": str(n)}, ":len": {"N": str(length)}},
        }} for prefix, (n, length) in totals.items()]

    def _transact(self, actions: list[dict[str, Any]]) -> bool:
        """One transaction; False when DynamoDB cancelled it retryably: the caller reads the
        records to tell which."""
        return transact_or_cancelled(self._db, actions)

    def _write_each(self, requests: list[dict[str, Any]]) -> None:
        """BatchWriteItem requests one after the other, from a pool thread (see `_map`)."""
        for chunk in _chunks(requests):
            self._batch_write(chunk)

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        """One BatchWriteItem, what it leaves unprocessed sent again with backoff. The loop is ours:
        botocore retries a failed request, not the items a successful one did not write."""
        pending = {self._table: requests}
        for attempt in range(MAX_ATTEMPTS):
            pending = self._call("BatchWriteItem", RequestItems=pending).get("UnprocessedItems") or {}
            if not pending:
                return
            self._backoff(attempt)
        raise _busy()

    def _drop_empty_statistics(self, tenant: str) -> None:
        """A wiped tenant's statistics rows, each only if it counts nothing (a put that counted a
        document meanwhile keeps its rows)."""
        for shard in range(SHARDS):
            for rows in self._pages(KeyConditionExpression="pk = :p", ProjectionExpression="pk, sk",
                                    ExpressionAttributeValues={":p": {"S": f"T#{tenant}#S#{shard}"}}):
                for row in rows:
                    try:
                        self._db.delete_item(TableName=self._table, Key=row, ConditionExpression="#n = :z",
                                             ExpressionAttributeNames={"#n": "n"},
                                             ExpressionAttributeValues={":z": {"N": "0"}})
                    except ClientError as exc:
                        if error_code(exc) != "ConditionalCheckFailedException":
                            raise aws_error(exc, service="DynamoDB", operation="DeleteItem") from None
                    except BotoCoreError as exc:
                        raise aws_error(exc, service="DynamoDB", operation="DeleteItem") from None

    # -- query -------------------------------------------------------------------------------

    def query(self, tenant: str, prefix: tuple[str, ...], pushdown: Filter, terms: Sequence[str],
              top_k: int) -> KeywordResult:
        """BM25 with the document count and average length of the documents under `prefix` (its
        statistics rows), and each term's document frequency among its postings under `prefix`
        that `pushdown` admits. A term with more than `max_postings_per_term` postings under the
        prefix is left out, of the scores and of `query_weight`: it is that common there, and
        the postings read so far would rank an arbitrary subset (those first in sort-key order)."""
        distinct = list(dict.fromkeys(terms))
        statistics = self._pool.submit(self._statistics_under, tenant, prefix)
        found = [self._pool.submit(self._postings, tenant, term, prefix) for term in distinct]
        n_docs, total_length = statistics.result()
        lists = [f.result() for f in found]
        if n_docs <= 0:
            return KeywordResult([], 0.0)
        avg_length = total_length / n_docs
        admitted: dict[str, bool] = {}  # by policy attributes' JSON: each distinct one parsed once

        def admits(p: _Posting) -> bool:
            if pushdown.is_empty:
                return True
            if p.attributes not in admitted:
                admitted[p.attributes] = pushdown.matches(lookup_in(json.loads(p.attributes or "{}")))
            return admitted[p.attributes]

        scores: dict[str, float] = {}
        held: Counter[str] = Counter()
        about: dict[str, _Posting] = {}
        weight = 0.0
        for postings in lists:
            if postings is None:
                continue
            postings = [p for p in postings if admits(p)]
            df = min(len(postings), n_docs)  # a document being written can have postings before it counts
            weight += idf(df, n_docs)
            for p in postings:
                scores[p.memory_id] = scores.get(p.memory_id, 0.0) + bm25(p.tf, df, n_docs, p.length, avg_length)
                held[p.memory_id] += 1
                about[p.memory_id] = p
        best = heapq.nsmallest(top_k, scores, key=lambda m: (-scores[m], m))
        return KeywordResult([KeywordHit(decode_namespace(about[m].ns), about[m].key, m, about[m].version, scores[m],
                                         held[m]) for m in best], weight)

    def _statistics_under(self, tenant: str, prefix: tuple[str, ...]) -> tuple[int, int]:
        """(documents, total length) under the prefix: its row in each shard, one BatchGetItem."""
        sk = {"S": _ROOT + encode_namespace(prefix)}
        keys = [{"pk": {"S": f"T#{tenant}#S#{shard}"}, "sk": sk} for shard in range(SHARDS)]
        rows = batch_get_rows(self._db, self._table, keys, consistent=False)
        return sum(int(r["n"]["N"]) for r in rows), sum(int(r["len"]["N"]) for r in rows)

    def _postings(self, tenant: str, term: str, prefix: tuple[str, ...]) -> list[_Posting] | None:
        """The term's postings under the prefix; None when there are more than the cap."""
        values: dict[str, Any] = {":p": {"S": f"T#{tenant}#W#{term}"}}
        condition = "pk = :p"
        if prefix:  # the namespace itself (`<ns>\x1f...`) and below it (`<ns>\x1e...`), nothing else
            exact = encode_namespace(prefix)
            condition += " AND #sk BETWEEN :lo AND :hi"
            values |= {":lo": {"S": exact + "\x1e"}, ":hi": {"S": exact + _DOC_END + _LAST}}
        out: list[_Posting] = []
        for rows in self._pages(KeyConditionExpression=condition, ExpressionAttributeValues=values,
                                ProjectionExpression=", ".join(_POSTING_FIELDS),
                                ExpressionAttributeNames=_POSTING_FIELDS,
                                limit=lambda: self.max_postings_per_term + 1 - len(out)):
            out.extend(_posting_of(row) for row in rows)
            if len(out) > self.max_postings_per_term:
                return None
        return out

    # -- plumbing ----------------------------------------------------------------------------

    def _records(self, tenant: str, memory_ids: Iterable[str]) -> dict[str, _Record]:
        """The records of these memory versions that exist, by memory id (consistent reads)."""
        keys = [_record_key(tenant, m) for m in dict.fromkeys(memory_ids)]
        return {row["sk"]["S"]: _record_of(tenant, row) for row in batch_get_rows(self._db, self._table, keys)}

    def _pages(self, *, limit: Callable[[], int] | None = None, **kwargs: Any) -> Iterable[list[dict[str, Any]]]:
        return query_pages(self._db, self._table, limit=limit, **kwargs)

    def _map(self, fn: Callable[[_T], _R], items: list[_T]) -> list[_R]:
        """`fn` over `items`, `_WORKERS` at a time, results in order. Every call has ended when it
        returns or raises (the first error), so a failed step never runs on behind the caller.
        Only ever called from the caller's thread (a pool thread waiting on the pool could
        starve it)."""
        if len(items) <= 1:
            return [fn(i) for i in items]
        futures = [self._pool.submit(fn, i) for i in items]
        wait(futures)
        return [f.result() for f in futures]

    def _backoff(self, attempt: int) -> None:
        self.sleep(min(0.05 * 2**attempt, 1.0) * (0.5 + self.random() / 2))

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        return call_table(self._db, self._table, operation, **kwargs)


def _shard(memory_id: str) -> int:
    return int.from_bytes(hashlib.sha256(memory_id.encode()).digest()[:4], "big") % SHARDS


def _record_key(tenant: str, memory_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"T#{tenant}#D#{_shard(memory_id)}"}, "sk": {"S": memory_id}}


def _record_item(doc: KeywordDoc, *, counted: bool) -> dict[str, Any]:
    item = {
        **_record_key(doc.tenant, doc.memory_id),
        "ns": {"S": encode_namespace(doc.namespace)}, "k": {"S": doc.key}, "v": {"N": str(doc.version)},
        "terms": _terms_map(doc.terms), "dl": {"N": str(doc.length)},
        "counted": {"BOOL": counted},
    }
    if doc.policy_attributes:
        item["pa"] = {"S": json.dumps(doc.policy_attributes, sort_keys=True)}
    return item


def _record_of(tenant: str, row: dict[str, Any]) -> _Record:
    doc = KeywordDoc(
        tenant=tenant, namespace=decode_namespace(row["ns"]["S"]), key=row["k"]["S"], memory_id=row["sk"]["S"],
        version=int(row["v"]["N"]), policy_attributes=json.loads(row["pa"]["S"]) if "pa" in row else {},
        terms={t: int(tf["N"]) for t, tf in row["terms"]["M"].items()}, length=int(row["dl"]["N"]))
    return _Record(doc, row["counted"]["BOOL"], frozenset(row.get("more", {}).get("SS", ())),
                   int(row.get("rev", {}).get("N", "0")))


def _terms_map(terms: dict[str, int]) -> dict[str, Any]:
    return {"M": {t: {"N": str(tf)} for t, tf in terms.items()}}


def _posting_key(doc: KeywordDoc, term: str) -> dict[str, Any]:
    return {"pk": {"S": f"T#{doc.tenant}#W#{term}"},
            "sk": {"S": encode_namespace(doc.namespace) + _DOC_END + doc.memory_id}}


def _posting_put(doc: KeywordDoc, term: str, tf: int) -> dict[str, Any]:
    item = {**_posting_key(doc, term), "tf": {"N": str(tf)}, "dl": {"N": str(doc.length)},
            "v": {"N": str(doc.version)}, "k": {"S": doc.key}}
    if doc.policy_attributes:
        item["pa"] = {"S": json.dumps(doc.policy_attributes, sort_keys=True)}
    return {"PutRequest": {"Item": item}}


def _posting_deletes(doc: KeywordDoc, terms: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Deletes of the version's postings of `terms` (by default, its document's)."""
    return [{"DeleteRequest": {"Key": _posting_key(doc, term)}} for term in (doc.terms if terms is None else terms)]


def _posting_of(row: dict[str, Any]) -> _Posting:
    ns, _, memory_id = row["sk"]["S"].partition(_DOC_END)  # an encoded namespace never holds it
    return _Posting(memory_id=memory_id, ns=ns, key=row["k"]["S"], version=int(row["v"]["N"]),
                    tf=int(row["tf"]["N"]), length=int(row["dl"]["N"]), attributes=row.get("pa", {}).get("S", ""))


def _transaction_groups(records: list[_Record]) -> list[list[_Record]]:
    """The records in groups of one tenant and shard (so their statistics rows are shared and
    concurrent transactions of one call never contend), each within a transaction's limits."""
    by_shard: dict[tuple[str, int], list[_Record]] = {}
    for r in records:
        by_shard.setdefault((r.doc.tenant, _shard(r.doc.memory_id)), []).append(r)
    groups = []
    for members in by_shard.values():
        group: list[_Record] = []
        prefixes: set[str] = set()
        size = 0
        for r in members:
            mine = {"", *ancestors(r.doc.namespace)}
            # an over-estimate of the record's size: its JSON (a transaction takes 4 MB of items)
            record_bytes = len(json.dumps(_record_item(r.doc, counted=True)))
            if group and (len(group) + 1 + len(prefixes | mine) > _MAX_ACTIONS
                          or size + record_bytes > _MAX_TRANSACTION_BYTES):
                groups.append(group)
                group, prefixes, size = [], set(), 0
            group.append(r)
            prefixes |= mine
            size += record_bytes
        groups.append(group)
    return groups


def _chunks(requests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [requests[i : i + _BATCH_WRITE] for i in range(0, len(requests), _BATCH_WRITE)]


def _busy() -> RateLimited:
    return RateLimited("the keyword index is busy (throttled or contended); try again shortly", retry_after_seconds=1,
                       details={"provider": "DynamoDB"})
