"""The LangGraph Platform store API (`/store/...`, issue 28): LangGraph's own request shapes,
answered by our use cases.

LangGraph's SDKs (`langgraph_sdk`'s `client.store`, the JS SDK's `StoreClient`) speak this API to a
LangGraph server. Each operation here translates its fields onto our commands and makes one call
to `Memories` or `Search`, so authorization, tenant and user isolation, namespace ownership,
validation and limits are exactly those of `/v1/memories`. The translation, field by field
(docs/langgraph-and-tools.md, "LangGraph Platform store API"):

- `index`: false, or a list of paths, is our `index_fields`; LangGraph's `"$"` (the whole value)
  is our default, every string leaf.
- `ttl` is in minutes; ours is `ttl_seconds`, rounded up, at least 1 s.
- `refresh_ttl` left out means true, as LangGraph's `TTLConfig.refresh_on_read` defaults.
- A `filter` object without operators (`$`-names or our bare ones) matches field by field
  (LangGraph's stores), so it becomes dot paths (`{"meta": {"lang": "en"}}` is `{"meta.lang": "en"}`);
  a path reached twice is refused.
- A put is searchable when it answers (`sync_index`), as LangGraph's stores embed on put.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictFloat, StrictStr, StringConstraints

from memsvc.core.errors import InvalidArgument, NotFound
from memsvc.core.filters import OPERATORS
from memsvc.core.models import Caller, Memory
from memsvc.core.namespaces import MAX_KEY_BYTES
from memsvc.core.validation import MAX_DEPTH, WHITESPACE, Command, Integer, NoIndexing
from memsvc.service.memories import (KEY_RULES, MAX_TTL_SECONDS, VALUE_RULES, IndexPaths, Memories, PutMemory,
                                     check_nesting)
from memsvc.service.search import (FILTER_RULES, FILTER_SCHEMA, MAX_OFFSET, MAX_QUERY_CHARS, ListNamespaces, Search,
                                   SearchQuery, SearchResult)

__all__ = ["LangGraphStoreApi", "StorePutItem", "StoreGetItem", "StoreDeleteItem", "StoreSearchItems",
           "StoreListNamespaces", "ttl_seconds_of", "filter_of", "MAX_TTL_MINUTES"]

MAX_TTL_MINUTES = MAX_TTL_SECONDS // 60
WHOLE_VALUE = "$"  # LangGraph's index path for the whole value
_LABEL_RULES = "non-empty, without '.' (LangGraph's namespace labels: GET joins them with '.')"
# A LangGraph namespace label: what their server and SDKs accept.
Label = Annotated[StrictStr, StringConstraints(min_length=1, pattern=r"^[^.]+$"), Field(description=_LABEL_RULES)]
_DEPTH = f"max_depth is the tenant's setting (default 10, at most {MAX_DEPTH})"
StoreNamespace = Annotated[list[Label], Field(min_length=1, max_length=MAX_DEPTH,
                                              description=f"1..max_depth labels; {_DEPTH}")]
StorePrefix = Annotated[list[Label], Field(max_length=MAX_DEPTH, description=f"0..max_depth labels; {_DEPTH}")]
# `GET /store/items?namespace=a.b.c`: the labels joined with '.', as LangGraph's SDKs send them.
DottedNamespace = Annotated[StrictStr, StringConstraints(pattern=rf"^[^.]+(\.[^.]+){{0,{MAX_DEPTH - 1}}}$")]
StoreKey = Annotated[StrictStr, Field(min_length=1, max_length=MAX_KEY_BYTES, description=KEY_RULES)]
_INDEX = ("false (or []): not indexed; a list of paths to embed (a.b, arr[*].c); \"$\" (LangGraph's whole value) "
          "or null: our default, every string leaf")
_TTL = f"minutes (LangGraph's unit), more than 0 and at most {MAX_TTL_MINUTES}; null: never expires"
_REFRESH = "restart the TTL of what is read; left out or null: true (LangGraph's refresh_on_read default)"
_STORE_FILTER = (FILTER_RULES + "; an object without operators matches field by field, as in LangGraph's stores "
                 "(so its names are non-empty and the operator objects inside it valid)")
_NOT_BLANK = re.compile(f"[^{WHITESPACE}]")


class StorePutItem(Command):
    """`PUT /store/items`."""

    namespace: StoreNamespace
    key: StoreKey
    value: dict[StrictStr, Any] = Field(description=VALUE_RULES)
    index: IndexPaths | NoIndexing | None = Field(None, description=_INDEX)
    ttl: Annotated[StrictFloat, Field(gt=0, le=MAX_TTL_MINUTES)] | None = Field(None, description=_TTL)


class StoreGetItem(Command):
    """`GET /store/items`."""

    namespace: DottedNamespace = Field(description="The namespace's labels joined with '.' (user.alice.notes)")
    key: StoreKey
    refresh_ttl: StrictBool = Field(True, description="Restart the item's TTL (LangGraph refresh_on_read, default "
                                                      "true)")

    @property
    def labels(self) -> list[str]:
        return self.namespace.split(".")


class StoreDeleteItem(Command):
    """`DELETE /store/items`."""

    namespace: StoreNamespace
    key: StoreKey


class StoreSearchItems(Command):
    """`POST /store/items/search`."""

    namespace_prefix: StorePrefix = []
    filter: dict[StrictStr, Any] | None = Field(None, json_schema_extra=FILTER_SCHEMA, description=_STORE_FILTER)
    limit: Integer = Field(10, ge=1, le=100)
    offset: Integer = Field(0, ge=0, le=MAX_OFFSET)
    query: StrictStr | None = Field(None, description=f"rank by meaning and keywords (hybrid), cut to "
                                                      f"{MAX_QUERY_CHARS:,} characters; left out, null or blank: "
                                                      "filter only (as LangGraph's stores)")
    refresh_ttl: StrictBool | None = Field(None, description=_REFRESH)


class StoreListNamespaces(Command):
    """`POST /store/namespaces`."""

    prefix: StorePrefix | None = Field(None, description="labels the namespace starts with ('*': any one label)")
    suffix: StorePrefix | None = Field(None, description="labels the namespace ends with ('*': any one label)")
    max_depth: Integer | None = Field(None, ge=1, description="truncate the namespaces to this depth")
    limit: Integer = Field(100, ge=1, le=1000)
    offset: Integer = Field(0, ge=0, le=MAX_OFFSET)


class LangGraphStoreApi:
    """LangGraph's store operations on our use cases."""

    def __init__(self, *, memories: Memories, search: Search) -> None:
        self._memories = memories
        self._search = search

    def put_item(self, caller: Caller, cmd: StorePutItem) -> Memory:
        index = cmd.index
        if isinstance(index, list) and WHOLE_VALUE in index:
            index = None
        put = PutMemory(namespace=cmd.namespace, key=cmd.key, value=cmd.value, index_fields=index,
                        ttl_seconds=ttl_seconds_of(cmd.ttl), sync_index=index not in (False, []))
        with _named_as_langgraph_names_them():
            return self._memories.put(caller, put)

    def get_item(self, caller: Caller, q: StoreGetItem) -> Memory | None:
        """None when absent, deleted or expired: LangGraph's servers answer `null`, and its SDKs
        return None, as `BaseStore.get` does."""
        try:
            return self._memories.get(caller, q.labels, q.key, refresh_ttl=q.refresh_ttl)
        except NotFound:
            return None

    def delete_item(self, caller: Caller, cmd: StoreDeleteItem) -> None:
        self._memories.delete(caller, cmd.namespace, cmd.key)

    def search_items(self, caller: Caller, q: StoreSearchItems, *, request_id: str = "") -> SearchResult:
        # SearchQuery cuts the query to MAX_QUERY_CHARS itself.
        ranked = {"query": q.query} if q.query is not None and _NOT_BLANK.search(q.query) else {}
        query = SearchQuery(namespace_prefix=q.namespace_prefix, filter=filter_of(q.filter) if q.filter else None,
                            limit=q.limit, offset=q.offset, refresh_ttl=q.refresh_ttl is not False, **ranked)
        return self._search.answer(caller, query, request_id=request_id)

    def list_namespaces(self, caller: Caller, q: StoreListNamespaces) -> list[tuple[str, ...]]:
        return self._search.list_namespaces(caller, ListNamespaces(
            prefix=q.prefix or [], suffix=q.suffix or [], max_depth=q.max_depth, limit=q.limit, offset=q.offset))


def ttl_seconds_of(minutes: float | None) -> int | None:
    """LangGraph's `ttl` (minutes) as our `ttl_seconds`: rounded up, at least 1 s (as `memsvc-client`'s
    MemsvcStore rounds it). round() first, so 5/60 minutes is 5 s, not 6 from 5.000000000000001."""
    if minutes is None:
        return None
    return min(MAX_TTL_SECONDS, max(1, math.ceil(round(minutes * 60, 6))))


def filter_of(spec: Mapping[str, Any]) -> dict[str, Any]:
    """LangGraph's filter in ours: operator objects and scalars as they are; an object without
    operators, which LangGraph's stores match field by field, as dot paths.

    Nested at most `MAX_NESTING` levels (`check_nesting`, before anything recurses); each path is
    joined once, at its leaf. The paths' names are `parse_filter`'s to check (`{"a": {"": 1}}` is
    `"a."`, refused there). A path reached twice (`{"a.b": 1, "a": {"b": 2}}`) is refused rather
    than one condition silently replacing the other."""
    check_nesting(spec, "filter")
    out: dict[str, Any] = {}

    def walk(names: tuple[str, ...], node: Mapping[str, Any]) -> None:
        for name, value in node.items():
            if isinstance(value, Mapping) and value and not any(_is_operator(k) for k in value):
                walk((*names, name), value)
                continue
            path = ".".join((*names, name))
            if path in out:
                raise InvalidArgument(f"filter names the path {path!r} twice", details={"field": "filter"})
            out[path] = value

    walk((), spec)
    return out


def _is_operator(name: str) -> bool:
    return name.startswith("$") or name in OPERATORS


_LANGGRAPH_NAMES = {"index_fields": "index", "ttl_seconds": "ttl"}


@contextmanager
def _named_as_langgraph_names_them() -> Iterator[None]:
    """A refusal that names one of our fields names LangGraph's instead (`index_fields` is `index`),
    in its details and in its message ("pass index=false")."""
    try:
        yield
    except InvalidArgument as exc:
        ours = exc.details.get("field")
        if ours in _LANGGRAPH_NAMES:
            exc.details["field"] = _LANGGRAPH_NAMES[ours]
            exc.message = exc.message.replace(ours, _LANGGRAPH_NAMES[ours])
            exc.args = (exc.message, *exc.args[1:])
        raise
