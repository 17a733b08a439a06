"""DynamoDB capacity of the keyword index per memory, on moto: `python -m benchmarks.keyword_costs`.

moto answers `ReturnConsumedCapacity` with a constant per call, so `CapacityMeter` computes what
DynamoDB would bill from the items themselves, by DynamoDB's documented rules (on-demand):

- an item's size is the sum of its attribute names' and values' sizes: a string its UTF-8 bytes,
  a number 1 byte plus 1 per two significant digits, a boolean 1, a map or list 3 bytes plus,
  per element, 1 byte and its name and value;
- a write is 1 write unit per KB (rounded up) of the larger of the item before and after; a
  delete, the item deleted; a write of an absent item or a failed condition, at least 1;
  BatchWriteItem, each item on its own; TransactWriteItems, 2 per KB per item;
- a read is 1 read unit per 4 KB when consistent, half when not: GetItem and each key of a
  BatchGetItem rounded up on its own (at least 1 or 0.5, found or not), a Query the total size of
  the items it reads (whatever it projects), rounded up once.

It prints, for a 20-word fact, a 100-word note and a 1,000-word document (windows of this
repository's own prose, analysed as the indexer does, under `["user", "alice", "notes"]` with the
default policy attributes), the units to index, to index again (a replay), and to delete, one
memory per call and 100 notes in one call (a stream batch: they share statistics updates), and
what a query reads, with the price at us-east-1's on-demand rates.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

WRITE_PRICE = 0.625 / 1e6  # $ per write unit, on demand, us-east-1
READ_PRICE = 0.125 / 1e6  # $ per read unit
TABLE = "memsvc-keywords-costs"
REGION = "us-east-1"
NAMESPACE = ("user", "alice", "notes")
SIZES = (("fact", 20), ("note", 100), ("document", 1000))
_ROOT = Path(__file__).resolve().parents[1]


def value_size(value: dict[str, Any]) -> int:
    """The size DynamoDB counts for one attribute value (without its name)."""
    (kind, v), = value.items()
    if kind == "S":
        return len(v.encode("utf-8"))
    if kind == "N":
        digits = Decimal(v).normalize().as_tuple().digits
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + value_size(e) + 1 for k, e in v.items())
    if kind == "L":
        return 3 + sum(value_size(e) + 1 for e in v)
    element = {"SS": "S", "NS": "N", "BS": "B"}[kind]
    return sum(value_size({element: e}) for e in v)


def item_size(item: dict[str, Any] | None) -> int:
    """An item's size by DynamoDB's rules: its attributes' names and values."""
    return sum(len(name.encode("utf-8")) + value_size(v) for name, v in (item or {}).items())


def _write_units(*sizes: int) -> int:
    return max(1, math.ceil(max(sizes) / 1024))


def _read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return units if consistent else units / 2


class CapacityMeter:
    """A DynamoDB client proxy that sums the capacity each call would consume on DynamoDB (see
    the module docstring), reading items before and after a write through the client itself."""

    def __init__(self, client: Any) -> None:
        self._client = client
        # The adapter calls from several threads: one call at a time, so no other write lands
        # between a call and the reads that size it (and moto's tables are not thread-safe).
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.write_units = 0.0
        self.read_units = 0.0
        self.requests: dict[str, int] = {}

    def _add(self, *, writes: float = 0.0, reads: float = 0.0) -> None:
        self.write_units += writes
        self.read_units += reads

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        meter = getattr(self, f"_{name}", None)
        if meter is None:
            return attr

        def call(**kwargs: Any) -> Any:
            with self._lock:
                self.requests[name] = self.requests.get(name, 0) + 1
                return meter(attr, **kwargs)

        return call

    def _stored(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        return self._client.get_item(TableName=table, Key={"pk": key["pk"], "sk": key["sk"]},
                                     ConsistentRead=True).get("Item")

    def _written(self, call: Any, table: str, key: dict[str, Any], units_per_kb: int, **kwargs: Any) -> Any:
        before = item_size(self._stored(table, key))
        try:
            return call(**kwargs)
        finally:
            after = item_size(self._stored(table, key))
            self._add(writes=units_per_kb * _write_units(before, after))

    def _put_item(self, call: Any, **kw: Any) -> Any:
        return self._written(call, kw["TableName"], kw["Item"], 1, **kw)

    def _update_item(self, call: Any, **kw: Any) -> Any:
        return self._written(call, kw["TableName"], kw["Key"], 1, **kw)

    def _delete_item(self, call: Any, **kw: Any) -> Any:
        return self._written(call, kw["TableName"], kw["Key"], 1, **kw)

    def _stored_many(self, table: str, keys: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
        """The items at these keys (at most 100, distinct), in order, None where absent."""
        wanted = [{"pk": k["pk"], "sk": k["sk"]} for k in keys]
        found = self._client.batch_get_item(RequestItems={table: {"Keys": wanted, "ConsistentRead": True}})
        by_key = {(r["pk"]["S"], r["sk"]["S"]): r for r in found["Responses"].get(table, [])}
        return [by_key.get((k["pk"]["S"], k["sk"]["S"])) for k in wanted]

    def _batch_write_item(self, call: Any, **kw: Any) -> Any:
        units = 0
        for table, requests in kw["RequestItems"].items():
            new = [r["PutRequest"]["Item"] if "PutRequest" in r else None for r in requests]
            keys = [item or r["DeleteRequest"]["Key"] for item, r in zip(new, requests)]
            for item, old in zip(new, self._stored_many(table, keys)):
                units += _write_units(item_size(item), item_size(old))
        self._add(writes=units)
        return call(**kw)

    def _transact_write_items(self, call: Any, **kw: Any) -> Any:
        actions = [next(iter(a.values())) for a in kw["TransactItems"]]
        keys = [(a["TableName"], a.get("Key") or a["Item"]) for a in actions]
        before = [item_size(self._stored(t, k)) for t, k in keys]
        try:
            return call(**kw)
        finally:
            after = [item_size(self._stored(t, k)) for t, k in keys]
            self._add(writes=sum(2 * _write_units(b, a) for b, a in zip(before, after)))

    def _get_item(self, call: Any, **kw: Any) -> Any:
        response = call(**kw)
        self._add(reads=_read_units(item_size(response.get("Item")), kw.get("ConsistentRead", False)))
        return response

    def _batch_get_item(self, call: Any, **kw: Any) -> Any:
        response = call(**kw)
        for table, request in kw["RequestItems"].items():
            found = response.get("Responses", {}).get(table, [])
            sizes = [item_size(row) for row in found]
            sizes += [0] * (len(request["Keys"]) - len(found))  # a key not found costs the minimum
            self._add(reads=sum(_read_units(s, request.get("ConsistentRead", False)) for s in sizes))
        return response

    def _query(self, call: Any, **kw: Any) -> Any:
        response = call(**kw)
        pk = kw["ExpressionAttributeValues"][":p"]
        size = sum(item_size(self._stored(kw["TableName"], {"pk": pk, "sk": row["sk"]}))
                   for row in response.get("Items", []))
        self._add(reads=_read_units(size, kw.get("ConsistentRead", False)))
        return response


@dataclass
class Measured:
    label: str
    words: int
    terms: float  # distinct terms, the postings written
    index: float  # write units to index once
    replay: float  # write units to index again (a replayed stream record)
    delete_writes: float
    delete_reads: float
    requests: dict[str, float]  # requests to index once, per operation


def prose_words() -> list[str]:
    # The README's prose moved to docs/ pages (issue 28); these hold what README.md held before.
    moved = ("api", "agent-memory", "sessions-and-workflow", "graph", "langgraph-and-tools", "search-and-retrieval",
             "security-and-encryption", "data-ownership", "aws-deployment", "operations", "architecture",
             "benchmarks-and-eval")
    pages = [_ROOT / "README.md", *(_ROOT / "docs" / f"{name}.md" for name in moved), _ROOT / "docs" / "aws-design.md"]
    text = "\n".join(p.read_text() for p in pages)
    return re.findall(r"[A-Za-z][A-Za-z'-]*", re.sub(r"```.*?```", " ", text, flags=re.S))


@contextmanager
def _moto_table() -> Iterator[Any]:
    import boto3
    from moto import mock_aws

    from memsvc.adapters.aws.dynamo_keywords import keyword_table_definition

    with mock.patch.dict(os.environ, {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}):
        with mock_aws():
            client = boto3.client("dynamodb", region_name=REGION)
            client.create_table(**keyword_table_definition(TABLE))
            yield client


def measure(samples: int = 5, sizes: tuple[tuple[str, int], ...] = SIZES,
            batch: int = 100) -> tuple[list[Measured], dict[str, Any]]:
    """Per size, the mean over `samples` memories (consecutive windows of prose) indexed one per
    call; per memory, `batch` notes indexed in one call; and what queries of 1 and 3 terms read
    over the memories indexed one per call."""
    from memsvc.adapters.aws.dynamo_keywords import DynamoKeywordIndex
    from memsvc.core.crypto import term_ids
    from memsvc.core.filters import Filter
    from memsvc.core.keywords import term_counts
    from memsvc.core.models import KeywordDoc

    words = prose_words()
    data_key = bytes(32)
    attributes = {"namespace": NAMESPACE[0], "sub": NAMESPACE[1]}

    def doc(n: int, text: str) -> KeywordDoc:
        counts = term_counts([text])
        return KeywordDoc("acme", NAMESPACE, f"note-{n:04d}", f"{n:08d}-0000-4000-8000-000000000000", 1,
                          attributes, dict(zip(term_ids(data_key, counts), counts.values())), sum(counts.values()))

    results: list[Measured] = []
    with _moto_table() as client:
        meter = CapacityMeter(client)
        index = DynamoKeywordIndex(meter, TABLE)
        index.put_many([doc(0, " ".join(words[:50]))])  # the statistics rows exist, as they mostly will
        n, start = 1, 0
        for label, size in sizes:
            measured = []
            for _ in range(samples):
                d = doc(n, " ".join(words[start : start + size]))
                n, start = n + 1, (start + size) % max(1, len(words) - size)
                measured.append(measure_one(index, meter, d))
            results.append(Measured(
                label=label, words=size, terms=statistics.mean(len(d.terms) for d in [m[0] for m in measured]),
                **{field: statistics.mean(getattr(m[1], field) for m in measured)
                   for field in ("index", "replay", "delete_writes", "delete_reads")},
                requests={op: statistics.mean(m[1].requests.get(op, 0) for m in measured)
                          for op in measured[0][1].requests},
            ))
        notes = [doc(n + i, " ".join(words[i * 100 : (i + 1) * 100])) for i in range(batch)]
        results.append(measure_batch(index, meter, notes))
        index.put_many(notes)
        queries = {}
        for label, text in (("1 term", "keyword"), ("3 terms", "vector index search")):
            meter.reset()
            index.query("acme", ("user", "alice"), Filter(()), term_ids(data_key, term_counts([text])), 10)
            queries[label] = meter.read_units
        queries["memories in scope"] = len(notes) + 1
        postings = [row for page in client.get_paginator("scan").paginate(TableName=TABLE)
                    for row in page["Items"] if "#W#" in row["pk"]["S"]]
        queries["posting bytes"] = statistics.mean(item_size(p) for p in postings)
    return results, queries


def measure_one(index: Any, meter: CapacityMeter, doc: Any) -> tuple[Any, Measured]:
    """One memory indexed, indexed again, deleted: each in its own call."""
    meter.reset()
    index.put_many([doc])
    once, requests = meter.write_units, dict(meter.requests)
    meter.reset()
    index.put_many([doc])
    replay = meter.write_units
    meter.reset()
    index.delete_many(doc.tenant, [doc.memory_id])
    return doc, Measured(label="", words=0, terms=len(doc.terms), index=once, replay=replay,
                         delete_writes=meter.write_units, delete_reads=meter.read_units, requests=requests)


def measure_batch(index: Any, meter: CapacityMeter, docs: list[Any]) -> Measured:
    """One call for the whole batch, as the indexer makes for a stream batch: per memory."""
    meter.reset()
    index.put_many(docs)
    once, requests = meter.write_units, dict(meter.requests)
    meter.reset()
    index.put_many(docs)
    replay = meter.write_units
    meter.reset()
    index.delete_many(docs[0].tenant, [d.memory_id for d in docs])
    per = len(docs)
    return Measured(label=f"{per} notes in one batch", words=100, terms=statistics.mean(len(d.terms) for d in docs),
                    index=once / per, replay=replay / per, delete_writes=meter.write_units / per,
                    delete_reads=meter.read_units / per, requests={op: c / per for op, c in requests.items()})


def report(results: list[Measured], queries: dict[str, Any]) -> str:
    lines = [
        "| Memory | Distinct terms | Index: write units | $ per million | Replay: write units "
        "| Delete: write + read units | $ per million |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for m in results:
        lines.append(
            f"| {m.label} ({m.words} words) | {m.terms:.0f} | {m.index:.1f} | {m.index * WRITE_PRICE * 1e6:.2f} "
            f"| {m.replay:.1f} | {m.delete_writes:.1f} + {m.delete_reads:.1f} "
            f"| {(m.delete_writes * WRITE_PRICE + m.delete_reads * READ_PRICE) * 1e6:.2f} |")
    lines.append("")
    lines.append("Requests to index one memory: " + "; ".join(
        f"{m.label}: " + ", ".join(f"{op} {count:g}" for op, count in sorted(m.requests.items())) for m in results))
    lines.append("")
    scope = queries.pop("memories in scope")
    posting = queries.pop("posting bytes")
    lines.append(f"Query read units over {scope} memories under the prefix: " + ", ".join(
        f"{label} {units:g} (${units * READ_PRICE * 1e6:.2f} per million)" for label, units in queries.items()))
    lines.append("")
    lines.append(f"A posting takes {posting:.0f} bytes: a term with P postings in scope reads "
                 f"about P / {4096 / posting:.0f} / 2 read units (eventually consistent), e.g. "
                 + ", ".join(f"{p:,}: {math.ceil(p * posting / 4096) / 2:g}" for p in (1_000, 20_000)) + ".")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.keyword_costs", description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=5, help="memories measured per size")
    parser.add_argument("--batch", type=int, default=100, help="notes indexed in one call")
    args = parser.parse_args(argv)
    print(report(*measure(args.samples, batch=args.batch)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
