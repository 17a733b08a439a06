"""`UserDataStores` on the DynamoDB table: one user's rows, found through the partitions keyed by
the user, removed with `BatchWriteItem` a page at a time.

Each of the user's item rows is first marked (`chg` = `ERASE_MARK`, same version: no change), then
what its version indexed is retired through the indexes' own ports (its vectors, its keyword
document and field tokens, which keep the keyword index's statistics right, its derived graph
rows), then the row is deleted: the stream's REMOVE of a marked row is no change
(`change_from_stream_record`), so neither the indexer nor the timeline Lambda sees the erasure.
The explicit graph entities and relations of the user's namespaces go through the graph store, the
keyword statistics rows of those namespaces once they count nothing, and the namespaces' registry
rows last.

Two kinds of rows are keyed by something else than the user: task contexts (by task id: found
through the tenant's listing of task contexts by creator, a Query) and the semantic upserts' pointers (by the content's digest,
which `semantic_digest` reads out of each of the user's semantic memories). Remember jobs queued on
SQS are not reachable at all (see docs/data-ownership.md, "Erasing a user").
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

from memsvc.adapters.aws.dynamo_rate_limiter import rate_counter_key
from memsvc.adapters.aws.dynamo_sessions import (_due_key, _pk as _sessions_pk, _record as _session_record,
                                                 _users_key as _session_users_key)
from memsvc.adapters.aws.dynamo_graph import SHARDS as _GRAPH_SHARDS
from memsvc.adapters.aws.dynamo_keywords import SHARDS as _KEYWORD_SHARDS
from memsvc.adapters.aws.dynamo_store import (ERASE_MARK, TTL_ATTRIBUTE, DynamoItemStore, item_from_row, call_table,
                                              conditional_write, query_pages)
from memsvc.adapters.aws.dynamo_transfers import job_partition, jobs_listing_pk
from memsvc.adapters.aws.dynamo_timeline import _event, _items, _root, _root_pk
from memsvc.adapters.aws.dynamo_workflow import (_hash_key, _plan_users_key, _plans_pk, _q, _subtask_key, _task_key,
                                                 _tasks_listing_key, _tasks_pk, _working_pk)
from memsvc.core.errors import RateLimited
from memsvc.core.layers import SEMANTIC_SEGMENT
from memsvc.core.graph import DerivedMemory
from memsvc.core.models import StoredItem, VectorRef
from memsvc.core.namespaces import SEP, decode_namespace, encode_namespace
from memsvc.core.transfer_jobs import job_of_doc, may_hold_user
from memsvc.ports import Clock, GraphStore, KeywordIndex, VectorIndex
from memsvc.service.user_erasure import user_config_names

__all__ = ["DynamoUserDataStores", "STORES"]

STORES = ("sessions", "task_contexts", "working_memory", "plans", "semantic_hashes", "rate_limits", "user_state",
          "graph", "memories", "keyword_statistics", "namespace_registry", "timeline", "transfers")
_BATCH_WRITE = 25  # BatchWriteItem's limit
_MARKERS = 8  # concurrent UpdateItems marking a page's rows
# Items a page erases at most, whatever the page size: each costs a few requests (its mark, its
# derived graph rows), so that a page takes a few seconds, well within one API request.
_ITEMS_PER_PAGE = 250
_MAX_ATTEMPTS = 8
_MORE = "more"  # the cursor of a store whose next page removes the next rows
_RATE_WINDOW_SECONDS = 3600  # `service.remember.take_rate`: hourly windows, each kept an hour past its end


class DynamoUserDataStores:
    def __init__(self, client: Any, table_name: str, *, items: DynamoItemStore, vectors: VectorIndex,
                 keyword_table: str, keywords: KeywordIndex, graph: GraphStore, clock: Clock,
                 semantic_digest: Callable[[StoredItem], str | None]) -> None:
        self._db = client
        self._items = items
        self._vectors = vectors
        self._markers = ThreadPoolExecutor(max_workers=_MARKERS, thread_name_prefix="memsvc-erase")
        self._table = table_name
        self._keyword_table = keyword_table
        self._keywords = keywords
        self._graph = graph
        self._clock = clock
        self._semantic_digest = semantic_digest
        self.stores = STORES

    def erase(self, tenant: str, user_id: str, store: str, *, erasure_id: str, limit: int,
              cursor: str | None) -> tuple[int, str | None]:
        if store == "task_contexts":
            return self._erase_task_contexts(tenant, user_id, limit, cursor)
        if store == "semantic_hashes":
            return self._erase_semantic_hashes(tenant, user_id, limit, cursor)
        if store == "plans":
            return self._erase_plans(tenant, user_id, limit)
        if store == "memories":
            return self._erase_items(tenant, user_id, min(limit, _ITEMS_PER_PAGE))
        if store == "graph":
            return self._erase_graph(tenant, user_id, limit, cursor)
        if store == "transfers":
            return self._erase_transfers(tenant, user_id, limit, cursor)
        removed = self._erase(tenant, user_id, store, erasure_id, limit)
        return removed, (_MORE if removed >= limit else None)

    def finish(self, tenant: str) -> None:
        """DynamoDB keeps nothing of a deleted item to clean up."""

    def running(self) -> list[tuple[str, str]]:
        """No background worker continues an erasure on AWS: the caller's next DELETE does."""
        return []

    def left_for_another_pass(self, tenant: str, user_id: str) -> bool:
        """Whether the registry kept a row of the user's (its namespace held items again)."""
        return bool(self._rows(f"T#{tenant}#R#{_user_root(user_id)}", 1))

    # -- stores ------------------------------------------------------------------------------

    def _erase(self, tenant: str, user_id: str, store: str, erasure_id: str, limit: int) -> int:
        """The stores whose every page removes the next rows."""
        if store == "sessions":
            rows = self._rows(_sessions_pk(tenant, user_id), limit, keys_only=False)
            due = [_due_key(record) for record in map(_session_record, rows) if record.delete_after is not None]
            # the last page also takes the user's row in the tenant's users-with-sessions listing
            listed = [_session_users_key(tenant, user_id)] if len(rows) < limit else []
            self._delete([_key_of(r) for r in rows] + due + listed)
            return len(rows)
        if store == "working_memory":
            return self._erase_working(tenant, user_id, limit)
        if store == "rate_limits":
            window = math.floor(self._clock.now().timestamp() / _RATE_WINDOW_SECONDS)
            return self._delete_existing([rate_counter_key(tenant, user_id, w) for w in (window - 2, window - 1, window)])
        if store == "user_state":
            return self._delete_existing([{"pk": {"S": f"T#{tenant}#CFG"}, "sk": {"S": name}}
                                          for name in user_config_names(user_id)])
        if store == "keyword_statistics":
            return self._erase_keyword_statistics(tenant, user_id)
        if store == "namespace_registry":
            # A namespace that holds items again (written after the memories step went by) keeps
            # its row, so that the next pass finds them (`left_for_another_pass`); unlisted, they
            # could be found by no erasure.
            root = _user_root(user_id)
            rows = self._rows(f"T#{tenant}#R#{root}", limit)
            holding = self._markers.map(lambda r: bool(self._rows(f"T#{tenant}#N#{r['sk']['S']}", 1)), rows)
            empty = [r for r, held in zip(rows, holding) if not held]
            self._delete([_key_of(r) for r in empty])
            if len(rows) < limit and len(empty) == len(rows):
                return len(empty) + self._delete_existing([{"pk": {"S": f"T#{tenant}#R"}, "sk": {"S": root}}])
            return len(empty)
        if store == "timeline":
            return self._strip_events(tenant, user_id, erasure_id, limit)
        raise ValueError(f"no store named {store!r}")

    def _erase_task_contexts(self, tenant: str, user_id: str, limit: int,
                             cursor: str | None) -> tuple[int, str | None]:
        """At most `limit` of the task contexts the user created, from the tenant's listing (a
        Query of the creator's rows), with their sub-task index rows. The rows read are deleted,
        so the next page starts at the front again."""
        page = call_table(self._db, self._table, "Query", Limit=limit, ConsistentRead=True,
                          KeyConditionExpression="pk = :pk AND begins_with(sk, :creator)",
                          ExpressionAttributeValues={":pk": {"S": _tasks_pk(tenant)},
                                                     ":creator": {"S": f"C#{_q(user_id)}#"}})
        tasks = page.get("Items", [])
        self._delete([_task_key(tenant, row["task_id"]["S"]) for row in tasks]
                     + [_tasks_listing_key(tenant, user_id, row["task_id"]["S"]) for row in tasks]
                     + [_subtask_key(tenant, sub["S"]) for row in tasks for sub in row.get("sub_tasks", {}).get("L", [])])
        return len(tasks), (_MORE if "LastEvaluatedKey" in page else None)

    def _erase_transfers(self, tenant: str, user_id: str, limit: int,
                         cursor: str | None) -> tuple[int, str | None]:
        """A page of the tenant's transfer jobs, through their listing: each job whose file may hold
        the user (`may_hold_user`) goes, its row and its file's parts with it (the service keeps no
        copy of an erased user), and so does the listing row of a job already expired. Counted in
        jobs."""
        page = call_table(self._db, self._table, "Query", KeyConditionExpression="pk = :p", ConsistentRead=True,
                          ExpressionAttributeValues={":p": {"S": jobs_listing_pk(tenant)}},
                          Limit=max(1, limit // 100),  # a job may have many parts: few jobs a page
                          **({"ExclusiveStartKey": json.loads(cursor)} if cursor else {}))
        removed = 0
        for listed in page.get("Items", []):
            job_id = listed["sk"]["S"]
            row = call_table(self._db, self._table, "GetItem", ConsistentRead=True,
                             Key={"pk": {"S": job_partition(tenant, job_id)}, "sk": {"S": "JOB"}}).get("Item")
            job = (job_of_doc(tenant, job_id, int(row["version"]["N"]), json.loads(row["doc"]["S"]), b"")
                   if row else None)
            if job is not None and not may_hold_user(job, user_id):
                continue
            for rows in query_pages(self._db, self._table, KeyConditionExpression="pk = :p", ConsistentRead=True,
                                    ProjectionExpression="pk, sk",
                                    ExpressionAttributeValues={":p": {"S": job_partition(tenant, job_id)}}):
                self._delete([_key_of(r) for r in rows])
            self._delete([_key_of(listed)])
            removed += job is not None
        after = page.get("LastEvaluatedKey")
        return removed, json.dumps(after) if after else None

    def _erase_semantic_hashes(self, tenant: str, user_id: str, limit: int,
                               cursor: str | None) -> tuple[int, str | None]:
        """The content-hash pointers of a page of the user's semantic memories (read, not removed:
        the memories go with the others)."""
        ns = encode_namespace(("user", user_id, SEMANTIC_SEGMENT))
        page = call_table(self._db, self._table, "Query", KeyConditionExpression="pk = :p", Limit=limit,
                          ConsistentRead=True, ExpressionAttributeValues={":p": {"S": f"T#{tenant}#N#{ns}"}},
                          **({"ExclusiveStartKey": json.loads(cursor)} if cursor else {}))
        items = [item_from_row(row) for row in page.get("Items", [])]
        pointers = [_hash_key(tenant, user_id, digest, item.key) for item in items
                    if item.deleted is None and (digest := self._semantic_digest(item)) is not None]
        removed = self._delete_existing(pointers)
        after = page.get("LastEvaluatedKey")
        return removed, json.dumps(after) if after else None

    def _erase_keyword_statistics(self, tenant: str, user_id: str) -> int:
        """The keyword index's statistics rows of the user's namespaces (`P#<namespace>` in each
        shard), each only while it counts nothing (its documents are gone)."""
        root = _user_root(user_id)
        removed = 0
        for shard in range(_KEYWORD_SHARDS):
            for page in query_pages(self._db, self._keyword_table, ProjectionExpression="pk, sk",
                                    KeyConditionExpression="pk = :p AND begins_with(sk, :u)",
                                    ExpressionAttributeValues={":p": {"S": f"T#{tenant}#S#{shard}"},
                                                               ":u": {"S": "P#" + root}}):
                for row in page:
                    if row["sk"]["S"] == "P#" + root or row["sk"]["S"].startswith("P#" + root + SEP):
                        removed += conditional_write(self._db, self._keyword_table, "DeleteItem", Key=row,
                                                     ConditionExpression="#n = :z", ExpressionAttributeNames={"#n": "n"},
                                                     ExpressionAttributeValues={":z": {"N": "0"}})
        return removed

    def _erase_graph(self, tenant: str, user_id: str, limit: int, cursor: str | None) -> tuple[int, str | None]:
        """The explicit entities of the user's namespaces (with their explicit relations), a node
        shard a page; a node a derived mention keeps goes with the mention, when the indexer
        retires the item."""
        shard = int(cursor) if cursor else 0
        root = _user_root(user_id)
        removed = 0
        for page in query_pages(self._db, self._keyword_table, KeyConditionExpression="pk = :p",
                                FilterExpression="#ns = :root OR begins_with(#ns, :under)",
                                ExpressionAttributeNames={"#ns": "ns"},
                                ExpressionAttributeValues={":p": {"S": f"T#{tenant}#GN#{shard}"},
                                                           ":root": {"S": root}, ":under": {"S": root + SEP}}):
            for row in page:
                removed += self._graph.delete_entity(tenant, decode_namespace(row["ns"]["S"]), row["e"]["S"])
        return removed, str(shard + 1) if shard + 1 < _GRAPH_SHARDS else None

    def _erase_plans(self, tenant: str, user_id: str, limit: int) -> tuple[int, str | None]:
        """Plans, through their listing rows (two a plan: among all, among its status's)."""
        listing = self._rows(_plans_pk(tenant, user_id), limit)
        plan_ids = {_plan_id(r) for r in listing}
        plans = [{"pk": {"S": f"T#{tenant}#U#{_q(user_id)}#PL#{_q(p)}"}, "sk": {"S": "PL"}} for p in plan_ids]
        # the last page also takes the user's row in the tenant's users-with-plans listing
        listed = [_plan_users_key(tenant, user_id)] if len(listing) < limit else []
        self._delete(plans + [_key_of(r) for r in listing] + listed)
        return len(plan_ids), (_MORE if len(listing) >= limit else None)

    def _erase_working(self, tenant: str, user_id: str, limit: int) -> int:
        """Each plan's working memory, found through the plans' listing (erased after it)."""
        removed = 0
        plan_ids = {_plan_id(r) for page in query_pages(
            self._db, self._table, KeyConditionExpression="pk = :p", ProjectionExpression="pk, sk",
            ExpressionAttributeValues={":p": {"S": _plans_pk(tenant, user_id)}}) for r in page}
        for plan_id in sorted(plan_ids):
            rows = self._rows(_working_pk(tenant, user_id, plan_id), limit - removed)
            self._delete([_key_of(r) for r in rows])
            removed += len(rows)
            if removed >= limit:
                break
        return removed

    def _erase_items(self, tenant: str, user_id: str, limit: int) -> tuple[int, str | None]:
        """Every row of every namespace the registry holds under the user's root: live items,
        tombstones and expired ones alike. A row written again since it was read keeps its mark
        unset and is left for the next page."""
        rows: list[dict[str, Any]] = []
        for ns in self._registered_namespaces(tenant, user_id):
            rows += self._rows(f"T#{tenant}#N#{ns}", limit - len(rows), keys_only=False)
            if len(rows) >= limit:
                break
        marked = [row for row, ok in zip(rows, self._markers.map(self._mark, rows)) if ok]
        items = [item_from_row(row) for row in marked]
        self._vectors.delete_many([VectorRef(tenant, i.id, name) for i in items for name in i.indexed_fields or ()])
        self._keywords.delete_many(tenant, [i.id for i in items])
        for i in items:
            self._graph.remove_memory(DerivedMemory(tenant, i.namespace, i.key, i.id, i.version + 1))
        self._delete([_key_of(row) for row in marked])
        return len(marked), (_MORE if len(rows) >= limit or len(marked) < len(rows) else None)

    def _mark(self, row: dict[str, Any]) -> bool:
        """Mark the row for the stream's consumers, if it is still the version read."""
        return conditional_write(self._db, self._table, "UpdateItem", Key=_key_of(row),
                                 UpdateExpression="SET #chg = :erase", ConditionExpression="#v = :v",
                                 ExpressionAttributeNames={"#chg": "chg", "#v": "version"},
                                 ExpressionAttributeValues={":erase": {"S": ERASE_MARK}, ":v": row["version"]})

    def _strip_events(self, tenant: str, user_id: str, erasure_id: str, limit: int) -> int:
        """Each of the user's events stays in the tenant's timeline at its stamp, without anything of
        the user: namespace `["erased", <erasure id>]`, the memory id as its key, no value,
        attributes, policy attributes or reason. Written before the old copy goes, so a page cut
        off midway is done again, never lost."""
        rows = self._rows(_root_pk(tenant, _user_root(user_id)), limit, keys_only=False)
        writes: list[dict[str, Any]] = []
        for row in rows:
            stripped = replace(_event(tenant, row, row), namespace=("erased", erasure_id), key=row["mid"]["S"],
                               policy_attributes={}, value_ct=None, attributes_ct=None, reason=None)
            writes += [{"PutRequest": {"Item": item}}
                       for item in _items(stripped, int(row["sk"]["S"][:20]), int(row[TTL_ATTRIBUTE]["N"]))]
            writes.append({"DeleteRequest": {"Key": _key_of(row)}})
        for start in range(0, len(writes), _BATCH_WRITE):  # in order: an event's puts before its delete
            self._batch_write(writes[start:start + _BATCH_WRITE])
        return len(rows)

    # -- plumbing ----------------------------------------------------------------------------

    def _registered_namespaces(self, tenant: str, user_id: str) -> Iterator[str]:
        for page in query_pages(self._db, self._table, KeyConditionExpression="pk = :p", ProjectionExpression="sk",
                                ExpressionAttributeValues={":p": {"S": f"T#{tenant}#R#{_user_root(user_id)}"}}):
            yield from (r["sk"]["S"] for r in page)

    def _rows(self, pk: str, limit: int, *, keys_only: bool = True) -> list[dict[str, Any]]:
        """Up to `limit` rows of the partition (consistent: a page's removals are seen by the next)."""
        rows: list[dict[str, Any]] = []
        if limit <= 0:
            return rows
        projection = {"ProjectionExpression": "pk, sk"} if keys_only else {}
        for page in query_pages(self._db, self._table, KeyConditionExpression="pk = :p", ConsistentRead=True,
                                ExpressionAttributeValues={":p": {"S": pk}}, limit=lambda: limit - len(rows),
                                **projection):
            rows += page
            if len(rows) >= limit:
                break
        return rows

    def _delete_existing(self, keys: list[dict[str, Any]]) -> int:
        """Delete these keys one by one; how many existed."""
        return sum("Attributes" in call_table(self._db, self._table, "DeleteItem", Key=key, ReturnValues="ALL_OLD")
                   for key in keys)

    def _delete(self, keys: list[dict[str, Any]]) -> None:
        requests = [{"DeleteRequest": {"Key": key}} for key in {_identity(k): k for k in keys}.values()]
        for start in range(0, len(requests), _BATCH_WRITE):
            self._batch_write(requests[start:start + _BATCH_WRITE])

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        """One BatchWriteItem, what it leaves unprocessed sent again with backoff (botocore retries
        a failed request, not the items a successful one left)."""
        pending: dict[str, Any] = {self._table: requests}
        for attempt in range(_MAX_ATTEMPTS):
            pending = call_table(self._db, self._table, "BatchWriteItem", RequestItems=pending).get(
                "UnprocessedItems") or {}
            if not pending:
                return
            time.sleep(min(0.05 * 2**attempt, 1.0))
        raise RateLimited("the table is throttling writes; erase again to continue", retry_after_seconds=1)


def _user_root(user_id: str) -> str:
    """The stored form of `["user", U]`: the root every namespace of the user's layers shares."""
    return _root(encode_namespace(("user", user_id)))


def _plan_id(listing_row: dict[str, Any]) -> str:
    """The plan a listing row (`dynamo_workflow._listing_sk`: `<prefix><created>#<plan id>`) names."""
    return unquote(listing_row["sk"]["S"].rsplit("#", 1)[1])


def _key_of(row: dict[str, Any]) -> dict[str, Any]:
    return {"pk": row["pk"], "sk": row["sk"]}


def _identity(key: dict[str, Any]) -> tuple[str, str]:
    return key["pk"]["S"], key["sk"]["S"]
