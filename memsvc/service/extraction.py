"""Learning from conversations (issue 24): `POST /v1/memories/extract`, and sessions that extract
on their own (their `extract` setting).

An extractor (`ports.MemoryExtractor`: the deterministic patterns locally, a language model where
one is configured) turns messages into candidates; each candidate is recorded on the timeline
(`memory.candidate`) and then decided by `remember`'s consolidation, so a repeat is `unchanged`,
an update merges into its neighbour (`memory.merged`) and a contradiction supersedes it. The
memory keeps its provenance in its value: the session and the message seqs it came from, and the
extractor (readable by whoever may read the memory, like the rest of its value).

- *Failures lose nothing.* When the model fails (a timeout, throttling, an unreadable answer),
  the messages are queued as a job (the queue `remember` uses: SQLite locally, SQS on AWS) and
  retried later with backoff; each failure counts in `memory.extraction.failed` and records a
  `memory.error` event (timeline and EventBridge) naming the reason, never the content. A
  request with `wait: true` then answers `202` with the job's id.
- *Sessions.* `on_close` extracts the messages not yet extracted when the session closes, before
  promotion; `continuous` extracts in the background: a job is queued when a session has
  `extract_every_messages` new messages, and one runs `extract_idle_seconds` after the first new
  message, which extracts then if the session has been idle that long (or waits for the idle time
  to pass). Nothing of it runs on the append's request path but putting a job on the queue.
  A run extracts one batch (one model call) under a lease on the session's next batch, and moves
  `extracted_seq`, conditionally, only after the batch's memories are written: two runs at once
  never send one batch to the model twice, and replays find nothing left. A run that dies leaves
  its lease to expire, and the batch is extracted again. A batch the model keeps refusing is
  skipped on its third attempt, said on the timeline. Extracted memories go to the session's
  user's `user` layer: what a person says of themselves outlives the session (provenance names it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, get_args

from pydantic import ConfigDict, Field, StrictBool, StrictStr

from memsvc.core.consolidation import candidate_key
from memsvc.core.errors import ContentTooLong, Forbidden, PolicyViolation, ProviderError, RateLimited
from memsvc.core.extraction import (MAX_EXTRACT_CHARS, MAX_EXTRACT_MESSAGES, Candidate, ConversationMessage, Role,
                                    read_chars)
from memsvc.core.layers import (LAYER_NAMES, accessible_layers, identifiers_schema, layer_namespace, layer_needs_schema,
                                resolve_identifiers)
from memsvc.core.message_context import MAX_NAME_CHARS
from memsvc.core.models import Caller, Memory, RememberJob, TimelineEvent, to_rfc3339
from memsvc.core.sessions import SessionRecord, session_namespace
from memsvc.core.time_expressions import validity
from memsvc.core.validation import Command, Timestamp, non_blank
from memsvc.ports import Clock, MemoryExtractor, Metrics, RememberQueue, SessionStore
from memsvc.service.access import Access
from memsvc.service.remember import Remember, RememberMemory, caller_of, caller_record
from memsvc.service.sealing import Sealer
from memsvc.service.sessions import Sessions
from memsvc.service.timeline import Timeline

__all__ = ["Extraction", "ExtractMemories", "Extracted", "ExtractedMemory", "ExtractionQueued", "FAILED_METRIC",
           "is_extraction_job"]

log = logging.getLogger(__name__)

FAILED_METRIC = "memory.extraction.failed"
_REQUEST_JOB = "extract:"
_SESSION_JOB = "session-extract:"
# How long a run holds a session's next batch: longer than a model call (30 s locally, 15 s on
# AWS) and the batch's writes; a run that dies leaves it to expire.
_LEASE = timedelta(minutes=5)
# The attempt from which a batch the model refuses or cannot answer is skipped (with a
# `memory.error` saying so), so that one poison message never stops a session's learning.
_SKIP_FROM_ATTEMPT = 3
_UNANSWERABLE = ("refused", "malformed")
_SOURCE = "extraction"


def is_extraction_job(job: RememberJob) -> bool:
    return job.candidate_id.startswith((_REQUEST_JOB, _SESSION_JOB))


class ExtractMessage(Command):
    role: Role
    content: StrictStr = Field(min_length=1, description="the message's text")
    name: non_blank(max_length=MAX_NAME_CHARS) | None = Field(  # type: ignore[valid-type]
        None, description="who spoke (e.g. Maria): candidates about them name them")
    created_at: Timestamp | None = None


class ExtractMemories(Command):
    """`POST /v1/memories/extract`."""

    model_config = ConfigDict(json_schema_extra={"allOf": layer_needs_schema("layer", many=False)})

    messages: list[ExtractMessage] = Field(min_length=1, max_length=MAX_EXTRACT_MESSAGES, description=(
        f"the conversation, oldest first; at most {MAX_EXTRACT_MESSAGES} messages and {MAX_EXTRACT_CHARS} "
        "characters of content in all (413)"))
    layer: StrictStr = Field(  # type: ignore[assignment]
        None, json_schema_extra={"enum": list(LAYER_NAMES)},
        description="where the memories go, default user; it needs its identifiers (MISSING_IDENTIFIER)")
    identifiers: dict[StrictStr, StrictStr] = Field(  # type: ignore[assignment]
        None, json_schema_extra=identifiers_schema(nullable=False),
        description="agent_id, user_id (default: the caller), session_id, project_id, team_id, org_id")
    wait: StrictBool = Field(True, description="false: 202 with a job_id at once, extracted in the background")


ExtractAction = Literal["created", "updated", "unchanged", "superseded", "blocked"]


@dataclass(frozen=True)
class ExtractedMemory:
    candidate: Candidate
    action: ExtractAction  # blocked: a governance policy refused it (nothing written)
    memory: Memory | None


@dataclass(frozen=True)
class Extracted:
    extractor: str
    memories: list[ExtractedMemory]


@dataclass(frozen=True)
class ExtractionQueued:
    job_id: str
    reason: Literal["accepted", "retrying"]  # wait false, or the model failed and the job will retry


class Extraction:
    def __init__(self, *, extractor: MemoryExtractor, remember: Remember, sessions: Sessions,
                 session_store: SessionStore, access: Access, sealer: Sealer, clock: Clock, queue: RememberQueue,
                 timeline: Timeline | None, metrics: Metrics) -> None:
        self._extractor = extractor
        self._remember = remember
        self._sessions = sessions
        self._session_store = session_store
        self._access = access
        self._sealer = sealer
        self._clock = clock
        self._queue = queue
        self._timeline = timeline
        self._metrics = metrics

    # -- POST /v1/memories/extract --------------------------------------------------------------

    def extract(self, caller: Caller, cmd: ExtractMemories) -> Extracted | ExtractionQueued:
        chars = sum(len(m.content) for m in cmd.messages)
        if chars > MAX_EXTRACT_CHARS:
            raise ContentTooLong(f"the messages hold {chars} characters; the limit is {MAX_EXTRACT_CHARS}",
                                 max_bytes=MAX_EXTRACT_CHARS * 4, details={"field": "messages"})
        ns = self._target(caller, cmd)
        self._access.authorize(caller, "write", ns, None)
        self._remember.take_rate(caller)
        job_id = _REQUEST_JOB + str(uuid.uuid5(uuid.NAMESPACE_URL, json.dumps(
            [caller.tenant_id, caller.user_id, list(ns), cmd.model_dump(mode="json", exclude={"wait"})])))
        if not cmd.wait:
            self._enqueue(caller, job_id, {"command": cmd.model_dump(mode="json", exclude_unset=True)})
            return ExtractionQueued(job_id, "accepted")
        try:
            return self._extract_into(caller, ns, _conversation(cmd), session_id=None)
        except (ProviderError, RateLimited) as exc:
            self._failed(caller, ns, job_id, 0, exc)
            self._enqueue(caller, job_id, {"command": cmd.model_dump(mode="json", exclude_unset=True)})
            return ExtractionQueued(job_id, "retrying")

    def _target(self, caller: Caller, cmd: ExtractMemories) -> tuple[str, ...]:
        identifiers = resolve_identifiers(caller, cmd.identifiers)
        layer = accessible_layers(identifiers, [cmd.layer or "user"])[0]
        return self._access.namespace_to_write(caller, layer_namespace(layer, identifiers))

    def _extract_into(self, caller: Caller, ns: tuple[str, ...], messages: list[ConversationMessage], *,
                      session_id: str | None) -> Extracted:
        policies = self._access.authorize(caller, "write", ns, None)  # before anything reaches the model
        candidates = self._extractor.extract(caller.tenant_id, messages)
        now = self._clock.now()
        self._notify([self._candidate_event(caller, ns, c, session_id, policies, now) for c in candidates])
        out = []
        for candidate in candidates:
            provenance = {"session_id": session_id, "seqs": list(candidate.source_seqs),
                          "extractor": self._extractor.model_id, "extracted_at": to_rfc3339(now)}
            said_at = _said_at(messages, candidate, now)
            valid_from, valid_to = validity(candidate.content, said_at)
            if valid_from is None and valid_to is not None and valid_to <= now:
                valid_to = None  # an end already past, with no start, would make the fact never hold
            cmd = RememberMemory(content=candidate.content, type=candidate.type, kind=candidate.kind,
                                 namespace=list(ns), category=candidate.category, importance=candidate.importance,
                                 source=_SOURCE, **({"valid_from": valid_from} if valid_from else {}),
                                 **({"valid_to": valid_to} if valid_to else {}))
            try:
                remembered = self._remember.remember_extracted(caller, cmd, provenance)
            except PolicyViolation:
                out.append(ExtractedMemory(candidate, "blocked", None))
                continue
            out.append(ExtractedMemory(candidate, remembered.action, remembered.memory))
        return Extracted(self._extractor.model_id, out)

    # -- sessions -------------------------------------------------------------------------------

    def on_append(self, caller: Caller, record: SessionRecord, seq: int) -> None:
        """A message was appended to `record` (as read before the append) and got `seq`: queue a
        continuous session's jobs (a full batch now; the idle check after the first new message)."""
        if record.extract != "continuous":
            return
        settings = self._access.settings_of(caller)
        pending = seq - record.extracted_seq
        try:
            if pending == 1:
                self._enqueue_session(caller, record, f"idle:{seq}", delay=settings.extract_idle_seconds)
            if pending > 0 and pending % settings.extract_every_messages == 0:
                self._enqueue_session(caller, record, f"batch:{seq}", delay=0)
        except Exception:  # the message is stored: its append succeeded; a later append or close catches up
            log.warning("queueing a session's extraction failed", extra={"tenant": caller.tenant_id}, exc_info=True)
            self._metrics.count(FAILED_METRIC, caller.tenant_id)

    def at_close(self, caller: Caller, record: SessionRecord) -> bool:
        """Extract what is left of a session that extracts (`on_close` or `continuous`) as it
        closes: one batch here, the rest in a job. True when nothing is left (or nothing may be
        written: the caller may not write their user layer); False when messages are left."""
        if record.extract == "off" or record.seq <= record.extracted_seq:
            return True
        try:
            if self._extract_batch(caller, record.session_id) == "done":
                return True
        except Forbidden:
            log.warning("a closed session's messages may not be extracted: its user may not write their user layer",
                        extra={"tenant": caller.tenant_id})
            return True
        except (ProviderError, RateLimited) as exc:
            self._failed(caller, session_namespace(record.user_id, record.session_id),
                         self._session_job_id(record, f"close:{record.seq}"), 0, exc)
        self._enqueue_session(caller, record, f"close:{record.seq}", delay=0)  # the rest, or a retry
        return False

    def _extract_batch(self, caller: Caller, session_id: str, *,
                       skip_unanswerable: bool = False) -> Literal["done", "left", "busy"]:
        """Extract the session's next batch (after `extracted_seq`) under its extraction lease:
        one model call at most (a job's or a close's time budget; a backlog goes on job by job).
        `done`: nothing is left; `left`: more is; `busy`: another run holds the lease (and
        follows up). `skip_unanswerable`: a batch the model refuses or cannot answer is passed over
        (said on the timeline) instead of raised."""
        record = self._session_store.get(caller.tenant_id, caller.user_id, session_id)
        if record is None or record.seq <= record.extracted_seq:
            return "done"
        now = self._clock.now()
        start = record.extracted_seq
        if not self._session_store.claim_extraction(caller.tenant_id, caller.user_id, session_id,
                                                    from_seq=start, now=now, until=now + _LEASE):
            return "busy"
        batch, last = self._batch(record)
        try:
            try:
                if batch:
                    self._extract_into(caller, _user_layer(record), batch, session_id=session_id)
            except ProviderError as exc:
                if not (skip_unanswerable and exc.details.get("reason") in _UNANSWERABLE):
                    raise
                self._skipped(caller, record, start, last, exc.details["reason"])
        except BaseException:
            self._session_store.mark_extracted(caller.tenant_id, caller.user_id, session_id,
                                               from_seq=start, to_seq=start)  # the lease ends: a retry may take it
            raise
        if not self._session_store.mark_extracted(caller.tenant_id, caller.user_id, session_id,
                                                  from_seq=start, to_seq=last):
            return "busy"  # its lease expired and another run moved on
        return "done" if last >= record.seq else "left"

    def _batch(self, record: SessionRecord) -> tuple[list[ConversationMessage], int]:
        """The messages after `extracted_seq`, oldest first, as many as an extractor reads whole
        (at most `MAX_EXTRACT_MESSAGES`, and `MAX_EXTRACT_CHARS` of what it reads of them; at least
        one), and the seq they reach. Items there without a message's role are passed over; with
        nothing left to read (deleted messages), the batch reaches the session's seq."""
        batch: list[ConversationMessage] = []
        chars, last = 0, record.seq
        for view in self._sessions.conversation(record, after_seq=record.extracted_seq, limit=MAX_EXTRACT_MESSAGES):
            chars += read_chars(view.content)
            if batch and chars > MAX_EXTRACT_CHARS:
                break
            last = view.seq
            if view.role in _ROLES and view.content:
                batch.append(ConversationMessage(role=view.role, content=view.content, seq=view.seq,  # type: ignore[arg-type]
                                                 name=view.name, created_at=view.created_at))
        return batch, last

    # -- background jobs ------------------------------------------------------------------------

    def run_job(self, job: RememberJob) -> str:
        """Run a queued extraction (a request's, or a session's) as the caller who caused it;
        authorization and governance are checked again. Raises when the model fails, so the queue
        retries it later."""
        payload = self._sealer.open_job(job.tenant, job.candidate_id, job.sealed)
        caller = caller_of(payload["caller"])
        if job.candidate_id.startswith(_REQUEST_JOB):
            cmd = ExtractMemories.parse({**payload["command"], "wait": True})
            ns = self._target(caller, cmd)
            try:
                self._extract_into(caller, ns, _conversation(cmd), session_id=None)
            except (ProviderError, RateLimited) as exc:
                self._failed(caller, ns, job.candidate_id, job.attempts + 1, exc)
                raise
            return "extracted"
        return self._run_session_job(caller, job, payload)

    def _run_session_job(self, caller: Caller, job: RememberJob, payload: dict[str, Any]) -> str:
        session = self._session_store.get(caller.tenant_id, caller.user_id, payload["session_id"])
        if session is None or session.extract == "off" or session.seq <= session.extracted_seq:
            return "nothing"
        settings = self._access.settings_of(caller)
        # A job finds what other runs did since it was queued: it extracts only what is due by then
        # (a closed session's messages always are).
        if not self._idle(session, settings.extract_every_messages, settings.extract_idle_seconds):
            self._wait_for_idle(caller, session, settings.extract_idle_seconds)
            return "waiting"
        try:
            outcome = self._extract_batch(caller, session.session_id,
                                          skip_unanswerable=job.attempts + 1 >= _SKIP_FROM_ATTEMPT)
        except Forbidden:
            return "nothing"  # the caller may no longer write their user layer: nothing to retry
        except (ProviderError, RateLimited) as exc:
            self._failed(caller, session_namespace(session.user_id, session.session_id), job.candidate_id,
                         job.attempts + 1, exc)
            raise
        if outcome == "busy":
            return "busy"  # the run holding the lease follows up
        self._follow_up(caller, session.session_id, settings.extract_every_messages, settings.extract_idle_seconds)
        return "extracted"

    def _follow_up(self, caller: Caller, session_id: str, every: int, idle_seconds: int) -> None:
        """After a run: what is left (a backlog, or messages appended while it ran, whose appends
        saw no need of a job) gets one, now when a batch is due, else when the session goes idle."""
        record = self._session_store.get(caller.tenant_id, caller.user_id, session_id)
        if record is None or record.seq <= record.extracted_seq:
            return
        if record.closed_at is not None or self._idle(record, every, idle_seconds):
            self._enqueue_session(caller, record, f"more:{record.extracted_seq}", delay=0)
        else:
            self._wait_for_idle(caller, record, idle_seconds)

    def _idle(self, record: SessionRecord, every: int, idle_seconds: int) -> bool:
        """Whether its messages are due: a batch is full, it is closed, or it has been idle long enough."""
        idle = (self._clock.now() - record.last_interaction).total_seconds()
        return record.closed_at is not None or record.seq - record.extracted_seq >= every or idle >= idle_seconds

    def _wait_for_idle(self, caller: Caller, record: SessionRecord, idle_seconds: int) -> None:
        idle = (self._clock.now() - record.last_interaction).total_seconds()
        delay = max(1, int(idle_seconds - idle) + 1)
        # Named by when it is due too: never the id of a job now running, which the queue deletes
        # once it has run.
        due = int(self._clock.now().timestamp()) + delay
        self._enqueue_session(caller, record, f"idle:{record.seq}:{due}", delay=delay)

    def _skipped(self, caller: Caller, record: SessionRecord, start: int, last: int, reason: str) -> None:
        """A batch the model kept refusing or answering unreadably: passed over, and said so."""
        log.warning("a session's batch was skipped", extra={"tenant": caller.tenant_id, "reason": reason})
        self._metrics.count(FAILED_METRIC, caller.tenant_id)
        ns = session_namespace(record.user_id, record.session_id)
        event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, json.dumps(["extraction-skipped", caller.tenant_id,
                                                                  list(ns), to_rfc3339(record.created_at), start])))
        self._notify([TimelineEvent(
            tenant=caller.tenant_id, id=event_id, kind="error", namespace=ns, key=f"messages {start + 1}-{last}",
            memory_id=event_id, version=0, changed_at=self._clock.now(), expires_at=None,
            policy_attributes=self._attributes(caller, ns, event_id),
            reason=f"extraction skipped messages {start + 1} to {last} ({reason}, after repeated attempts)")])

    def _enqueue_session(self, caller: Caller, record: SessionRecord, what: str, *, delay: int) -> None:
        trigger = what.split(":", 1)[0]
        self._enqueue(caller, self._session_job_id(record, what),
                      {"session_id": record.session_id, "trigger": trigger}, delay=delay)

    @staticmethod
    def _session_job_id(record: SessionRecord, what: str) -> str:
        """One job per session lifetime (a deleted session's id can start over) and trigger."""
        lifetime = hashlib.sha256(json.dumps([record.tenant, record.user_id, record.session_id,
                                              to_rfc3339(record.created_at)]).encode()).hexdigest()[:32]
        return f"{_SESSION_JOB}{lifetime}:{what}"

    def _enqueue(self, caller: Caller, job_id: str, payload: dict[str, Any], *, delay: int = 0) -> None:
        sealed = self._sealer.seal_job(caller.tenant_id, job_id, {"caller": caller_record(caller), **payload})
        self._queue.enqueue(RememberJob(caller.tenant_id, job_id, sealed), delay_seconds=delay)

    # -- events ---------------------------------------------------------------------------------

    def _failed(self, caller: Caller, ns: tuple[str, ...], job_id: str, attempt: int, exc: Exception) -> None:
        reason = exc.details.get("reason", "unavailable") if isinstance(exc, ProviderError) else "throttled"
        log.warning("extraction failed; it will be retried", extra={"tenant": caller.tenant_id, "job_id": job_id,
                                                                     "attempt": attempt, "reason": reason})
        self._metrics.count(FAILED_METRIC, caller.tenant_id)
        event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, json.dumps(["extraction-error", caller.tenant_id, job_id,
                                                                  attempt])))
        self._notify([TimelineEvent(
            tenant=caller.tenant_id, id=event_id, kind="error", namespace=ns, key=job_id, memory_id=event_id,
            version=0, changed_at=self._clock.now(), expires_at=None,
            policy_attributes=self._attributes(caller, ns, job_id),
            reason=f"extraction failed ({reason}); it will be retried")])

    def _attributes(self, caller: Caller, ns: tuple[str, ...], key: str) -> dict[str, Any]:
        """An event's policy attributes, as a write there would have (the timeline's scope filter reads them)."""
        return self._access.policies.get(caller.tenant_id).extract_attributes(ns, key, {}, None,
                                                                              caller.policy_context())

    def _candidate_event(self, caller: Caller, ns: tuple[str, ...], candidate: Candidate, session_id: str | None,
                         policies: Any, now: datetime) -> TimelineEvent:
        key = candidate_key(ns, candidate.content, key_space=self._sealer.statement_keys(caller.tenant_id))
        event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, json.dumps(
            ["candidate", caller.tenant_id, list(ns), key, session_id, list(candidate.source_seqs)])))
        value = {"content": candidate.content, "type": candidate.type, "category": candidate.category}
        return TimelineEvent(
            tenant=caller.tenant_id, id=event_id, kind="candidate", namespace=ns, key=key, memory_id=key, version=0,
            changed_at=now, expires_at=None,
            policy_attributes=policies.extract_attributes(ns, key, value, None, caller.policy_context()),
            reason=f"a {candidate.type} extracted by {self._extractor.model_id}")

    def _notify(self, events: list[TimelineEvent]) -> None:
        if events and self._timeline is not None:
            self._timeline.notify(events)


_ROLES = get_args(Role)


def _conversation(cmd: ExtractMemories) -> list[ConversationMessage]:
    return [ConversationMessage(role=m.role, content=m.content, seq=n, name=m.name, created_at=m.created_at)
            for n, m in enumerate(cmd.messages)]


def _said_at(messages: list[ConversationMessage], candidate: Candidate, now: datetime) -> datetime:
    """When the candidate was said: its latest source message's time, else now (its words'
    "since March" is read from then, `core.time_expressions`)."""
    times = [m.created_at for m in messages if m.seq in candidate.source_seqs and m.created_at is not None]
    return max(times) if times else now


def _user_layer(record: SessionRecord) -> tuple[str, ...]:
    """Where a session's learnt memories go: its user's `user` layer."""
    return layer_namespace(accessible_layers({"user_id": record.user_id}, ["user"])[0], {"user_id": record.user_id})
