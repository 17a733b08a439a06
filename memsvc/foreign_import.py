"""`memsvc convert`: what other memory stores hold, as a memsvc export file (docs/export-format.md,
"Converting from other stores") that `memsvc import` then takes.

- LangGraph `SqliteStore`: its database file (the `store` table).
- LangGraph `PostgresStore`: its `store` table as CSV with a header (`\\copy store to 'store.csv'
  csv header`) or as JSON Lines (`\\copy (select row_to_json(s) from store s) to 'store.jsonl'`).
- LangGraph `InMemoryStore`: its items as JSON (`[item.dict() for ...]`, a list or one per line).
- mem0: what `Memory.get_all(...)` answers (`{"results": [...]}` or the list), or a file of
  several, one per line.

Every item becomes a `memory` record, version 1 with a new id, keeping its times and expiry. The
source is plaintext already; so is the file written (import it, then delete it).
"""

from __future__ import annotations

import csv
import json
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memsvc.core.export_format import ExportHeader, LineWriter
from memsvc.core.models import to_rfc3339
from memsvc.service.langgraph_store_api import ttl_seconds_of

__all__ = ["SOURCES", "convert", "ConversionError"]

SOURCES = ("langgraph-sqlite", "langgraph-postgres", "langgraph-memory", "mem0")
_STORE_COLUMNS = ("prefix", "key", "value", "created_at", "updated_at", "expires_at", "ttl_minutes")


class ConversionError(Exception):
    """The source is not what its kind says: where, and what was expected."""


def convert(source_kind: str, source: Path, out: Path, *, tenant: str, default_user: str | None) -> dict[str, int]:
    """Write `source` as an export file for `tenant` at `out`; the records written, per kind."""
    records = {"langgraph-sqlite": lambda: _langgraph_rows(_sqlite_rows(source)),
               "langgraph-postgres": lambda: _langgraph_rows(_postgres_rows(source)),
               "langgraph-memory": lambda: _langgraph_items(source),
               "mem0": lambda: _mem0(source, default_user)}[source_kind]
    writer = LineWriter()
    header = ExportHeader(f"converted from {source_kind}", tenant, {"tenant": True},
                          to_rfc3339(datetime.now(timezone.utc)) or "")
    partial = out.with_name(out.name + ".partial")
    try:
        with open(partial, "wb") as file:
            file.write(writer.lines([header.to_json()]))
            for record in records():
                file.write(writer.lines([record]))
            file.write(writer.trailer())
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(out)
    return dict(writer.counts)


def _memory(namespace: list[str], key: str, value: Any, *, created_at: datetime | None, updated_at: datetime | None,
            expires_at: datetime | None = None, ttl_seconds: int | None = None) -> dict[str, Any]:
    now = datetime.now(timezone.utc)
    created = created_at or updated_at or now
    return {"kind": "memory", "namespace": namespace, "key": key, "id": str(uuid.uuid4()), "version": 1,
            "value": value if isinstance(value, dict) else {"value": value}, "attributes": None,
            "index_fields": None, "created_at": to_rfc3339(created), "updated_at": to_rfc3339(updated_at or created),
            "expires_at": to_rfc3339(expires_at), "ttl_seconds": ttl_seconds, "access_count": 0,
            "last_accessed_at": None}


def _sqlite_rows(path: Path) -> Iterator[dict[str, Any]]:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(store)")}
    except sqlite3.Error:
        raise ConversionError(f"{path} is not a SQLite database") from None
    if not {"prefix", "key", "value"} <= columns:
        raise ConversionError(f"{path} has no LangGraph `store` table (prefix, key, value, ...)")
    wanted = [c for c in _STORE_COLUMNS if c in columns]
    try:
        for row in conn.execute(f"SELECT {', '.join(wanted)} FROM store ORDER BY prefix, key"):
            yield dict(zip(wanted, row))
    finally:
        conn.close()


def _postgres_rows(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8", newline="") as file:
        first = file.readline()
        file.seek(0)
        if first.lstrip().startswith("{"):
            for number, line in enumerate(file, 1):
                if line.strip():
                    yield _json(line, path, number)
        else:
            yield from csv.DictReader(file)


def _langgraph_rows(rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """LangGraph keeps a namespace as its segments joined with "." (a segment never holds one),
    and the value as JSON text (jsonb in Postgres)."""
    for number, row in enumerate(rows, 1):
        try:
            value = row["value"] if isinstance(row["value"], dict) else json.loads(row["value"])
            ttl_minutes = row.get("ttl_minutes")
            yield _memory(str(row["prefix"]).split("."), str(row["key"]), value,
                          created_at=_time(row.get("created_at")), updated_at=_time(row.get("updated_at")),
                          expires_at=_time(row.get("expires_at")),
                          ttl_seconds=ttl_seconds_of(float(ttl_minutes)) if ttl_minutes not in (None, "") else None)
        except (KeyError, TypeError, ValueError, OverflowError):
            raise ConversionError(f"row {number} of the store is not a LangGraph item "
                                  "(prefix, key, JSON value, ISO times)") from None


def _langgraph_items(path: Path) -> Iterator[dict[str, Any]]:
    for number, item in enumerate(_documents(path), 1):
        try:
            yield _memory([str(s) for s in item["namespace"]], str(item["key"]), item["value"],
                          created_at=_time(item.get("created_at")), updated_at=_time(item.get("updated_at")))
        except (KeyError, TypeError, ValueError):
            raise ConversionError(f"item {number} is not a LangGraph item (namespace, key, value, ISO times)") from None


def _mem0(path: Path, default_user: str | None) -> Iterator[dict[str, Any]]:
    """A mem0 memory becomes a typed memory (`content`, type `fact`, source `mem0`) in the layer its
    ids name: an agent's (`agent_id`), a session's (`run_id`), else the user's; its metadata and
    hash are kept beside the content."""
    for number, memory in enumerate(_documents(path), 1):
        try:
            user = memory.get("user_id") or default_user
            if not user:
                raise ConversionError(f"memory {number} names no user_id; give --user-id")
            if memory.get("agent_id"):
                namespace = ["user", user, "agents", memory["agent_id"]]
            elif memory.get("run_id"):
                namespace = ["user", user, "sessions", memory["run_id"]]
            else:
                namespace = ["user", user, "memories"]
            metadata = memory.get("metadata") or {}
            value = {"content": str(memory["memory"]), "type": "fact", "source": "mem0",
                     "tags": [str(c) for c in memory.get("categories") or metadata.get("categories") or []],
                     "metadata": metadata, "mem0_hash": memory.get("hash")}
            yield _memory(namespace, f"mem0-{memory['id']}", value, created_at=_time(memory.get("created_at")),
                          updated_at=_time(memory.get("updated_at")))
        except (KeyError, TypeError, ValueError):
            raise ConversionError(f"memory {number} is not a mem0 memory (id, memory, ...)") from None


def _documents(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a JSON file (a list, `{"results": [...]}`, or one object) or of JSON Lines."""
    text = path.read_text(encoding="utf-8")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                yield from _documents_of(_json(line, path, number))
        return
    yield from _documents_of(whole)


def _documents_of(doc: Any) -> Iterator[dict[str, Any]]:
    if isinstance(doc, dict) and isinstance(doc.get("results"), list):
        doc = doc["results"]
    for item in doc if isinstance(doc, list) else [doc]:
        if not isinstance(item, dict):
            raise ConversionError("expected JSON objects")
        yield item


def _json(line: str, path: Path, number: int) -> dict[str, Any]:
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        raise ConversionError(f"line {number} of {path} is not JSON") from None
    if not isinstance(doc, dict):
        raise ConversionError(f"line {number} of {path} is not a JSON object")
    return doc


def _time(value: Any) -> datetime | None:
    """A time as LangGraph's stores and mem0 write them: ISO 8601 text (Postgres' `+00` offset
    too), a `datetime`, or None; a time without an offset is UTC."""
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        parsed = value
    else:
        text = str(value).strip().replace(" ", "T", 1)
        if len(text) > 3 and text[-3] in "+-" and text[-2:].isdigit() and ":" not in text[-6:]:
            text += ":00"
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed.astimezone(timezone.utc)

