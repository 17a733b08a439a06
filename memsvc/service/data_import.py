"""Import (issue 26): an export file into the caller's tenant, through the stores' normal writes,
so the change feed re-derives what the export left out (vectors, keyword postings, field tokens,
the derived graph) and the timeline records each written memory.

The file is uploaded in parts, then `start` opens it (a wrong passphrase is refused at once) and
reads its header: a file exported from another tenant is refused unless the caller says
`allow_other_tenant`, and even then every record goes into the caller's tenant, never the file's.
The job then reads the file twice, a bounded number of records per step: first `checking` it end
to end (frames, checksum, trailer, and each record's shape), writing nothing, so that a damaged or
cut-short file imports nothing; then `running`, applying each record.

Idempotent: a record whose key holds the same content already is skipped, so a second import of
a file changes nothing. A memory keeps its id, version and times where its key is new to the
tenant; over an existing key it becomes that key's next version with a new id (listed in
`remapped`). `dry_run` runs the second pass without writing: counts of create, update and skip.

A memory's history (`memory_version` records, oldest first, right before its `memory` record) is
restored onto the timeline as it was (`EventLog.restore`: ids, versions, stamps) where the key is
new to the tenant, before the memory is written, so that the memory's own write is a replay of
its newest version there; over a key the tenant has versions of, it is not carried
(`not_carried`), since its version numbers would clash with the tenant's own.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictStr

from memsvc.core.errors import ContentTooLong, Forbidden, InvalidArgument, MemsvcError, Taken
from memsvc.core.export_crypto import (FrameReader, SealedHeader, content_key_of_passphrase, is_sealed,
                                       kms_wrapped_key)
from memsvc.core.export_format import BadExportFile, ExportHeader, LineChecker
from memsvc.core.models import (Caller, ChangeKind, RememberJob, StoredItem, TimelineEvent, WriteAction, to_epoch_us,
                                 to_rfc3339)
from memsvc.core.namespaces import validate_key
from memsvc.core.paths import validate_index_fields
from memsvc.core.graph import normalise_name
from memsvc.core.policy import compile_bundle
from memsvc.core.sessions import SessionRecord, messages_namespace, session_namespace
from memsvc.core.validity import interval, typed_in
from memsvc.core.transfer_jobs import MAX_PART_BYTES, MAX_PARTS, TransferJob
from memsvc.core.validation import Command, Integer, Namespace, Timestamp
from memsvc.core.workflow import (MAX_NAME_CHARS, MAX_SUB_TASKS, PLAN_STATUSES, PlanRecord, StaleRecord, TaskRecord,
                                  WorkingRecord, check_id)
from memsvc.ports import EventLog, ExportKeys, GraphStore, ItemStore, SessionStore, TenantConfigStore, WorkflowStore
from memsvc.service.access import Access
from memsvc.service.graph import Graph, PutEntity, PutRelation
from memsvc.service.memories import Memories, check_nesting
from memsvc.service.memory_ids import MINTED_MEMORY_ID
from memsvc.service.sealing import SealedParts, Sealer
from memsvc.service.tenant_config import MAX_VALUE_BYTES, SettingsPatch
from memsvc.service.transfers import TransferSteps, caller_of
from memsvc.service.workflow_rules import check_payload

__all__ = ["DataImports", "CreateImport", "ImportPart", "StartImport", "STEP_RECORDS", "MAX_LISTED_REMAPPED"]

STEP_RECORDS = 2000  # records applied per step (a part or more is read whole before the count is looked at)
MAX_LISTED_REMAPPED = 100  # remapped memories the job lists; its counts hold them all
_MAX_EDGES_READ = 10_000  # of one entity, to find a relation already there
_BATCH = 500  # memory writes (and restored versions) per commit
_MAX_VERSION = 2**53 - 1  # what JSON carries exactly
_MAX_ID_CHARS = 128  # an event's id (a UUID: 36)
_MAX_REASON_CHARS = 500
# When a record says something happened, which is never later than the import: a restored event's
# stamp moves the tenant's timeline clock up to it (year 9999 stopped the local timeline), and a
# memory's times order its versions and its valid time. The exporting machine's clock may run ahead.
_PAST_TIMES = ("created_at", "updated_at", "last_accessed_at", "last_interaction", "occurred_at", "changed_at")
_CLOCK_LEEWAY = timedelta(minutes=5)
Stamp = Timestamp | None


class CreateImport(Command):
    """`POST /admin/v1/imports`: a job to upload a file into, part by part."""

    dry_run: StrictBool = Field(False, description="report what would change (create/update/skip per kind), "
                                                   "write nothing")
    allow_other_tenant: StrictBool = Field(False, description="import a file exported from another tenant (into "
                                                              "yours: a record never goes to the file's tenant)")


class ImportPart(Command):
    """`PUT /admin/v1/imports/{id}/parts`."""

    index: Integer = Field(ge=0, lt=MAX_PARTS, description="the part's place in the file, from 0")
    data: StrictStr = Field(min_length=4, max_length=(MAX_PART_BYTES + 2) // 3 * 4,
                            description=f"the part's bytes, base64; every part but the last {MAX_PART_BYTES} "
                                        "bytes, in file order")


class StartImport(Command):
    """`POST /admin/v1/imports/{id}/start`: every part is uploaded; open the file and begin."""

    parts: Integer = Field(ge=1, le=MAX_PARTS, description="how many parts the file was uploaded in")
    passphrase: StrictStr | None = Field(None, min_length=1, max_length=1024, description="of a sealed file")


class _Record(Command):
    kind: StrictStr


class MemoryRecord(_Record):
    namespace: Namespace
    key: StrictStr
    # feedback, restore and an admin's delete find a memory by its id: as memsvc mints them, one memory's
    id: StrictStr | None = Field(None, pattern=MINTED_MEMORY_ID)
    version: Integer = Field(1, ge=1, le=_MAX_VERSION)
    value: dict[StrictStr, Any]
    attributes: dict[StrictStr, Any] | None = None
    index_fields: Any = None
    created_at: Timestamp
    updated_at: Timestamp
    expires_at: Stamp = None
    ttl_seconds: Integer | None = Field(None, ge=1)
    access_count: Integer = Field(0, ge=0)
    last_accessed_at: Stamp = None


class MemoryVersionRecord(_Record):
    """One version of a memory's history, as its timeline event holds it (format version 3)."""

    namespace: Namespace
    key: StrictStr
    version: Integer = Field(ge=1, le=_MAX_VERSION)
    change: Literal["add", "update", "delete", "expired"]
    event_id: StrictStr = Field(min_length=1, max_length=_MAX_ID_CHARS)
    memory_id: StrictStr = Field(pattern=MINTED_MEMORY_ID)
    occurred_at: Timestamp
    changed_at: Timestamp
    expires_at: Stamp = None
    action: WriteAction | None = None
    reason: StrictStr | None = Field(None, max_length=_MAX_REASON_CHARS)
    value: dict[StrictStr, Any] | None = None
    attributes: dict[StrictStr, Any] | None = None


class SessionRecordIn(_Record):
    user_id: StrictStr = Field(min_length=1)
    session_id: StrictStr = Field(min_length=1)
    agent_id: StrictStr | None = None
    title: StrictStr | None = None
    metadata: dict[StrictStr, Any] = Field({})
    created_at: Timestamp
    updated_at: Timestamp
    last_interaction: Timestamp
    version: Integer = Field(1, ge=1)
    seq: Integer = Field(0, ge=0)
    closed_at: Stamp = None
    delete_after: Stamp = None
    extract: Literal["off", "on_close", "continuous"] = "off"
    extracted_seq: Integer = Field(0, ge=0)


class PlanRecordIn(_Record):
    user_id: StrictStr = Field(min_length=1)
    plan_id: StrictStr = Field(min_length=1)
    goal_event: StrictStr = Field(min_length=1, max_length=MAX_NAME_CHARS)
    status: Literal[PLAN_STATUSES]  # type: ignore[valid-type]
    goal_data: Any = None
    state: Any = None
    version: Integer = Field(1, ge=1)
    created_at: Timestamp
    updated_at: Timestamp


class WorkingRecordIn(_Record):
    user_id: StrictStr = Field(min_length=1)
    plan_id: StrictStr = Field(min_length=1)
    key: StrictStr = Field(min_length=1)
    value: Any
    version: Integer = Field(1, ge=1)
    updated_at: Timestamp
    expires_at: Stamp = None


class TaskRecordIn(_Record):
    task_id: StrictStr = Field(min_length=1)
    creator: StrictStr = Field(min_length=1)
    plan_id: StrictStr | None = None
    event_type: StrictStr = Field(min_length=1, max_length=MAX_NAME_CHARS)
    response_event: StrictStr | None = Field(None, min_length=1, max_length=MAX_NAME_CHARS)
    response_topic: StrictStr = Field(min_length=1, max_length=MAX_NAME_CHARS)
    sub_tasks: list[StrictStr] = Field([], max_length=MAX_SUB_TASKS)
    data: dict[StrictStr, Any] = Field({})
    state: dict[StrictStr, Any] = Field({})
    version: Integer = Field(1, ge=1)
    created_at: Timestamp
    updated_at: Timestamp


class EntityRecord(_Record):
    namespace: Namespace
    name: StrictStr = Field(min_length=1)
    type: StrictStr
    explicit: StrictBool = True


class RelationRecord(_Record):
    namespace: Namespace
    source: StrictStr = Field(min_length=1)
    type: StrictStr
    target: StrictStr = Field(min_length=1)
    valid_from: StrictStr | None = None
    valid_to: StrictStr | None = None


class SettingsRecord(_Record):
    settings: dict[StrictStr, Any]


class PoliciesRecord(_Record):
    version: StrictStr | None = None
    policies: dict[StrictStr, StrictStr]


_MODELS: dict[str, type[_Record]] = {"memory": MemoryRecord, "message": MemoryRecord,
                                     "memory_version": MemoryVersionRecord, "session": SessionRecordIn,
                                     "plan": PlanRecordIn, "working": WorkingRecordIn, "task": TaskRecordIn,
                                     "settings": SettingsRecord,
                                     "policies": PoliciesRecord, "entity": EntityRecord, "relation": RelationRecord}
Action = Literal["create", "update", "skip", "expired", "no_plan", "not_carried"]


def _save_unchanged(save: Callable[[], object], what: str, details: dict[str, Any]) -> None:
    """Runs a save that checks the stored version; a record that changed meanwhile refuses the import."""
    try:
        save()
    except StaleRecord:
        raise InvalidArgument(f"{what} changed while it was imported; import the file again", details=details) from None


class DataImports:
    def __init__(self, *, steps: TransferSteps, items: ItemStore, sessions: SessionStore, workflow: WorkflowStore,
                 memories: Memories, graph: tuple[GraphStore, Graph], configs: TenantConfigStore, sealer: Sealer,
                 access: Access, kms: ExportKeys | None, log_: EventLog,
                 on_write: Callable[[], None] = lambda: None) -> None:
        """`memories` builds each memory's version as every write does; `graph`: the knowledge
        graph's store (to compare) and service (to write, as its routes do); `log_`: the timeline,
        where a memory's history is restored."""
        self._steps = steps
        self._log = log_
        self._memories = memories
        self._graph_store, self._graph = graph
        self._items = items
        self._sessions = sessions
        self._workflow = workflow
        self._configs = configs
        self._sealer = sealer
        self._access = access
        self._kms = kms
        self._on_write = on_write  # wakes the local feed workers after a step's writes

    def create(self, caller: Caller, cmd: CreateImport) -> TransferJob:
        self._access.admin(caller)
        return self._steps.new_job(caller, "import", state="uploading", options=cmd.model_dump(),
                                   sealed=lambda job_id: b"")

    def put_part(self, caller: Caller, job_id: str, cmd: ImportPart) -> TransferJob:
        self._access.admin(caller)
        job = self._steps.job(caller, job_id, "import")
        if job.state != "uploading":
            raise Taken("the import has started; its parts can no longer change", details={"state": job.state})
        try:
            data = base64.b64decode(cmd.data, validate=True)
        except ValueError:
            raise InvalidArgument("data is not base64", details={"field": "data"}) from None
        if len(data) > MAX_PART_BYTES:
            raise ContentTooLong(f"a part holds at most {MAX_PART_BYTES} bytes", max_bytes=MAX_PART_BYTES)
        self._steps.put_part(caller.tenant_id, job_id, cmd.index, data)
        return job

    def start(self, caller: Caller, job_id: str, cmd: StartImport) -> TransferJob:
        """Open the file and read its header here, so a wrong passphrase or a file of another
        tenant is refused in the answer; the rest runs as the job."""
        self._access.admin(caller)
        job = self._steps.job(caller, job_id, "import")
        if job.state != "uploading":
            raise Taken("the import has already started", details={"state": job.state})
        first = self._steps.get_part(caller.tenant_id, job_id, 0)
        if first is None or (cmd.parts > 1 and self._steps.get_part(caller.tenant_id, job_id, cmd.parts - 1) is None):
            raise InvalidArgument("upload every part before starting: a part is missing", details={"field": "parts"})
        last = self._steps.last_part(caller.tenant_id, job_id)
        if last is not None and last >= cmd.parts:  # a part the file does not have would be left unread
            raise InvalidArgument(f"part {last} was uploaded, but the file has {cmd.parts} parts (0 to {cmd.parts - 1})",
                                  details={"field": "parts"})
        state: dict[str, Any] = {"phase": "check", "part": 0, "offset": 0, "frame": 0, "key": None, "header": None,
                                 "checker": None}
        if is_sealed(first):
            end = first.find(b"\n")
            if end < 0:
                raise BadExportFile("the file's first line is cut short")
            header = SealedHeader.read(first[:end])
            state.update(header=_b64(header.line), offset=end + 1, start=end + 1,
                         key=_b64(self._content_key(caller, header, cmd)))
        elif cmd.passphrase is not None:
            raise InvalidArgument("this file is not sealed: it takes no passphrase", details={"field": "passphrase"})
        else:
            state["start"] = 0
        job = dataclasses.replace(job, options={**job.options, "parts": cmd.parts})
        export_header = self._read_header(job, state, first)
        if export_header.tenant != caller.tenant_id and not job.options["allow_other_tenant"]:
            raise Forbidden("this file is an export of another tenant; set allow_other_tenant to import it into "
                            "yours", details={"field": "allow_other_tenant"})
        return self._steps.advance(job, state="checking", options={
            **job.options, "file": {"tenant": export_header.tenant, "scope": export_header.scope,
                                    "created_at": export_header.created_at,
                                    "memsvc_version": export_header.memsvc_version}},
            sealed=self._sealer.seal_job(caller.tenant_id, job_id, state))

    def status(self, caller: Caller, job_id: str) -> TransferJob:
        self._access.admin(caller)
        job = self._steps.job(caller, job_id, "import")
        self._steps.nudge_if_stalled(job)
        return job

    def _content_key(self, caller: Caller, header: SealedHeader, cmd: StartImport) -> bytes:
        if header.doc.get("key", {}).get("kind") == "kms":
            if self._kms is None:
                raise InvalidArgument("this file is sealed under a KMS key: import it on the AWS backend",
                                      details={"field": "passphrase"})
            key_id, wrapped = kms_wrapped_key(header)
            return self._kms.decrypt(key_id, caller.tenant_id, wrapped)
        if cmd.passphrase is None:
            raise InvalidArgument("this file is sealed: give its passphrase", details={"field": "passphrase"})
        return content_key_of_passphrase(header, cmd.passphrase)

    def _read_header(self, job: TransferJob, state: dict[str, Any], first: bytes) -> ExportHeader:
        """The export header, from the file's first frame (or line): at most its first parts
        (`first`, part 0, already read)."""
        reader = _FileReader(self._steps, job, dict(state), known={0: first})
        for _ in reader.records(limit=1):
            break
        if reader.checker.header is None:
            raise BadExportFile("the file has no export header")
        return reader.checker.header

    # -- the steps -------------------------------------------------------------------------------

    def run(self, message: RememberJob) -> str:
        """The queued step `message` names, if the job is still at it."""
        return self._steps.run(message, self.step)

    def step(self, job: TransferJob) -> TransferJob:
        state = self._sealer.open_job(job.tenant, job.job_id, job.sealed)
        reader = _FileReader(self._steps, job, state)
        checking = state["phase"] == "check"
        caller = caller_of(job.options["caller"])
        counts = {kind: dict(c) for kind, c in job.counts.items()}
        remapped = list(job.remapped)
        done = 0
        batch = _MemoryWrites(self._items, self._log)
        for record in reader.records(limit=STEP_RECORDS):
            parsed = _parse(record, reader.checker.line_number)
            if checking:
                self._check(caller, parsed, reader.checker.line_number)
                _check_history_order(state, parsed, reader.checker.line_number)
            else:
                try:
                    action, remap = self._apply(caller, parsed, batch if not job.options["dry_run"] else None, state)
                except MemsvcError as exc:
                    if exc.retryable:
                        raise
                    # What the tenant holds that the check pass could not see (a task id another
                    # user holds): the records before it are written, and the job says so; a
                    # memory's own history is not, without it.
                    if isinstance(parsed, MemoryRecord):
                        batch.forget_versions((tuple(parsed.namespace), parsed.key))
                    self._flush(batch, counts, wrote=bool(done) and not job.options["dry_run"])
                    return self._steps.advance(job, state="failed", error=exc.to_body()["error"], counts=counts,
                                               remapped=remapped, done=job.done + done)
                kind = counts.setdefault(parsed.kind, {})
                if action is not None:
                    kind[action] = kind.get(action, 0) + 1
                if remap is not None:
                    kind["remapped"] = kind.get("remapped", 0) + 1
                    if len(remapped) < MAX_LISTED_REMAPPED:
                        remapped.append(remap)
            done += 1
        self._flush(batch, counts, wrote=bool(done) and not checking and not job.options["dry_run"])
        state.update(reader.position())
        if checking and reader.finished and state.get("versions_of") is not None:
            raise BadExportFile(f"line {reader.checker.line_number}: the file ends inside a memory's history, "
                                "before its memory record", details={"line": reader.checker.line_number})
        if not reader.finished:
            return self._advance(job, state, counts=counts, remapped=remapped, done=job.done + done,
                                 total=None if checking else job.total)
        if checking:
            total = sum(reader.checker.counts.values())
            state.update(phase="apply", part=0, offset=state["start"], frame=0, checker=None, versions_of=None)
            return self._advance(job, state, counts={}, remapped=[], done=0, total=total, phase="running")
        return self._advance(job, state, counts=counts, remapped=remapped, done=job.done + done, total=job.total,
                             phase="done")

    def _flush(self, batch: "_MemoryWrites", counts: dict[str, dict[str, int]], *, wrote: bool) -> None:
        """The step's writes not written yet, written, and its restored versions counted."""
        batch.flush()
        for action, n in batch.restored.items():
            versions = counts.setdefault("memory_version", {})
            versions[action] = versions.get(action, 0) + n
        if wrote:
            self._on_write()

    def _advance(self, job: TransferJob, state: dict[str, Any], *, counts: dict[str, dict[str, int]],
                 remapped: list[dict[str, Any]], done: int, total: int | None, phase: str | None = None
                 ) -> TransferJob:
        return self._steps.advance(job, state=phase or job.state, counts=counts, remapped=remapped, done=done,
                                   total=total, sealed=self._sealer.seal_job(job.tenant, job.job_id, state))

    def _check(self, caller: Caller, record: _Record, line: int) -> None:
        """What the normal write path would refuse, refused now: before anything is written."""
        latest = self._steps.now() + _CLOCK_LEEWAY
        for name in _PAST_TIMES:
            at = getattr(record, name, None)
            if at is not None and at > latest:
                raise BadExportFile(f"line {line}: {name} {to_rfc3339(at)} is in the future",
                                    details={"line": line, "field": name})
        created, updated = getattr(record, "created_at", None), getattr(record, "updated_at", None)
        if created is not None and updated is not None and updated < created:
            # reads order by updated_at, and created_at is when the key was first written
            raise BadExportFile(f"line {line}: updated_at is before created_at", details={"line": line, "field": "updated_at"})
        try:
            if isinstance(record, MemoryRecord):
                self._access.namespace_to_write(caller, record.namespace)
                validate_key(record.key)
                held = self._items.get_by_id(caller.tenant_id, record.id) if record.id is not None else None
                if held is not None and (held.namespace, held.key) != (tuple(record.namespace), record.key):
                    # feedback, restore and an admin's delete find a memory by its id
                    raise InvalidArgument(f"id {record.id} names another memory of this tenant")
                validate_index_fields(record.index_fields)
                _check_value(record.value, record.attributes)
            elif isinstance(record, MemoryVersionRecord):
                self._access.namespace_to_write(caller, record.namespace)
                validate_key(record.key)
                if record.change in ("add", "update"):
                    if record.value is None:
                        raise InvalidArgument(f"an {record.change} version carries its value")
                    _check_value(record.value, record.attributes)
                elif record.value is not None or record.attributes is not None:
                    raise InvalidArgument(f"a {record.change} version carries no value")
            elif isinstance(record, SessionRecordIn):
                for namespace in (session_namespace(record.user_id, record.session_id),
                                  messages_namespace(record.user_id, record.session_id)):
                    self._access.namespace_to_write(caller, namespace)
            elif isinstance(record, (PlanRecordIn, WorkingRecordIn)):
                check_id(record.plan_id, "plan_id")
                if isinstance(record, WorkingRecordIn):
                    check_id(record.key, "key")
            elif isinstance(record, TaskRecordIn):
                for name, value in (("task_id", record.task_id), ("plan_id", record.plan_id),
                                    *(("sub_tasks", sub) for sub in record.sub_tasks)):
                    if value is not None:
                        check_id(value, name)
                try:
                    check_payload({"data": record.data, "state": record.state}, "data and state")
                except ContentTooLong as exc:
                    raise InvalidArgument(exc.message) from None
            elif isinstance(record, SettingsRecord):
                SettingsPatch.parse(_patchable(record.settings))
            elif isinstance(record, PoliciesRecord):
                if not compile_bundle(record.policies).allow("admin", [], None, caller.policy_context()):
                    raise InvalidArgument("the file's policy bundle would deny you the admin operation")
            elif isinstance(record, EntityRecord):
                PutEntity.parse({"namespace": record.namespace, "name": record.name, "type": record.type})
            elif isinstance(record, RelationRecord):
                _put_relation(record)
        except InvalidArgument as exc:
            raise BadExportFile(f"line {line}: {exc.message}", details={"line": line}) from None

    def _apply(self, caller: Caller, record: _Record, batch: _MemoryWrites | None, state: dict[str, Any]
               ) -> tuple[Action | None, dict[str, Any] | None]:
        """What the record does to the tenant, done unless this is a dry run (no `batch`). A
        restored version's action is None: `batch` counts it when it is written. `state` keeps
        which key's history is being read, across steps."""
        if isinstance(record, MemoryVersionRecord):
            return self._apply_version(caller, record, batch, state), None
        state["history"] = None
        if isinstance(record, MemoryRecord):
            return self._apply_memory(caller, record, batch)
        write = batch is not None
        if batch is not None:
            batch.flush()  # what follows may refer to what came before
        if isinstance(record, SessionRecordIn):
            return self._apply_session(caller.tenant_id, record, write=write), None
        if isinstance(record, PlanRecordIn):
            return self._apply_plan(caller.tenant_id, record, write=write), None
        if isinstance(record, WorkingRecordIn):
            return self._apply_working(caller.tenant_id, record, write=write), None
        if isinstance(record, TaskRecordIn):
            return self._apply_task(caller.tenant_id, record, write=write), None
        if isinstance(record, EntityRecord):
            return self._apply_entity(caller, record, write=write), None
        if isinstance(record, RelationRecord):
            return self._apply_relation(caller, record, write=write), None
        if isinstance(record, SettingsRecord):
            stored = self._configs.get_config(caller.tenant_id, "settings")
            wanted = _patchable(record.settings)
            if stored is not None and _patchable(stored) == wanted:
                return "skip", None
            if write:
                self._access.settings.update(caller.tenant_id, SettingsPatch.parse(wanted))
            return ("update" if stored else "create"), None
        assert isinstance(record, PoliciesRecord)
        stored = self._configs.get_config(caller.tenant_id, "policies")
        if stored is not None and stored["policies"] == record.policies:
            return "skip", None
        if write:
            self._access.policies.replace(caller.tenant_id, record.policies, caller.policy_context())
        return ("update" if stored else "create"), None

    def _apply_memory(self, caller: Caller, record: MemoryRecord, batch: _MemoryWrites | None
                      ) -> tuple[Action, dict[str, Any] | None]:
        tenant, ns, now = caller.tenant_id, tuple(record.namespace), self._steps.now()
        if record.expires_at is not None and record.expires_at <= now:
            return "expired", None
        index_fields = validate_index_fields(record.index_fields)
        ref = (ns, record.key)
        read = batch.read_before.pop(ref, None) if batch is not None else None
        old = read[0] if read is not None else self._items.get(tenant, ns, record.key)
        live_old = old if old is not None and old.is_live(now) else None
        if live_old is not None:
            value, attributes = self._sealer.open_item(live_old)
            if (value == record.value and attributes == record.attributes and live_old.index_fields == index_fields
                    and live_old.ttl_seconds == record.ttl_seconds):
                return "skip", None
        action: Action = "update" if live_old else "create"
        keep = old is None  # a key new to the tenant keeps its id, version and times
        version = record.version if keep else old.version + 1  # type: ignore[union-attr]
        # An id that names another memory is not kept (feedback, restore and an admin's delete would
        # find either): one of the tenant's refuses the file (`_check`); one of this file's, found
        # here, gets a new id.
        kept_id = keep and record.id is not None and not self._names_another(tenant, record.id, ref, batch)
        memory_id = record.id if kept_id else str(uuid.uuid4())
        remap = None if kept_id or (keep and record.id is None) else {
            "namespace": list(ns), "key": record.key, "id": record.id, "new_id": memory_id,
            "version": record.version, "new_version": version}
        if batch is None:
            return action, remap
        newest = batch.newest_version.pop(ref, None)
        if newest is not None and (newest.value, newest.attributes) != (record.value, record.attributes):
            newest = None
        if newest is not None:
            policy_attributes = newest.policy_attributes  # the memory is its history's newest version
        else:
            policy_attributes = self._access.policies.get(tenant).extract_attributes(
                ns, record.key, record.value, record.attributes, caller.policy_context())
        item = self._memories.build_version(tenant, ns, record.key, record.value, old=old,
                                            attributes=record.attributes, policy_attributes=policy_attributes,
                                            index_fields=index_fields, ttl_seconds=record.ttl_seconds)
        if keep:
            valid_start, valid_end = interval(record.value, typed=typed_in(ns, record.value),
                                              created_at=record.created_at, updated_at=record.updated_at)
            item = dataclasses.replace(item, id=memory_id, created_at=record.created_at,
                                       updated_at=record.updated_at, valid_start=valid_start, valid_end=valid_end)
            if version != item.version:  # the seal binds the version: sealed again under the kept one
                sealed = (newest.sealed if newest is not None and newest.version == version
                          else self._sealer.seal_item(tenant, ns, record.key, version, value=record.value,
                                                      attributes=record.attributes))
                item = dataclasses.replace(item, version=version, value_ct=sealed.value_ct,
                                           attributes_ct=sealed.attributes_ct)
        item = dataclasses.replace(item, expires_at=record.expires_at, access_count=record.access_count,
                                   last_accessed_at=record.last_accessed_at)
        batch.add((item, "update" if live_old else "add", old))
        return action, remap

    def _names_another(self, tenant: str, memory_id: str, ref: tuple[tuple[str, ...], str],
                       batch: _MemoryWrites | None) -> bool:
        pending = batch.key_of_id(memory_id) if batch is not None else None
        if pending is not None:
            return pending != ref
        held = self._items.get_by_id(tenant, memory_id)
        return held is not None and (held.namespace, held.key) != ref

    def _apply_version(self, caller: Caller, record: MemoryVersionRecord, batch: _MemoryWrites | None,
                       state: dict[str, Any]) -> Action | None:
        """A version of a memory's history, restored where the key's history is the file's. At the
        key's first version: the tenant has no row and no version of the key (new to it: every
        version is restored), or its oldest version is this one (the file imported before, or a
        step that died midway: what the tenant holds is skipped, and only where it has no row yet
        is the rest restored). Otherwise the tenant's own versions stand (`not_carried`): the
        memory record becomes the next of them."""
        tenant, ns = caller.tenant_id, tuple(record.namespace)
        history = state.get("history")
        if history is None or (tuple(history["namespace"]), history["key"]) != (ns, record.key):
            oldest = self._log.versions_after(tenant, ns, record.key, after=None, limit=1)
            row = self._items.get(tenant, ns, record.key)
            if batch is not None:
                batch.read_before = {(ns, record.key): (row,)}  # the memory record that follows reads it here
            has_row = row is not None
            history = state["history"] = {
                "namespace": list(ns), "key": record.key, "fresh": not oldest and not has_row, "has_row": has_row,
                "carry": bool(oldest and oldest[0].id == record.event_id), "attributes": {}}
        if not (history["fresh"] or history["carry"]):
            return "not_carried"
        if batch is not None and record.value is not None:
            # A delete or an expiry is seen by whoever could see the memory it removed: its policy attributes.
            history["attributes"] = self._access.policies.get(tenant).extract_attributes(
                ns, record.key, record.value, record.attributes, caller.policy_context())
        if not history["fresh"]:
            if self._holds(tenant, record):
                return "skip"
            if history["has_row"]:  # a history that went another way from here: the tenant's stands
                return "not_carried"
        if batch is None:
            return "create"
        value_ct = attributes_ct = None
        if record.value is not None:  # an add or an update
            sealed = self._sealer.seal_item(tenant, ns, record.key, record.version, value=record.value,
                                            attributes=record.attributes)
            value_ct, attributes_ct = sealed.value_ct, sealed.attributes_ct
            batch.newest_version = {(ns, record.key): _NewestVersion(
                record.version, record.value, record.attributes, history["attributes"], sealed)}
        batch.add_version(TimelineEvent(
            tenant=tenant, id=record.event_id, kind=record.change, namespace=ns, key=record.key,
            memory_id=record.memory_id, version=record.version, changed_at=record.changed_at,
            expires_at=record.expires_at, policy_attributes=history["attributes"], value_ct=value_ct,
            attributes_ct=attributes_ct, occurred_at=record.occurred_at, action=record.action,
            reason=record.reason))
        return None

    def _holds(self, tenant: str, record: MemoryVersionRecord) -> bool:
        """Whether the tenant's timeline holds this version already (its event id; one read)."""
        return bool(self._log.held(tenant, [record.event_id]))

    def _apply_session(self, tenant: str, record: SessionRecordIn, *, write: bool) -> Action:
        existing = self._sessions.get(tenant, record.user_id, record.session_id)
        payload = {"title": record.title, "metadata": record.metadata}
        ids = ("session", record.user_id, record.session_id)
        if existing is not None and (
                self._sealer.open_record(tenant, ids, existing.sealed) == payload
                and (existing.agent_id, existing.closed_at, existing.delete_after, existing.extract)
                == (record.agent_id, record.closed_at, record.delete_after, record.extract)):
            return "skip"
        if write:
            session = SessionRecord(
                tenant=tenant, user_id=record.user_id, session_id=record.session_id, agent_id=record.agent_id,
                sealed=self._sealer.seal_record(tenant, ids, payload), created_at=record.created_at,
                updated_at=record.updated_at, last_interaction=record.last_interaction, version=record.version,
                seq=record.seq, closed_at=record.closed_at, delete_after=record.delete_after, extract=record.extract,
                extracted_seq=record.extracted_seq)
            if existing is None:
                self._sessions.create(session)
            else:
                self._sessions.update(dataclasses.replace(session, version=existing.version + 1),
                                      expected_version=existing.version)
        return "update" if existing else "create"

    def _apply_plan(self, tenant: str, record: PlanRecordIn, *, write: bool) -> Action:
        existing = self._workflow.get_plan(tenant, record.user_id, record.plan_id)
        payload = {"goal_data": record.goal_data, "state": record.state}
        ids = ("plan", record.user_id, record.plan_id)
        if existing is not None and (
                self._sealer.open_record(tenant, ids, existing.sealed) == payload
                and (existing.goal_event, existing.status) == (record.goal_event, record.status)):
            return "skip"
        if write:
            plan = PlanRecord(tenant=tenant, user=record.user_id, plan_id=record.plan_id, goal_event=record.goal_event,
                              status=record.status, sealed=self._sealer.seal_record(tenant, ids, payload),
                              version=existing.version + 1 if existing else record.version,
                              created_at=existing.created_at if existing else record.created_at,
                              updated_at=record.updated_at)
            _save_unchanged(lambda: self._workflow.save_plan(plan, previous=existing), "a plan",
                            {"plan_id": record.plan_id})
        return "update" if existing else "create"

    def _apply_working(self, tenant: str, record: WorkingRecordIn, *, write: bool) -> Action:
        now = self._steps.now()
        if record.expires_at is not None and record.expires_at <= now:
            return "expired"
        existing = self._workflow.get_working(tenant, record.user_id, record.plan_id, record.key)
        ids = ("working", record.user_id, record.plan_id, record.key)
        if (existing is not None and existing.is_live(now) and existing.expires_at == record.expires_at
                and self._sealer.open_record(tenant, ids, existing.sealed) == {"value": record.value}):
            return "skip"
        if write:
            stored = self._workflow.put_working(WorkingRecord(
                tenant=tenant, user=record.user_id, plan_id=record.plan_id, key=record.key,
                sealed=self._sealer.seal_record(tenant, ids, {"value": record.value}), version=record.version,
                updated_at=record.updated_at, expires_at=record.expires_at))
            if stored is None:
                return "no_plan"
        return "update" if existing else "create"

    def _apply_task(self, tenant: str, record: TaskRecordIn, *, write: bool) -> Action:
        """A task context by its id: skipped when the tenant holds the same one, else written as
        the id's next version (an existing one keeps its creator and created_at). A sub-task
        another of the tenant's task contexts holds is refused, as the API refuses it."""
        existing = self._workflow.get_task(tenant, record.task_id)
        payload = {"data": record.data, "state": record.state}
        sub_tasks = tuple(dict.fromkeys(record.sub_tasks))
        fields = (record.plan_id, record.event_type, record.response_event, record.response_topic, sub_tasks)
        if existing is not None and (
                (existing.plan_id, existing.event_type, existing.response_event, existing.response_topic,
                 existing.sub_tasks) == fields
                and self._sealer.open_record(tenant, ("task", record.task_id), existing.sealed) == payload):
            return "skip"
        if write:
            task = TaskRecord(tenant=tenant, task_id=record.task_id,
                              creator=existing.creator if existing else record.creator, plan_id=record.plan_id,
                              event_type=record.event_type, response_event=record.response_event,
                              response_topic=record.response_topic, sub_tasks=sub_tasks,
                              sealed=self._sealer.seal_record(tenant, ("task", record.task_id), payload),
                              version=existing.version + 1 if existing else record.version,
                              created_at=existing.created_at if existing else record.created_at,
                              updated_at=record.updated_at)
            try:
                _save_unchanged(lambda: self._workflow.save_task(task, previous=existing), "a task context",
                                {"task_id": record.task_id})
            except Taken as exc:
                raise InvalidArgument(f"task context {record.task_id}: {exc.message}",
                                      details={"task_id": record.task_id, **(exc.details or {})}) from None
        return "update" if existing else "create"

    def _entity_id(self, tenant: str, name: str) -> str:
        return self._sealer.entity_ids(tenant, [normalise_name(name)])[0]

    def _apply_entity(self, caller: Caller, record: EntityRecord, *, write: bool) -> Action:
        """An entity that was only derived comes as `explicit: false` when an explicit relation
        needs it: it is written only where the tenant has no such entity yet (its memory's
        indexing may not have made it yet), and then it is explicit."""
        ns = tuple(record.namespace)
        entity_id = self._entity_id(caller.tenant_id, record.name)
        existing = [n for n in self._graph_store.nodes(caller.tenant_id, ns, [entity_id]) if n.namespace == ns]
        if existing and (not record.explicit or (existing[0].explicit and existing[0].type == record.type)):
            return "skip"
        if write:
            self._graph.put_entity(caller, PutEntity.parse({"namespace": record.namespace, "name": record.name,
                                                            "type": record.type}))
        return "update" if existing else "create"

    def _apply_relation(self, caller: Caller, record: RelationRecord, *, write: bool) -> Action:
        ns = tuple(record.namespace)
        source, target = (self._entity_id(caller.tenant_id, name) for name in (record.source, record.target))
        held = {(e.source_id, e.type, e.target_id, e.valid_from, e.valid_to)
                for e in self._graph_store.expand(caller.tenant_id, ns, [source], limit=_MAX_EDGES_READ)
                if e.explicit and e.namespace == ns}
        if (source, record.type, target, record.valid_from, record.valid_to) in held:
            return "skip"
        if write:
            # Its ends, where the tenant has none: an export names them first (`entity` records),
            # but a file written another way may not, and the check pass read no graph.
            present = {n.entity_id for n in self._graph_store.nodes(caller.tenant_id, ns, [source, target])
                       if n.namespace == ns}
            for name, entity_id in ((record.source, source), (record.target, target)):
                if entity_id not in present:
                    self._graph.put_entity(caller, PutEntity.parse({"namespace": record.namespace, "name": name}))
                    present.add(entity_id)
            self._graph.put_relation(caller, _put_relation(record))
        return "update" if any(h[:3] == (source, record.type, target) for h in held) else "create"


@dataclasses.dataclass(frozen=True)
class _NewestVersion:
    """The last version of a key's history restored in this step: what its memory record, when it
    is the same version, takes from it rather than work it out again."""

    version: int
    value: dict[str, Any]
    attributes: dict[str, Any] | None
    policy_attributes: dict[str, Any]
    sealed: SealedParts


class _MemoryWrites:
    """A step's memory writes, written `_BATCH` at a time (`ItemStore.write_many`: one commit each
    locally), each after the versions of history added before it (`EventLog.restore`), so that
    the timeline holds a memory's history before its write reaches the timeline. A write that lost
    a race raises its `Conflict`: the step runs again, and what was written is then skipped."""

    def __init__(self, items: ItemStore, log_: EventLog) -> None:
        self._items = items
        self._log = log_
        self._writes: list[tuple[StoredItem, ChangeKind, StoredItem | None]] = []
        self._keys: set[tuple[tuple[str, ...], str]] = set()
        self._ids: dict[str, tuple[tuple[str, ...], str]] = {}  # of the writes not flushed yet
        self._versions: list[TimelineEvent] = []
        self.restored: dict[str, int] = {}  # versions restored (create) or held already (skip)
        # What a key's history read, for the memory record that comes right after it: the key's
        # row (as it was before the history), and the newest version restored. At most one key's.
        self.read_before: dict[tuple[tuple[str, ...], str], tuple[StoredItem | None]] = {}
        self.newest_version: dict[tuple[tuple[str, ...], str], _NewestVersion] = {}

    def forget_versions(self, ref: tuple[tuple[str, ...], str]) -> None:
        """Not to restore the versions of `ref` not restored yet (its memory is not written)."""
        self._versions = [e for e in self._versions if (e.namespace, e.key) != ref]

    def add_version(self, event: TimelineEvent) -> None:
        if len(self._versions) >= _BATCH:
            self._restore()
        self._versions.append(event)

    def _restore(self) -> None:
        events, self._versions = self._versions, []
        for inserted in self._log.restore(events) if events else []:
            action = "create" if inserted else "skip"
            self.restored[action] = self.restored.get(action, 0) + 1

    def add(self, write: tuple[StoredItem, ChangeKind, StoredItem | None]) -> None:
        key = (write[0].namespace, write[0].key)
        if key in self._keys or len(self._writes) >= _BATCH:  # a key written twice: the first lands first
            self.flush()
        self._writes.append(write)
        self._keys.add(key)
        self._ids[write[0].id] = key

    def key_of_id(self, memory_id: str) -> tuple[tuple[str, ...], str] | None:
        """The key of the write not flushed yet that holds `memory_id`."""
        return self._ids.get(memory_id)

    def flush(self) -> None:
        self._restore()
        writes, self._writes, self._keys, self._ids = self._writes, [], set(), {}
        failed = [outcome for outcome in self._items.write_many(writes) if outcome is not None] if writes else []
        if failed:
            raise failed[0]


def _check_value(value: dict[str, Any], attributes: dict[str, Any] | None) -> None:
    check_nesting(value, "value")
    check_nesting(attributes, "attributes")
    size = len(_compact(value)) + (len(_compact(attributes)) if attributes else 0)
    if size > MAX_VALUE_BYTES:
        raise InvalidArgument(f"a value takes {size} bytes; the limit is {MAX_VALUE_BYTES}")


def _check_history_order(state: dict[str, Any], record: _Record, line: int) -> None:
    """A memory's versions come together, oldest first (by their stamps), right before its
    `memory` record: what a restore needs to put them back as they were. Not by version number:
    on DynamoDB a key whose row TTL removed starts again at version 1. `state["versions_of"]`:
    [namespace, key, stamp µs] of the last version read whose memory record has not come yet."""
    pending = state.get("versions_of")
    if isinstance(record, MemoryVersionRecord):
        here = [list(record.namespace), record.key]
        stamp = to_epoch_us(record.occurred_at)
        if pending is not None and pending[:2] != here:
            raise _out_of_order(line, "a memory's versions come right before its memory record, not another key's")
        if pending is not None and stamp < pending[2]:
            raise _out_of_order(line, "a memory's versions come oldest first: this one is older than the one "
                                      "before it")
        state["versions_of"] = [*here, stamp]
        return
    if pending is None:
        return
    if (not isinstance(record, MemoryRecord) or record.kind != "memory"
            or pending[:2] != [list(record.namespace), record.key]):
        raise _out_of_order(line, "a memory's versions come right before its memory record, not another record")
    state["versions_of"] = None


def _out_of_order(line: int, why: str) -> BadExportFile:
    return BadExportFile(f"line {line}: {why}", details={"line": line})


def _put_relation(record: RelationRecord) -> PutRelation:
    return PutRelation.parse({"namespace": record.namespace, "source": record.source, "type": record.type,
                              "target": record.target, "valid_from": record.valid_from, "valid_to": record.valid_to})


class _FileReader:
    """Reads an uploaded file from a saved position, a part at a time: its frames opened (a
    sealed file) and its lines checked (`LineChecker`). `position()` is where the next step starts:
    a frame boundary of a sealed file, a line boundary of a plain one."""

    def __init__(self, steps: TransferSteps, job: TransferJob, state: dict[str, Any], *,
                 known: dict[int, bytes] | None = None) -> None:
        """`known`: parts the caller has already read, by index (not read again)."""
        self._steps = steps
        self._known = dict(known or {})
        self._job = job
        self._parts: int = job.options["parts"]
        self._part, self._offset = state["part"], state["offset"]
        self.checker = _checker_of(state.get("checker"))
        self._frames = None
        if state.get("header"):
            self._frames = FrameReader(base64.b64decode(state["key"]),
                                       SealedHeader.read(base64.b64decode(state["header"])), index=state["frame"])
        self._fed: list[tuple[int, int, int]] = []  # (part, offset, length) of what was read this step
        self.finished = False

    def records(self, *, limit: int) -> Iterator[dict[str, Any]]:
        count = 0
        while count < limit:
            if self._part >= self._parts:
                yield from self._end()
                self.finished = True
                return
            data = self._known.pop(self._part, None)
            if data is None:
                data = self._steps.get_part(self._job.tenant, self._job.job_id, self._part)
            if data is None:
                raise BadExportFile(f"part {self._part} of the file was never uploaded", details={"part": self._part})
            piece = data[self._offset:]
            self._fed.append((self._part, self._offset, len(piece)))
            self._part, self._offset = self._part + 1, 0
            for plaintext in self._plaintexts(piece):
                for record in self.checker.feed(plaintext):
                    count += 1
                    yield record

    def _plaintexts(self, piece: bytes) -> Iterator[bytes]:
        if self._frames is None:
            yield piece
        else:
            yield from self._frames.feed(piece)

    def _end(self) -> Iterator[dict[str, Any]]:
        if self._frames is not None:
            yield from self.checker.feed(self._frames.finish())
        self.checker.finish()

    def position(self) -> dict[str, Any]:
        """Where the unconsumed bytes begin, walking back over what was read this step."""
        unread = len(self._frames.pending) if self._frames is not None else len(self.checker.pending)
        if self._frames is not None and self.checker.pending:
            raise BadExportFile("a frame of the file ends inside a line: it was not written by memsvc export")
        part, offset = self._part, self._offset
        for fed_part, fed_offset, length in reversed(self._fed):
            if unread <= 0:
                break
            if unread <= length:
                part, offset = fed_part, fed_offset + length - unread
                unread = 0
            else:
                unread -= length
                part, offset = fed_part, fed_offset
        state = {"part": part, "offset": offset, "checker": _checker_doc(self.checker)}
        if self._frames is not None:
            state["frame"] = self._frames.index
        return state


def _checker_doc(checker: LineChecker) -> dict[str, Any]:
    return {"chain": checker.chain.hex(), "counts": dict(checker.counts), "line": checker.line_number,
            "header": checker.header.to_json() if checker.header else None, "ended": checker.ended}


def _checker_of(doc: dict[str, Any] | None) -> LineChecker:
    checker = LineChecker()
    if doc:
        checker.chain = bytes.fromhex(doc["chain"])
        checker.counts.update(doc["counts"])
        checker.line_number = doc["line"]
        checker.header = ExportHeader.of(doc["header"]) if doc["header"] else None
        # A plain file's trailer can be read by a step that stops there (its limit reached)
        checker.ended = doc.get("ended", False)
    return checker


def _parse(record: dict[str, Any], line: int) -> _Record:
    try:
        return _MODELS[record["kind"]].parse(record)
    except InvalidArgument as exc:
        raise BadExportFile(f"line {line}: {exc.message}", details={"line": line}) from None


def _patchable(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings an admin chooses; the rest (`reachable_depth`, the stored format) the service
    keeps itself."""
    return {k: v for k, v in settings.items() if k in SettingsPatch.model_fields}


def _compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")

