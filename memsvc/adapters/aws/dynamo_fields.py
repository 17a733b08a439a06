"""Field-token postings on DynamoDB, in the keyword index's table (docs/aws-design.md, "Field
tokens"): the same postings design as the keyword terms, without statistics.

- a **token posting** per (memory version, token): `T#<tenant>#FT#<token>` / `<ns>\\x1f<memory id>`;
- an **indexed posting** per memory version: `T#<tenant>#FI` / `<ns>\\x1f<memory id>`, written
  after all its token postings and deleted before them, so a version found here has all its
  tokens readable (a search never decides on part of them);
- a **record** per memory version: `T#<tenant>#FD#<shard>` / `<memory id>`, its namespace and
  tokens (what a delete must remove), written first and deleted last.

Every step is an idempotent put or delete, so a retry after a crash anywhere finishes the work.
A filter reads one partition per token plus the indexed partition, each a `Query` of the
prefix's sort-key range; nothing is a Scan.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memsvc.adapters.aws.dynamo_store import batch_get_rows
from memsvc.core.models import FieldDoc, FieldHolderSets
from memsvc.core.namespaces import decode_namespace, encode_namespace

__all__ = ["DynamoFieldPostings", "RECORD_SHARDS"]

RECORD_SHARDS = 16
_DOC_END = "\x1f"  # between a posting's namespace and memory id (as the keyword postings)
_LAST = "\U0010ffff"


class DynamoFieldPostings:
    """Thread-safe. `batch_write`, `pages` and `run` are the keyword index's own request loops
    (unprocessed items sent again with backoff; paginated Query; requests side by side)."""

    def __init__(self, client: Any, table: str, *, pool: ThreadPoolExecutor,
                 batch_write: Callable[[list[dict[str, Any]]], None],
                 pages: Callable[..., Iterable[list[dict[str, Any]]]],
                 run: Callable[[Callable[[Any], Any], list[Any]], list[Any]]) -> None:
        self._db = client
        self._table = table
        self._pool = pool
        self._batch_write = batch_write
        self._pages = pages
        self._run = run

    def put(self, docs: Sequence[FieldDoc]) -> None:
        docs = list({(d.tenant, d.memory_id): d for d in docs}.values())
        for phase in ([_record(d) for d in docs],
                      [_posting(d, f"FT#{t}") for d in docs for t in d.tokens],
                      [_posting(d, "FI") for d in docs]):
            self._write(phase, "PutRequest")

    def delete(self, tenant: str, memory_ids: Sequence[str]) -> None:
        keys = [_record_key(tenant, m) for m in dict.fromkeys(memory_ids)]
        self._remove(tenant, batch_get_rows(self._db, self._table, keys))

    def delete_tenant(self, tenant: str) -> None:
        for shard in range(RECORD_SHARDS):
            for rows in self._pages(KeyConditionExpression="pk = :p",
                                    ExpressionAttributeValues={":p": {"S": f"T#{tenant}#FD#{shard}"}}):
                self._remove(tenant, rows)

    def holders(self, tenant: str, prefix: tuple[str, ...], tokens: Sequence[str]) -> FieldHolderSets:
        distinct = list(dict.fromkeys(tokens))
        indexed = self._pool.submit(self._memory_ids, f"T#{tenant}#FI", prefix)
        found = [self._pool.submit(self._memory_ids, f"T#{tenant}#FT#{t}", prefix) for t in distinct]
        return FieldHolderSets(indexed.result(), {t: f.result() for t, f in zip(distinct, found)})

    def _remove(self, tenant: str, rows: list[dict[str, Any]]) -> None:
        docs = [FieldDoc(tenant, decode_namespace(r["ns"]["S"]), r["sk"]["S"],
                         frozenset(t["S"] for t in r["tokens"]["L"])) for r in rows]
        for phase in ([_posting(d, "FI") for d in docs],
                      [_posting(d, f"FT#{t}") for d in docs for t in d.tokens],
                      [_record(d) for d in docs]):
            self._write(phase, "DeleteRequest")

    def _write(self, items: list[dict[str, Any]], request: str) -> None:
        """One phase: every item put (or its key deleted), 25 to a BatchWriteItem, side by side."""
        requests = [{request: {"Item": item} if request == "PutRequest" else {"Key": _key_of(item)}}
                    for item in items]
        self._run(self._batch_write, [requests[i : i + 25] for i in range(0, len(requests), 25)])

    def _memory_ids(self, pk: str, prefix: tuple[str, ...]) -> frozenset[str]:
        """Memory ids of the partition's postings under the prefix (a consistent read)."""
        values: dict[str, Any] = {":p": {"S": pk}}
        condition = "pk = :p"
        if prefix:  # the namespace itself (`<ns>\x1f...`) and below it (`<ns>\x1e...`), nothing else
            exact = encode_namespace(prefix)
            condition += " AND sk BETWEEN :lo AND :hi"
            values |= {":lo": {"S": exact + "\x1e"}, ":hi": {"S": exact + _DOC_END + _LAST}}
        return frozenset(row["sk"]["S"].partition(_DOC_END)[2]
                         for rows in self._pages(KeyConditionExpression=condition, ExpressionAttributeValues=values,
                                                 ProjectionExpression="sk", ConsistentRead=True)
                         for row in rows)


def _shard(memory_id: str) -> int:
    return int.from_bytes(hashlib.sha256(memory_id.encode()).digest()[:4], "big") % RECORD_SHARDS


def _record_key(tenant: str, memory_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"T#{tenant}#FD#{_shard(memory_id)}"}, "sk": {"S": memory_id}}


def _record(doc: FieldDoc) -> dict[str, Any]:
    return {**_record_key(doc.tenant, doc.memory_id), "ns": {"S": encode_namespace(doc.namespace)},
            "tokens": {"L": [{"S": t} for t in sorted(doc.tokens)]}}


def _posting(doc: FieldDoc, kind: str) -> dict[str, Any]:
    return {"pk": {"S": f"T#{doc.tenant}#{kind}"},
            "sk": {"S": encode_namespace(doc.namespace) + _DOC_END + doc.memory_id}}


def _key_of(item: dict[str, Any]) -> dict[str, Any]:
    return {"pk": item["pk"], "sk": item["sk"]}
