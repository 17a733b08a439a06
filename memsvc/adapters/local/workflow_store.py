"""The local workflow store (seed 003): task contexts, plans and working memory in their own
SQLite file, next to the item store but outside its change feed, so none of it is ever indexed
or put on the timeline as a memory. Each conditional write is one `BEGIN IMMEDIATE` transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memsvc.adapters.local.sqlite_db import SqliteFile
from memsvc.core.errors import Taken
from memsvc.core.models import from_epoch_us, to_epoch_us
from memsvc.core.workflow import PlanRecord, StaleRecord, TaskRecord, WorkingRecord

__all__ = ["SqliteWorkflowStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS task_contexts (
    tenant TEXT NOT NULL, task_id TEXT NOT NULL, creator TEXT NOT NULL, plan_id TEXT, event_type TEXT NOT NULL,
    response_event TEXT, response_topic TEXT NOT NULL, sub_tasks TEXT NOT NULL, sealed BLOB NOT NULL,
    version INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, task_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS task_contexts_by_creator ON task_contexts (tenant, creator, task_id);
CREATE TABLE IF NOT EXISTS sub_tasks (
    tenant TEXT NOT NULL, subtask_id TEXT NOT NULL, task_id TEXT NOT NULL,
    PRIMARY KEY (tenant, subtask_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS plans (
    tenant TEXT NOT NULL, user TEXT NOT NULL, plan_id TEXT NOT NULL, goal_event TEXT NOT NULL,
    status TEXT NOT NULL, sealed BLOB NOT NULL, version INTEGER NOT NULL,
    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, user, plan_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS plans_newest ON plans (tenant, user, created_at DESC, plan_id DESC);
CREATE INDEX IF NOT EXISTS plans_by_status ON plans (tenant, user, status, created_at DESC, plan_id DESC);
CREATE TABLE IF NOT EXISTS working (
    tenant TEXT NOT NULL, user TEXT NOT NULL, plan_id TEXT NOT NULL, key TEXT NOT NULL, sealed BLOB NOT NULL,
    version INTEGER NOT NULL, updated_at INTEGER NOT NULL, expires_at INTEGER,
    PRIMARY KEY (tenant, user, plan_id, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS semantic_hashes (
    tenant TEXT NOT NULL, user TEXT NOT NULL, digest TEXT NOT NULL, key TEXT NOT NULL,
    PRIMARY KEY (tenant, user, digest, key)
) WITHOUT ROWID;
"""
_TASK = ("tenant, task_id, creator, plan_id, event_type, response_event, response_topic, sub_tasks, sealed, "
         "version, created_at, updated_at")
_PLAN = "tenant, user, plan_id, goal_event, status, sealed, version, created_at, updated_at"
_WORKING = "tenant, user, plan_id, key, sealed, version, updated_at, expires_at"
_PAGE_ROWS = 16  # working-memory rows read at a time by iter_working (each up to 256 KB)


class SqliteWorkflowStore:
    """`WorkflowStore`."""

    def __init__(self, path: Path) -> None:
        self._db = SqliteFile(path, _SCHEMA)

    # -- task contexts ----------------------------------------------------------------------------

    def get_task(self, tenant: str, task_id: str) -> TaskRecord | None:
        return _get_task(self._db.conn(), tenant, task_id)

    def task_of_subtask(self, tenant: str, subtask_id: str) -> str | None:
        row = self._db.conn().execute("SELECT task_id FROM sub_tasks WHERE tenant = ? AND subtask_id = ?",
                                      (tenant, subtask_id)).fetchone()
        return row[0] if row else None

    def save_task(self, task: TaskRecord, *, previous: TaskRecord | None) -> None:
        with self._db.tx() as conn:
            _check(_get_task(conn, task.tenant, task.task_id), previous)
            old = set(previous.sub_tasks) if previous else set()
            for subtask_id in set(task.sub_tasks) - old:
                row = conn.execute("SELECT task_id FROM sub_tasks WHERE tenant = ? AND subtask_id = ?",
                                   (task.tenant, subtask_id)).fetchone()
                if row and row[0] != task.task_id:
                    raise Taken("this sub-task belongs to another task context", details={"sub_task": subtask_id})
                conn.execute("INSERT OR REPLACE INTO sub_tasks (tenant, subtask_id, task_id) VALUES (?, ?, ?)",
                             (task.tenant, subtask_id, task.task_id))
            conn.executemany("DELETE FROM sub_tasks WHERE tenant = ? AND subtask_id = ? AND task_id = ?",
                             [(task.tenant, s, task.task_id) for s in old - set(task.sub_tasks)])
            conn.execute(f"INSERT OR REPLACE INTO task_contexts ({_TASK}) VALUES ({', '.join('?' * 12)})", (
                task.tenant, task.task_id, task.creator, task.plan_id, task.event_type, task.response_event,
                task.response_topic, json.dumps(list(task.sub_tasks)), task.sealed, task.version,
                to_epoch_us(task.created_at), to_epoch_us(task.updated_at)))

    def plan_users_after(self, tenant: str, after: str | None, limit: int) -> list[str]:
        rows = self._db.conn().execute(
            "SELECT DISTINCT user FROM plans WHERE tenant = ? AND user > ? ORDER BY user LIMIT ?",
            (tenant, after if after is not None else "", limit)).fetchall()
        return [user for (user,) in rows]

    def list_tasks(self, tenant: str, *, creator: str | None, after: tuple[str, str] | None,
                   limit: int) -> list[TaskRecord]:
        where, args = "tenant = ?", [tenant]
        if creator is not None:
            where, args = where + " AND creator = ?", args + [creator]
        if after is not None:
            where, args = where + " AND (creator, task_id) > (?, ?)", args + list(after)
        rows = self._db.conn().execute(
            f"SELECT {_TASK} FROM task_contexts WHERE {where} ORDER BY creator, task_id LIMIT ?",
            (*args, limit)).fetchall()
        return [_task_of(row) for row in rows]

    def delete_task(self, task: TaskRecord) -> None:
        with self._db.tx() as conn:
            _check(_get_task(conn, task.tenant, task.task_id), task)
            conn.execute("DELETE FROM task_contexts WHERE tenant = ? AND task_id = ?", (task.tenant, task.task_id))
            conn.execute("DELETE FROM sub_tasks WHERE tenant = ? AND task_id = ?", (task.tenant, task.task_id))

    # -- plans ------------------------------------------------------------------------------------

    def get_plan(self, tenant: str, user: str, plan_id: str) -> PlanRecord | None:
        return _get_plan(self._db.conn(), tenant, user, plan_id)

    def save_plan(self, plan: PlanRecord, *, previous: PlanRecord | None) -> None:
        with self._db.tx() as conn:
            _check(_get_plan(conn, plan.tenant, plan.user, plan.plan_id), previous)
            conn.execute(f"INSERT OR REPLACE INTO plans ({_PLAN}) VALUES ({', '.join('?' * 9)})", (
                plan.tenant, plan.user, plan.plan_id, plan.goal_event, plan.status, plan.sealed, plan.version,
                to_epoch_us(plan.created_at), to_epoch_us(plan.updated_at)))

    def delete_plan(self, plan: PlanRecord) -> None:
        with self._db.tx() as conn:
            _check(_get_plan(conn, plan.tenant, plan.user, plan.plan_id), plan)
            conn.execute("DELETE FROM plans WHERE tenant = ? AND user = ? AND plan_id = ?",
                         (plan.tenant, plan.user, plan.plan_id))
            conn.execute("DELETE FROM working WHERE tenant = ? AND user = ? AND plan_id = ?",
                         (plan.tenant, plan.user, plan.plan_id))

    def list_plans(self, tenant, user, *, status, after, limit):
        where, params = "tenant = ? AND user = ?", [tenant, user]
        if status is not None:
            where += " AND status = ?"
            params.append(status)
        if after is not None:
            where += " AND (created_at < ? OR (created_at = ? AND plan_id < ?))"
            params += [after[0], after[0], after[1]]
        rows = self._db.conn().execute(
            f"SELECT {_PLAN} FROM plans WHERE {where} ORDER BY created_at DESC, plan_id DESC LIMIT ?",
            [*params, limit]).fetchall()
        return [_plan(r) for r in rows]

    # -- working memory ---------------------------------------------------------------------------

    def put_working(self, record: WorkingRecord, *, expected_version: int | None = None) -> int | None:
        with self._db.tx() as conn:
            # The plan is read in the write's transaction: its deletion (which takes the working
            # memory with it) is either before (no plan: nothing written) or after (this key goes too).
            if _get_plan(conn, record.tenant, record.user, record.plan_id) is None:
                return None
            row = conn.execute("SELECT version FROM working WHERE tenant = ? AND user = ? AND plan_id = ? AND key = ?",
                               (record.tenant, record.user, record.plan_id, record.key)).fetchone()
            if expected_version is not None and (row[0] if row else None) != expected_version:
                raise StaleRecord("the working-memory key is not at the expected version")
            version = row[0] + 1 if row else 1
            conn.execute(f"INSERT OR REPLACE INTO working ({_WORKING}) VALUES ({', '.join('?' * 8)})", (
                record.tenant, record.user, record.plan_id, record.key, record.sealed, version,
                to_epoch_us(record.updated_at), to_epoch_us(record.expires_at) if record.expires_at else None))
            # Expired keys of the plan go as the plan is written to (reads hide them already).
            conn.execute("DELETE FROM working WHERE tenant = ? AND user = ? AND plan_id = ? AND expires_at <= ?",
                         (record.tenant, record.user, record.plan_id, to_epoch_us(record.updated_at)))
            return version

    def get_working(self, tenant, user, plan_id, key):
        row = self._db.conn().execute(
            f"SELECT {_WORKING} FROM working WHERE tenant = ? AND user = ? AND plan_id = ? AND key = ?",
            (tenant, user, plan_id, key)).fetchone()
        return _working(row) if row else None

    def list_working(self, tenant, user, plan_id):
        rows = self._db.conn().execute(
            f"SELECT {_WORKING} FROM working WHERE tenant = ? AND user = ? AND plan_id = ? ORDER BY key",
            (tenant, user, plan_id)).fetchall()
        return [_working(r) for r in rows]

    def iter_working(self, tenant, user, plan_id, *, after):
        after_key = after if after is not None else ""
        while True:
            rows = self._db.conn().execute(
                f"SELECT {_WORKING} FROM working WHERE tenant = ? AND user = ? AND plan_id = ? AND key > ? "
                "ORDER BY key LIMIT ?", (tenant, user, plan_id, after_key, _PAGE_ROWS)).fetchall()
            yield from (_working(r) for r in rows)
            if len(rows) < _PAGE_ROWS:
                return
            after_key = rows[-1][3]

    def delete_working(self, tenant, user, plan_id, keys: Sequence[str]) -> None:
        with self._db.tx() as conn:
            conn.executemany("DELETE FROM working WHERE tenant = ? AND user = ? AND plan_id = ? AND key = ?",
                             [(tenant, user, plan_id, k) for k in keys])

    # -- semantic memories' content-hash pointers -----------------------------------------------

    def add_semantic_hash(self, tenant, user, digest, key):
        with self._db.tx() as conn:
            conn.execute("INSERT OR IGNORE INTO semantic_hashes (tenant, user, digest, key) VALUES (?, ?, ?, ?)",
                         (tenant, user, digest, key))

    def semantic_hash_keys(self, tenant, user, digest):
        rows = self._db.conn().execute(
            "SELECT key FROM semantic_hashes WHERE tenant = ? AND user = ? AND digest = ? ORDER BY key",
            (tenant, user, digest)).fetchall()
        return [r[0] for r in rows]

    def drop_semantic_hash(self, tenant, user, digest, key):
        with self._db.tx() as conn:
            conn.execute("DELETE FROM semantic_hashes WHERE tenant = ? AND user = ? AND digest = ? AND key = ?",
                         (tenant, user, digest, key))

    def ping(self) -> None:
        self._db.conn().execute("SELECT 1").fetchone()


def _check(current: Any, previous: Any) -> None:
    if (current.version if current else None) != (previous.version if previous else None):
        raise StaleRecord()


def _get_task(conn: sqlite3.Connection, tenant: str, task_id: str) -> TaskRecord | None:
    row = conn.execute(f"SELECT {_TASK} FROM task_contexts WHERE tenant = ? AND task_id = ?",
                       (tenant, task_id)).fetchone()
    return _task_of(row) if row is not None else None


def _task_of(row: Any) -> TaskRecord:
    return TaskRecord(tenant=row[0], task_id=row[1], creator=row[2], plan_id=row[3], event_type=row[4],
                      response_event=row[5], response_topic=row[6], sub_tasks=tuple(json.loads(row[7])),
                      sealed=bytes(row[8]), version=row[9], created_at=from_epoch_us(row[10]),
                      updated_at=from_epoch_us(row[11]))


def _get_plan(conn: sqlite3.Connection, tenant: str, user: str, plan_id: str) -> PlanRecord | None:
    row = conn.execute(f"SELECT {_PLAN} FROM plans WHERE tenant = ? AND user = ? AND plan_id = ?",
                       (tenant, user, plan_id)).fetchone()
    return _plan(row) if row else None


def _plan(row: Sequence[Any]) -> PlanRecord:
    return PlanRecord(tenant=row[0], user=row[1], plan_id=row[2], goal_event=row[3], status=row[4],
                      sealed=bytes(row[5]), version=row[6], created_at=from_epoch_us(row[7]),
                      updated_at=from_epoch_us(row[8]))


def _working(row: Sequence[Any]) -> WorkingRecord:
    return WorkingRecord(tenant=row[0], user=row[1], plan_id=row[2], key=row[3], sealed=bytes(row[4]),
                         version=row[5], updated_at=from_epoch_us(row[6]),
                         expires_at=from_epoch_us(row[7]) if row[7] is not None else None)
