"""The AWS event timeline: the `EventLog` port on the items' DynamoDB table (single-table design;
see docs/aws-design.md, "Timeline", for every key, access path, cost and limit).

Per tenant, a clock item holds the last stamp. Recording is one `TransactWriteItems` per chunk
of events: the clock moves from the value read to the chunk's last stamp, and each event writes
its id marker (put-if-absent, so an id is recorded once), its full copy in its two-segment root's
partition and a copy without ciphertexts in the tenant-wide partition. A scan reads the clock
first and yields only events stamped at or below it: every transaction that stamped those has
committed, and every later one stamps above it, so a cursor walk never skips an event.
`restore` (an import's carried history) stamps the same way, from each event's own stamp.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.dynamo_store import GSI_HISTORY, TTL_ATTRIBUTE, _bytes, batch_get_rows, call_table
from memsvc.adapters.aws.errors import aws_error
from memsvc.core.errors import Conflict, ProviderError, RateLimited
from memsvc.core.models import TimelineEvent, from_epoch_us, to_epoch_us
from memsvc.core.namespaces import SEP, decode_namespace, encode_namespace, is_under
from memsvc.core.timeline import KINDS, VERSION_KINDS, ScanTooWide, next_stamp

__all__ = ["DynamoEventLog"]

MAX_EVENTS_PER_TRANSACTION = 33  # 1 clock update + 3 writes per event <= 100 actions
# TransactWriteItems takes at most 4 MB of items; the estimate below is close but not exact.
TRANSACTION_BUDGET_BYTES = 3_000_000
MAX_ATTEMPTS = 10  # per chunk, for a busy clock or throttling
_THROTTLED = {"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
_RETRYABLE = {"None", "ConditionalCheckFailed", "TransactionConflict", *_THROTTLED}
_DAY_SECONDS = 86_400


def _back_off(tenant: str, failures: int, reasons: list[str]) -> None:
    """After a cancelled transaction: a jittered wait before the next try, or, at the last
    attempt, the error its reasons call for."""
    if failures >= MAX_ATTEMPTS:
        if _THROTTLED & set(reasons):
            raise RateLimited("the table is throttling timeline writes; retry", retry_after_seconds=1,
                              details={"operation": "TransactWriteItems"})
        raise Conflict("the tenant's timeline is busy; retry", details={"tenant": tenant})
    time.sleep(random.uniform(0, min(0.005 * 2**failures, 1.0)))


class DynamoEventLog:
    """`EventLog` on DynamoDB. Every key starts with `T#<tenant>#TL`, so no request reaches another
    tenant. Retention is DynamoDB TTL's job: `purge` and `tenants` have nothing to do."""

    def __init__(self, client: Any, table_name: str, *, retention_days=lambda tenant: 90) -> None:
        self._db = client
        self._table = table_name
        self._retention_days = retention_days

    # -- record ------------------------------------------------------------------------------

    def record(self, events: Sequence[TimelineEvent]) -> list[TimelineEvent]:
        stamps, _ = self._append(events, lambda e: e.changed_at)
        return [replace(e, occurred_at=from_epoch_us(stamps[(e.tenant, e.id)])) for e in events]

    def restore(self, events: Sequence[TimelineEvent]) -> list[bool]:
        _, inserted = self._append(events, lambda e: e.occurred_at)
        out = []
        for e in events:  # a repeated id is the same event: inserted once
            out.append((e.tenant, e.id) in inserted)
            inserted.discard((e.tenant, e.id))
        return out

    def held(self, tenant: str, event_ids: Sequence[str]) -> set[str]:
        return set(self._stored_stamps(tenant, event_ids))

    def _append(self, events: Sequence[TimelineEvent], own_time: Callable[[TimelineEvent], datetime | None]
                ) -> tuple[dict[tuple[str, str], int], set[tuple[str, str]]]:
        """Each (tenant, id)'s stamp, and the ones inserted now (the others the log held already)."""
        by_tenant: dict[str, dict[str, TimelineEvent]] = {}
        for e in events:  # in order; a repeated id within the batch is the same event
            by_tenant.setdefault(e.tenant, {}).setdefault(e.id, e)
        stamps: dict[tuple[str, str], int] = {}
        inserted: set[tuple[str, str]] = set()
        for tenant, unique in by_tenant.items():
            done, held = self._append_tenant(tenant, list(unique.values()), own_time)
            stamps.update(((tenant, event_id), stamp) for event_id, stamp in done.items())
            inserted.update((tenant, event_id) for event_id in done if event_id not in held)
        return stamps, inserted

    def _append_tenant(self, tenant: str, events: list[TimelineEvent],
                       own_time: Callable[[TimelineEvent], datetime | None]) -> tuple[dict[str, int], set[str]]:
        """Record one tenant's events in order, each at its own time or 1 µs past the tenant's
        latest stamp; returns each id's stamp (the stored one for replays), and the replayed ids.

        The loop is ours, not botocore's: a cancelled transaction is a `TransactionCanceledException`
        that botocore never retries, whose per-action reasons say what to do (a replayed id is
        settled by reading its stamp; a clock another recorder moved is read again and the chunk
        restamped; `TransactionConflict` and throttled actions are tried again after a backoff)."""
        ttl_seconds = self._retention_days(tenant) * _DAY_SECONDS
        done: dict[str, int] = {}
        replayed: set[str] = set()
        todo = events
        last = self._clock(tenant)
        failures = 0
        while todo:
            chunk, stamps, actions = self._transaction(tenant, todo, last, ttl_seconds, own_time)
            reasons = self._transact(actions)
            if reasons is None:
                done.update({e.id: s for e, s in zip(chunk, stamps)})
                last = stamps[-1]
                todo = todo[len(chunk):]
                failures = 0
                continue
            # Cancelled. A failed marker condition is an id already recorded (no reasons: check all).
            found = self._stored_stamps(tenant, [e.id for i, e in enumerate(chunk)
                                                 if not reasons or reasons[1 + 3 * i] == "ConditionalCheckFailed"])
            done.update(found)
            replayed.update(found)
            todo = [e for e in todo if e.id not in found]
            if found and reasons and reasons[0] == "None" and set(reasons) <= {"None", "ConditionalCheckFailed"}:
                continue  # only replays, the clock was fine: record the rest at once
            failures += 1
            _back_off(tenant, failures, reasons)
            last = self._clock(tenant)  # another recorder may have moved it
        return done, replayed

    def _transact(self, actions: list[dict[str, Any]]) -> list[str] | None:
        """None when the transaction committed; else its cancellation reason codes, one per action
        ([] when DynamoDB gave none). Raises for failures that a retry would not fix."""
        try:
            self._db.transact_write_items(TransactItems=actions)
            return None
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise aws_error(exc, service="DynamoDB", operation="TransactWriteItems") from None
            reasons = [r.get("Code") or "None" for r in exc.response.get("CancellationReasons") or []]
        except BotoCoreError as exc:
            raise aws_error(exc, service="DynamoDB", operation="TransactWriteItems") from None
        if len(reasons) != len(actions):
            return []
        if set(reasons) - _RETRYABLE:
            raise ProviderError("the event log failed", details={
                "operation": "TransactWriteItems", "code": sorted(set(reasons) - _RETRYABLE)[0]})
        return reasons

    def _transaction(
        self, tenant: str, todo: list[TimelineEvent], last: int | None, ttl_seconds: int,
        own_time: Callable[[TimelineEvent], datetime | None],
    ) -> tuple[list[TimelineEvent], list[int], list[dict[str, Any]]]:
        """The longest prefix of `todo` that fits one transaction: (events, stamps, actions), the
        clock's update first."""
        def stamp_of(e: TimelineEvent, prev: int | None) -> int:
            own = own_time(e)
            assert own is not None
            return next_stamp(to_epoch_us(own), last if prev is None else prev)

        chunk, stamps, puts = self._puts(todo, stamp_of, ttl_seconds)
        return chunk, stamps, [self._clock_update(tenant, stamps[-1], last), *puts]

    def _puts(
        self, todo: list[TimelineEvent], stamp_of: Callable[[TimelineEvent, int | None], int], ttl_seconds: int
    ) -> tuple[list[TimelineEvent], list[int], list[dict[str, Any]]]:
        """The longest prefix of `todo` whose items fit one transaction's budget: (events, stamps,
        puts), three puts an event, its marker's first. `stamp_of(event, previous stamp or None)`."""
        stamps: list[int] = []
        actions: list[dict[str, Any]] = []
        size = 0
        for e in todo[:MAX_EVENTS_PER_TRANSACTION]:
            stamp = stamp_of(e, stamps[-1] if stamps else None)
            items = _items(e, stamp, stamp // 1_000_000 + ttl_seconds)
            item_bytes = sum(_size(item) for item in items)
            if stamps and size + item_bytes > TRANSACTION_BUDGET_BYTES:
                break
            size += item_bytes
            stamps.append(stamp)
            marker, *copies = items
            actions.append({"Put": {"TableName": self._table, "Item": marker,
                                    "ConditionExpression": "attribute_not_exists(pk)"}})
            actions.extend({"Put": {"TableName": self._table, "Item": item}} for item in copies)
        return todo[: len(stamps)], stamps, actions

    def _clock_update(self, tenant: str, new: int, last: int | None) -> dict[str, Any]:
        """The clock set to `new` on the value read (`last`; None: no clock yet)."""
        clock: dict[str, Any] = {
            "TableName": self._table, "Key": _clock_key(tenant),
            "UpdateExpression": "SET #last = :new, #rt = :rt",
            "ExpressionAttributeNames": {"#last": "last", "#rt": "rt"},
            "ExpressionAttributeValues": {":new": {"N": str(new)}, ":rt": {"S": "timeline-clock"}},
        }
        if last is None:
            clock["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            clock["ConditionExpression"] = "#last = :expected"
            clock["ExpressionAttributeValues"][":expected"] = {"N": str(last)}
        return {"Update": clock}

    def _stored_stamps(self, tenant: str, event_ids: Sequence[str]) -> dict[str, int]:
        """The stamps of the ids the log already holds (their markers)."""
        rows = self._batch_get([_marker_key(tenant, i) for i in event_ids])
        return {i: int(rows[key]["at"]["N"]) for i in event_ids
                if (key := (_marker_key(tenant, i)["pk"]["S"], "ID")) in rows}

    def _clock(self, tenant: str) -> int | None:
        row = self._call("GetItem", Key=_clock_key(tenant), ConsistentRead=True)
        return int(row["Item"]["last"]["N"]) if "Item" in row else None

    # -- scan --------------------------------------------------------------------------------

    def scan(
        self,
        tenant: str,
        prefix: tuple[str, ...],
        *,
        kinds: frozenset[str],
        start_after: tuple[datetime, str] | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
        page_size: int = 100,
        max_rows: int | None = None,
    ) -> Iterator[TimelineEvent]:
        horizon = self._clock(tenant)  # read when iteration starts; see the module docstring
        if horizon is None or not kinds:
            return
        lo_stamp = max(0, to_epoch_us(after) + 1) if after is not None else 0
        hi_stamp = min(horizon, to_epoch_us(before) - 1) if before is not None else horizon
        lo = f"{lo_stamp:020d}"
        cursor = _sort_key(to_epoch_us(start_after[0]), start_after[1]) if start_after else None
        if cursor is not None and cursor > lo:
            lo = cursor  # inclusive in BETWEEN; the cursor's own event is skipped below
        hi = f"{hi_stamp + 1:020d}"  # above every sort key stamped hi_stamp, below every later one
        if hi_stamp < lo_stamp or lo > hi:
            return

        from_all = len(prefix) < 2
        pk = _all_pk(tenant) if from_all else _root_pk(tenant, _root(encode_namespace(prefix)))
        names: dict[str, str] = {}
        values: dict[str, Any] = {":p": {"S": pk}, ":lo": {"S": lo}, ":hi": {"S": hi}}
        filters = []
        if not KINDS <= kinds:
            names["#knd"] = "knd"
            values.update({f":k{i}": {"S": k} for i, k in enumerate(sorted(kinds))})
            filters.append(f"#knd IN ({', '.join(f':k{i}' for i in range(len(kinds)))})")
        if len(prefix) == 1 or len(prefix) > 2:  # a root partition holds exactly its 2-segment prefix
            exact = encode_namespace(prefix)
            names["#ns"] = "ns"
            values.update({":nse": {"S": exact}, ":nsb": {"S": exact + SEP}})
            filters.append("(#ns = :nse OR begins_with(#ns, :nsb))")  # "a" must not match "ab"
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :p AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": values, "ConsistentRead": True, "Limit": page_size,
        }
        if filters:
            kwargs["FilterExpression"] = " AND ".join(filters)
            kwargs["ExpressionAttributeNames"] = names
        read = 0  # rows the Queries evaluated (their `Limit` counts rows before the filter)
        while True:
            if max_rows is not None:
                kwargs["Limit"] = min(page_size, max_rows + 1 - read)
            page = self._call("Query", **kwargs)
            read += page.get("ScannedCount", len(page.get("Items", [])))
            if max_rows is not None and read > max_rows:
                raise ScanTooWide(max_rows)
            rows = [r for r in page.get("Items", [])
                    if r["sk"]["S"] != cursor and is_under(r["ns"]["S"], prefix) and r["knd"]["S"] in kinds]
            full = self._root_copies(tenant, rows) if from_all else {}
            for row in rows:
                if not from_all:
                    yield _event(tenant, row, row)
                elif "hv" not in row:
                    yield _event(tenant, row, {})
                elif (copy := full.get(row["sk"]["S"])) is not None:
                    # (absent only when TTL has already removed the root copy: past retention)
                    yield _event(tenant, row, copy)
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _root_copies(self, tenant: str, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The full copies (with ciphertexts) of tenant-wide rows that have values, by sort key."""
        keys = [{"pk": {"S": _root_pk(tenant, _root(r["ns"]["S"]))}, "sk": r["sk"]} for r in rows if "hv" in r]
        return {sk: row for (_, sk), row in self._batch_get(keys).items()}

    # -- one key's history ----------------------------------------------------------------

    def history(
        self, tenant: str, namespace: tuple[str, ...], key: str, *,
        before: tuple[datetime, str] | None = None, limit: int = 20,
    ) -> list[TimelineEvent]:
        """One `Query` of the `history` index (the key's version events, keys only, newest first),
        then one `BatchGetItem` of their root copies. The index is eventually consistent: an event
        recorded a moment ago can be missing from the first page (the service adds the item row)."""
        return self._key_versions(tenant, namespace, key, before, limit, newest_first=True)

    def versions_after(
        self, tenant: str, namespace: tuple[str, ...], key: str, *,
        after: tuple[datetime, str] | None, limit: int,
    ) -> list[TimelineEvent]:
        """`history`'s `Query` and `BatchGetItem`, oldest first."""
        return self._key_versions(tenant, namespace, key, after, limit, newest_first=False)

    def _key_versions(self, tenant: str, namespace: tuple[str, ...], key: str,
                      bound: tuple[datetime, str] | None, limit: int, *, newest_first: bool) -> list[TimelineEvent]:
        values: dict[str, Any] = {":h": {"S": _history_key(tenant, encode_namespace(namespace), key)}}
        condition = "hk = :h"
        if bound is not None:
            condition += f" AND sk {'<' if newest_first else '>'} :b"
            values[":b"] = {"S": _sort_key(to_epoch_us(bound[0]), bound[1])}
        page = self._call("Query", IndexName=GSI_HISTORY, KeyConditionExpression=condition,
                          ExpressionAttributeValues=values, ScanIndexForward=not newest_first, Limit=limit)
        keys = [{"pk": r["pk"], "sk": r["sk"]} for r in page.get("Items", [])]
        rows = self._batch_get(keys)
        # A root copy TTL removed after the index answered is past retention: skipped.
        return [_event(tenant, row, row) for k in keys
                if (row := rows.get((k["pk"]["S"], k["sk"]["S"]))) is not None
                and row["ns"]["S"] == encode_namespace(namespace) and row["key"]["S"] == key]

    # -- restore (an import) ---------------------------------------------------------------

    # -- retention is DynamoDB TTL's job on AWS ----------------------------------------------

    def purge(self, tenant: str, before: datetime) -> int:
        return 0

    def tenants(self) -> list[str]:
        return []

    # -- plumbing ----------------------------------------------------------------------------

    def _batch_get(self, keys: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
        return {(r["pk"]["S"], r["sk"]["S"]): r for r in batch_get_rows(self._db, self._table, keys)}

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        return call_table(self._db, self._table, operation, **kwargs)


def _clock_key(tenant: str) -> dict[str, Any]:
    return {"pk": {"S": f"T#{tenant}#TL"}, "sk": {"S": "CLOCK"}}


def _marker_key(tenant: str, event_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"T#{tenant}#TL#ID#{event_id}"}, "sk": {"S": "ID"}}


def _all_pk(tenant: str) -> str:
    return f"T#{tenant}#TL#ALL"


def _root_pk(tenant: str, root: str) -> str:
    # At most 1016 bytes (a 128-byte tenant, an 880-byte namespace): `pk` is also the `pending`
    # index's sort key, which holds 1024 (see MAX_NAMESPACE_BYTES).
    return f"T#{tenant}#TL#R#{root}"


def _root(ns_encoded: str) -> str:
    """The namespace's first two segments (its only one, for a one-segment namespace)."""
    return SEP.join(ns_encoded.split(SEP)[:2])


def _history_key(tenant: str, ns_encoded: str, key: str) -> str:
    """The `history` index's partition: a digest of (namespace, key), so the index key stays short
    whatever their lengths (a namespace and a key together can exceed its 2048 bytes)."""
    digest = hashlib.sha256(json.dumps([ns_encoded, key]).encode()).hexdigest()
    return f"T#{tenant}#TL#K#{digest}"


def _sort_key(stamp: int, event_id: str) -> str:
    # Stamps are unique per tenant, so sort-key order is (occurred_at, id) order.
    return f"{stamp:020d}#{event_id}"


def _items(e: TimelineEvent, stamp: int, ttl: int) -> list[dict[str, Any]]:
    """The marker, the root copy and the tenant-wide copy of an event stamped `stamp`."""
    ns = encode_namespace(e.namespace)
    root = _root(ns)
    sk = {"S": _sort_key(stamp, e.id)}
    ttl_value = {"N": str(ttl)}
    marker = {**_marker_key(e.tenant, e.id), "rt": {"S": "timeline-id"}, "at": {"N": str(stamp)},
              "root": {"S": root}, TTL_ATTRIBUTE: ttl_value}
    plain: dict[str, Any] = {
        "rt": {"S": "event"}, "id": {"S": e.id}, "knd": {"S": e.kind}, "ns": {"S": ns}, "key": {"S": e.key},
        "mid": {"S": e.memory_id}, "ver": {"N": str(e.version)}, "cat": {"N": str(to_epoch_us(e.changed_at))},
        "pa": {"S": json.dumps(e.policy_attributes)}, TTL_ATTRIBUTE: ttl_value,
    }
    if e.expires_at is not None:
        plain["exp"] = {"N": str(to_epoch_us(e.expires_at))}
    if e.action is not None:
        plain["rma"] = {"S": e.action}
    if e.reason is not None:
        plain["rsn"] = {"S": e.reason}
    sealed = {name: {"B": ct} for name, ct in (("vct", e.value_ct), ("act", e.attributes_ct)) if ct is not None}
    full = {"pk": {"S": _root_pk(e.tenant, root)}, "sk": sk, **plain, **sealed}
    if e.kind in VERSION_KINDS:  # only versions enter the key's `history` index (sparse)
        full["hk"] = {"S": _history_key(e.tenant, ns, e.key)}
    tenant_wide = {"pk": {"S": _all_pk(e.tenant)}, "sk": sk, **plain}
    if sealed:
        tenant_wide["hv"] = {"BOOL": True}  # the values are in the root copy
    return [marker, full, tenant_wide]


def _event(tenant: str, row: dict[str, Any], sealed: dict[str, Any]) -> TimelineEvent:
    return TimelineEvent(
        tenant=tenant,
        id=row["id"]["S"],
        kind=row["knd"]["S"],  # type: ignore[arg-type]
        namespace=decode_namespace(row["ns"]["S"]),
        key=row["key"]["S"],
        memory_id=row["mid"]["S"],
        version=int(row["ver"]["N"]),
        changed_at=from_epoch_us(int(row["cat"]["N"])),
        expires_at=from_epoch_us(int(row["exp"]["N"])) if "exp" in row else None,
        policy_attributes=json.loads(row["pa"]["S"]),
        value_ct=_bytes(sealed["vct"]["B"]) if "vct" in sealed else None,
        attributes_ct=_bytes(sealed["act"]["B"]) if "act" in sealed else None,
        occurred_at=from_epoch_us(int(row["sk"]["S"][:20])),
        action=row["rma"]["S"] if "rma" in row else None,  # type: ignore[arg-type]
        reason=row["rsn"]["S"] if "rsn" in row else None,
    )


def _size(item: dict[str, Any]) -> int:
    """About what DynamoDB counts for an item: attribute names plus values (+ a little per attribute)."""
    total = 0
    for name, value in item.items():
        (kind, raw), = value.items()
        total += len(name) + 4 + (len(raw) if kind == "B" else len(str(raw).encode()))
    return total
