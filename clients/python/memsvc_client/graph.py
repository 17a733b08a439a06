"""The knowledge graph as client methods (`/v1/graph/...`, issue 15). `MemsvcClient` and
`AsyncMemsvcClient` take these methods from `GraphMethods`; each builds one request and hands it
to the client's `_run` (the answer, or a coroutine of it on the async client).

An endpoint of `related`, `path` and `neighbours` is an entity's name (a `str`) or a memory, given as its
`(namespace, key)`. Errors are the store's: `NotFoundError` (404: a relation's entity is missing,
`details.missing` says which; a memory endpoint that does not exist), `InvalidArgumentError`
(400), `AuthError` (403: not yours to read or write).

Valid time (issue 25): `as_of` (RFC 3339 with an offset) on `related`, `path` and `neighbours` walks the
relations that held then and answers the memories that held then; without it, the relations not
ended by now. `put_relation` takes `valid_from`/`valid_to`; writing a relation again replaces them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

__all__ = ["GraphMethods", "Endpoint", "EntityType", "RelationType"]

EntityType = Literal["PERSON", "PROJECT", "ORGANIZATION", "TICKET", "SYSTEM", "PLACE", "EVENT", "CONCEPT"]
RelationType = Literal["WORKS_ON", "CAUSED_BY", "RELATES_TO", "DEPENDS_ON", "PART_OF", "OWNS", "USES", "BLOCKS",
                       "FIXES", "MEMBER_OF", "REPORTS_TO", "LOCATED_IN"]
Endpoint = str | tuple[Sequence[str], str]  # an entity's name, or a memory's (namespace, key)


def _endpoint(end: Endpoint) -> dict[str, Any]:
    if isinstance(end, str):
        return {"entity": end}
    namespace, key = end
    return {"memory": {"namespace": list(namespace), "key": key}}


def _body(**fields: str | None) -> dict[str, str]:
    """The optional fields that were given (one left out is absent, never null)."""
    return {name: value for name, value in fields.items() if value is not None}


def _ns(namespace: Sequence[str]) -> list[tuple[str, str]]:
    return [("ns", segment) for segment in namespace]


class GraphMethods:
    _run: Callable[[tuple[Any, ...]], Any]

    def find_entities(self, namespace_prefix: Sequence[str], names: Sequence[str]) -> Any:
        """`POST /v1/graph/entities/find`: `{"entities": [{"id", "name", "type", "namespaces", "explicit"}]}`."""
        body = {"namespace_prefix": list(namespace_prefix), "names": list(names)}
        return self._run(("POST", "/v1/graph/entities/find", (), body))

    def related(self, namespace_prefix: Sequence[str], start: Endpoint, *, max_hops: int = 2,
                limit: int = 20, as_of: str | None = None) -> Any:
        """`POST /v1/graph/related`: `{"memories": [... "hops", "via"], "depth", "truncated"}`, nearest first."""
        body = {"namespace_prefix": list(namespace_prefix), "from": _endpoint(start), "max_hops": max_hops,
                "limit": limit, **_body(as_of=as_of)}
        return self._run(("POST", "/v1/graph/related", (), body))

    def path(self, namespace_prefix: Sequence[str], start: Endpoint, goal: Endpoint, *, max_hops: int = 4,
             as_of: str | None = None) -> Any:
        """`POST /v1/graph/path`: `{"found", "hops", "entities", "steps", "truncated"}`; each step's edges
        carry their `valid_from`/`valid_to`."""
        body = {"namespace_prefix": list(namespace_prefix), "from": _endpoint(start), "to": _endpoint(goal),
                "max_hops": max_hops, **_body(as_of=as_of)}
        return self._run(("POST", "/v1/graph/path", (), body))

    def neighbours(self, namespace_prefix: Sequence[str], entity: Endpoint, *,
                   direction: Literal["out", "in", "both"] = "both", relation: RelationType | None = None,
                   as_of: str | None = None, limit: int = 50, cursor: str | None = None) -> Any:
        """`POST /v1/graph/neighbours`: `{"edges": [{"relation", "direction", "entity", "namespace", "memory",
        "valid_from", "valid_to"}], "next_cursor"}`, a page of the entity's relations (of each entity a
        memory names); pass `next_cursor` back as `cursor` for the next page of the same query."""
        body = {"namespace_prefix": list(namespace_prefix), "entity": _endpoint(entity), "direction": direction,
                "limit": limit, **_body(relation=relation, as_of=as_of, cursor=cursor)}
        return self._run(("POST", "/v1/graph/neighbours", (), body))

    def put_entity(self, namespace: Sequence[str], name: str, type: EntityType = "CONCEPT") -> Any:
        """`PUT /v1/graph/entities`: the entity, written explicitly."""
        return self._run(("PUT", "/v1/graph/entities", (), {"namespace": list(namespace), "name": name,
                                                            "type": type}))

    def delete_entity(self, namespace: Sequence[str], name: str) -> Any:
        """`DELETE /v1/graph/entities`: idempotent; a memory's entities go with the memory."""
        return self._run(("DELETE", "/v1/graph/entities", [*_ns(namespace), ("name", name)], None))

    def put_relation(self, namespace: Sequence[str], source: str, type: RelationType, target: str, *,
                     valid_from: str | None = None, valid_to: str | None = None) -> Any:
        """`PUT /v1/graph/relations`: both entities must exist in `namespace`. `valid_from` (default: now)
        and `valid_to` (default: open), RFC 3339: when the relation holds."""
        body = {"namespace": list(namespace), "source": source, "type": type, "target": target,
                **_body(valid_from=valid_from, valid_to=valid_to)}
        return self._run(("PUT", "/v1/graph/relations", (), body))

    def delete_relation(self, namespace: Sequence[str], source: str, type: RelationType, target: str) -> Any:
        """`DELETE /v1/graph/relations`: idempotent."""
        query = [*_ns(namespace), ("source", source), ("type", type), ("target", target)]
        return self._run(("DELETE", "/v1/graph/relations", query, None))

    def graph_integrity_scan(self) -> Any:
        """`POST /admin/v1/graph/integrity-scan` (admin): `{"removed": {...}}`."""
        return self._run(("POST", "/admin/v1/graph/integrity-scan", (), None))
