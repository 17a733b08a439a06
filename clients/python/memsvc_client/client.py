"""`MemsvcClient` / `AsyncMemsvcClient`: the agent-memory routes of API-AGENT.md, as methods.

    client = MemsvcClient()                                  # MEMORY_SERVICE_URL + MEMORY_SERVICE_TOKEN
    client.remember("I prefer window seats", type="preference")
    client.recall("seat preference on flights")["memories"]

A client rides on a `MemsvcStore` (its `.store`, a LangGraph `BaseStore`): one connection pool,
one authentication (bearer token or SigV4), and the store's retries and errors
(`InvalidArgumentError`, `AuthError`, `NotFoundError`, `TransientError`, `MemsvcError`).
Methods return the decoded JSON answer. Seed 003's workflow state (task contexts, plans,
working memory) comes from `memsvc_client.workflow.WorkflowMethods`; `memsvc_client.worker`
turns it into a worker's few steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict, Unpack

from memsvc_client.graph import GraphMethods
from memsvc_client.transfer import TransferMethods
from memsvc_client.store import MemsvcStore, _ns_key
from memsvc_client.workflow import WorkflowMethods, path_segment

__all__ = [
    "MemsvcClient",
    "AsyncMemsvcClient",
    "RememberFields",
    "RecallFields",
    "FeedbackSignal",
    "ExtractMode",
    "session_message",
    "extract_message",
    "MemoryType",
    "MemoryKind",
    "MessageRole",
    "RecallMode",
    "RecallOrder",
]

MemoryType = Literal["fact", "preference", "decision", "note"]
MemoryKind = Literal["semantic", "episodic"]
RecallMode = Literal["hybrid", "semantic", "keyword"]
RecallOrder = Literal["relevance", "precedence"]


class RememberFields(TypedDict, total=False):
    """The optional fields of `POST /v1/memories/remember` (API-AGENT.md)."""

    type: MemoryType  # default "fact"
    kind: MemoryKind  # default "semantic"
    layer: str  # default "user" (the service's); or `namespace` instead of `layer` + `identifiers`
    identifiers: Mapping[str, str]
    namespace: Sequence[str]
    category: str
    tags: Sequence[str]
    importance: float  # default 0.5
    pinned: bool  # default False
    source: str
    ttl_seconds: int
    consolidate: bool  # default True
    wait: bool  # default True: False answers 202 {"candidate_id"} at once
    valid_from: str  # RFC 3339 with an offset: the fact holds from then (default: from now)
    valid_to: str  # RFC 3339, after valid_from: the fact holds until then (default: open)


class RecallFields(TypedDict, total=False):
    """The optional fields of `POST /v1/memories/recall` (API-AGENT.md)."""

    layers: Sequence[str]  # default: every accessible layer
    identifiers: Mapping[str, str]  # default: {"user_id": <the caller>}
    namespace_prefix: Sequence[str]  # instead of `layers` + `identifiers`
    types: Sequence[MemoryType]  # default: every type
    filter: Mapping[str, Any]  # search's filter language, ANDed with types: {"tags": {"contains": "travel"}}
    limit: int  # default 10, 1..50
    min_score: float  # default 0.3
    token_budget: int  # default 1000, 1..8000
    mode: RecallMode  # default "hybrid"
    order: RecallOrder  # default "relevance"
    include_superseded: bool  # default False
    include_archived: bool  # default False: reflection's archived memories are left out (one returned is restored)
    graph_hops: int  # default 0 (none), 0..3: add the memories the knowledge graph links to the hits
    as_of: str  # RFC 3339 with an offset: what held then (valid time), superseded memories included
    known_at: str  # RFC 3339 with an offset: what memsvc held then (transaction time), versions since replaced included
    temporal: bool  # default True: a time the query names ("in July", "last week") ranks memories valid then higher
    explain: bool  # default False: each memory's `explain` (how its relevance was computed) and `metadata.cut`


REMEMBER_DEFAULTS: RememberFields = {
    "type": "fact", "kind": "semantic", "importance": 0.5, "pinned": False, "consolidate": True, "wait": True,
}
RECALL_DEFAULTS: RecallFields = {
    "limit": 10, "min_score": 0.3, "token_budget": 1000, "mode": "hybrid", "order": "relevance",
    "include_superseded": False,
}


def remember_body(content: str, **fields: Unpack[RememberFields]) -> dict[str, Any]:
    """The body of `POST /v1/memories/remember`: the contract's defaults, then `fields`. A field
    given as None is left out, so the service decides (e.g. `layer` when `namespace` is given)."""
    return {"content": content, **_json_fields(RememberFields, REMEMBER_DEFAULTS, fields)}


def recall_body(query: str, **fields: Unpack[RecallFields]) -> dict[str, Any]:
    """The body of `POST /v1/memories/recall`: the contract's defaults, then `fields`."""
    return {"query": query, **_json_fields(RecallFields, RECALL_DEFAULTS, fields)}


def _json_fields(shape: type, defaults: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(shape.__annotations__)
    if unknown:
        raise TypeError(f"unexpected field(s) for {shape.__name__}: {', '.join(sorted(unknown))}")
    merged = {**defaults, **fields}
    return {
        name: list(value) if isinstance(value, (list, tuple)) else dict(value) if isinstance(value, Mapping) else value
        for name, value in merged.items()
        if value is not None
    }


MessageRole = Literal["user", "assistant", "system", "tool"]
FeedbackSignal = Literal["useful", "wrong", "outdated"]
ExtractMode = Literal["off", "on_close", "continuous"]


_ROLE_OF_TYPE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def session_message(message: Mapping[str, Any] | Any) -> dict[str, Any]:
    """`add_message`'s fields for a chat message: a `{role, content, name?}` mapping, or a LangChain
    `BaseMessage` (human -> user, ai -> assistant, system, tool; its text, without tool calls).
    Raises ValueError for another role or a message with no text (the route takes neither)."""
    if isinstance(message, Mapping):
        role, content, name = message.get("role"), message.get("content"), message.get("name")
    else:
        role, content, name = _ROLE_OF_TYPE.get(message.type), message.text, message.name
    if role not in _ROLE_OF_TYPE.values():
        raise ValueError(f"a session message's role is user, assistant, system or tool, not {role!r}")
    if not isinstance(content, str) or not content:
        raise ValueError("a session message needs text content")
    return _body(role=role, content=content, name=name)


def extract_message(message: Mapping[str, Any] | Any) -> dict[str, Any]:
    """`extract`'s form of a chat message: `session_message`'s, with `created_at` kept from a mapping."""
    fields = session_message(message)
    if isinstance(message, Mapping) and message.get("created_at") is not None:
        fields["created_at"] = message["created_at"]
    return fields


def _session(session_id: str, *rest: str) -> str:
    """A session's path: its id one segment (`a/b` is `a%2Fb`)."""
    return "/v1/memory/sessions/" + path_segment(session_id) + "".join("/" + r for r in rest)


def _given(**params: Any) -> list[tuple[str, str]]:
    return [(name, str(value)) for name, value in params.items() if value is not None]


def _body(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


class AgentMemoryMethods:
    """The routes of API-AGENT.md's typed memories (remember, recall) and conversations
    (sessions, messages, semantic upsert), and the store routes of API.md that `MemsvcStore`
    does not cover as a LangGraph `BaseStore`. Each method builds one request and hands it to the
    client's `_run` (the answer, or a coroutine of it on the async client)."""

    _run: Callable[[tuple[Any, ...]], Any]

    # -- typed memories --

    def remember(self, content: str, **fields: Unpack[RememberFields]) -> Any:
        """`POST /v1/memories/remember`: `{"action", "memory", "neighbors", "judge"}`, or
        `{"candidate_id"}` with `wait=False`. Fields: `RememberFields`."""
        return self._run(("POST", "/v1/memories/remember", (), remember_body(content, **fields)))

    def recall(self, query: str, **fields: Unpack[RecallFields]) -> Any:
        """`POST /v1/memories/recall`: `{"memories": [...], "metadata": {...}}`. Fields: `RecallFields`."""
        return self._run(("POST", "/v1/memories/recall", (), recall_body(query, **fields)))

    def feedback(self, memory_id: str, signal: FeedbackSignal, *, note: str | None = None) -> Any:
        """`POST /v1/memories/feedback`: `{"signal", "memory", "previous_id"}`. `id` is the memory's
        current id (`id` in the body: as recall or remember answered it); `useful` raises its importance, `wrong`
        and `outdated` supersede it. The answer's `memory.id` is the id a next feedback names."""
        return self._run(("POST", "/v1/memories/feedback", (), _body(id=memory_id, signal=signal, note=note)))

    def extract(self, messages: Sequence[Mapping[str, Any] | Any], *, layer: str | None = None,
                identifiers: Mapping[str, str] | None = None, wait: bool = True) -> Any:
        """`POST /v1/memories/extract`: learn typed memories from a conversation. `messages` are
        `{role, content, name?, created_at?}` mappings or LangChain messages, oldest first.
        Answers `{"extractor", "memories": [{"action", "candidate", "memory"}]}`, each candidate
        consolidated as `remember` does; or `{"job_id", "status"}` (202) with `wait=False`, or when
        the model failed and the service retries it later (`status: "retrying"`). Safe to retry:
        what was learnt once is `unchanged` the second time."""
        body = _body(messages=[extract_message(m) for m in messages], layer=layer,
                     identifiers=dict(identifiers) if identifiers is not None else None, wait=wait)
        return self._run(("POST", "/v1/memories/extract", (), body))

    def restore(self, memory_id: str) -> Any:
        """`POST /v1/memories/restore`: bring an archived memory back (`{"restored", "memory",
        "previous_id"}`); one that is not archived is answered as it is (`restored: false`)."""
        return self._run(("POST", "/v1/memories/restore", (), {"id": memory_id}))

    def profile(self, *, token_budget: int | None = None) -> Any:
        """`GET /v1/memory/profile`: the caller's standing profile, the most important current
        preferences and facts within `token_budget` tokens (the tenant's default when None)."""
        return self._run(("GET", "/v1/memory/profile", _given(token_budget=token_budget), None))

    # -- items (API.md) --

    def put(self, namespace: Sequence[str], key: str, value: Mapping[str, Any], *,
            attributes: Mapping[str, Any] | None = None, ttl_seconds: int | None = None,
            index_fields: Sequence[str] | Literal[False] | None = None, sync_index: bool = False) -> Any:
        """`PUT /v1/memories`: `{"id", "version", ...}`."""
        body = _body(namespace=list(namespace), key=key, value=dict(value),
                     attributes=dict(attributes) if attributes is not None else None, ttl_seconds=ttl_seconds,
                     index_fields=list(index_fields) if isinstance(index_fields, (list, tuple)) else index_fields,
                     sync_index=sync_index)
        return self._run(("PUT", "/v1/memories", (), body))

    def get(self, namespace: Sequence[str], key: str) -> Any:
        """`GET /v1/memories`: the item. Raises `NotFoundError` when there is none."""
        return self._run(("GET", "/v1/memories", _ns_key(namespace, key), None))

    def delete(self, namespace: Sequence[str], key: str) -> Any:
        """`DELETE /v1/memories`: idempotent, as the service is."""
        return self._run(("DELETE", "/v1/memories", _ns_key(namespace, key), None))

    def search(self, namespace_prefix: Sequence[str], *, query: str | None = None,
               filter: Mapping[str, Any] | None = None, limit: int = 10, offset: int = 0,
               mode: RecallMode | None = None, min_score: float | None = None, refresh_ttl: bool = False,
               as_of: str | None = None, known_at: str | None = None, temporal: bool | None = None) -> Any:
        """`POST /v1/memories/search`: `{"items": [...]}`. `as_of` (RFC 3339): only what held then;
        `known_at` (RFC 3339): the versions memsvc held then (each item's `current` says which are still);
        `temporal=False`: a time the query names does not move the ranking (the service's default: it does)."""
        body = _body(namespace_prefix=list(namespace_prefix), query=query,
                     filter=dict(filter) if filter is not None else None, limit=limit, offset=offset, mode=mode,
                     min_score=min_score, refresh_ttl=refresh_ttl, as_of=as_of, known_at=known_at,
                     temporal=temporal)
        return self._run(("POST", "/v1/memories/search", (), body))

    def list_namespaces(self, *, prefix: Sequence[str] = (), suffix: Sequence[str] = (),
                        max_depth: int | None = None, limit: int = 100, offset: int = 0, counts: bool = False) -> Any:
        """`GET /v1/memories/namespaces`: `{"namespaces": [...]}`; with `counts`, also `counts`
        (each namespace's live items, itself and below) and `count_cap` (a count equal to it means
        at least that many)."""
        query = ([("prefix", p) for p in prefix] + [("suffix", p) for p in suffix]
                 + _given(max_depth=max_depth, limit=limit, offset=offset) + ([("counts", "true")] if counts else []))
        return self._run(("GET", "/v1/memories/namespaces", query, None))

    def health(self) -> Any:
        """`GET /health`: `{"status": "healthy" | "degraded" | "unhealthy", "components": {...}}`
        (each with its latency); the report also when the service is unhealthy (its `503`), not an
        error, as the TypeScript client's `health()`."""
        return self._run(("GET", "/health", (), None))

    def openapi(self) -> Any:
        """`GET /openapi.json`: the service's OpenAPI document, generated from its route table."""
        return self._run(("GET", "/openapi.json", (), None))

    def metrics(self) -> Any:
        """`GET /metrics`: the service's metrics in Prometheus' text format, as a string (`memsvc
        serve`; `NotFoundError` on AWS, where they go to CloudWatch), as the TypeScript client's."""
        return self._run(("GET", "/metrics", (), None))

    def identity(self) -> Any:
        """`GET /v1/identity`: who the service takes you to be, `{"tenant_id", "user_id", "roles",
        "auth": "jwt" | "iam", "claims"}`."""
        return self._run(("GET", "/v1/identity", (), None))

    def events(self, namespace_prefix: Sequence[str] = (), **params: Any) -> Any:
        """`GET /v1/memories/events`: the timeline, oldest first (`kinds`, `after`, `before`,
        `after_cursor`, `limit` as API.md names them)."""
        query = [("ns", p) for p in namespace_prefix]
        for name, value in params.items():
            values = value if isinstance(value, (list, tuple)) else [value]
            query += [(name, str(v)) for v in values if v is not None]
        return self._run(("GET", "/v1/memories/events", query, None))

    def history(self, namespace: Sequence[str], key: str, *, limit: int | None = None,
                cursor: str | None = None) -> Any:
        """`GET /v1/memories/history`: every version of one memory, newest first: `{"versions",
        "next_cursor", "past_retention_before", "retention_days"}`. Pass `next_cursor` back as
        `cursor` for older versions. Raises `NotFoundError` when the caller may not read the key
        or nothing was ever written there."""
        return self._run(("GET", "/v1/memories/history",
                          _ns_key(namespace, key) + _given(limit=limit, cursor=cursor), None))

    # -- conversations --

    def create_session(self, session_id: str, *, agent_id: str | None = None, title: str | None = None,
                       metadata: Mapping[str, Any] | None = None, extract: ExtractMode | None = None) -> Any:
        """`extract`: learn memories from its messages (`off`, `on_close`, `continuous`; default the
        tenant's `session_extract`)."""
        return self._run(("POST", "/v1/memory/sessions", (),
                          _body(session_id=session_id, agent_id=agent_id, title=title, metadata=dict(metadata or {}),
                                extract=extract)))

    def list_sessions(self, *, limit: int | None = None, cursor: str | None = None,
                      agent_id: str | None = None) -> Any:
        return self._run(("GET", "/v1/memory/sessions", _given(limit=limit, cursor=cursor, agent_id=agent_id), None))

    def get_session(self, session_id: str) -> Any:
        return self._run(("GET", _session(session_id), (), None))

    def update_session(self, session_id: str, *, title: str | None = None, metadata: Mapping[str, Any] | None = None,
                       last_interaction: str | None = None, extract: ExtractMode | None = None,
                       if_match: int | None = None) -> Any:
        body = _body(title=title, metadata=dict(metadata) if metadata is not None else None,
                     last_interaction=last_interaction, extract=extract)
        headers = ({"If-Match": str(if_match)},) if if_match is not None else ()
        return self._run(("PUT", _session(session_id), (), body, *headers))

    def delete_session(self, session_id: str) -> Any:
        return self._run(("DELETE", _session(session_id), (), None))

    def add_message(self, session_id: str, role: MessageRole, content: str, *,
                    correlation_id: str | None = None, name: str | None = None) -> Any:
        return self._run(("POST", _session(session_id, "messages"), (),
                          _body(role=role, content=content, correlation_id=correlation_id, name=name)))

    def get_messages(self, session_id: str, *, after_seq: int | None = None, limit: int | None = None) -> Any:
        return self._run(("GET", _session(session_id, "messages"), _given(after_seq=after_seq, limit=limit), None))

    def close_session(self, session_id: str) -> Any:
        return self._run(("POST", _session(session_id, "close"), (), None))

    def upsert_semantic(self, content: str, *, external_id: str | None = None,
                        metadata: Mapping[str, Any] | None = None) -> Any:
        return self._run(("POST", "/v1/memory/semantic", (),
                          _body(content=content, external_id=external_id, metadata=dict(metadata or {}))))

    def get_semantic(self, *, external_id: str | None = None, content_hash: str | None = None) -> Any:
        return self._run(("GET", "/v1/memory/semantic", _given(external_id=external_id, content_hash=content_hash),
                          None))

    def delete_semantic(self, *, external_id: str | None = None, content_hash: str | None = None) -> Any:
        return self._run(("DELETE", "/v1/memory/semantic",
                          _given(external_id=external_id, content_hash=content_hash), None))

    # -- administration (roles admin/service) --

    def get_policies(self) -> Any:
        return self._run(("GET", "/admin/v1/memories/policies", (), None))

    def put_policies(self, policies: Mapping[str, str], *, dry_run: bool = False, replacing: str | None = None) -> Any:
        """The bundle now in force; with `dry_run`, only checked (`{"valid": true}`, or a 400 naming
        the policy file, line and column) and nothing stored. `replacing`: the `version` that
        `get_policies` answered; a `PreconditionFailedError` (412) when another bundle is in force by then."""
        query = [("dry_run", "true")] if dry_run else []
        body: dict[str, Any] = {"policies": dict(policies)}
        if replacing is not None:
            body["version"] = replacing
        return self._run(("PUT", "/admin/v1/memories/policies", query, body))

    def get_settings(self) -> Any:
        return self._run(("GET", "/admin/v1/memories/settings", (), None))

    def put_settings(self, **settings: Any) -> Any:
        """Only the settings given change."""
        return self._run(("PUT", "/admin/v1/memories/settings", (), settings))

    def index_status(self) -> Any:
        return self._run(("GET", "/admin/v1/memories/index/status", (), None))

    def index_trigger(self) -> Any:
        return self._run(("POST", "/admin/v1/memories/index/trigger", (), None))

    def index_retry(self, ids: Sequence[str]) -> Any:
        """Send quarantined memories (`index_status()["quarantined_items"]`) to the indexer again."""
        return self._run(("POST", "/admin/v1/memories/index/retry", (), {"ids": list(ids)}))

    def force_delete(self, memory_id: str) -> Any:
        return self._run(("DELETE", f"/admin/v1/memories/{path_segment(memory_id)}", (), None))

    def reflect(self, user_id: str) -> Any:
        """`POST /admin/v1/memories/reflect` (admin): one bounded reflection run over the user's
        memories; its stats. A run not `done` goes on from its cursor when called again."""
        return self._run(("POST", "/admin/v1/memories/reflect", (), {"user_id": user_id}))

    def erase_user(self, user_id: str) -> Any:
        """`DELETE /admin/v1/users/{user_id}` (admin): erase everything of the user in the caller's
        tenant; the receipt (`status`, `erased` counts per store, `completed_at`). A receipt with
        `status` `running` (a big user) goes on when called again; a completed one is answered
        again unchanged while the user has nothing new."""
        return self._run(("DELETE", f"/admin/v1/users/{path_segment(user_id)}", (), None))

    def user_erasure(self, user_id: str) -> Any:
        """`GET /admin/v1/users/{user_id}/erasure` (admin): the receipt of the user's last erasure."""
        return self._run(("GET", f"/admin/v1/users/{path_segment(user_id)}/erasure", (), None))


class MemsvcClient(AgentMemoryMethods, WorkflowMethods, GraphMethods, TransferMethods):
    """Every route of API.md and API-AGENT.md over HTTP, synchronously. Methods answer the
    service's JSON (None for a 204); `if_match=version` sends `If-Match`.

    Args:
        url, token, and every other keyword: as `MemsvcStore` takes them (environment defaults,
            SigV4, `tenant_id`, `timeout`, `max_retries`, ...).
        store: an existing `MemsvcStore` to share (its connections and authentication) instead.
    """

    def __init__(self, url: str | None = None, token: Any = None, *, store: MemsvcStore | None = None,
                 **options: Any) -> None:
        self.store = store if store is not None else MemsvcStore(url, token, **options)

    def _run(self, call: Any) -> Any:
        return self.store._call(call)

    def add_messages(self, session_id: str, messages: Sequence[Mapping[str, Any] | Any]) -> list[Any]:
        """Append `messages` in order, one `POST .../messages` each (the service has no batch
        route): their answers (`{message_id, seq, created_at}`). Every message is checked
        (`session_message`) before the first is sent. On an error, the messages before the failing
        one stay appended. Not idempotent: a retry after a lost answer (a timeout, a dropped
        connection, a gateway's 504) may store a message twice; `max_retries=0` never retries."""
        return [self.add_message(session_id, **fields) for fields in [session_message(m) for m in messages]]

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> MemsvcClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncMemsvcClient(AgentMemoryMethods, WorkflowMethods, GraphMethods, TransferMethods):
    """`MemsvcClient`'s methods as coroutines (same arguments, same answers and errors)."""

    def __init__(self, url: str | None = None, token: Any = None, *, store: MemsvcStore | None = None,
                 **options: Any) -> None:
        self.store = store if store is not None else MemsvcStore(url, token, **options)

    async def _run(self, call: Any) -> Any:
        return await self.store._acall(self.store._async_client(), call)

    async def add_messages(self, session_id: str, messages: Sequence[Mapping[str, Any] | Any]) -> list[Any]:
        """`MemsvcClient.add_messages`: one request after the other, so the seqs keep the order."""
        return [await self.add_message(session_id, **fields) for fields in [session_message(m) for m in messages]]

    async def aclose(self) -> None:
        await self.store.aclose()

    async def __aenter__(self) -> AsyncMemsvcClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
