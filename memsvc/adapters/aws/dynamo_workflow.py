"""The AWS workflow store (seed 003): task contexts, plans and working memory in the item table.

Every row has `rt = workflow`, which the stream consumers' filters and `change_from_stream_record`
drop (they take `rt = item` only), so none of it is ever indexed or put on the timeline. The keys,
access paths and hot-partition reasoning are in docs/aws-design.md ("Agent workflow state"). Ids
go into keys percent-encoded, so an id holding `#` or `/` can never reach another id's key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.dynamo_store import TTL_ATTRIBUTE
from memsvc.adapters.aws.errors import aws_error, lost_race
from memsvc.core.errors import Taken
from memsvc.core.models import from_epoch_us, to_epoch_us
from memsvc.core.workflow import PlanRecord, StaleRecord, TaskRecord, WorkingRecord

__all__ = ["DynamoWorkflowStore", "ROW_TYPE"]

ROW_TYPE = "workflow"
_US_DIGITS = 20  # created_at in µs, zero-padded, so sort keys order by time


def _q(part: str) -> str:
    return quote(part, safe="")


def _task_key(tenant: str, task_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"T#{tenant}#TC#{_q(task_id)}"}, "sk": {"S": "TC"}}


def _tasks_listing_key(tenant: str, creator: str, task_id: str) -> dict[str, Any]:
    """The task's row in its tenant's listing (a copy of the task, written in the task's
    transaction), by creator then id: one partition per tenant, so an export or an erasure finds a
    tenant's or a creator's task contexts with a Query, not a Scan."""
    return {"pk": {"S": _tasks_pk(tenant)}, "sk": {"S": _tasks_sk(creator, task_id)}}


def _tasks_pk(tenant: str) -> str:
    return f"T#{tenant}#TASKS"


def _tasks_sk(creator: str, task_id: str) -> str:
    # "#" sorts below every percent-encoded character, so a creator's rows sort together
    return f"C#{_q(creator)}#{_q(task_id)}"


def _subtask_key(tenant: str, subtask_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"T#{tenant}#ST#{_q(subtask_id)}"}, "sk": {"S": "ST"}}


def _plan_key(tenant: str, user: str, plan_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"T#{tenant}#U#{_q(user)}#PL#{_q(plan_id)}"}, "sk": {"S": "PL"}}


def _plans_pk(tenant: str, user: str) -> str:
    return f"T#{tenant}#U#{_q(user)}#PLANS"


def _listing_sk(prefix: str, created_us: int, plan_id: str) -> str:
    return f"{prefix}{created_us:0{_US_DIGITS}d}#{_q(plan_id)}"


def _listing_keys(plan: PlanRecord) -> list[dict[str, Any]]:
    """The plan's two listing rows: among all the user's plans, and among those of its status."""
    pk, created = _plans_pk(plan.tenant, plan.user), to_epoch_us(plan.created_at)
    return [{"pk": {"S": pk}, "sk": {"S": _listing_sk(prefix, created, plan.plan_id)}}
            for prefix in ("A#", f"S#{plan.status}#")]


def _plan_users_key(tenant: str, user: str) -> dict[str, Any]:
    """A user's row in the tenant's listing of users who have had a plan (the export walks it):
    written with each plan created, one row per user, removed by the user's erasure."""
    return {"pk": {"S": f"T#{tenant}#PU"}, "sk": {"S": f"U#{_q(user)}"}}


def _working_pk(tenant: str, user: str, plan_id: str) -> str:
    return f"T#{tenant}#U#{_q(user)}#WM#{_q(plan_id)}"


class DynamoWorkflowStore:
    """`WorkflowStore`."""

    def __init__(self, client: Any, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def _call(self, operation: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except ClientError as exc:
            if lost_race(exc):
                raise StaleRecord() from None
            raise aws_error(exc, service="DynamoDB", operation=operation) from None
        except BotoCoreError as exc:
            raise aws_error(exc, service="DynamoDB", operation=operation) from None

    def _get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        return self._call("GetItem", self._db.get_item, TableName=self._table, Key=key,
                          ConsistentRead=True).get("Item")

    # -- task contexts ----------------------------------------------------------------------------

    def get_task(self, tenant: str, task_id: str) -> TaskRecord | None:
        item = self._get(_task_key(tenant, task_id))
        return _task(tenant, item) if item else None

    def task_of_subtask(self, tenant: str, subtask_id: str) -> str | None:
        item = self._get(_subtask_key(tenant, subtask_id))
        return item["task_id"]["S"] if item else None

    def save_task(self, task: TaskRecord, *, previous: TaskRecord | None) -> None:
        old = set(previous.sub_tasks) if previous else set()
        added = [s for s in task.sub_tasks if s not in old]
        removed = [s for s in old if s not in set(task.sub_tasks)]
        ours = {":t": {"S": task.task_id}}
        mine_or_free = "attribute_not_exists(pk) OR task_id = :t"
        actions = [{"Put": {"TableName": self._table, "Item": {**_task_key(task.tenant, task.task_id),
                                                               **_task_item(task)},
                            **_unchanged(previous)}},
                   {"Put": {"TableName": self._table, "Item": {**_tasks_listing_key(task.tenant, task.creator,
                                                                                    task.task_id),
                                                               **_task_item(task)}}}]
        actions += [{"Put": {"TableName": self._table, "ConditionExpression": mine_or_free,
                             "ExpressionAttributeValues": ours,
                             "Item": {**_subtask_key(task.tenant, s), "rt": {"S": ROW_TYPE}, "task_id": {"S": task.task_id}}}}
                    for s in added]
        actions += [{"Delete": {"TableName": self._table, "Key": _subtask_key(task.tenant, s),
                                "ConditionExpression": mine_or_free, "ExpressionAttributeValues": ours}}
                    for s in removed]
        try:
            self._call("TransactWriteItems", self._db.transact_write_items, TransactItems=actions)
        except StaleRecord:
            current = self.get_task(task.tenant, task.task_id)
            if (current.version if current else None) != (previous.version if previous else None):
                raise
            for s in added:  # the task is as read, so one of the new sub-tasks is another task's
                owner = self.task_of_subtask(task.tenant, s)
                if owner is not None and owner != task.task_id:
                    raise Taken("this sub-task belongs to another task context", details={"sub_task": s}) from None
            raise

    def delete_task(self, task: TaskRecord) -> None:
        ours = {":t": {"S": task.task_id}}
        actions = [{"Delete": {"TableName": self._table, "Key": _task_key(task.tenant, task.task_id),
                               **_unchanged(task)}},
                   {"Delete": {"TableName": self._table,
                               "Key": _tasks_listing_key(task.tenant, task.creator, task.task_id)}}]
        actions += [{"Delete": {"TableName": self._table, "Key": _subtask_key(task.tenant, s),
                                "ConditionExpression": "attribute_not_exists(pk) OR task_id = :t",
                                "ExpressionAttributeValues": ours}} for s in task.sub_tasks]
        self._call("TransactWriteItems", self._db.transact_write_items, TransactItems=actions)

    def list_tasks(self, tenant: str, *, creator: str | None, after: tuple[str, str] | None,
                   limit: int) -> list[TaskRecord]:
        prefix = "C#" if creator is None else f"C#{_q(creator)}#"
        pk = _tasks_pk(tenant)
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": {"S": pk}, ":prefix": {"S": prefix}},
            "Limit": limit, "ConsistentRead": True,
        }
        if after is not None:
            kwargs["ExclusiveStartKey"] = {"pk": {"S": pk}, "sk": {"S": _tasks_sk(*after)}}
        out: list[TaskRecord] = []
        while len(out) < limit:
            page = self._call("Query", self._db.query, TableName=self._table, **kwargs)
            out += [_task(tenant, item) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            kwargs["Limit"] = limit - len(out)
        return out[:limit]

    # -- plans ------------------------------------------------------------------------------------

    def get_plan(self, tenant: str, user: str, plan_id: str) -> PlanRecord | None:
        item = self._get(_plan_key(tenant, user, plan_id))
        return _plan(tenant, user, item) if item else None

    def save_plan(self, plan: PlanRecord, *, previous: PlanRecord | None) -> None:
        attrs = _plan_item(plan)
        actions: list[dict[str, Any]] = [{"Put": {"TableName": self._table, "Item": {
            **_plan_key(plan.tenant, plan.user, plan.plan_id), **attrs}, **_unchanged(previous)}}]
        if previous is not None and previous.status != plan.status:
            actions.append({"Delete": {"TableName": self._table, "Key": _listing_keys(previous)[1]}})
        actions += [{"Put": {"TableName": self._table, "Item": {**key, **attrs}}} for key in _listing_keys(plan)]
        if previous is None:
            actions.append({"Put": {"TableName": self._table, "Item": {
                **_plan_users_key(plan.tenant, plan.user), "rt": {"S": ROW_TYPE}, "user": {"S": plan.user}}}})
        self._call("TransactWriteItems", self._db.transact_write_items, TransactItems=actions)

    def plan_users_after(self, tenant: str, after: str | None, limit: int) -> list[str]:
        pk = _plan_users_key(tenant, "")["pk"]
        kwargs: dict[str, Any] = {"KeyConditionExpression": "pk = :pk", "ConsistentRead": True,
                                  "ExpressionAttributeValues": {":pk": pk}}
        if after is not None:
            kwargs["ExclusiveStartKey"] = _plan_users_key(tenant, after)
        out: list[str] = []
        while len(out) < limit:
            kwargs["Limit"] = limit - len(out)
            page = self._call("Query", self._db.query, TableName=self._table, **kwargs)
            out += [item["user"]["S"] for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return out

    def delete_plan(self, plan: PlanRecord) -> None:
        actions = [{"Delete": {"TableName": self._table, "Key": _plan_key(plan.tenant, plan.user, plan.plan_id),
                               **_unchanged(plan)}}]
        actions += [{"Delete": {"TableName": self._table, "Key": key}} for key in _listing_keys(plan)]
        self._call("TransactWriteItems", self._db.transact_write_items, TransactItems=actions)
        working = self.list_working(plan.tenant, plan.user, plan.plan_id)
        self.delete_working(plan.tenant, plan.user, plan.plan_id, [w.key for w in working])

    def list_plans(self, tenant, user, *, status, after, limit):
        prefix = "A#" if status is None else f"S#{status}#"
        pk = _plans_pk(tenant, user)
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": {"S": pk}, ":prefix": {"S": prefix}},
            "ScanIndexForward": False, "Limit": limit, "ConsistentRead": True,
        }
        if after is not None:
            kwargs["ExclusiveStartKey"] = {"pk": {"S": pk}, "sk": {"S": _listing_sk(prefix, after[0], after[1])}}
        out: list[PlanRecord] = []
        while len(out) < limit:
            page = self._call("Query", self._db.query, TableName=self._table, **kwargs)
            out += [_plan(tenant, user, item) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            kwargs["Limit"] = limit - len(out)
        return out[:limit]

    # -- working memory ---------------------------------------------------------------------------

    def put_working(self, record: WorkingRecord, *, expected_version: int | None = None) -> int | None:
        """One transaction: the plan row must exist (a `ConditionCheck`, which also serialises this
        put with the plan's deletion) and the key must still be at the version read."""
        plan_key = _plan_key(record.tenant, record.user, record.plan_id)
        key = _working_key(record.tenant, record.user, record.plan_id, record.key)
        item: dict[str, Any] = {**key, "rt": {"S": ROW_TYPE}, "key": {"S": record.key}, "sealed": {"B": record.sealed},
                                "updated_at": {"N": str(to_epoch_us(record.updated_at))}}
        if record.expires_at is not None:
            item["expires_at"] = {"N": str(to_epoch_us(record.expires_at))}
            item[TTL_ATTRIBUTE] = {"N": str(math.ceil(record.expires_at.timestamp()))}
        current = self._get(key)
        if expected_version is not None and (int(current["version"]["N"]) if current else None) != expected_version:
            raise StaleRecord("the working-memory key is not at the expected version")
        version = int(current["version"]["N"]) + 1 if current else 1
        condition: dict[str, Any] = (
            {"ConditionExpression": "version = :v", "ExpressionAttributeValues": {":v": current["version"]}}
            if current else {"ConditionExpression": "attribute_not_exists(pk)"})
        actions = [{"ConditionCheck": {"TableName": self._table, "Key": plan_key,
                                       "ConditionExpression": "attribute_exists(pk)"}},
                   {"Put": {"TableName": self._table, "Item": {**item, "version": {"N": str(version)}}, **condition}}]
        try:
            self._call("TransactWriteItems", self._db.transact_write_items, TransactItems=actions)
        except StaleRecord:
            if self._get(plan_key) is None:
                return None  # no plan (or it was just deleted): nothing written
            raise  # another put of this key, or a change of the plan, came in between
        return version

    def iter_working(self, tenant, user, plan_id, *, after):
        kwargs: dict[str, Any] = {"KeyConditionExpression": "pk = :pk",
                                  "ExpressionAttributeValues": {":pk": {"S": _working_pk(tenant, user, plan_id)}},
                                  "ConsistentRead": True}
        if after is not None:
            kwargs["ExclusiveStartKey"] = _working_key(tenant, user, plan_id, after)
        while True:
            page = self._call("Query", self._db.query, TableName=self._table, **kwargs)
            yield from (_working(tenant, user, plan_id, item["key"]["S"], item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def get_working(self, tenant, user, plan_id, key):
        item = self._get(_working_key(tenant, user, plan_id, key))
        return _working(tenant, user, plan_id, key, item) if item else None

    def list_working(self, tenant, user, plan_id):
        kwargs: dict[str, Any] = {"KeyConditionExpression": "pk = :pk",
                                  "ExpressionAttributeValues": {":pk": {"S": _working_pk(tenant, user, plan_id)}},
                                  "ConsistentRead": True}
        out: list[WorkingRecord] = []
        while True:
            page = self._call("Query", self._db.query, TableName=self._table, **kwargs)
            out += [_working(tenant, user, plan_id, item["key"]["S"], item) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def delete_working(self, tenant, user, plan_id, keys: Sequence[str]) -> None:
        for start in range(0, len(keys), 25):  # BatchWriteItem takes 25 requests at most
            requests = {self._table: [{"DeleteRequest": {"Key": _working_key(tenant, user, plan_id, k)}}
                                      for k in keys[start:start + 25]]}
            while requests:
                answer = self._call("BatchWriteItem", self._db.batch_write_item, RequestItems=requests)
                requests = answer.get("UnprocessedItems") or {}


    # -- semantic memories' content-hash pointers -----------------------------------------------

    def add_semantic_hash(self, tenant, user, digest, key):
        self._call("PutItem", self._db.put_item, TableName=self._table,
                   Item={**_hash_key(tenant, user, digest, key), "rt": {"S": ROW_TYPE}, "key": {"S": key}})

    def semantic_hash_keys(self, tenant, user, digest):
        kwargs: dict[str, Any] = {"KeyConditionExpression": "pk = :pk",
                                  "ExpressionAttributeValues": {":pk": {"S": _hash_key(tenant, user, digest, "")["pk"]["S"]}},
                                  "ProjectionExpression": "#k", "ExpressionAttributeNames": {"#k": "key"},
                                  "ConsistentRead": True}
        keys: list[str] = []
        while True:
            page = self._call("Query", self._db.query, TableName=self._table, **kwargs)
            keys += [item["key"]["S"] for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return keys
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def drop_semantic_hash(self, tenant, user, digest, key):
        self._call("DeleteItem", self._db.delete_item, TableName=self._table, Key=_hash_key(tenant, user, digest, key))


def _hash_key(tenant: str, user: str, digest: str, key: str) -> dict[str, Any]:
    """One partition per (user, content hash): a pointer to each semantic memory key with it."""
    return {"pk": {"S": f"T#{tenant}#U#{_q(user)}#SH#{digest}"}, "sk": {"S": f"K#{_q(key)}"}}


def _working_key(tenant: str, user: str, plan_id: str, key: str) -> dict[str, Any]:
    return {"pk": {"S": _working_pk(tenant, user, plan_id)}, "sk": {"S": f"K#{_q(key)}"}}


def _unchanged(previous: TaskRecord | PlanRecord | None) -> dict[str, Any]:
    """The condition that the row is still as the writer read it (absent when `previous` is None)."""
    if previous is None:
        return {"ConditionExpression": "attribute_not_exists(pk)"}
    return {"ConditionExpression": "version = :v", "ExpressionAttributeValues": {":v": {"N": str(previous.version)}}}


def _opt(value: str | None) -> dict[str, Any]:
    return {"S": value} if value is not None else {"NULL": True}


def _str(item: dict[str, Any], name: str) -> str | None:
    return item[name].get("S") if name in item else None


def _task_item(task: TaskRecord) -> dict[str, Any]:
    return {"rt": {"S": ROW_TYPE}, "task_id": {"S": task.task_id}, "creator": {"S": task.creator},
            "plan_id": _opt(task.plan_id), "event_type": {"S": task.event_type},
            "response_event": _opt(task.response_event), "response_topic": {"S": task.response_topic},
            "sub_tasks": {"L": [{"S": s} for s in task.sub_tasks]}, "sealed": {"B": task.sealed},
            "version": {"N": str(task.version)}, "created_at": {"N": str(to_epoch_us(task.created_at))},
            "updated_at": {"N": str(to_epoch_us(task.updated_at))}}


def _task(tenant: str, item: dict[str, Any]) -> TaskRecord:
    return TaskRecord(tenant=tenant, task_id=item["task_id"]["S"], creator=item["creator"]["S"],
                      plan_id=_str(item, "plan_id"), event_type=item["event_type"]["S"],
                      response_event=_str(item, "response_event"), response_topic=item["response_topic"]["S"],
                      sub_tasks=tuple(s["S"] for s in item["sub_tasks"]["L"]), sealed=bytes(item["sealed"]["B"]),
                      version=int(item["version"]["N"]), created_at=from_epoch_us(int(item["created_at"]["N"])),
                      updated_at=from_epoch_us(int(item["updated_at"]["N"])))


def _plan_item(plan: PlanRecord) -> dict[str, Any]:
    return {"rt": {"S": ROW_TYPE}, "plan_id": {"S": plan.plan_id}, "goal_event": {"S": plan.goal_event},
            "status": {"S": plan.status}, "sealed": {"B": plan.sealed}, "version": {"N": str(plan.version)},
            "created_at": {"N": str(to_epoch_us(plan.created_at))},
            "updated_at": {"N": str(to_epoch_us(plan.updated_at))}}


def _plan(tenant: str, user: str, item: dict[str, Any]) -> PlanRecord:
    return PlanRecord(tenant=tenant, user=user, plan_id=item["plan_id"]["S"], goal_event=item["goal_event"]["S"],
                      status=item["status"]["S"], sealed=bytes(item["sealed"]["B"]),
                      version=int(item["version"]["N"]), created_at=from_epoch_us(int(item["created_at"]["N"])),
                      updated_at=from_epoch_us(int(item["updated_at"]["N"])))


def _working(tenant: str, user: str, plan_id: str, key: str, item: dict[str, Any]) -> WorkingRecord:
    expires = item.get("expires_at")
    return WorkingRecord(tenant=tenant, user=user, plan_id=plan_id, key=key, sealed=bytes(item["sealed"]["B"]),
                         version=int(item["version"]["N"]), updated_at=from_epoch_us(int(item["updated_at"]["N"])),
                         expires_at=from_epoch_us(int(expires["N"])) if expires else None)
