"""The knowledge graph on AWS: DynamoDB adjacency lists in the index table (the keyword index's
table: derived rows, no stream), traversed breadth-first by `memsvc.core.graph` in the Lambda
(docs/aws-design.md, "Knowledge graph", has every record, access path, limit and cost).

Four kinds of record, every key starting with the tenant (`<ns>` is the encoded namespace,
`<kh>` 32 hex digits of the SHA-256 of an item key, `<e>` an entity id):

- **adjacency** of an entity, `T#<tenant>#G#<e>`, its sort keys starting with the namespace, so
  everything under a prefix is one sort-key range:
  - a mention, `<ns>\\x1fM\\x1f<kh>`: the memory (`k`, `mid`) names the entity, and carries that
    memory's derived edges touching the entity (`ed`: [source, type, target, valid_from,
    valid_to] each, "" for an open end; a row from before valid time has the first three), so a
    hop reads mentions and edges in one Query;
  - an explicit edge, `<ns>\\x1fX\\x1f<O|I>\\x1f<type>\\x1f<other entity>`, stored at both ends
    (O at the source, I at the target), `vf`/`vt` its valid time when it has one.
- **node**, `T#<tenant>#GN#<shard of e>` / `<e>|<ns>\\x1f`: type, sealed name, `mc` (mentions),
  `x` (explicit), `xe` (explicit edge rows in the entity's adjacency in that namespace). Sharded
  16 ways per tenant, so the integrity scan finds every node with 16 Queries.
- **marker** (`DerivedMemory`), `T#<tenant>#GK#<shard of ns and key>` / `<ns>\\x1f<kh>`: the
  version the key's rows come from, `ents`, the entity ids it mentions (what the next version
  must remove), and `ne`, its derived edges.
- **statistics**, `GSTAT#<0..15>` / `GSTAT`: `nodes`, `edges`, `mentions`, added to after every
  write's transaction (a shard picked at random), for operators (`stats`; /health publishes
  no count). The only rows of no tenant.

A memory's rows change in one `TransactWriteItems` with its marker conditioned on the marker as
read: a replay or an older version changes nothing, and a crash leaves the old rows or the new
ones, never half. The nodes' counters make "drop a node when its last mention goes" atomic
with the mention. What cannot fit one transaction (more than 100 actions: a node to drop that
carries many explicit edges) is trimmed first, explicit edge by edge, in transactions that are
each a valid graph (as `delete_relation` would), then the memory's transaction runs.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from memsvc.adapters.aws.dynamo_store import (batch_get_rows, call_table, conditional_write, query_pages,
                                              transact_or_cancelled)
from memsvc.core.errors import RateLimited
from memsvc.core.graph import DerivedMemory, GraphEdge, GraphNode, Mention, ValidAt
from memsvc.core.namespaces import decode_namespace, encode_namespace

__all__ = ["DynamoGraphStore", "SHARDS", "MAX_ROWS_PER_ENTITY"]

SHARDS = 16  # node and marker partitions per tenant
# Adjacency rows one read of one entity goes through (a hub entity, mentioned by 100,000 memories
# under the prefix, would otherwise cost ~100 MB and seconds per hop): past it, the hop sees the
# entity's first rows in sort-key order (by namespace). ~2,000 rows are ~1 MB, one or two pages.
MAX_ROWS_PER_ENTITY = 2_000
MAX_ATTEMPTS = 8  # per transaction cancelled by a concurrent writer or throttling
_MAX_ACTIONS = 100  # TransactWriteItems' limit
_TRIM = 30  # explicit edges removed per trimming transaction (3 actions each, and the node's)
_WORKERS = 8  # Queries in flight per expand (the client pools 10 connections)
_REPLACE_WRITERS = 8  # keys of a batch replaced at once (the client pools 10 connections)
_END = "\x1f"  # after a namespace in a sort key: sorts after SEP (`\x1e`), so `<ns>\x1f` ends a namespace
_LAST = "\U0010ffff"
_SK = {"#sk": "sk"}


@dataclass(frozen=True)
class _Marker:
    memory_id: str
    version: int
    entity_ids: tuple[str, ...]
    edges: int  # the derived edges of that version (for the statistics)


@dataclass(frozen=True)
class _Node:
    mentions: int
    explicit: bool
    explicit_rows: int


@dataclass
class _NodeChange:
    """One node's part of a transaction (one action per item): counters to add, an upsert, a
    condition on what was read, or its deletion."""

    mentions: int = 0
    explicit_rows: int = 0
    upsert: GraphNode | None = None
    conditions: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    delete: bool = False


class DynamoGraphStore:
    """`GraphStore` on a DynamoDB table (the index table). Thread-safe."""

    def __init__(self, client: Any, table_name: str, *, max_rows_per_entity: int = MAX_ROWS_PER_ENTITY) -> None:
        self._db = client
        self._table = table_name
        self.max_rows_per_entity = max_rows_per_entity
        self._pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="graph")
        self.sleep: Callable[[float], None] = time.sleep  # backoff between contended attempts
        self.random: Callable[[], float] = random.random  # its jitter

    def ping(self) -> None:
        self._call("GetItem", Key={"pk": {"S": "ping"}, "sk": {"S": "ping"}})

    def stats(self) -> dict[str, int]:
        """`nodes`, `edges` and `mentions` over every tenant: the sum of the statistics rows, which
        every write updates in its own transaction (one BatchGetItem of `SHARDS` rows)."""
        keys = [_key(f"GSTAT#{shard}", "GSTAT") for shard in range(SHARDS)]
        rows = batch_get_rows(self._db, self._table, keys, consistent=False)
        return {name: sum(int(r.get(name, {}).get("N", "0")) for r in rows) for name in ("nodes", "edges", "mentions")}

    # -- a memory's rows -------------------------------------------------------------------------

    def replace_memory(self, memory: DerivedMemory, nodes: Sequence[GraphNode], edges: Sequence[GraphEdge]) -> bool:
        return self._apply(memory, nodes, edges, remove=False)

    def replace_many(self, memories: Sequence[tuple[DerivedMemory, Sequence[GraphNode], Sequence[GraphEdge]]]
                     ) -> list[bool | Exception]:
        """A transaction per key (the keys of a batch share nothing but nodes, which each plans
        for itself), several at once: each is a few round trips."""
        def one(memory: tuple[DerivedMemory, Sequence[GraphNode], Sequence[GraphEdge]]) -> bool | Exception:
            try:
                return self.replace_memory(*memory)
            except Exception as exc:
                return exc

        if len(memories) <= 1:
            return [one(m) for m in memories]
        with ThreadPoolExecutor(max_workers=min(_REPLACE_WRITERS, len(memories)),
                                thread_name_prefix="memsvc-graph") as pool:
            return list(pool.map(one, memories))

    def remove_memory(self, memory: DerivedMemory) -> bool:
        return self._apply(memory, (), (), remove=True)

    def _apply(self, memory: DerivedMemory, nodes: Sequence[GraphNode], edges: Sequence[GraphEdge], *,
               remove: bool) -> bool:
        """Read the marker; if this version may change the key's rows (a newer write; a removal
        not older than the marker), plan the transaction from what the marker says the key
        derived before, and run it conditioned on the marker as read. A cancelled transaction (a
        concurrent writer of the key or of a node, throttling) is planned again."""
        for attempt in range(MAX_ATTEMPTS):
            marker = self._marker(memory.tenant, memory.namespace, memory.key)
            if remove and (marker is None or marker.version > memory.version):
                return False
            if not remove and marker is not None and marker.version >= memory.version:
                return False
            plan = self._plan(memory, marker, nodes, edges, remove=remove)
            if plan is None:  # a trimming step ran: plan again from what is there now
                continue
            if self._transact(*plan):
                return True
            self._backoff(attempt)
        raise _busy()

    def _plan(self, memory: DerivedMemory, marker: _Marker | None, nodes: Sequence[GraphNode],
              edges: Sequence[GraphEdge], *, remove: bool) -> tuple[list[dict[str, Any]], dict[str, int]] | None:
        """The transaction's actions and what it changes in the statistics; None when the plan was
        too big and a trimming step ran instead."""
        tenant, ns = memory.tenant, memory.namespace
        before = set(marker.entity_ids) if marker is not None else set()
        after = {n.entity_id: n for n in nodes}
        added, dropped = sorted(after.keys() - before), sorted(before - after.keys())
        read = self._nodes_read(tenant, ns, added + dropped)
        changes: dict[str, _NodeChange] = {}
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        counted = {"nodes": 0, "edges": len(edges) - (marker.edges if marker else 0),
                   "mentions": len(added) - len(dropped)}
        for eid in added:  # conditioned on being there or not as read, so that creations count exactly
            change = changes.setdefault(eid, _NodeChange(upsert=after[eid], mentions=1))
            change.conditions.append(("attribute_exists(pk)" if eid in read else "attribute_not_exists(pk)", {}))
            counted["nodes"] += eid not in read
        for eid, node in sorted(after.items()):
            touching = [e for e in edges if eid in (e.source_id, e.target_id)]
            rows[(_adjacency_pk(tenant, eid), _mention_sk(ns, memory.key))] = {"Put": {
                "TableName": self._table, "Item": _mention_item(tenant, eid, memory, touching)}}
        cascade: list[tuple[str, list[str]]] = []
        for eid in dropped:
            rows[(_adjacency_pk(tenant, eid), _mention_sk(ns, memory.key))] = {"Delete": {
                "TableName": self._table, "Key": _key(_adjacency_pk(tenant, eid), _mention_sk(ns, memory.key))}}
            node = read.get(eid)
            if node is None:  # a mention without its node (the integrity scan's to count): nothing to count down
                continue
            change = changes.setdefault(eid, _NodeChange())
            if node.explicit:
                change.mentions -= 1
                change.conditions.append(("#x = :true AND #mc >= :one", {":true": {"BOOL": True}}))
            elif node.mentions > 1:
                change.mentions -= 1
                change.conditions.append(("#mc > :one", {}))
            else:  # its last mention: the node goes, and every explicit edge of the namespace touching it
                change.delete = True
                counted["nodes"] -= 1
                change.conditions.append(("#mc = :one AND #x = :false AND #xe = :xe", {
                    ":false": {"BOOL": False}, ":xe": {"N": str(node.explicit_rows)}}))
                cascade.append((eid, self._explicit_rows(tenant, ns, eid) if node.explicit_rows else []))
        cascaded: set[tuple[str, str, str]] = set()  # edges between two dropped nodes are read at both
        for eid, explicit in cascade:
            for sk in explicit:
                cascaded.add(_explicit_edge(eid, sk))
                other, mirror = _mirror(ns, eid, sk)
                rows[(_adjacency_pk(tenant, eid), sk)] = _delete(self._table, _adjacency_pk(tenant, eid), sk)
                rows[(_adjacency_pk(tenant, other), mirror)] = _delete(self._table, _adjacency_pk(tenant, other), mirror)
                if other != eid:
                    changes.setdefault(other, _NodeChange()).explicit_rows -= 1
        counted["edges"] -= len(cascaded)
        for eid, change in changes.items():
            if change.explicit_rows and not change.delete and not change.upsert:
                change.conditions.append(("attribute_exists(pk)", {}))
        actions = [self._marker_write(memory, marker, sorted(after), len(edges), remove=remove), *rows.values(),
                   *(self._node_action(tenant, ns, eid, c) for eid, c in sorted(changes.items()))]
        if len(actions) <= _MAX_ACTIONS:
            return actions, counted
        eid, explicit = max(cascade, key=lambda c: len(c[1]))
        self._remove_explicit(tenant, ns, eid, explicit[:_TRIM])
        return None

    def _marker_write(self, memory: DerivedMemory, marker: _Marker | None, entity_ids: list[str], edges: int, *,
                      remove: bool) -> dict[str, Any]:
        """The marker's new state (or its deletion), conditioned on it being as read."""
        key = _marker_key(memory.tenant, memory.namespace, memory.key)
        if marker is None:
            as_read: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            as_read = {"ConditionExpression": "#v = :v AND #mid = :mid",
                       "ExpressionAttributeNames": {"#v": "v", "#mid": "mid"},
                       "ExpressionAttributeValues": {":v": {"N": str(marker.version)}, ":mid": {"S": marker.memory_id}}}
        if remove:
            return {"Delete": {"TableName": self._table, "Key": key, **as_read}}
        item = {**key, "k": {"S": memory.key}, "mid": {"S": memory.memory_id}, "v": {"N": str(memory.version)},
                "ents": {"L": [{"S": e} for e in entity_ids]}, "ne": {"N": str(edges)}}
        return {"Put": {"TableName": self._table, "Item": item, **as_read}}

    def _node_action(self, tenant: str, ns: tuple[str, ...], eid: str, change: _NodeChange) -> dict[str, Any]:
        key = _node_key(tenant, ns, eid)
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        condition = " AND ".join(f"({c})" for c, _ in change.conditions) or None
        for _, v in change.conditions:
            values |= v
        if condition:
            names |= {n: n[1:] for n in re.findall(r"#\w+", condition)}
            if ":one" in condition:
                values[":one"] = {"N": "1"}
        if change.delete:
            return {"Delete": {"TableName": self._table, "Key": key, "ConditionExpression": condition,
                               "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}}
        sets, adds = [], []
        if change.upsert is not None:
            names |= {"#ty": "ty", "#nm": "nm", "#x": "x", "#e": "e", "#ns": "ns"}
            values |= {":ty": {"S": change.upsert.type}, ":nm": {"B": change.upsert.name_ct},
                       ":false": {"BOOL": False}, ":e": {"S": eid}, ":ns": {"S": encode_namespace(ns)}}
            sets = ["#ty = if_not_exists(#ty, :ty)", "#nm = if_not_exists(#nm, :nm)", "#x = if_not_exists(#x, :false)",
                    "#e = :e", "#ns = :ns"]
        for name, amount in (("mc", change.mentions), ("xe", change.explicit_rows)):
            if amount or change.upsert is not None:
                names[f"#{name}"] = name
                values[f":d{name}"] = {"N": str(amount)}
                adds.append(f"#{name} :d{name}")
        update = (f"SET {', '.join(sets)} " if sets else "") + (f"ADD {', '.join(adds)}" if adds else "")
        action: dict[str, Any] = {"TableName": self._table, "Key": key, "UpdateExpression": update.strip(),
                                  "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}
        if condition:
            action["ConditionExpression"] = condition
        return {"Update": action}

    # -- explicit writes -------------------------------------------------------------------------

    def put_entity(self, node: GraphNode) -> None:
        """One UpdateItem when the node is there; a new one is counted in the statistics in the
        same transaction (conditioned on still being absent)."""
        update = {"TableName": self._table, "Key": _node_key(node.tenant, node.namespace, node.entity_id),
                  "UpdateExpression": "SET #ty = :ty, #nm = :nm, #x = :true, #e = :e, #ns = :ns, "
                                      "#mc = if_not_exists(#mc, :zero), #xe = if_not_exists(#xe, :zero)",
                  "ExpressionAttributeNames": {"#ty": "ty", "#nm": "nm", "#x": "x", "#e": "e", "#ns": "ns",
                                               "#mc": "mc", "#xe": "xe"},
                  "ExpressionAttributeValues": {":ty": {"S": node.type}, ":nm": {"B": node.name_ct},
                                                ":true": {"BOOL": True}, ":e": {"S": node.entity_id},
                                                ":ns": {"S": encode_namespace(node.namespace)}, ":zero": {"N": "0"}}}
        for attempt in range(MAX_ATTEMPTS):
            exists = bool(self._nodes_read(node.tenant, node.namespace, [node.entity_id]))
            condition = "attribute_exists(pk)" if exists else "attribute_not_exists(pk)"
            if self._transact([{"Update": {**update, "ConditionExpression": condition}}],
                              {"nodes": 0 if exists else 1}):
                return
            self._backoff(attempt)
        raise _busy()

    def delete_entity(self, tenant: str, namespace: tuple[str, ...], entity_id: str) -> bool:
        """Its explicit edges first, up to `_TRIM` a transaction (each a valid graph), then the node
        (deleted, or only unmarked when a mention keeps it) in a transaction conditioned on what
        was read."""
        for attempt in range(MAX_ATTEMPTS):
            node = self._nodes_read(tenant, namespace, [entity_id]).get(entity_id)
            if node is None or not node.explicit:
                return False
            explicit = self._explicit_rows(tenant, namespace, entity_id) if node.explicit_rows else []
            if len(explicit) > _TRIM:
                self._remove_explicit(tenant, namespace, entity_id, explicit[:_TRIM])
                continue
            change = _NodeChange(delete=node.mentions == 0, conditions=[("#x = :true AND #xe = :xe AND #mc = :mc", {
                ":true": {"BOOL": True}, ":xe": {"N": str(node.explicit_rows)}, ":mc": {"N": str(node.mentions)}})])
            actions = self._explicit_deletes(tenant, namespace, entity_id, explicit, owner=False)
            key = _node_key(tenant, namespace, entity_id)
            if change.delete:
                actions.append(self._node_action(tenant, namespace, entity_id, change))
            else:
                actions.append({"Update": {
                    "TableName": self._table, "Key": key, "UpdateExpression": "SET #x = :false, #xe = :zero",
                    "ConditionExpression": "#x = :true AND #xe = :xe",
                    "ExpressionAttributeNames": {"#x": "x", "#xe": "xe"},
                    "ExpressionAttributeValues": {":false": {"BOOL": False}, ":true": {"BOOL": True},
                                                  ":zero": {"N": "0"}, ":xe": {"N": str(node.explicit_rows)}}}})
            if self._transact(actions, {"nodes": -int(change.delete), "edges": -_edge_count(entity_id, explicit)}):
                return True
            self._backoff(attempt)
        raise _busy()

    def put_relation(self, edge: GraphEdge) -> list[str]:
        tenant, ns = edge.tenant, edge.namespace
        out_sk, in_sk = _explicit_sk(ns, "O", edge.type, edge.target_id), _explicit_sk(ns, "I", edge.type, edge.source_id)
        for attempt in range(MAX_ATTEMPTS):
            read = self._nodes_read(tenant, ns, [edge.source_id, edge.target_id])
            missing = [e for e in dict.fromkeys((edge.source_id, edge.target_id)) if e not in read]
            if missing:
                return missing
            counts = {edge.source_id: 0, edge.target_id: 0}
            counts[edge.source_id] += 1
            counts[edge.target_id] += 1
            rows = ((_adjacency_pk(tenant, edge.source_id), out_sk), (_adjacency_pk(tenant, edge.target_id), in_sk))
            actions: list[dict[str, Any]] = [
                {"Put": {"TableName": self._table, "Item": {**_key(pk, sk), **_validity_item(edge)},
                         "ConditionExpression": "attribute_not_exists(pk)"}} for pk, sk in rows]
            actions += [self._node_action(tenant, ns, eid, _NodeChange(
                explicit_rows=n, conditions=[("attribute_exists(pk)", {})])) for eid, n in counts.items()]
            if self._transact(actions, {"edges": 1}):
                return []
            # Written already: idempotent, but its valid time is the one given now (both rows, or
            # neither: a delete meanwhile cancels it, and the next attempt writes it anew).
            if self._row_exists(*rows[0]) and self._transact([self._validity_update(pk, sk, edge) for pk, sk in rows], {}):
                return []
            self._backoff(attempt)
        raise _busy()

    def _validity_update(self, pk: str, sk: str, edge: GraphEdge) -> dict[str, Any]:
        sets = {name: value for name, value in (("vf", edge.valid_from), ("vt", edge.valid_to)) if value is not None}
        removes = [name for name in ("vf", "vt") if name not in sets]
        update = (f"SET {', '.join(f'#{n} = :{n}' for n in sets)} " if sets else "") + (
            f"REMOVE {', '.join(f'#{n}' for n in removes)}" if removes else "")
        return {"Update": {"TableName": self._table, "Key": _key(pk, sk), "UpdateExpression": update.strip(),
                           "ConditionExpression": "attribute_exists(pk)",
                           "ExpressionAttributeNames": {f"#{n}": n for n in ("vf", "vt")},
                           "ExpressionAttributeValues": {f":{n}": {"S": v} for n, v in sets.items()}}}

    def delete_relation(self, edge: GraphEdge) -> bool:
        tenant, ns = edge.tenant, edge.namespace
        out_sk = _explicit_sk(ns, "O", edge.type, edge.target_id)
        if not self._row_exists(_adjacency_pk(tenant, edge.source_id), out_sk):
            return False
        for attempt in range(MAX_ATTEMPTS):
            if self._transact(self._explicit_deletes(tenant, ns, edge.source_id, [out_sk]), {"edges": -1}):
                return True
            if not self._row_exists(_adjacency_pk(tenant, edge.source_id), out_sk):
                return False  # removed meanwhile
            self._backoff(attempt)
        raise _busy()

    def _remove_explicit(self, tenant: str, ns: tuple[str, ...], eid: str, explicit: list[str]) -> None:
        """One trimming step: these explicit edge rows of the entity go, with their mirrors and the
        counters of both ends, in one transaction (a cancelled one is simply planned again)."""
        if not self._transact(self._explicit_deletes(tenant, ns, eid, explicit), {"edges": -_edge_count(eid, explicit)}):
            self._backoff(0)

    def _explicit_deletes(self, tenant: str, ns: tuple[str, ...], eid: str, explicit: list[str], *,
                          owner: bool = True) -> list[dict[str, Any]]:
        """Deletes of these explicit edge rows of `eid` (each conditioned on existing) and of their
        mirrors, and the counter updates of every end (one action per node; `owner=False`: not of
        `eid`, whose own action the caller writes)."""
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        counts: dict[str, int] = {}
        for sk in explicit:
            other, mirror = _mirror(ns, eid, sk)
            for pk, row_sk, end in ((_adjacency_pk(tenant, eid), sk, eid), (_adjacency_pk(tenant, other), mirror, other)):
                if (pk, row_sk) not in rows:
                    rows[(pk, row_sk)] = _delete(self._table, pk, row_sk, must_exist=True)
                    counts[end] = counts.get(end, 0) - 1
        return [*rows.values(), *(self._node_action(tenant, ns, end, _NodeChange(
            explicit_rows=n, conditions=[("attribute_exists(pk)", {})])) for end, n in sorted(counts.items())
            if owner or end != eid)]

    def _count(self, *, nodes: int = 0, edges: int = 0, mentions: int = 0) -> None:
        """Add to one statistics row (picked at random among `SHARDS`, so no one row takes every
        write), after the transaction it counts: never inside one, where concurrent transactions
        meeting on a statistics row would cancel each other. A crash in between leaves the
        counts off by that write: they are what /health shows, not what the graph relies on."""
        if nodes or edges or mentions:
            self._call("UpdateItem", Key=_key(f"GSTAT#{int(self.random() * SHARDS) % SHARDS}", "GSTAT"),
                       UpdateExpression="ADD #n :n, #e :e, #m :m",
                       ExpressionAttributeNames={"#n": "nodes", "#e": "edges", "#m": "mentions"},
                       ExpressionAttributeValues={":n": {"N": str(nodes)}, ":e": {"N": str(edges)},
                                                  ":m": {"N": str(mentions)}})

    # -- reads -----------------------------------------------------------------------------------

    def nodes(self, tenant: str, prefix: tuple[str, ...], entity_ids: Sequence[str]) -> list[GraphNode]:
        found = self._each(lambda eid: self._nodes_under(tenant, prefix, eid), list(dict.fromkeys(entity_ids)))
        return sorted((n for nodes in found for n in nodes), key=lambda n: (n.entity_id, n.namespace))

    def expand(self, tenant: str, prefix: tuple[str, ...], entity_ids: Sequence[str], *,
               limit: int, valid: ValidAt | None = None) -> list[GraphEdge]:
        found = self._each(lambda eid: self._edges_of(tenant, prefix, eid, limit, valid),
                           list(dict.fromkeys(entity_ids)))
        out: dict[GraphEdge, None] = {}
        for edges in found:
            for edge in edges:
                out[edge] = None
                if len(out) >= limit:
                    return list(out)
        return list(out)

    def memories_of(self, tenant: str, prefix: tuple[str, ...], entity_ids: Sequence[str], *,
                    limit: int) -> list[Mention]:
        found = self._each(lambda eid: self._mentions_of(tenant, prefix, eid, limit), list(dict.fromkeys(entity_ids)))
        return [m for mentions in found for m in mentions][:limit]

    def entities_of_memories(self, tenant: str, refs: Sequence[tuple[tuple[str, ...], str]]) -> list[Mention]:
        keys = [_marker_key(tenant, ns, key) for ns, key in dict.fromkeys((tuple(ns), key) for ns, key in refs)]
        out = []
        for row in batch_get_rows(self._db, self._table, keys, consistent=False):
            marker = _marker_of(row)
            ns = decode_namespace(row["sk"]["S"].rpartition(_END)[0])
            out += [Mention(tenant, ns, row["k"]["S"], marker.memory_id, e) for e in marker.entity_ids]
        return out

    def derived_memories(self, tenant: str) -> Iterator[DerivedMemory]:
        for shard in range(SHARDS):
            for rows in self._pages(KeyConditionExpression="pk = :p",
                                    ExpressionAttributeValues={":p": {"S": f"T#{tenant}#GK#{shard}"}}):
                for row in rows:
                    marker = _marker_of(row)
                    yield DerivedMemory(tenant, decode_namespace(row["sk"]["S"].rpartition(_END)[0]),
                                        row["k"]["S"], marker.memory_id, marker.version)

    def _nodes_under(self, tenant: str, prefix: tuple[str, ...], eid: str) -> list[GraphNode]:
        if prefix:
            exact = f"{eid}|{encode_namespace(prefix)}"
            condition, values = "pk = :p AND #sk BETWEEN :lo AND :hi", {":lo": {"S": exact + "\x1e"},
                                                                         ":hi": {"S": exact + _END}}
        else:
            condition, values = "pk = :p AND begins_with(#sk, :lo)", {":lo": {"S": f"{eid}|"}}
        values[":p"] = {"S": f"T#{tenant}#GN#{_shard(eid)}"}
        return [_node_of(tenant, row) for rows in self._pages(KeyConditionExpression=condition,
                                                              ExpressionAttributeNames=_SK,
                                                              ExpressionAttributeValues=values) for row in rows]

    def _adjacency(self, tenant: str, prefix: tuple[str, ...], eid: str) -> Iterator[dict[str, Any]]:
        """The entity's adjacency rows under the prefix, in sort-key order, at most
        `max_rows_per_entity` of them."""
        values: dict[str, Any] = {":p": {"S": _adjacency_pk(tenant, eid)}}
        condition = "pk = :p"
        if prefix:  # the namespace itself (`<ns>\x1f...`) and below it (`<ns>\x1e...`), nothing else
            exact = encode_namespace(prefix)
            condition += " AND #sk BETWEEN :lo AND :hi"
            values |= {":lo": {"S": exact + "\x1e"}, ":hi": {"S": exact + _END + _LAST}}
        names = _SK if prefix else {}
        read = 0
        for rows in self._pages(KeyConditionExpression=condition, ExpressionAttributeValues=values,
                                **({"ExpressionAttributeNames": names} if names else {}),
                                limit=lambda: min(1000, self.max_rows_per_entity - read)):
            read += len(rows)
            yield from rows
            if read >= self.max_rows_per_entity:
                return

    def _edges_of(self, tenant: str, prefix: tuple[str, ...], eid: str, limit: int,
                  valid: ValidAt | None) -> list[GraphEdge]:
        """The entity's edges (those `valid` admits): the rows read are bounded by
        `max_rows_per_entity` whatever their valid time, so an ended edge costs a hop what it
        did, and `limit` counts the edges kept."""
        out: list[GraphEdge] = []
        for row in self._adjacency(tenant, prefix, eid):
            out += [e for e in _row_edges(tenant, eid, row) if valid is None or valid.admits(e)]
            if len(out) >= limit:
                break
        return out

    def neighbours(self, tenant: str, prefix: tuple[str, ...], entity_id: str, *, direction: str,
                   relation: str | None, valid: ValidAt, limit: int, after: list[str | int] | None
                   ) -> tuple[list[GraphEdge], list[str | int] | None]:
        """One Query of the entity's adjacency with `Limit` `limit + 1`, in sort-key order (by
        namespace, then a memory's mention row with the edges it carries, then explicit edges by
        direction, type and other end). A mention row may carry several edges, so a page can end
        inside one: a position is a row's sort key, where the next Query starts (inclusive), and
        how many of its edges were gone through."""
        start, skip = (str(after[0]), int(after[1])) if after is not None else (None, 0)
        condition, values = "pk = :p", {":p": {"S": _adjacency_pk(tenant, entity_id)}}
        if prefix:  # as `_adjacency`: the namespace's rows and those below it
            exact = encode_namespace(prefix)
            condition += " AND #sk BETWEEN :lo AND :hi"
            values |= {":lo": {"S": start or exact + "\x1e"}, ":hi": {"S": exact + _END + _LAST}}
        elif start is not None:
            condition += " AND #sk >= :lo"
            values[":lo"] = {"S": start}
        page = self._call("Query", KeyConditionExpression=condition, ExpressionAttributeValues=values,
                          Limit=limit + 1, **({"ExpressionAttributeNames": _SK} if ":lo" in values else {}))
        rows = page.get("Items", [])
        out: list[GraphEdge] = []
        for row in rows:
            sk = row["sk"]["S"]
            edges = _row_edges(tenant, entity_id, row)
            for at in range(skip if sk == start else 0, len(edges)):
                if len(out) == limit:
                    return out, [sk, at]
                edge = edges[at]
                if (direction in ("both", "out" if edge.source_id == entity_id else "in")
                        and relation in (None, edge.type) and valid.admits(edge)):
                    out.append(edge)
        if rows and "LastEvaluatedKey" in page:
            return out, [rows[-1]["sk"]["S"], len(_row_edges(tenant, entity_id, rows[-1]))]
        return out, None

    def _mentions_of(self, tenant: str, prefix: tuple[str, ...], eid: str, limit: int) -> list[Mention]:
        out = []
        for row in self._adjacency(tenant, prefix, eid):
            ns_text, kind, _ = _split(row["sk"]["S"])
            if kind == "M":
                out.append(Mention(tenant, decode_namespace(ns_text), row["k"]["S"], row["mid"]["S"], eid))
                if len(out) >= limit:
                    break
        return out

    # -- integrity -------------------------------------------------------------------------------

    def explicit_rows(self, tenant: str, prefix: tuple[str, ...]) -> tuple[list[GraphNode], list[GraphEdge]]:
        """The node rows (16 Queries), then the outgoing explicit edge rows of each node that has
        explicit edges (`xe`), one Query each."""
        found: dict[tuple[tuple[str, ...], str], tuple[GraphNode, int]] = {}
        for shard in range(SHARDS):
            for rows in self._pages(KeyConditionExpression="pk = :p",
                                    ExpressionAttributeValues={":p": {"S": f"T#{tenant}#GN#{shard}"}}):
                for row in rows:
                    node = _node_of(tenant, row)
                    if node.namespace[:len(prefix)] == prefix:
                        found[(node.namespace, node.entity_id)] = (node, int(row.get("xe", {}).get("N", "0")))
        edges: list[GraphEdge] = []
        for (ns, eid), (_, explicit_rows) in sorted(found.items()):
            if not explicit_rows:
                continue
            outgoing = f"{encode_namespace(ns)}{_END}X{_END}O{_END}"
            for rows in self._pages(KeyConditionExpression="pk = :p AND begins_with(#sk, :o)",
                                    ExpressionAttributeNames=_SK,
                                    ExpressionAttributeValues={":p": {"S": _adjacency_pk(tenant, eid)},
                                                               ":o": {"S": outgoing}}):
                for row in rows:
                    source, kind, target = _explicit_edge(eid, row["sk"]["S"])
                    edges.append(GraphEdge(tenant, ns, source, kind, target, valid_from=_text(row.get("vf")),
                                           valid_to=_text(row.get("vt"))))
        ends = {(e.namespace, end) for e in edges for end in (e.source_id, e.target_id)}
        nodes = [node for ref, (node, _) in sorted(found.items()) if node.explicit or ref in ends]
        return nodes, edges

    def integrity_scan(self, tenant: str) -> dict[str, int]:
        """Every node of the tenant (16 Queries, a page at a time) with its adjacency in its
        namespace, against the markers: mentions whose memory is not its key's current marker go
        (with the derived edges they carry), explicit edges whose other end has no node go, a node
        left with no mention that is not explicit goes, and the counters are set to what is there;
        each of these writes only if its row is still as read. Reads the tenant's whole graph, within
        the admin's request (`/admin/v1/graph/integrity-scan`): fit for tenants of about 10k nodes."""
        counts = {"edges": 0, "mentions": 0, "nodes": 0}
        markers: dict[tuple[str, str], _Marker] = {}
        for shard in range(SHARDS):
            for rows in self._pages(KeyConditionExpression="pk = :p",
                                    ExpressionAttributeValues={":p": {"S": f"T#{tenant}#GN#{shard}"}}):
                for row in rows:
                    self._check_node(tenant, row, markers, counts)
        self._count(nodes=-counts["nodes"], edges=-counts["edges"], mentions=-counts["mentions"])
        return counts

    def _check_node(self, tenant: str, row: dict[str, Any], markers: dict[tuple[str, str], _Marker],
                    counts: dict[str, int]) -> None:
        eid, ns = row["e"]["S"], decode_namespace(row["ns"]["S"])
        pk = _adjacency_pk(tenant, eid)
        rows = [r for page in self._pages(KeyConditionExpression="pk = :p AND begins_with(#sk, :ns)",
                                          ExpressionAttributeNames=_SK,
                                          ExpressionAttributeValues={":p": {"S": pk},
                                                                     ":ns": {"S": encode_namespace(ns) + _END}})
                for r in page]
        stale, explicit = [], []
        for r in rows:
            _, kind, _ = _split(r["sk"]["S"])
            if kind == "M":
                key = r["k"]["S"]
                ref = (encode_namespace(ns), key)
                if ref not in markers:
                    found = self._marker(tenant, ns, key)
                    markers[ref] = found or _Marker("", 0, (), 0)
                marker = markers[ref]
                if marker.memory_id != r["mid"]["S"] or eid not in marker.entity_ids:
                    stale.append(r)
            else:
                explicit.append(r["sk"]["S"])
        others = {_mirror(ns, eid, sk)[0] for sk in explicit} - {eid}
        present = set(self._nodes_read(tenant, ns, sorted(others))) | {eid}
        dangling = [sk for sk in explicit if _mirror(ns, eid, sk)[0] not in present]
        # The scan races the indexer: every write below holds only if the row is still as read (a
        # memory written again meanwhile rewrites its mention row under the same key, and then
        # that row stays; the next scan judges it).
        for r in list(stale):
            if not self._write_if_unchanged("DeleteItem", Key=_key(pk, r["sk"]["S"]), ConditionExpression="#mid = :mid",
                                            ExpressionAttributeNames={"#mid": "mid"},
                                            ExpressionAttributeValues={":mid": r["mid"]}):
                stale.remove(r)
                continue
            counts["mentions"] += 1
            # a derived edge is in the mention rows of both its ends: counted at its source's
            counts["edges"] += sum(1 for e in r.get("ed", {}).get("L", []) if e["L"][0]["S"] == eid)
        for sk in dangling:
            for p, s in ((pk, sk), (_adjacency_pk(tenant, _mirror(ns, eid, sk)[0]), _mirror(ns, eid, sk)[1])):
                self._call("DeleteItem", Key=_key(p, s))
            counts["edges"] += 1
        mentions = sum(1 for r in rows if _split(r["sk"]["S"])[1] == "M") - len(stale)
        explicit_rows = len(explicit) - len(dangling)
        node_key = {"pk": row["pk"], "sk": row["sk"]}
        # The node's counters as read: a write since changed them, and the node is then left alone.
        as_read = {"ConditionExpression": "#mc = :mc_read AND #xe = :xe_read",
                   "ExpressionAttributeNames": {"#mc": "mc", "#xe": "xe"},
                   "ExpressionAttributeValues": {":mc_read": row.get("mc", {"N": "0"}),
                                                 ":xe_read": row.get("xe", {"N": "0"})}}
        if mentions == 0 and not row.get("x", {}).get("BOOL", False):
            if not self._write_if_unchanged("DeleteItem", Key=node_key, **as_read):
                return
            counts["nodes"] += 1
            for sk in set(explicit) - set(dangling):  # the node is gone: its explicit edges go with it
                self._call("DeleteItem", Key=_key(pk, sk))
                other, mirror = _mirror(ns, eid, sk)
                self._call("DeleteItem", Key=_key(_adjacency_pk(tenant, other), mirror))
                counts["edges"] += 1
        elif int(row.get("mc", {}).get("N", "0")) != mentions or int(row.get("xe", {}).get("N", "0")) != explicit_rows:
            self._write_if_unchanged("UpdateItem", Key=node_key, UpdateExpression="SET #mc = :mc, #xe = :xe",
                                     ConditionExpression=as_read["ConditionExpression"],
                                     ExpressionAttributeNames=as_read["ExpressionAttributeNames"],
                                     ExpressionAttributeValues={**as_read["ExpressionAttributeValues"],
                                                                ":mc": {"N": str(mentions)},
                                                                ":xe": {"N": str(explicit_rows)}})

    # -- plumbing --------------------------------------------------------------------------------

    def _marker(self, tenant: str, ns: tuple[str, ...], key: str) -> _Marker | None:
        row = self._call("GetItem", Key=_marker_key(tenant, ns, key), ConsistentRead=True).get("Item")
        return _marker_of(row) if row else None

    def _nodes_read(self, tenant: str, ns: tuple[str, ...], entity_ids: Iterable[str]) -> dict[str, _Node]:
        keys = [_node_key(tenant, ns, e) for e in dict.fromkeys(entity_ids)]
        return {row["e"]["S"]: _Node(int(row.get("mc", {}).get("N", "0")), row.get("x", {}).get("BOOL", False),
                                     int(row.get("xe", {}).get("N", "0")))
                for row in batch_get_rows(self._db, self._table, keys)}

    def _explicit_rows(self, tenant: str, ns: tuple[str, ...], eid: str) -> list[str]:
        return [row["sk"]["S"] for rows in self._pages(
            KeyConditionExpression="pk = :p AND begins_with(#sk, :x)", ProjectionExpression="#sk",
            ExpressionAttributeNames=_SK,
            ExpressionAttributeValues={":p": {"S": _adjacency_pk(tenant, eid)},
                                       ":x": {"S": encode_namespace(ns) + _END + "X" + _END}}) for row in rows]

    def _row_exists(self, pk: str, sk: str) -> bool:
        return "Item" in self._call("GetItem", Key=_key(pk, sk), ConsistentRead=True, ProjectionExpression="pk")

    def _transact(self, actions: list[dict[str, Any]], counted: dict[str, int]) -> bool:
        """One transaction, then its `counted` changes added to the statistics; False when
        DynamoDB cancelled it (a condition on what was read failed, another transaction held one
        of its items, or throttling): the caller reads and plans again. botocore never retries a
        cancelled transaction."""
        for action in actions:
            body = next(iter(action.values()))
            for empty in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
                if empty in body and not body[empty]:
                    del body[empty]
            if body.get("ConditionExpression") is None:
                body.pop("ConditionExpression", None)
        if not transact_or_cancelled(self._db, actions):
            return False
        self._count(**counted)
        return True

    def _each(self, fn: Callable[[str], Any], ids: list[str]) -> list[Any]:
        """`fn` over `ids`, `_WORKERS` Queries in flight, results in order (called from the
        caller's thread only: a pool thread waiting on the pool could starve it)."""
        if len(ids) <= 1:
            return [fn(i) for i in ids]
        return list(self._pool.map(fn, ids))

    def _pages(self, *, limit: Callable[[], int] | None = None, **kwargs: Any) -> Iterable[list[dict[str, Any]]]:
        return query_pages(self._db, self._table, limit=limit, **kwargs)

    def _backoff(self, attempt: int) -> None:
        self.sleep(min(0.05 * 2**attempt, 1.0) * (0.5 + self.random() / 2))

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        return call_table(self._db, self._table, operation, **kwargs)

    def _write_if_unchanged(self, operation: str, **kwargs: Any) -> bool:
        return conditional_write(self._db, self._table, operation, **kwargs)


def _shard(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:4], "big") % SHARDS


def _key_hash(key: str) -> str:
    """An item key in a sort key: keys are up to 1,024 bytes, and a sort key holds the namespace too."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _adjacency_pk(tenant: str, eid: str) -> str:
    return f"T#{tenant}#G#{eid}"


def _mention_sk(ns: tuple[str, ...], key: str) -> str:
    return f"{encode_namespace(ns)}{_END}M{_END}{_key_hash(key)}"


def _explicit_sk(ns: tuple[str, ...], direction: str, kind: str, other: str) -> str:
    return f"{encode_namespace(ns)}{_END}X{_END}{direction}{_END}{kind}{_END}{other}"


def _split(sk: str) -> tuple[str, str, str]:
    """(encoded namespace, `M` or `X`, the rest) of an adjacency sort key."""
    ns, kind, rest = sk.split(_END, 2)
    return ns, kind, rest


def _edge_count(eid: str, explicit: list[str]) -> int:
    """How many explicit edges these rows of `eid` are (a loop has two rows there)."""
    return len({_explicit_edge(eid, sk) for sk in explicit})


def _explicit_edge(eid: str, sk: str) -> tuple[str, str, str]:
    """(source, type, target) of an explicit edge row of `eid`."""
    direction, kind, other = _split(sk)[2].split(_END)
    return (eid, kind, other) if direction == "O" else (other, kind, eid)


def _mirror(ns: tuple[str, ...], eid: str, sk: str) -> tuple[str, str]:
    """The other end of an explicit edge row of `eid`, and that end's row's sort key."""
    direction, kind, other = _split(sk)[2].split(_END)
    return other, _explicit_sk(ns, "I" if direction == "O" else "O", kind, eid)


def _row_edges(tenant: str, eid: str, row: dict[str, Any]) -> list[GraphEdge]:
    """The edges an adjacency row of `eid` holds: a mention row's derived edges, or its one explicit edge."""
    ns_text, kind, rest = _split(row["sk"]["S"])
    ns = decode_namespace(ns_text)
    if kind == "M":
        return [GraphEdge(tenant, ns, e[0]["S"], e[1]["S"], e[2]["S"], row["k"]["S"], row["mid"]["S"],
                          *(_text(v) for v in e[3:5]))
                for e in (x["L"] for x in row.get("ed", {}).get("L", []))]
    direction, kind_type, other = rest.split(_END)
    source, target = (eid, other) if direction == "O" else (other, eid)
    return [GraphEdge(tenant, ns, source, kind_type, target, valid_from=_text(row.get("vf")),
                      valid_to=_text(row.get("vt")))]


def _node_key(tenant: str, ns: tuple[str, ...], eid: str) -> dict[str, Any]:
    return _key(f"T#{tenant}#GN#{_shard(eid)}", f"{eid}|{encode_namespace(ns)}{_END}")


def _marker_key(tenant: str, ns: tuple[str, ...], key: str) -> dict[str, Any]:
    encoded = encode_namespace(ns)
    return _key(f"T#{tenant}#GK#{_shard(encoded + _END + key)}", f"{encoded}{_END}{_key_hash(key)}")


def _mention_item(tenant: str, eid: str, memory: DerivedMemory, edges: list[GraphEdge]) -> dict[str, Any]:
    item = {**_key(_adjacency_pk(tenant, eid), _mention_sk(memory.namespace, memory.key)),
            "k": {"S": memory.key}, "mid": {"S": memory.memory_id}}
    if edges:
        item["ed"] = {"L": [{"L": [{"S": e.source_id}, {"S": e.type}, {"S": e.target_id}, {"S": e.valid_from or ""},
                                   {"S": e.valid_to or ""}]} for e in edges]}
    return item


def _validity_item(edge: GraphEdge) -> dict[str, Any]:
    """An explicit edge row's valid time (an open end has no attribute)."""
    return {name: {"S": value} for name, value in (("vf", edge.valid_from), ("vt", edge.valid_to)) if value is not None}


def _text(value: dict[str, Any] | None) -> str | None:
    """A stored valid-time string; None when absent or empty (open)."""
    return (value or {}).get("S") or None


def _delete(table: str, pk: str, sk: str, *, must_exist: bool = False) -> dict[str, Any]:
    action: dict[str, Any] = {"TableName": table, "Key": _key(pk, sk)}
    if must_exist:
        action["ConditionExpression"] = "attribute_exists(pk)"
    return {"Delete": action}


def _marker_of(row: dict[str, Any]) -> _Marker:
    return _Marker(row["mid"]["S"], int(row["v"]["N"]), tuple(e["S"] for e in row.get("ents", {}).get("L", [])),
                   int(row.get("ne", {}).get("N", "0")))


def _node_of(tenant: str, row: dict[str, Any]) -> GraphNode:
    return GraphNode(tenant, decode_namespace(row["ns"]["S"]), row["e"]["S"], row["ty"]["S"], bytes(row["nm"]["B"]),
                     row.get("x", {}).get("BOOL", False))


def _busy() -> RateLimited:
    return RateLimited("the knowledge graph is busy (throttled or contended); try again shortly",
                       retry_after_seconds=1, details={"provider": "DynamoDB"})
