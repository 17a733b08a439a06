"""`UserDataStores` over the local data dir: one user's rows in every SQLite file, removed with
SQL a page at a time.

Rows are found by the user's namespace range (`["user", U, ...]`, through each table's namespace
column) or by the user id column of the tables keyed by it. The in-memory indexes (vectors,
keyword documents, field tokens) follow the files: their triggers log every removed row, and
each process catches up with the log before its next query. Every file deletes securely
(`PRAGMA secure_delete`, `sqlite_db.SqliteFile`), so a removed row's bytes are overwritten, and
`finish` checkpoints and truncates each file's write-ahead log, which holds older copies of the
pages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from memsvc.adapters.local.sqlite_db import SqliteFile
from memsvc.core.layers import layer_of
from memsvc.core.models import RememberJob
from memsvc.core.namespaces import SEP, decode_namespace, encode_namespace, prefix_range
from memsvc.core.transfer_jobs import job_of_doc, may_hold_user
from memsvc.service.user_erasure import RECORD_PREFIX, user_config_names

__all__ = ["LocalUserDataStores", "STORES"]

STORES = ("jobs", "sessions", "task_contexts", "plans", "working_memory", "semantic_hashes", "rate_limits",
          "user_state", "memories", "change_feed", "vectors", "keyword_documents", "field_tokens", "graph",
          "timeline", "transfers")
# Each graph table and its primary key (`sqlite_graph`).
_GRAPH_TABLES = {"graph_mentions": "(tenant, ns, key, entity_id)",
                 "graph_edges": "(tenant, source_id, ns, type, target_id, key)",
                 "graph_nodes": "(tenant, entity_id, ns)", "graph_memories": "(tenant, ns, key)"}
_MORE = "more"
# A parked change (`dead_letters.change`, JSON) holds its item under `new`.
_PARKED_ITEM = "json_extract(change, '$.new')"
_FILES = ("memsvc.db", "workflow.db", "jobs.db", "rate_limits.db", "vectors.db", "keywords.db", "graph.db",
          "events.db", "transfers.db")


class LocalUserDataStores:
    """`job_users` reads the user ids a queued job acts for (its caller, and the user it writes
    for): a job keeps them sealed."""

    def __init__(self, data_dir: Path, *, job_users: Callable[[RememberJob], set[str]]) -> None:
        self._data_dir = data_dir
        self._files: dict[str, SqliteFile] = {}
        self._job_users = job_users
        self.stores = STORES

    def erase(self, tenant: str, user_id: str, store: str, *, erasure_id: str, limit: int,
              cursor: str | None) -> tuple[int, str | None]:
        """Each page removes the next rows: the cursor only says whether a page was full."""
        removed = self._erase(tenant, user_id, store, erasure_id, limit)
        return removed, (_MORE if removed >= limit else None)

    def _erase(self, tenant: str, user_id: str, store: str, erasure_id: str, limit: int) -> int:
        exact, lo, hi = prefix_range(("user", user_id))  # type: ignore[misc]
        in_user = "(ns = ? OR (ns >= ? AND ns < ?))"
        under = (exact, lo, hi)
        if store == "jobs":
            return self._erase_jobs(tenant, user_id, limit)
        if store == "sessions":
            return self._delete("memsvc.db", "sessions", "(tenant, user_id, session_id)",
                                "tenant = ? AND user_id = ?", (tenant, user_id), limit)
        if store == "task_contexts":
            return self._erase_task_contexts(tenant, user_id, limit)
        if store in ("plans", "working_memory", "semantic_hashes"):
            table, columns = {"plans": ("plans", "(tenant, user, plan_id)"),
                              "working_memory": ("working", "(tenant, user, plan_id, key)"),
                              "semantic_hashes": ("semantic_hashes", "(tenant, user, digest, key)")}[store]
            return self._delete("workflow.db", table, columns, "tenant = ? AND user = ?", (tenant, user_id), limit)
        if store == "rate_limits":
            return self._delete("rate_limits.db", "rate_counters", "(tenant, subject, window)",
                                "tenant = ? AND subject = ?", (tenant, user_id), limit)
        if store == "user_state":
            names = user_config_names(user_id)
            return self._delete("memsvc.db", "config", "(tenant, name)",
                                f"tenant = ? AND name IN ({', '.join('?' * len(names))})", (tenant, *names), limit)
        if store == "memories":
            return self._erase_items(tenant, in_user, under, limit)
        if store == "change_feed":
            return self._erase_changes(tenant, user_id, limit)
        if store == "vectors":
            return self._delete("vectors.db", "vectors", "rowid", f"tenant = ? AND {in_user}", (tenant, *under), limit)
        if store == "keyword_documents":
            return self._delete("keywords.db", "docs", "(tenant, memory_id)", f"tenant = ? AND {in_user}",
                                (tenant, *under), limit)
        if store == "field_tokens":
            return self._delete("keywords.db", "field_docs", "(tenant, memory_id)", f"tenant = ? AND {in_user}",
                                (tenant, *under), limit)
        if store == "graph":
            return self._erase_graph(tenant, in_user, under, limit)
        if store == "timeline":
            return self._strip_events(tenant, user_id, erasure_id, limit)
        if store == "transfers":
            return self._erase_transfers(tenant, user_id, limit)
        raise ValueError(f"no store named {store!r}")

    def finish(self, tenant: str) -> None:
        for name in _FILES:
            if (self._data_dir / name).exists():
                self._file(name).conn().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()

    def left_for_another_pass(self, tenant: str, user_id: str) -> bool:
        """No store here leaves a row for a later pass: each finds the user's rows directly."""
        return False

    def running(self) -> list[tuple[str, str]]:
        rows = self._file("memsvc.db").conn().execute(
            "SELECT tenant, name FROM config WHERE substr(name, 1, ?) = ? "
            "AND json_extract(doc, '$.status') = 'running'", (len(RECORD_PREFIX), RECORD_PREFIX)).fetchall()
        return [(tenant, name) for tenant, name in rows]

    # -- stores ------------------------------------------------------------------------------

    def _erase_transfers(self, tenant: str, user_id: str, limit: int) -> int:
        """Export and import jobs whose file may hold the user (`may_hold_user`), with their parts:
        the service keeps no copy of an erased user. Counted in jobs."""
        if not (self._data_dir / "transfers.db").exists():
            return 0
        db = self._file("transfers.db")
        rows = db.conn().execute("SELECT job_id, version, doc FROM transfer_jobs WHERE tenant = ?",
                                 (tenant,)).fetchall()
        jobs = [job_id for job_id, version, doc in rows
                if may_hold_user(job_of_doc(tenant, job_id, version, json.loads(doc), b""), user_id)][:limit]
        with db.tx() as conn:
            for job_id in jobs:
                conn.execute("DELETE FROM transfer_parts WHERE tenant = ? AND job_id = ?", (tenant, job_id))
                conn.execute("DELETE FROM transfer_jobs WHERE tenant = ? AND job_id = ?", (tenant, job_id))
        return len(jobs)

    def _erase_jobs(self, tenant: str, user_id: str, limit: int) -> int:
        """A queued job keeps its caller and request sealed: each of the tenant's jobs is opened
        to see whose it is (the queue is short: jobs run within seconds)."""
        db = self._file("jobs.db")
        rows = db.conn().execute("SELECT candidate_id, sealed, attempts FROM remember_jobs WHERE tenant = ?",
                                 (tenant,)).fetchall()
        users = [cid for cid, sealed, attempts in rows
                 if user_id in self._job_users(RememberJob(tenant, cid, bytes(sealed), attempts))][:limit]
        with db.tx() as conn:
            conn.executemany("DELETE FROM remember_jobs WHERE tenant = ? AND candidate_id = ?",
                             [(tenant, cid) for cid in users])
        return len(users)

    def _erase_task_contexts(self, tenant: str, user_id: str, limit: int) -> int:
        with self._file("workflow.db").tx() as conn:
            tasks = [task_id for (task_id,) in conn.execute(
                "SELECT task_id FROM task_contexts WHERE tenant = ? AND creator = ? LIMIT ?", (tenant, user_id, limit))]
            conn.executemany("DELETE FROM sub_tasks WHERE tenant = ? AND task_id = ?", [(tenant, t) for t in tasks])
            conn.executemany("DELETE FROM task_contexts WHERE tenant = ? AND task_id = ?",
                             [(tenant, t) for t in tasks])
        return len(tasks)

    def _erase_items(self, tenant: str, in_user: str, under: tuple[str, ...], limit: int) -> int:
        """Items of every version state (live, expired, tombstones), with the layers' usage
        counters moved as `SqliteItemStore.write` moves them."""
        with self._file("memsvc.db").tx() as conn:
            removed = conn.execute(
                "DELETE FROM items WHERE (tenant, ns, key) IN "
                f"(SELECT tenant, ns, key FROM items WHERE tenant = ? AND {in_user} LIMIT ?) "
                "RETURNING ns, deleted IS NULL, coalesce(length(value_ct), 0) + coalesce(length(attributes_ct), 0)",
                (tenant, *under, limit)).fetchall()
            usage: dict[str, list[int]] = {}
            for ns, live, size in removed:
                if live:
                    layer = layer_of(decode_namespace(ns))
                    total = usage.setdefault(layer.name if layer is not None else "", [0, 0])
                    total[0] += 1
                    total[1] += size
            conn.executemany("UPDATE usage SET items = max(items - ?, 0), bytes = max(bytes - ?, 0) "
                             "WHERE tenant = ? AND layer = ?",
                             [(items, size, tenant, layer) for layer, (items, size) in usage.items()])
        return len(removed)

    def _erase_changes(self, tenant: str, user_id: str, limit: int) -> int:
        """The change feed's rows of the user's items that a consumer has not read yet, and the
        parked ones (their records carry the namespace and the sealed value)."""
        mine = "json_extract({item}, '$.namespace[0]') = 'user' AND json_extract({item}, '$.namespace[1]') = ?"
        with self._file("memsvc.db").tx() as conn:
            changes = conn.execute(
                "DELETE FROM changes WHERE seq IN (SELECT seq FROM changes WHERE tenant = ? AND "
                f"{mine.format(item='new')} LIMIT ?)", (tenant, user_id, limit)).rowcount
            parked = conn.execute(
                "DELETE FROM dead_letters WHERE (consumer, seq) IN (SELECT consumer, seq FROM dead_letters "
                f"WHERE tenant = ? AND {mine.format(item=_PARKED_ITEM)} LIMIT ?)",
                (tenant, user_id, max(limit - changes, 0))).rowcount
        return changes + parked

    def _erase_graph(self, tenant: str, in_user: str, under: tuple[str, ...], limit: int) -> int:
        """Derived and explicit rows alike: every node, mention, edge and memory marker of the
        user's namespaces (an edge never leaves its namespace)."""
        removed = 0
        with self._file("graph.db").tx() as conn:
            for table, key in _GRAPH_TABLES.items():
                if removed < limit:
                    removed += conn.execute(
                        f"DELETE FROM {table} WHERE {key} IN (SELECT {key.strip('()')} FROM {table} WHERE tenant = ? "
                        f"AND {in_user} LIMIT ?)", (tenant, *under, limit - removed)).rowcount
        return removed

    def _strip_events(self, tenant: str, user_id: str, erasure_id: str, limit: int) -> int:
        """Each of the user's entries stays where it is in the tenant's timeline (its stamp, kind,
        memory id, version and times) without anything of the user: its namespace becomes
        `["erased", <erasure id>]`, its key the memory id, and value, attributes, policy
        attributes and reason go."""
        root = SEP.join(encode_namespace(("user", user_id)).split(SEP)[:2])
        erased = encode_namespace(("erased", erasure_id))
        with self._file("events.db").tx() as conn:
            return conn.execute(
                "UPDATE events SET root = ?, ns = ?, key = memory_id, value_ct = NULL, attributes_ct = NULL, "
                "policy_attributes = '{}', reason = NULL WHERE (tenant, stamp, id) IN "
                "(SELECT tenant, stamp, id FROM events WHERE tenant = ? AND root = ? LIMIT ?)",
                (erased, erased, tenant, root, limit)).rowcount

    # -- plumbing ----------------------------------------------------------------------------

    def _delete(self, file: str, table: str, key: str, where: str, params: tuple[object, ...], limit: int) -> int:
        with self._file(file).tx() as conn:
            return conn.execute(f"DELETE FROM {table} WHERE {key} IN (SELECT {key.strip('()')} FROM {table} "
                                f"WHERE {where} LIMIT ?)", (*params, limit)).rowcount

    def _file(self, name: str) -> SqliteFile:
        if name not in self._files:
            self._files[name] = SqliteFile(self._data_dir / name, "")
        return self._files[name]

