"""The AWS item store: one DynamoDB table (see docs/aws-design.md for every key and access path).

Writes are conditional on the version the writer read, so concurrent writers never lose an
update. The change feed is the table's stream (NEW_AND_OLD_IMAGES); `change_from_stream_record`
turns a stream record into the same `Change` the local feed produces.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import json
import math
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, TypeVar

from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.errors import aws_error, lost_race
from memsvc.core.errors import Conflict, RateLimited
from memsvc.core.models import Change, ItemHead, StoredItem, expiry_event_id, from_epoch_us, to_epoch_us
from memsvc.core.namespaces import SEP, decode_namespace, encode_namespace, is_under, prefix_range

__all__ = [
    "DynamoItemStore",
    "COUNT_READ_FACTOR",
    "table_definition",
    "change_from_stream_record",
    "TTL_ATTRIBUTE",
    "GSI_RECENT",
    "GSI_ID",
    "GSI_PENDING",
    "PENDING_SHARDS",
    "ERASE_MARK",
    "item_from_row",
]

TTL_ATTRIBUTE = "ttl"
GSI_RECENT = "by_recent"
GSI_ID = "by_id"
GSI_PENDING = "pending"
# A key's timeline events, newest first (`GET /v1/memories/history`); see dynamo_timeline.py.
GSI_HISTORY = "history"
# `chg` of an item row a user's erasure is about to delete (`dynamo_user_erasure`): its removal
# is no change for the indexer or the timeline.
ERASE_MARK = "erase"
PENDING_SHARDS = 8
_DEFAULT_TOMBSTONE_DAYS = 90
MAX_SORT_KEY_BYTES = 1024  # DynamoDB's limit for a sort key, of the table or of an index
# `count_live` reads at most this many times its cap in rows: room for expired rows TTL has not
# removed yet, while a count's reads stay a few pages whatever piles up in a partition.
COUNT_READ_FACTOR = 2
_ser = TypeSerializer()
# Attribute names go through placeholders: `ttl` and `key` are DynamoDB reserved words.
_NAMES = {"#idx": "idx", "#chg": "chg", "#ppk": "ppk", "#exp": "exp", "#ttl": TTL_ATTRIBUTE, "#ixa": "ixa",
          "#qrs": "qrs", "#qat": "qat"}
_ATTEMPT_WRITERS = 8  # concurrent UpdateItems marking a stream batch's attempts
_T = TypeVar("_T")
_de = TypeDeserializer()


def table_definition(table_name: str) -> dict[str, Any]:
    """`CreateTable` arguments: the schema the CDK stack declares and the tests create on moto."""
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": name, "AttributeType": "S"}
            for name in ("pk", "sk", "gpk", "gsk", "ipk", "ppk", "hk")
        ],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": GSI_RECENT,
                "KeySchema": [{"AttributeName": "gpk", "KeyType": "HASH"}, {"AttributeName": "gsk", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": GSI_ID,
                "KeySchema": [{"AttributeName": "ipk", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
            {
                "IndexName": GSI_PENDING,
                "KeySchema": [{"AttributeName": "ppk", "KeyType": "HASH"}, {"AttributeName": "pk", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["exp"]},
            },
            {
                "IndexName": GSI_HISTORY,
                "KeySchema": [{"AttributeName": "hk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    }


class DynamoItemStore:
    """`ItemStore`, `IndexBacklog`, `DataKeyStore` and `TenantConfigStore` on one DynamoDB table.
    Every key starts with the tenant, so no request can reach another. Expiry (`LocalExpiry`
    locally) is DynamoDB TTL's job here."""

    def __init__(self, client: Any, table_name: str, *, tombstone_days=lambda tenant: _DEFAULT_TOMBSTONE_DAYS) -> None:
        self._db = client
        self._table = table_name
        self._tombstone_days = tombstone_days

    # -- items -------------------------------------------------------------------------------

    def get(self, tenant, namespace, key):
        row = self._call("GetItem", Key=_key(tenant, encode_namespace(namespace), key), ConsistentRead=True)
        return item_from_row(row["Item"]) if "Item" in row else None

    def time_span(self, tenant):
        return None  # no index orders a tenant's items by their valid time

    def get_many(self, tenant, refs):
        wanted = list(dict.fromkeys((encode_namespace(ns), key) for ns, key in refs))
        return self._batch_get(tenant, [_key(tenant, ns, k) for ns, k in wanted])

    def _batch_get(self, tenant: str, keys: list[dict[str, Any]]) -> dict[tuple[tuple[str, ...], str], StoredItem]:
        items = (item_from_row(row) for row in batch_get_rows(self._db, self._table, keys))
        return {(i.namespace, i.key): i for i in items if i.tenant == tenant}

    def get_by_id(self, tenant, memory_id):
        rows = self._call(
            "Query", IndexName=GSI_ID, KeyConditionExpression="ipk = :i",
            ExpressionAttributeValues={":i": {"S": f"T#{tenant}#I#{memory_id}"}},
        ).get("Items", [])
        if not rows:
            return None
        row = self._call("GetItem", Key={"pk": rows[0]["pk"], "sk": rows[0]["sk"]}, ConsistentRead=True)
        item = item_from_row(row["Item"]) if "Item" in row else None
        return item if item is not None and item.id == memory_id and item.tenant == tenant else None

    def write_many(self, writes):
        """One conditional put each: a transaction holds 100 items, and each write stands alone."""
        out: list[Exception | None] = []
        for item, kind, old in writes:
            try:
                self.write(item, kind=kind, old=old)
                out.append(None)
            except Conflict as exc:
                out.append(exc)
        return out

    def write(self, item, *, kind, old):
        ns = encode_namespace(item.namespace)
        row = self._row(item, kind=kind)
        if old is None:
            extra: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            extra = {"ConditionExpression": "#version = :v", "ExpressionAttributeNames": {"#version": "version"},
                     "ExpressionAttributeValues": {":v": {"N": str(old.version)}}}
        if kind == "add":  # a new lifetime of this key: its namespace is registered first, so a
            self._register(item.tenant, ns)  # failure in between can't leave an unlisted item
        try:
            self._db.put_item(TableName=self._table, Item=row, **extra)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise Conflict(
                    "the memory changed while this write was in flight",
                    details={"expected_version": old.version if old else None},
                ) from None
            raise aws_error(exc, service="DynamoDB", operation="PutItem") from None
        except BotoCoreError as exc:
            raise aws_error(exc, service="DynamoDB", operation="PutItem") from None

    def put_action(self, item: StoredItem, *, kind: str, old: StoredItem | None) -> dict[str, Any]:
        """`write` as one `TransactWriteItems` action (same row, same condition), for a store that
        writes an item in a transaction with rows of its own (the session store's appends). The
        caller registers the namespace first (`register_namespace`)."""
        put: dict[str, Any] = {"TableName": self._table, "Item": self._row(item, kind=kind)}
        if old is None:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            put |= {"ConditionExpression": "#version = :v", "ExpressionAttributeNames": {"#version": "version"},
                    "ExpressionAttributeValues": {":v": {"N": str(old.version)}}}
        return {"Put": put}

    def register_namespace(self, tenant: str, namespace: tuple[str, ...]) -> None:
        self._register(tenant, encode_namespace(namespace))

    def items_after(self, tenant: str, namespace: tuple[str, ...], after_key: str, limit: int) -> list[StoredItem]:
        """Live items of one namespace with keys above `after_key`, in key order: a `Query` of the
        namespace's partition (keys of at most 1022 bytes sort as `K#<key>`)."""
        out: list[StoredItem] = []
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :p AND sk BETWEEN :lo AND :hi", "ConsistentRead": True,
            "FilterExpression": "attribute_not_exists(#del)", "ExpressionAttributeNames": {"#del": "del"},
            "ExpressionAttributeValues": {":p": {"S": f"T#{tenant}#N#{encode_namespace(namespace)}"},
                                          ":lo": {"S": f"K#{after_key}\x00"}, ":hi": {"S": "K#\U0010ffff"}},
        }
        while len(out) < limit:
            kwargs["Limit"] = limit - len(out)
            page = self._call("Query", **kwargs)
            out.extend(item_from_row(row) for row in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return out

    def mark_indexed(self, marks):
        return self._each(list(marks), lambda mark: self._update_if_current(
            mark[0].tenant, mark[0].namespace, mark[0].key, mark[0].version,
            "SET #idx = :f, #chg = :c REMOVE #ppk, #ixa",
            {":f": {"S": json.dumps(list(mark[1]))}, ":c": {"S": "index"}},
            extra_condition=" AND attribute_not_exists(#qrs)",
        ))

    # -- indexing attempts and quarantine ----------------------------------------------------------
    # Marks on the item row (same version, so the stream's MODIFY is no change; `chg` says which
    # mark it was, and the mappings' filters drop `attempt` before it costs an invocation). The
    # quarantine and the retry are changes: `change_from_stream_record` reads them as
    # `index_failed` (the timeline's) and `index_retry` (the indexer's).

    def begin_attempts(self, items, attempt):
        self._each(items, lambda i: self._update_if_current(
            i.tenant, i.namespace, i.key, i.version, "SET #ixa = :a, #chg = :c",
            {":a": {"S": attempt}, ":c": {"S": "attempt"}}))

    def end_attempts(self, items):
        self._each(items, lambda i: self._update_if_current(
            i.tenant, i.namespace, i.key, i.version, "SET #chg = :c REMOVE #ixa", {":c": {"S": "attempt"}},
            extra_condition=" AND attribute_exists(#ixa)"))

    def _each(self, items: list[_T], write: Callable[[_T], bool]) -> list[bool]:
        """One conditional write per item (a version that moved on is left alone), several at once:
        a stream batch's hundred marks would otherwise take a hundred round trips in a row.
        Returns whether each was written."""
        if len(items) <= 1:
            return [write(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(_ATTEMPT_WRITERS, len(items)),
                                thread_name_prefix="memsvc-attempts") as pool:
            return list(pool.map(write, items))

    def quarantine(self, item, reason, at):
        return self._update_if_current(
            item.tenant, item.namespace, item.key, item.version,
            "SET #qrs = :r, #qat = :t, #ppk = :q, #chg = :c REMOVE #ixa",
            {":r": {"S": reason}, ":t": {"N": str(to_epoch_us(at))}, ":q": {"S": _quarantine_partition(item.tenant)},
             ":c": {"S": "quarantine"}, ":id": {"S": item.id}},
            extra_condition=" AND #id = :id AND attribute_not_exists(#qrs)",
        )

    def release(self, item):
        # Back to the pending index's shards if it still needs vectors (the quarantine put it in
        # the tenant's quarantine partition of that index instead).
        pending = item.indexed_fields is None and item.index_fields is not False
        values: dict[str, Any] = {":c": {"S": "retry"}, ":id": {"S": item.id}}
        if pending:
            values[":p"] = {"S": _pending_partition(item.tenant, encode_namespace(item.namespace), item.key)}
        return self._update_if_current(
            item.tenant, item.namespace, item.key, item.version,
            ("SET #chg = :c, #ppk = :p REMOVE #qrs, #qat, #ixa" if pending
             else "SET #chg = :c REMOVE #qrs, #qat, #ixa, #ppk"),
            values, extra_condition=" AND #id = :id AND attribute_exists(#qrs)",
        )

    def quarantined(self, tenant, now, limit):
        """From the tenant's quarantine partition of the `pending` index (eventually consistent, as
        every index is: a quarantine shows within about a second): the count, and the first `limit`
        in the index's key order, read back consistently and sorted by when they were set aside."""
        query: dict[str, Any] = {
            "IndexName": GSI_PENDING, "KeyConditionExpression": "ppk = :p",
            "FilterExpression": "attribute_not_exists(#exp) OR #exp > :now",
            "ExpressionAttributeNames": {"#exp": "exp"},
            "ExpressionAttributeValues": {":p": {"S": _quarantine_partition(tenant)},
                                          ":now": {"N": str(to_epoch_us(now))}},
        }
        count = sum(page.get("Count", 0) for page in self._pages({**query, "Select": "COUNT"}))
        keys: list[dict[str, Any]] = []
        for page in self._pages(query):
            keys.extend({"pk": row["pk"], "sk": row["sk"]} for row in page.get("Items", [])[:limit - len(keys)])
            if len(keys) >= limit:
                break
        items = [i for i in self._batch_get(tenant, keys).values() if i.index_error is not None and i.is_live(now)]
        return count, sorted(items, key=lambda i: (i.quarantined_at, i.namespace, i.key))

    def _pages(self, query: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """A `Query`'s answers, a page at a time (a filtered page may hold no rows and still go on)."""
        while True:
            page = self._call("Query", **query)
            yield page
            if "LastEvaluatedKey" not in page:
                return
            query = {**query, "ExclusiveStartKey": page["LastEvaluatedKey"]}

    def record_accesses(self, tenant, accesses, at):
        """One conditional UpdateItem per key: the count is added only while the row still holds
        that memory. No new version, so the stream's MODIFY is no change (`change_from_stream_record`)."""
        for ns, key, memory_id, count in accesses:
            try:
                self._db.update_item(
                    TableName=self._table, Key=_key(tenant, encode_namespace(ns), key),
                    UpdateExpression="ADD #acc :n SET #lat = :t, #chg = :c",
                    ConditionExpression="#id = :id AND attribute_not_exists(#del)",
                    ExpressionAttributeNames={"#acc": "acc", "#lat": "lat", "#chg": "chg", "#id": "id", "#del": "del"},
                    ExpressionAttributeValues={":n": {"N": str(count)}, ":t": {"N": str(to_epoch_us(at))},
                                               ":c": {"S": "access"}, ":id": {"S": memory_id}},
                )
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":  # moved on: not counted
                    raise aws_error(exc, service="DynamoDB", operation="UpdateItem") from None
            except BotoCoreError as exc:
                raise aws_error(exc, service="DynamoDB", operation="UpdateItem") from None

    def refresh_expiry(self, tenant, namespace, key, *, version, expires_at):
        exp = to_epoch_us(expires_at)
        return self._update_if_current(
            tenant, namespace, key, version,
            "SET #exp = :e, #ttl = :t, #chg = :c",
            {":e": {"N": str(exp)}, ":t": {"N": str(math.ceil(exp / 1_000_000))}, ":c": {"S": "refresh"}},
            extra_condition=" AND attribute_exists(#exp)",
        )

    def _update_if_current(self, tenant, namespace, key, version, update, values, extra_condition=""):
        try:
            self._db.update_item(
                TableName=self._table, Key=_key(tenant, encode_namespace(namespace), key),
                UpdateExpression=update,
                ConditionExpression="#version = :v AND attribute_not_exists(#del)" + extra_condition,
                ExpressionAttributeNames={n: _NAMES[n] for n in _NAMES if n in update + extra_condition}
                | {"#version": "version", "#del": "del"} | ({"#id": "id"} if "#id" in extra_condition else {}),
                ExpressionAttributeValues={":v": {"N": str(version)}, **values},
            )
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise aws_error(exc, service="DynamoDB", operation="UpdateItem") from None
        except BotoCoreError as exc:
            raise aws_error(exc, service="DynamoDB", operation="UpdateItem") from None

    def scan_live(self, tenant, prefix, now, *, page_size=100):
        streams = [self._recent(tenant, ns, now, page_size) for ns in self._namespaces_under(tenant, prefix)]
        for _, item in heapq.merge(*streams, key=lambda pair: pair[0]):
            yield item

    def _recent(self, tenant: str, ns: str, now: datetime, page_size: int) -> Iterator[tuple[tuple, StoredItem]]:
        """One namespace's live items, newest first, a page at a time."""
        for row in self._recent_rows(tenant, ns, now, page_size):
            item = item_from_row(row)
            yield (-to_epoch_us(item.updated_at), ns, item.key), item

    def live_heads(self, tenant, prefix, now):
        streams = [self._recent_heads(tenant, ns, now) for ns in self._namespaces_under(tenant, prefix)]
        for _, head in heapq.merge(*streams, key=lambda pair: pair[0]):
            yield head

    def _recent_heads(self, tenant: str, ns: str, now: datetime) -> Iterator[tuple[tuple, ItemHead]]:
        """One namespace's live items without their sealed parts, newest first."""
        namespace = decode_namespace(ns)
        attributes: dict[str, dict[str, Any]] = {}  # each distinct JSON parsed once, its dict shared
        for row in self._recent_rows(tenant, ns, now, 200, projection="#i, #k, uat, pa"):
            pa = row["pa"]["S"]
            if (parsed := attributes.get(pa)) is None:
                parsed = attributes[pa] = json.loads(pa)
            yield (-int(row["uat"]["N"]), ns, row["key"]["S"]), ItemHead(row["id"]["S"], namespace, row["key"]["S"],
                                                                         parsed)

    def _recent_rows(self, tenant: str, ns: str, now: datetime, page_size: int, *,
                     projection: str | None = None) -> Iterator[dict[str, Any]]:
        start: dict[str, Any] | None = None
        while True:
            kwargs: dict[str, Any] = {
                "IndexName": GSI_RECENT, "KeyConditionExpression": "gpk = :g", "ScanIndexForward": False,
                "FilterExpression": "attribute_not_exists(#exp) OR #exp > :now",
                "ExpressionAttributeNames": {"#exp": "exp"},
                "ExpressionAttributeValues": {":g": {"S": f"T#{tenant}#N#{ns}"}, ":now": {"N": str(to_epoch_us(now))}},
                "Limit": page_size,
            }
            if projection:
                kwargs["ProjectionExpression"] = projection
                kwargs["ExpressionAttributeNames"] |= {"#i": "id", "#k": "key"}
            if start:
                kwargs["ExclusiveStartKey"] = start
            page = self._call("Query", **kwargs)
            yield from page.get("Items", [])
            start = page.get("LastEvaluatedKey")
            if not start:
                return

    def list_namespaces(self, tenant, prefix, now, *, keep=None):
        # Sorted as tuples of segments: the sort keys sort by their percent-encoding.
        for ns, encoded in sorted((decode_namespace(e), e) for e in self._namespaces_under(tenant, prefix)):
            if (keep is None or keep(ns)) and next(self._recent(tenant, encoded, now, 10), None) is not None:
                yield ns

    def count_live(self, tenant, namespace, now, cap):
        """A Query with Select=COUNT on the namespace's partition of the recent index, newest first,
        a page at a time, until the cap. An expired row DynamoDB's TTL has not yet removed is read
        but filtered out, as every read here does, so the reads are bounded in rows, not in what
        they count: a page asks for what is left of the cap plus as many rows as were expired so
        far, and reading stops at `COUNT_READ_FACTOR` x `cap` rows. Past that a namespace crowded
        with expired rows counts low, never high."""
        kwargs: dict[str, Any] = {
            "IndexName": GSI_RECENT, "KeyConditionExpression": "gpk = :g", "Select": "COUNT",
            "ScanIndexForward": False,  # the newest rows are the least likely to have expired
            "FilterExpression": "attribute_not_exists(#exp) OR #exp > :now",
            "ExpressionAttributeNames": {"#exp": "exp"},
            "ExpressionAttributeValues": {":g": {"S": f"T#{tenant}#N#{encode_namespace(namespace)}"},
                                          ":now": {"N": str(to_epoch_us(now))}},
        }
        most = COUNT_READ_FACTOR * cap
        count = read = 0
        while count < cap and read < most:
            # Limit bounds the rows a page reads (before the filter).
            page = self._call("Query", **kwargs, Limit=min(cap - count + (read - count), most - read))
            count += page["Count"]
            read += page["ScannedCount"]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return min(count, cap)

    def namespaces_after(self, tenant, prefix, after, limit):
        """The registry: the tenant's roots (first two segments) in order, from `after`'s root,
        then each root's namespaces in order, after `after`. A namespace sorts after every one of
        a root that sorts before its own (a segment's encoding never holds SEP), so this is the
        order of the encoded namespaces."""
        after_ns = encode_namespace(after) if after else None
        after_root = SEP.join(after_ns.split(SEP)[:2]) if after_ns else None
        encoded = [encode_namespace((s,)) for s in prefix]
        if len(prefix) >= 2:
            roots: Iterator[str] = iter([SEP.join(encoded[:2])])
        else:
            first = after_root or (encoded[0] if encoded else None)
            roots = (r for r in self._sort_keys_from(f"T#{tenant}#R", first, inclusive=True)
                     if not prefix or r.split(SEP)[0] == encoded[0])
        bounds = prefix_range(prefix) if len(prefix) >= 2 else None  # within one root: where it starts and ends
        out: list[tuple[str, ...]] = []
        for root in roots:
            if after_root is not None and root < after_root:
                continue
            start, inclusive = ((after_ns, False) if root == after_root else
                                (bounds[0], True) if bounds else (None, False))
            for ns in self._sort_keys_from(f"T#{tenant}#R#{root}", start, inclusive=inclusive):
                if bounds and ns >= bounds[2]:
                    break
                if not prefix or is_under(ns, prefix):
                    out.append(decode_namespace(ns))
                    if len(out) == limit:
                        return out
        return out

    def _sort_keys_from(self, pk: str, start: str | None, *, inclusive: bool) -> Iterator[str]:
        """A partition's sort keys in order, from `start` (None: the first), fetched lazily."""
        kwargs: dict[str, Any] = {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": pk}},
                                  "ProjectionExpression": "sk"}
        if start is not None:
            kwargs["KeyConditionExpression"] += f" AND sk {'>=' if inclusive else '>'} :s"
            kwargs["ExpressionAttributeValues"][":s"] = {"S": start}
        for rows in query_pages(self._db, self._table, **kwargs):
            yield from (row["sk"]["S"] for row in rows)

    def _namespaces_under(self, tenant: str, prefix: tuple[str, ...]) -> list[str]:
        encoded = [encode_namespace((s,)) for s in prefix]
        if len(prefix) >= 2:
            roots = [SEP.join(encoded[:2])]
        else:
            roots = [
                r for r in self._query_sort_keys(f"T#{tenant}#R", encoded[0] if encoded else None)
                if not prefix or r.split(SEP)[0] == encoded[0]
            ]
        found = []
        for root in roots:
            bounds = prefix_range(prefix) if len(prefix) >= 2 else None
            for ns in self._query_sort_keys(f"T#{tenant}#R#{root}", bounds[0] if bounds else None):
                if not prefix or is_under(ns, prefix):
                    found.append(ns)
        return found

    def _query_sort_keys(self, pk: str, begins: str | None) -> Iterator[str]:
        kwargs: dict[str, Any] = {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": pk}},
                                  "ProjectionExpression": "sk"}
        if begins:
            kwargs["KeyConditionExpression"] += " AND begins_with(sk, :b)"
            kwargs["ExpressionAttributeValues"][":b"] = {"S": begins}
        while True:
            page = self._call("Query", **kwargs)
            for row in page.get("Items", []):
                yield row["sk"]["S"]
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _register(self, tenant: str, ns: str) -> None:
        """Registry rows are written once per namespace (and the tenant-wide level-1 row once per
        root), not once per new key: a consistent read of the namespace's row first, then
        put-if-absent, root first (so a namespace row always has its root row). Read at every new
        key, never remembered: erasing a user removes their namespaces' rows, and a write to one
        of them after that, through any process, must list it again."""
        root = SEP.join(ns.split(SEP)[:2])
        level2 = {"pk": {"S": f"T#{tenant}#R#{root}"}, "sk": {"S": ns}}
        if "Item" not in self._call("GetItem", Key=level2, ProjectionExpression="pk", ConsistentRead=True):
            for key in ({"pk": {"S": f"T#{tenant}#R"}, "sk": {"S": root}}, level2):
                try:
                    self._db.put_item(TableName=self._table, Item={**key, "rt": {"S": "namespace"}},
                                      ConditionExpression="attribute_not_exists(pk)")
                except ClientError as exc:
                    if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                        raise aws_error(exc, service="DynamoDB", operation="PutItem") from None
                except BotoCoreError as exc:
                    raise aws_error(exc, service="DynamoDB", operation="PutItem") from None

    def pending_index(self, tenant, now):
        total = 0
        for shard in range(PENDING_SHARDS):
            kwargs: dict[str, Any] = {
                "IndexName": GSI_PENDING, "KeyConditionExpression": "ppk = :p", "Select": "COUNT",
                "FilterExpression": "attribute_not_exists(#exp) OR #exp > :now",
                "ExpressionAttributeNames": {"#exp": "exp"},
                "ExpressionAttributeValues": {":p": {"S": f"T#{tenant}#P#{shard}"}, ":now": {"N": str(to_epoch_us(now))}},
            }
            while True:
                page = self._call("Query", **kwargs)
                total += page.get("Count", 0)
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return total

    def unindexed(self, tenant, now, limit):
        keys: list[dict[str, Any]] = []  # the table keys themselves: a long key's sk is a digest
        for shard in range(PENDING_SHARDS):
            page = self._call(
                "Query", IndexName=GSI_PENDING, KeyConditionExpression="ppk = :p", Limit=limit,
                ExpressionAttributeValues={":p": {"S": f"T#{tenant}#P#{shard}"}},
            )
            keys.extend({"pk": row["pk"], "sk": row["sk"]} for row in page.get("Items", []))
            if len(keys) >= limit:
                break
        items = self._batch_get(tenant, keys[:limit])
        return [i for i in items.values()
                if i.is_live(now) and i.indexed_fields is None and i.index_fields is not False and i.index_error is None]

    # -- key material and per-tenant configuration ----------------------------------------------

    def get_wrapped_key(self, tenant):
        row = self._call("GetItem", Key={"pk": {"S": f"T#{tenant}#KEY"}, "sk": {"S": "DEK"}}, ConsistentRead=True)
        return _bytes(row["Item"]["wrapped"]["B"]) if "Item" in row else None

    def put_wrapped_key_if_absent(self, tenant, wrapped):
        try:
            self._db.put_item(
                TableName=self._table,
                Item={"pk": {"S": f"T#{tenant}#KEY"}, "sk": {"S": "DEK"}, "rt": {"S": "key"}, "wrapped": {"B": wrapped}},
                ConditionExpression="attribute_not_exists(pk)",
            )
            return wrapped
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise aws_error(exc, service="DynamoDB", operation="PutItem") from None
        except BotoCoreError as exc:
            raise aws_error(exc, service="DynamoDB", operation="PutItem") from None
        existing = self.get_wrapped_key(tenant)
        assert existing is not None
        return existing

    def get_config(self, tenant, name):
        row = self._call("GetItem", Key={"pk": {"S": f"T#{tenant}#CFG"}, "sk": {"S": name}}, ConsistentRead=True)
        return json.loads(row["Item"]["doc"]["S"]) if "Item" in row else None

    def put_config(self, tenant, name, doc):
        self._call("PutItem", Item={"pk": {"S": f"T#{tenant}#CFG"}, "sk": {"S": name}, "rt": {"S": "config"},
                                    "doc": {"S": json.dumps(doc)}})

    def swap_config(self, tenant, name, doc, *, expected):
        # The stored text is json.dumps of what was read, so equal documents are equal strings.
        condition = ({"ConditionExpression": "attribute_not_exists(pk)"} if expected is None else
                     {"ConditionExpression": "#doc = :expected", "ExpressionAttributeNames": {"#doc": "doc"},
                      "ExpressionAttributeValues": {":expected": {"S": json.dumps(expected)}}})
        return conditional_write(self._db, self._table, "PutItem", Item={
            "pk": {"S": f"T#{tenant}#CFG"}, "sk": {"S": name}, "rt": {"S": "config"},
            "doc": {"S": json.dumps(doc)}}, **condition)

    def ping(self):
        self._call("GetItem", Key={"pk": {"S": "ping"}, "sk": {"S": "ping"}})

    # -- plumbing ------------------------------------------------------------------------------

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        return call_table(self._db, self._table, operation, **kwargs)

    def _row(self, item: StoredItem, *, kind: str) -> dict[str, Any]:
        ns = encode_namespace(item.namespace)
        plain = {
            "rt": "item", "tenant": item.tenant, "ns": ns, "key": item.key, "id": item.id,
            "version": item.version, "pa": json.dumps(item.policy_attributes),
            "ixf": json.dumps(item.index_fields), "cat": to_epoch_us(item.created_at),
            "uat": to_epoch_us(item.updated_at), "knd": kind, "chg": "write",
            "ipk": f"T#{item.tenant}#I#{item.id}",
        }
        row: dict[str, Any] = {**_key(item.tenant, ns, item.key), **{k: _ser.serialize(v) for k, v in plain.items()}}
        if item.value_ct is not None:
            row["vct"] = {"B": item.value_ct}
        if item.attributes_ct is not None:
            row["act"] = {"B": item.attributes_ct}
        if item.ttl_seconds is not None:
            row["tts"] = {"N": str(item.ttl_seconds)}
        if item.indexed_fields is not None:
            row["idx"] = {"S": json.dumps(list(item.indexed_fields))}
        if item.access_count:
            row["acc"] = {"N": str(item.access_count)}
        if item.last_accessed_at is not None:
            row["lat"] = {"N": str(to_epoch_us(item.last_accessed_at))}
        if item.valid_start is not None:
            row["vst"] = {"N": str(to_epoch_us(item.valid_start))}
        if item.valid_end is not None:
            row["ven"] = {"N": str(to_epoch_us(item.valid_end))}
        if item.action is not None:
            row["rma"] = {"S": item.action}  # what remember did (plaintext: the outcome, not the content)
        if item.deleted is not None:
            row["del"] = {"S": item.deleted}
            retention = timedelta(days=self._tombstone_days(item.tenant))
            row[TTL_ATTRIBUTE] = {"N": str(int((item.updated_at + retention).timestamp()))}
        else:
            row["gpk"] = {"S": f"T#{item.tenant}#N#{ns}"}
            row["gsk"] = {"S": _fit(f"{to_epoch_us(item.updated_at):020d}#{item.key}", MAX_SORT_KEY_BYTES)}
            if item.expires_at is not None:
                exp = to_epoch_us(item.expires_at)
                row["exp"] = {"N": str(exp)}
                row[TTL_ATTRIBUTE] = {"N": str(math.ceil(exp / 1_000_000))}
            if item.index_fields is not False and item.indexed_fields is None:
                row["ppk"] = {"S": _pending_partition(item.tenant, ns, item.key)}
        return row


def _pending_partition(tenant: str, ns: str, key: str) -> str:
    """The `pending` index's partition of an unindexed version: one of the tenant's shards."""
    shard = int(hashlib.sha256(f"{ns}{SEP}{key}".encode()).hexdigest(), 16) % PENDING_SHARDS
    return f"T#{tenant}#P#{shard}"


def _quarantine_partition(tenant: str) -> str:
    """The `pending` index's partition of the tenant's quarantined versions (few: one partition)."""
    return f"T#{tenant}#Q"


def change_from_stream_record(record: dict[str, Any]) -> Change | None:
    """A DynamoDB stream record (as Lambda or GetRecords delivers it) as a `Change`, or None
    for records that are no change to a memory: other record types, index and attempt marks,
    access counts and TTL refreshes (same version), and TTL purges of tombstones (retention, not
    expiry). Two marks on a version are changes: its quarantine (`index_failed`) and an admin's
    retry of it (`index_retry`)."""
    data = record.get("dynamodb") or {}
    new_image, old_image = data.get("NewImage"), data.get("OldImage")
    if (new_image or old_image or {}).get("rt", {}).get("S") != "item":
        return None
    seq = int(data["SequenceNumber"])
    new = item_from_row(new_image) if new_image else None
    old = item_from_row(old_image) if old_image else None
    event = record.get("eventName")
    if event in ("INSERT", "MODIFY") and new is not None:
        if old is not None and old.version == new.version:  # a mark on the version: only two are changes
            mark = new_image.get("chg", {}).get("S")
            if mark == "quarantine" and new.quarantined_at is not None:
                return Change(seq=seq, kind="index_failed", new=new, old=old, occurred_at=new.quarantined_at)
            if mark == "retry" and old.index_error is not None and new.index_error is None:
                return Change(seq=seq, kind="index_retry", new=new, old=old, occurred_at=new.updated_at)
            return None
        kind = new.deleted or new_image.get("knd", {}).get("S") or ("update" if old and old.deleted is None else "add")
        return Change(seq=seq, kind=kind, new=new, old=old, occurred_at=new.updated_at)
    if event == "REMOVE" and old is not None:
        if old.deleted is not None:
            return None  # a tombstone's retention ran out
        if old_image.get("chg", {}).get("S") == ERASE_MARK:
            return None  # a user's erasure, which retired what the row's version had indexed itself
        identity = record.get("userIdentity") or {}
        by_ttl = identity.get("type") == "Service" and identity.get("principalId") == "dynamodb.amazonaws.com"
        at = old.expires_at if by_ttl and old.expires_at else old.updated_at
        kind = "expired" if by_ttl else "delete"
        tombstone_id = expiry_event_id(old.id) if by_ttl else str(uuid.uuid5(uuid.NAMESPACE_URL, f"delete:{old.id}"))
        tombstone = old.tombstone(kind=kind, at=at, new_id=tombstone_id)
        return Change(seq=seq, kind=kind, new=tombstone, old=old, occurred_at=at)
    return None


def _key(tenant: str, ns: str, key: str) -> dict[str, Any]:
    return {"pk": {"S": f"T#{tenant}#N#{ns}"}, "sk": {"S": _sort_key(key)}}


def _sort_key(key: str) -> str:
    """`K#<key>`; a key too long for that (keys may have 1024 bytes, as many as a DynamoDB sort
    key) is `L#<sha256 of the key>` instead. The prefixes keep the two forms apart."""
    raw = key.encode("utf-8")
    if len(raw) <= MAX_SORT_KEY_BYTES - 2:
        return f"K#{key}"
    return "L#" + hashlib.sha256(raw).hexdigest()


def _fit(s: str, max_bytes: int) -> str:
    """`s` cut to at most `max_bytes` of UTF-8, at a character boundary."""
    raw = s.encode("utf-8")
    return s if len(raw) <= max_bytes else raw[:max_bytes].decode("utf-8", errors="ignore")


def item_from_row(row: dict[str, Any]) -> StoredItem:
    r = {k: _de.deserialize(_binary_as_bytes(v)) for k, v in row.items()}
    return StoredItem(
        tenant=r["tenant"],
        namespace=decode_namespace(r["ns"]),
        key=r["key"],
        id=r["id"],
        version=int(r["version"]),
        value_ct=_bytes(r.get("vct")),
        attributes_ct=_bytes(r.get("act")),
        policy_attributes=json.loads(r["pa"]),
        index_fields=json.loads(r["ixf"]),
        created_at=from_epoch_us(int(r["cat"])),
        updated_at=from_epoch_us(int(r["uat"])),
        expires_at=from_epoch_us(int(r["exp"])) if "exp" in r else None,
        deleted=r.get("del"),
        ttl_seconds=int(r["tts"]) if "tts" in r else None,
        indexed_fields=tuple(json.loads(r["idx"])) if "idx" in r else None,
        access_count=int(r.get("acc", 0)),
        last_accessed_at=from_epoch_us(int(r["lat"])) if "lat" in r else None,
        action=r.get("rma"),
        index_attempt=r.get("ixa"),
        index_error=r.get("qrs"),
        quarantined_at=from_epoch_us(int(r["qat"])) if "qat" in r else None,
        valid_start=from_epoch_us(int(r["vst"])) if "vst" in r else None,
        valid_end=from_epoch_us(int(r["ven"])) if "ven" in r else None,
    )


def _binary_as_bytes(value: dict[str, Any]) -> dict[str, Any]:
    if isinstance(value.get("B"), str):  # a Lambda event's JSON carries binary as base64
        return {"B": base64.b64decode(value["B"])}
    return value


def _bytes(value: Any) -> bytes | None:
    """Binary attributes arrive as bytes from boto3 and as base64 text in Lambda events."""
    if value is None:
        return None
    if isinstance(value, Binary):
        return bytes(value.value)
    if isinstance(value, str):
        return base64.b64decode(value)
    return bytes(value)


def call_table(client: Any, table: str, operation: str, **kwargs: Any) -> dict[str, Any]:
    """One DynamoDB call on `table` (botocore has retried it), its errors mapped to the service's."""
    if operation not in ("BatchGetItem", "BatchWriteItem"):  # these name their tables in the request
        kwargs["TableName"] = table
    try:
        return getattr(client, _snake(operation))(**kwargs)
    except (ClientError, BotoCoreError) as exc:
        raise aws_error(exc, service="DynamoDB", operation=operation) from None


def conditional_write(client: Any, table: str, operation: str, **kwargs: Any) -> bool:
    """One conditional write on `table`; False when its condition failed (another writer got there
    first), any other failure is the service's error."""
    try:
        getattr(client, _snake(operation))(TableName=table, **kwargs)
        return True
    except (ClientError, BotoCoreError) as exc:
        if lost_race(exc):
            return False
        raise aws_error(exc, service="DynamoDB", operation=operation) from None


# A transaction cancelled for these reasons (per item; "None" is an item that was fine) is worth
# planning again after a backoff: a condition on what was read failed, another transaction held an
# item, or throttling. botocore never retries a cancelled transaction.
_CANCELLED_RETRYABLE = frozenset({None, "None", "ConditionalCheckFailed", "TransactionConflict", "ThrottlingError",
                                  "ProvisionedThroughputExceeded", "RequestLimitExceeded"})


def transact_or_cancelled(client: Any, actions: list[dict[str, Any]]) -> bool:
    """One `TransactWriteItems`; False when DynamoDB cancelled it for a reason worth planning
    again (the caller reads, backs off and retries); any other failure is the service's error."""
    try:
        client.transact_write_items(TransactItems=actions)
        return True
    except ClientError as exc:
        reasons = {r.get("Code") for r in exc.response.get("CancellationReasons", [])}
        if exc.response.get("Error", {}).get("Code") == "TransactionCanceledException" \
                and reasons <= _CANCELLED_RETRYABLE:
            return False
        raise aws_error(exc, service="DynamoDB", operation="TransactWriteItems") from None
    except BotoCoreError as exc:
        raise aws_error(exc, service="DynamoDB", operation="TransactWriteItems") from None


def query_pages(client: Any, table: str, *, limit: Callable[[], int] | None = None,
                **kwargs: Any) -> Iterator[list[dict[str, Any]]]:
    """A `Query`'s rows, a page at a time, following `LastEvaluatedKey`; `limit`, when given, is
    asked for each page's `Limit` as the caller consumes them."""
    while True:
        if limit is not None:
            kwargs["Limit"] = limit()
        page = call_table(client, table, "Query", **kwargs)
        yield page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def batch_get_rows(client: Any, table: str, keys: list[dict[str, Any]], *,
                   consistent: bool = True) -> list[dict[str, Any]]:
    """Reads of these keys (consistent unless asked otherwise), 100 to a request, unprocessed keys
    asked again with backoff. The loop is ours because botocore retries failed requests, not the
    keys a successful BatchGetItem left unprocessed (DynamoDB's answer to throttling within a batch)."""
    rows: list[dict[str, Any]] = []
    for start in range(0, len(keys), 100):
        request = {table: {"Keys": keys[start : start + 100], "ConsistentRead": consistent}}
        for attempt in range(8):
            response = call_table(client, table, "BatchGetItem", RequestItems=request)
            rows.extend(response.get("Responses", {}).get(table, []))
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            time.sleep(min(0.05 * 2**attempt, 1.0))
        else:
            raise RateLimited("the table is throttling reads; retry", retry_after_seconds=1)
    return rows


def _snake(operation: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in operation).lstrip("_")

