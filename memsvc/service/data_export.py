"""Export (issue 26): a tenant's, a namespace prefix's or one user's data as an export file
(`core.export_format`, docs/export-format.md), sealed by default (`core.export_crypto`).

An export job walks its sections in order, a page of records per step: the tenant's settings and
policies (a tenant export only), the entities and relations callers wrote, sessions, the items
under the scope (messages and memories, one namespace after another, by key), plans and their
working memory, then task contexts (after the plans they may name). Each memory comes after its
history: the versions the timeline holds of its key (`GET /v1/memories/history`'s), oldest first,
read a page at a time. What is derived (vectors, keyword postings, field tokens, the derived graph)
is left out: an import rebuilds it.

Users are found through their namespaces (`["user", U, ...]`), then through the session and plan
stores' listings of the users who have one (`SessionStore.users_after`,
`WorkflowStore.plan_users_after`), so a tenant export holds the sessions and plans of a user who
has no memory and no message too.
"""

from __future__ import annotations

import base64
import importlib.metadata
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictStr, model_validator

from memsvc.core.errors import Conflict, InvalidArgument, NotFound
from memsvc.core.export_crypto import MIN_PASSPHRASE_CHARS, SealedHeader, kms_header, passphrase_header, seal_frame
from memsvc.core.export_format import ExportHeader, LineWriter
from memsvc.core.models import Caller, RememberJob, StoredItem, TimelineEvent, from_epoch_us, to_epoch_us, to_rfc3339
from memsvc.core.sessions import is_messages_namespace, session_namespace
from memsvc.core.transfer_jobs import MAX_PARTS, TransferJob
from memsvc.core.validation import Command, Integer, NamespacePrefix
from memsvc.ports import EventLog, ExportKeys, GraphStore, ItemStore, SessionStore, TenantConfigStore, WorkflowStore
from memsvc.service.access import Access
from memsvc.service.sealing import Sealer
from memsvc.service.transfers import TransferSteps

__all__ = ["DataExports", "StartExport", "ExportPartQuery", "ExportScope", "export_scope_prefix", "STEP_RECORDS",
           "FRAME_TARGET_BYTES"]

STEP_RECORDS = 2000  # records per step: a few seconds of reads on DynamoDB, well inside a Lambda's time
# Plaintext per frame (and so per part): a line is never split, so a frame holding one big memory
# (256 KiB of JSON at most) is a little over this; `MAX_PART_BYTES` leaves room for it.
FRAME_TARGET_BYTES = 192 * 1024
_SECTIONS = ("config", "graph", "sessions", "items", "plans", "tasks")
_PAGE = 200
UserId = Annotated[StrictStr, Field(min_length=1, max_length=256)]


class ExportScope(Command):
    """What to export: nothing named is the whole tenant; else a namespace prefix or one user's
    layers (`["user", user_id]`: agent, user, semantic and session layers, with sessions and plans)."""

    prefix: NamespacePrefix | None = Field(None, description="a namespace prefix (one segment at least)")
    user_id: UserId | None = None

    @model_validator(mode="after")
    def _one(self) -> "ExportScope":
        if self.prefix is not None and self.user_id is not None:
            raise ValueError("name a prefix or a user_id, not both")
        if self.prefix is not None and not self.prefix:
            raise ValueError("prefix needs a segment at least; leave it out to export the tenant")
        return self


class ExportPartQuery(Command):
    """`GET /admin/v1/exports/{id}/parts?index=N`."""

    index: Integer = Field(ge=0, le=MAX_PARTS, description="0 to the job's parts - 1: the file is the parts in order")


class StartExport(Command):
    """`POST /admin/v1/exports`. Sealed under `passphrase` or the KMS key `kms_key_id` (AWS); a
    file in plaintext only with `encrypt: false`."""

    scope: ExportScope = Field(default_factory=ExportScope)
    passphrase: StrictStr | None = Field(None, min_length=MIN_PASSPHRASE_CHARS, max_length=1024,
                                         description=f"at least {MIN_PASSPHRASE_CHARS} characters; never stored")
    kms_key_id: StrictStr | None = Field(None, min_length=1, max_length=2048,
                                         description="a KMS key id, ARN or alias (AWS backend)")
    encrypt: StrictBool = Field(True, description="false: a plaintext file (it holds every memory in the clear)")

    @model_validator(mode="after")
    def _one_key(self) -> "StartExport":
        keys = (self.passphrase is not None) + (self.kms_key_id is not None)
        if self.encrypt and keys != 1:
            raise ValueError("give a passphrase or a kms_key_id (or encrypt: false for a plaintext file)")
        if not self.encrypt and keys:
            raise ValueError("encrypt: false takes no passphrase or kms_key_id")
        return self


def export_scope_prefix(scope: dict[str, Any]) -> tuple[str, ...]:
    if scope.get("user_id") is not None:
        return ("user", scope["user_id"])
    return tuple(scope.get("prefix") or ())


class DataExports:
    def __init__(self, *, steps: TransferSteps, items: ItemStore, sessions: SessionStore, workflow: WorkflowStore,
                 graph: GraphStore, configs: TenantConfigStore, sealer: Sealer, access: Access,
                 kms: ExportKeys | None, log_: EventLog) -> None:
        """`log_`: the timeline, whose version events of each key are the memory's history."""
        self._steps = steps
        self._log = log_
        self._graph = graph
        self._items = items
        self._sessions = sessions
        self._workflow = workflow
        self._configs = configs
        self._sealer = sealer
        self._access = access
        self._kms = kms

    def start(self, caller: Caller, cmd: StartExport) -> TransferJob:
        self._access.admin(caller)
        scope = cmd.scope.model_dump(exclude_none=True)
        prefix = export_scope_prefix(scope)
        if prefix:
            self._access.namespace_to_read(caller, prefix)
        header = ExportHeader(_version(), caller.tenant_id, scope or {"tenant": True},
                              to_rfc3339(self._steps.now()) or "")
        writer = LineWriter()
        first = writer.lines([header.to_json()])
        if not cmd.encrypt:
            sealed_header, content_key, encryption = None, None, "none"
        elif cmd.passphrase is not None:
            sealed_header, content_key = passphrase_header(cmd.passphrase)
            encryption = "passphrase"
        else:
            if self._kms is None:
                raise InvalidArgument("KMS keys seal exports on the AWS backend only; use a passphrase",
                                      details={"field": "kms_key_id"})
            content_key, wrapped = self._kms.generate(cmd.kms_key_id or "", caller.tenant_id)
            sealed_header, encryption = kms_header(cmd.kms_key_id or "", wrapped), "kms"
        state = {"section": 0, "cursor": None, "chain": writer.chain.hex(), "counts": {}, "frame": 0,
                 "key": _b64(content_key) if content_key else None,
                 "header": _b64(sealed_header.line) if sealed_header else None}
        job = self._steps.new_job(caller, "export", state="running",
                                  options={"scope": scope or {"tenant": True}, "encryption": encryption},
                                  sealed=lambda job_id: self._sealer.seal_job(caller.tenant_id, job_id, state))
        preamble = sealed_header.line + b"\n" if sealed_header else b""
        data = preamble + _sealed(state, _sealing(state), first, last=False)
        self._steps.put_part(caller.tenant_id, job.job_id, 0, data)
        return self._steps.advance(job, parts=1, bytes=len(data),
                                   sealed=self._sealer.seal_job(caller.tenant_id, job.job_id, state))

    def status(self, caller: Caller, job_id: str) -> TransferJob:
        self._access.admin(caller)
        job = self._steps.job(caller, job_id, "export")
        self._steps.nudge_if_stalled(job)
        return job

    def part(self, caller: Caller, job_id: str, index: int) -> tuple[bytes, int]:
        """Part `index` of a finished export's file, and how many parts it has."""
        self._access.admin(caller)
        job = self._steps.job(caller, job_id, "export")
        if job.state != "done":
            raise Conflict("the export is not finished; download it once its state is done",
                           details={"state": job.state})
        data = self._steps.get_part(caller.tenant_id, job_id, index) if 0 <= index < job.parts else None
        if data is None:
            raise NotFound("the export has no part of this index", details={"index": index, "parts": job.parts})
        return data, job.parts

    # -- the steps -------------------------------------------------------------------------------

    def run(self, message: RememberJob) -> str:
        """The queued step `message` names, if the job is still at it."""
        return self._steps.run(message, self.step)

    def step(self, job: TransferJob) -> TransferJob:
        state = self._sealer.open_job(job.tenant, job.job_id, job.sealed)
        writer = LineWriter(bytes.fromhex(state["chain"]))
        writer.counts.update(state["counts"])
        records: list[dict[str, Any]] = []
        section, cursor = state["section"], state["cursor"]
        while section < len(_SECTIONS) and len(records) < STEP_RECORDS:
            page, cursor = self._page(job, _SECTIONS[section], cursor)
            records.extend(page)
            if cursor is None:
                section += 1
        finished = section >= len(_SECTIONS)
        frames = _frames(writer, records, trailer=finished)
        index, total = job.parts, job.bytes
        sealing = _sealing(state)
        for n, plaintext in enumerate(frames):
            data = _sealed(state, sealing, plaintext, last=finished and n == len(frames) - 1)
            self._steps.put_part(job.tenant, job.job_id, index, data)
            index, total = index + 1, total + len(data)
        state.update(section=section, cursor=cursor, chain=writer.chain.hex(), counts=dict(writer.counts))
        done = job.done + len(records)
        return self._steps.advance(
            job, parts=index, bytes=total, done=done, total=done if finished else None,
            state="done" if finished else "running",
            counts={kind: {"exported": n} for kind, n in sorted(writer.counts.items())},
            sealed=self._sealer.seal_job(job.tenant, job.job_id, state))

    def _page(self, job: TransferJob, section: str, cursor: Any) -> tuple[list[dict[str, Any]], Any]:
        """One page of a section's records and the cursor after it (None: the section is done)."""
        scope = job.options["scope"]
        prefix = export_scope_prefix(scope)
        if section == "config":
            return (self._config(job.tenant) if scope.get("tenant") else []), None
        if section == "graph":
            return self._explicit_graph(job.tenant, prefix), None
        if section == "items":
            return self._items_page(job.tenant, prefix, cursor)
        if section == "sessions":
            return self._sessions_page(job.tenant, prefix, cursor)
        if section == "tasks":
            return self._tasks_page(job.tenant, prefix, cursor)
        return self._plans_page(job.tenant, prefix, cursor)

    def _config(self, tenant: str) -> list[dict[str, Any]]:
        out = []
        settings = self._configs.get_config(tenant, "settings")
        if settings is not None:
            out.append({"kind": "settings", "settings": {k: v for k, v in settings.items() if k != "format"}})
        policies = self._configs.get_config(tenant, "policies")
        if policies is not None:
            out.append({"kind": "policies", "version": policies["version"], "policies": policies["policies"]})
        return out

    def _explicit_graph(self, tenant: str, prefix: tuple[str, ...]) -> list[dict[str, Any]]:
        """Entities and relations callers wrote, by name (entity ids are keyed hashes under the
        tenant's key: another tenant's are other ids). In one page: `GraphStore.explicit_rows`'s bound."""
        nodes, edges = self._graph.explicit_rows(tenant, prefix)
        names = {(n.namespace, n.entity_id): self._sealer.open_entity_name(tenant, n.entity_id, n.name_ct)
                 for n in nodes}
        out: list[dict[str, Any]] = [{"kind": "entity", "namespace": list(n.namespace),
                                      "name": names[(n.namespace, n.entity_id)], "type": n.type,
                                      "explicit": n.explicit} for n in nodes]
        out.extend({"kind": "relation", "namespace": list(e.namespace), "source": names[(e.namespace, e.source_id)],
                    "type": e.type, "target": names[(e.namespace, e.target_id)], "valid_from": e.valid_from,
                    "valid_to": e.valid_to} for e in edges)
        return out

    def _items_page(self, tenant: str, prefix: tuple[str, ...], cursor: Any) -> tuple[list[dict[str, Any]], Any]:
        """One namespace's items by key, each memory after its history, about `_PAGE` records at a
        time; the cursor is (namespace, last key done, and where the next key's history resumes:
        [key, stamp µs, event id], or None). The next namespace is asked for only when one is
        done, so the walk is linear in the tenant's rows however many namespaces it has; a long
        history is read a page at a time, over as many steps as it takes."""
        if cursor is None:
            first = self._items.namespaces_after(tenant, prefix, None, 1)
            if not first:
                return [], None
            cursor = [list(first[0]), "", None]
        ns, key_after = tuple(cursor[0]), cursor[1]
        resume = cursor[2] if len(cursor) > 2 else None
        now = self._steps.now()
        rows = self._sessions.messages(tenant, ns, key_after, _PAGE)
        out: list[dict[str, Any]] = []
        with_history = not is_messages_namespace(ns)
        for row in rows:
            if row.is_live(now):
                if with_history:
                    after = (from_epoch_us(resume[1]), resume[2]) if resume and resume[0] == row.key else None
                    while True:
                        events = self._log.versions_after(tenant, ns, row.key, after=after, limit=_PAGE)
                        # Up to the row's own version: what the timeline recorded since the row was
                        # read is newer than the memory this export holds
                        current = next((n for n, e in enumerate(events) if e.id == row.id), None)
                        out.extend(self._version_record(e) for e in events[:None if current is None else current + 1])
                        if current is not None or len(events) < _PAGE:
                            break
                        assert events[-1].occurred_at is not None
                        after = (events[-1].occurred_at, events[-1].id)
                        if len(out) >= _PAGE:
                            return out, [list(ns), key_after, [row.key, to_epoch_us(after[0]), after[1]]]
                out.append(self._item_record(row))
            key_after = row.key
            if len(out) >= _PAGE:
                return out, [list(ns), key_after, None]
        if len(rows) == _PAGE:
            return out, [list(ns), key_after, None]
        following = self._items.namespaces_after(tenant, prefix, ns, 1)
        return out, ([list(following[0]), "", None] if following else None)

    def _version_record(self, event: TimelineEvent) -> dict[str, Any]:
        """One version of a memory's history, as `GET /v1/memories/history` shows it."""
        value, attributes = self._sealer.open_item(event)
        return {"kind": "memory_version", "namespace": list(event.namespace), "key": event.key,
                "version": event.version, "change": event.kind, "event_id": event.id, "memory_id": event.memory_id,
                "occurred_at": to_rfc3339(event.occurred_at), "changed_at": to_rfc3339(event.changed_at),
                "expires_at": to_rfc3339(event.expires_at), "action": event.action, "reason": event.reason,
                "value": value, "attributes": attributes}

    def _item_record(self, item: StoredItem) -> dict[str, Any]:
        value, attributes = self._sealer.open_item(item)
        return {"kind": "message" if is_messages_namespace(item.namespace) else "memory",
                "namespace": list(item.namespace), "key": item.key, "id": item.id, "version": item.version,
                "value": value, "attributes": attributes, "index_fields": item.index_fields,
                "created_at": to_rfc3339(item.created_at), "updated_at": to_rfc3339(item.updated_at),
                "expires_at": to_rfc3339(item.expires_at), "ttl_seconds": item.ttl_seconds,
                "access_count": item.access_count, "last_accessed_at": to_rfc3339(item.last_accessed_at)}

    def _next_user(self, tenant: str, prefix: tuple[str, ...], position: list[Any] | None,
                   listing: Callable[[str, str | None, int], list[str]]) -> list[Any] | None:
        """The position (`[phase, user]`) of the first user after `position` (None: the first)
        whose sessions or plans the scope takes. Phase "ns": users found through their namespaces,
        in order, each namespace passed over once per section whatever the number of users; then
        phase "store": the users the store lists (`listing`: who has a session, or a plan), less
        those with a namespace (the first phase had them), so that a user with no memory and no
        message is found too."""
        if len(prefix) >= 2 and prefix[0] == "user":
            return ["one", prefix[1]] if position is None else None
        if prefix and prefix[0] != "user":
            return None
        phase, user = position if position is not None else ("ns", None)
        if phase == "ns":
            after = ("user", user) if user is not None else None
            while True:
                page = self._items.namespaces_after(tenant, ("user",), after, _PAGE)
                for ns in page:
                    if len(ns) >= 2 and ns[1] != user:
                        return ["ns", ns[1]]
                if len(page) < _PAGE:
                    break
                after = page[-1]
            phase, user = "store", None
        while True:
            users = listing(tenant, user, _PAGE)
            for listed in users:
                if not self._items.namespaces_after(tenant, ("user", listed), None, 1):
                    return ["store", listed]
            if len(users) < _PAGE:
                return None
            user = users[-1]

    def _sessions_page(self, tenant: str, prefix: tuple[str, ...], cursor: Any) -> tuple[list[dict[str, Any]], Any]:
        """One user's sessions, a page at a time; the cursor is (the user's position, the last
        one's last_interaction in µs and session id)."""
        position = cursor[0] if cursor else self._next_user(tenant, prefix, None, self._sessions.users_after)
        if position is None:
            return [], None
        user = position[1]
        after = (from_epoch_us(cursor[1]), cursor[2]) if cursor and cursor[1] is not None else None
        records = self._sessions.list(tenant, user, agent_id=None, limit=_PAGE, after=after)
        out = []
        for record in records:
            if session_namespace(user, record.session_id)[:len(prefix)] != prefix:
                continue
            opened = self._sealer.open_record(tenant, ("session", user, record.session_id), record.sealed)
            out.append({"kind": "session", "user_id": user, "session_id": record.session_id,
                        "agent_id": record.agent_id, "title": opened.get("title"),
                        "metadata": opened.get("metadata") or {}, "created_at": to_rfc3339(record.created_at),
                        "updated_at": to_rfc3339(record.updated_at),
                        "last_interaction": to_rfc3339(record.last_interaction), "version": record.version,
                        "seq": record.seq, "closed_at": to_rfc3339(record.closed_at),
                        "delete_after": to_rfc3339(record.delete_after), "extract": record.extract,
                        "extracted_seq": record.extracted_seq})
        if len(records) == _PAGE:
            last = records[-1]
            return out, [position, to_epoch_us(last.last_interaction), last.session_id]
        following = self._next_user(tenant, prefix, position, self._sessions.users_after)
        return out, ([following, None, None] if following is not None else None)

    def _plans_page(self, tenant: str, prefix: tuple[str, ...], cursor: Any) -> tuple[list[dict[str, Any]], Any]:
        """One user's plans with their working memory, a page at a time; the cursor is (the user's
        position, the last one's created_at in µs and plan id). Plans belong to a user, not to a
        namespace: a user's whole subtree (or more) takes them."""
        if len(prefix) > 2:
            return [], None
        position = cursor[0] if cursor else self._next_user(tenant, prefix, None, self._workflow.plan_users_after)
        if position is None:
            return [], None
        user = position[1]
        after = (int(cursor[1][0]), str(cursor[1][1])) if cursor and cursor[1] else None
        plans = self._workflow.list_plans(tenant, user, status=None, after=after, limit=_PAGE)
        out: list[dict[str, Any]] = []
        for plan in plans:
            opened = self._sealer.open_record(tenant, ("plan", user, plan.plan_id), plan.sealed)
            out.append({"kind": "plan", "user_id": user, "plan_id": plan.plan_id, "goal_event": plan.goal_event,
                        "status": plan.status, "goal_data": opened["goal_data"], "state": opened["state"],
                        "version": plan.version, "created_at": to_rfc3339(plan.created_at),
                        "updated_at": to_rfc3339(plan.updated_at)})
            out.extend(self._working(tenant, user, plan.plan_id))
        if len(plans) == _PAGE:
            last = plans[-1]
            return out, [position, [to_epoch_us(last.created_at), last.plan_id]]
        following = self._next_user(tenant, prefix, position, self._workflow.plan_users_after)
        return out, ([following, None] if following is not None else None)

    def _tasks_page(self, tenant: str, prefix: tuple[str, ...], cursor: Any) -> tuple[list[dict[str, Any]], Any]:
        """A page of task contexts from the tenant's listing (`WorkflowStore.list_tasks`); the cursor
        is the last one's (creator, task_id). A task context belongs to its creator, not to a
        namespace: a tenant export, a prefix of `["user"]`, or a user's (`["user", U]`) takes them."""
        if len(prefix) > 2 or (prefix and prefix[0] != "user"):
            return [], None
        creator = prefix[1] if len(prefix) == 2 else None
        after = (str(cursor[0]), str(cursor[1])) if cursor else None
        tasks = self._workflow.list_tasks(tenant, creator=creator, after=after, limit=_PAGE)
        out = []
        for task in tasks:
            opened = self._sealer.open_record(tenant, ("task", task.task_id), task.sealed)
            out.append({"kind": "task", "task_id": task.task_id, "creator": task.creator, "plan_id": task.plan_id,
                        "event_type": task.event_type, "response_event": task.response_event,
                        "response_topic": task.response_topic, "sub_tasks": list(task.sub_tasks),
                        "data": opened["data"], "state": opened["state"], "version": task.version,
                        "created_at": to_rfc3339(task.created_at), "updated_at": to_rfc3339(task.updated_at)})
        if len(tasks) < _PAGE:
            return out, None
        return out, [tasks[-1].creator, tasks[-1].task_id]

    def _working(self, tenant: str, user: str, plan_id: str) -> Iterator[dict[str, Any]]:
        now = self._steps.now()
        for record in self._workflow.iter_working(tenant, user, plan_id, after=None):
            if record.is_live(now):
                opened = self._sealer.open_record(tenant, ("working", user, plan_id, record.key), record.sealed)
                yield {"kind": "working", "user_id": user, "plan_id": plan_id, "key": record.key,
                       "value": opened["value"], "version": record.version,
                       "updated_at": to_rfc3339(record.updated_at), "expires_at": to_rfc3339(record.expires_at)}


def _sealing(state: dict[str, Any]) -> tuple[bytes, SealedHeader] | None:
    """The content key and sealed header a step's frames are sealed with (None: a plaintext export),
    decoded once per step."""
    if not state["header"]:
        return None
    return base64.b64decode(state["key"]), SealedHeader.read(base64.b64decode(state["header"]))


def _sealed(state: dict[str, Any], sealing: tuple[bytes, SealedHeader] | None, plaintext: bytes, *,
            last: bool) -> bytes:
    """The next frame of a sealed export (its index moved on in `state`), or the plaintext as it is."""
    if sealing is None:
        return plaintext
    frame = seal_frame(sealing[0], sealing[1], state["frame"], plaintext, last=last)
    state["frame"] += 1
    return frame


def _frames(writer: LineWriter, records: list[dict[str, Any]], *, trailer: bool) -> list[bytes]:
    """The records' lines cut into frames of about `FRAME_TARGET_BYTES`, never inside a line; the
    trailer goes in the last frame. No frame at all when there is nothing to write."""
    frames: list[bytes] = []
    current = bytearray()
    for record in records:
        line = writer.lines([record])
        if current and len(current) + len(line) > FRAME_TARGET_BYTES:
            frames.append(bytes(current))
            current = bytearray()
        current += line
    if trailer:
        current += writer.trailer()
    if current:
        frames.append(bytes(current))
    return frames


def _version() -> str:
    try:
        return importlib.metadata.version("memsvc")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
