"""`memsvc eval` on a conversation dataset (`eval/conversations.json`, built by
`eval/build_conversations.py`): long two-speaker conversations and questions whose evidence is one
or two of their turns.

A run writes every conversation for a fresh user under a namespace of its own,
`["user", <user>, "eval", <run id>, <conversation id>]`: each turn is a plain memory with key = the
turn's id and value `{"content": "(8 May 2023) Maria said, \\"...\\"", "speaker", "date", "session",
"valid_from", "valid_to"}`, only `content` indexed. The date prefix is the session's date, so a
question that names a month has words to match; `valid_from`/`valid_to` are the session's day
(`turn_valid_time`), the valid time a question naming a time is ranked by (issue 25). Writes go
without `sync_index`, many at once, while a thread asks the admin route
`POST /admin/v1/memories/index/trigger` to index the backlog in batches, until nothing is pending
once all is written (with `--token`, where no admin token can be minted, each write is
`sync_index: true` instead). With `--as-messages` each dataset session is a session of the service
instead (`POST /v1/memory/sessions`, then its turns in order as messages: the first speaker's role
`user`, the other's `assistant`, `name` = the speaker, content `(8 May 2023) <text>` since the
service dates a message when it is posted), for a user of its own per conversation, and the
questions search `["user", <that user>, "sessions"]`; a message found is mapped back to its turn by
session id and seq.

Then every question searches its conversation (limit k, default 5) once per mode, `hybrid`,
`keyword` and `semantic`: one write, three sets of queries.
- Recall@k of a question: its evidence turns among the returned items / its evidence turns.
- MRR: 1 / the rank of the first evidence turn returned (0 if none).
Both are averaged over the questions, for all of them, per kind and per split.

Cross-user safety: for each conversation, a second user searches the first user's namespace with
its first question; the answer must be a refusal (403/404) or no items. A leak fails the run.
There are no recall thresholds: the set is a benchmark to compare modes and rankings on.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memsvc.evaluation import Api, DatasetError, EvalError, Target, percentile

__all__ = [
    "MODES", "QUESTION_KINDS", "Conversation", "ConversationOptions", "Question", "QuestionResult", "Session", "Turn",
    "conversation_problems", "is_conversation_dataset", "parse_conversations", "select", "turn_content",
    "turn_valid_time",
    "message_content", "score_question", "mode_metrics", "side_by_side", "run_conversations", "main",
]

QUESTION_KINDS = ("fact", "speaker", "temporal", "multi_session")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
SPLITS = ("dev", "test")
MODES = ("hybrid", "keyword", "semantic")
MAX_EVIDENCE = 4
WRITE_ATTEMPTS = 3
INDEX_POLL_S = 0.5
INDEX_TIMEOUT_S = 900.0  # one trigger indexes up to 5,000 items: minutes on a busy machine
INDEX_STALL_S = 120.0  # all written, and nothing indexed for this long: a dependency is failing


# -- the dataset -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    id: str
    speaker: str
    text: str
    session: str
    date: str  # ISO date of its session


@dataclass(frozen=True)
class Session:
    id: str
    date: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Conversation:
    id: str
    split: str
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session.turns]


@dataclass(frozen=True)
class Question:
    id: str
    conversation: str
    kind: str
    split: str
    query: str
    evidence: tuple[str, ...]


def is_conversation_dataset(doc: Any) -> bool:
    """A conversation dataset has top-level `conversations`; the golden set has `cases`."""
    return isinstance(doc, dict) and "conversations" in doc


def conversation_problems(doc: Any) -> list[str]:
    """Everything wrong with a conversation dataset, or [] when it is well formed."""
    if not isinstance(doc, dict) or not isinstance(doc.get("conversations"), list) \
            or not isinstance(doc.get("questions"), list):
        return ['the document must be an object with "conversations" and "questions" lists']
    problems = [f'"{name}" must be a string' for name in ("version", "description")
                if not isinstance(doc.get(name), str)]
    turn_owner: dict[str, str] = {}
    conversation_ids: set[str] = set()
    for n, conversation in enumerate(doc["conversations"]):
        where = (f"conversation {conversation.get('id', n)!r}" if isinstance(conversation, dict)
                 else f"conversation #{n}")
        problems += [f"{where}: {p}" for p in _conversation_problems(conversation, turn_owner)]
        if isinstance(conversation, dict):
            if conversation.get("id") in conversation_ids:
                problems.append(f"{where}: duplicate id")
            conversation_ids.add(conversation.get("id"))
    question_ids: set[str] = set()
    for n, question in enumerate(doc["questions"]):
        where = f"question {question.get('id', n)!r}" if isinstance(question, dict) else f"question #{n}"
        problems += [f"{where}: {p}" for p in _question_problems(question, conversation_ids, turn_owner)]
        if isinstance(question, dict):
            if question.get("id") in question_ids:
                problems.append(f"{where}: duplicate id")
            question_ids.add(question.get("id"))
    return problems


def _conversation_problems(conversation: Any, turn_owner: dict[str, str]) -> list[str]:
    if not isinstance(conversation, dict):
        return ["not an object"]
    problems = []
    if not _text(conversation.get("id")):
        problems.append('"id" must be a non-empty string')
    if conversation.get("split") not in SPLITS:
        problems.append(f'"split" must be one of {", ".join(SPLITS)}')
    speakers = conversation.get("speakers")
    if not isinstance(speakers, list) or len(speakers) != 2 or not all(map(_text, speakers)) \
            or speakers[0] == speakers[1]:
        return problems + ['"speakers" must be two different names']
    sessions = conversation.get("sessions")
    if not isinstance(sessions, list) or not sessions:
        return problems + ['"sessions" must be a non-empty list']
    for session in sessions:
        if not isinstance(session, dict) or not _text(session.get("id")) or not _iso_date(session.get("date")) \
                or not isinstance(session.get("turns"), list) or not session["turns"]:
            problems.append(f"a session must be {{id, date (YYYY-MM-DD), turns (non-empty)}}: {_short(session)}")
            continue
        for turn in session["turns"]:
            if not isinstance(turn, dict) or not _text(turn.get("id")) or not _text(turn.get("text")) \
                    or turn.get("speaker") not in speakers:
                problems.append(f"a turn must be {{id, speaker (one of the speakers), text}}: {_short(turn)}")
            elif turn["id"] in turn_owner:
                problems.append(f"turn id {turn['id']!r} is used twice")
            else:
                turn_owner[turn["id"]] = conversation.get("id")
    return problems


def _question_problems(question: Any, conversations: set[str], turn_owner: dict[str, str]) -> list[str]:
    if not isinstance(question, dict):
        return ["not an object"]
    problems = [f'"{name}" must be a non-empty string' for name in ("id", "query") if not _text(question.get(name))]
    if question.get("kind") not in QUESTION_KINDS:
        problems.append(f'"kind" must be one of {", ".join(QUESTION_KINDS)}')
    if question.get("conversation") not in conversations:
        problems.append('"conversation" must be the id of a conversation')
    evidence = question.get("evidence")
    if (not isinstance(evidence, list) or not 1 <= len(evidence) <= MAX_EVIDENCE
            or len(set(map(str, evidence))) != len(evidence)):
        return problems + [f'"evidence" must list 1..{MAX_EVIDENCE} distinct turn ids']
    problems += [f"evidence {turn!r} is not a turn of the question's conversation" for turn in evidence
                 if turn_owner.get(turn) != question.get("conversation") or turn_owner.get(turn) is None]
    if question.get("kind") == "multi_session" and len(evidence) < 2:
        problems.append("a multi_session question has at least two evidence turns")
    return problems


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _iso_date(value: Any) -> bool:
    try:
        return isinstance(value, str) and date.fromisoformat(value).isoformat() == value
    except ValueError:
        return False


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_conversations(doc: dict) -> tuple[list[Conversation], list[Question]]:
    """The conversations and questions of a well-formed document (see `conversation_problems`)."""
    conversations = [Conversation(
        id=c["id"], split=c["split"], speakers=(c["speakers"][0], c["speakers"][1]),
        sessions=tuple(Session(s["id"], s["date"], tuple(Turn(t["id"], t["speaker"], t["text"], s["id"], s["date"])
                                                          for t in s["turns"])) for s in c["sessions"]))
        for c in doc["conversations"]]
    split_of = {c.id: c.split for c in conversations}
    questions = [Question(q["id"], q["conversation"], q["kind"], split_of[q["conversation"]], q["query"],
                          tuple(q["evidence"])) for q in doc["questions"]]
    return conversations, questions


def check_conversations(doc: Any, path: Path) -> tuple[list[Conversation], list[Question]]:
    problems = conversation_problems(doc)
    if problems:
        shown = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
        raise DatasetError(f"{path}: " + "; ".join(shown))
    return parse_conversations(doc)


def select(conversations: Sequence[Conversation], questions: Sequence[Question], *, split: str = "all",
           kinds: Sequence[str] = (), count: int | None = None) -> tuple[list[Conversation], list[Question]]:
    """The first `count` conversations of `split` ("all" for both), and their questions of `kinds`."""
    chosen = [c for c in conversations if split in ("all", c.split)]
    chosen = chosen if count is None else chosen[:count]
    ids = {c.id for c in chosen}
    return chosen, [q for q in questions if q.conversation in ids and (not kinds or q.kind in kinds)]


def turn_content(turn: Turn) -> str:
    """What is indexed for a turn written as a memory: `(8 May 2023) Maria said, "..."`."""
    return f'{session_day(turn)} {turn.speaker} said, "{turn.text}"'


def turn_valid_time(turn: Turn) -> dict[str, str]:
    """The day of the turn's session as a memory's valid time (issue 25): `valid_from` its
    midnight (UTC), `valid_to` the next day's."""
    day = date.fromisoformat(turn.date)
    return {"valid_from": f"{day.isoformat()}T00:00:00Z",
            "valid_to": f"{(day + timedelta(days=1)).isoformat()}T00:00:00Z"}


def message_content(turn: Turn) -> str:
    """A turn written as a message: `(8 May 2023) ...`. The service dates a message when it is
    posted, so the session's date goes in front; the speaker is the message's `name`."""
    return f"{session_day(turn)} {turn.text}"


def session_day(turn: Turn) -> str:
    """`(8 May 2023)`, in English whatever the locale."""
    day = date.fromisoformat(turn.date)
    return f"({day.day} {MONTHS[day.month - 1]} {day.year})"


def dataset_summary(conversations: Sequence[Conversation], questions: Sequence[Question]) -> str:
    turns = [len(c.turns) for c in conversations]
    lines = [f"{len(conversations)} conversations, {sum(turns)} turns ({min(turns)}..{max(turns)} each), "
             f"{len(questions)} questions, well formed", f"{'kind':14}{'dev':>6}{'test':>6}{'all':>6}"]
    for kind in QUESTION_KINDS:
        dev = sum(q.kind == kind and q.split == "dev" for q in questions)
        test = sum(q.kind == kind and q.split == "test" for q in questions)
        lines.append(f"{kind:14}{dev:>6}{test:>6}{dev + test:>6}")
    return "\n".join(lines)


# -- metrics (pure) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionScore:
    recall: float
    reciprocal_rank: float


def score_question(evidence: Sequence[str], returned: Sequence[str | None]) -> QuestionScore:
    """`returned`: in rank order, the turn id of each returned item (None for an item that is no
    turn of the question's conversation)."""
    wanted = set(evidence)
    found = {turn for turn in returned if turn in wanted}
    first = next((rank for rank, turn in enumerate(returned, start=1) if turn in wanted), None)
    return QuestionScore(len(found) / len(wanted), 1 / first if first else 0.0)


@dataclass(frozen=True)
class QuestionResult:
    question: Question
    mode: str
    score: QuestionScore
    latency_ms: float
    returned: tuple[str | None, ...]


def summarize(results: Sequence[QuestionResult]) -> dict:
    if not results:
        return {"questions": 0, "recall_at_k": None, "mrr": None}
    return {"questions": len(results),
            "recall_at_k": sum(r.score.recall for r in results) / len(results),
            "mrr": sum(r.score.reciprocal_rank for r in results) / len(results)}


def mode_metrics(results: Sequence[QuestionResult]) -> dict:
    """Per mode: all questions, per split and per kind."""
    metrics = {}
    for mode in dict.fromkeys(r.mode for r in results):
        mine = [r for r in results if r.mode == mode]
        latencies = [r.latency_ms for r in mine]
        metrics[mode] = {
            **summarize(mine),
            "latency_ms": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)},
            "by_split": {s: summarize([r for r in mine if r.question.split == s]) for s in SPLITS
                         if any(r.question.split == s for r in mine)},
            "by_kind": {k: summarize([r for r in mine if r.question.kind == k]) for k in QUESTION_KINDS
                        if any(r.question.kind == k for r in mine)},
        }
    return metrics


def side_by_side(metrics: dict, k: int) -> str:
    """One row per slice (all, each split, each kind), R@k and MRR of each mode side by side."""
    modes = list(metrics)
    first = metrics[modes[0]]
    slices = [("all", lambda m: m)] \
        + [(f"split {s}", lambda m, s=s: m["by_split"][s]) for s in first["by_split"]] \
        + [(f"kind {kind}", lambda m, kind=kind: m["by_kind"][kind]) for kind in first["by_kind"]]
    header = f"{'':20}{'questions':>10}" + "".join(f"{mode + ' R@' + str(k):>15}" for mode in modes) \
        + "".join(f"{mode + ' MRR':>15}" for mode in modes)
    lines = [header]
    for name, pick in slices:
        row = [pick(metrics[mode]) for mode in modes]
        lines.append(f"{name:20}{row[0]['questions']:>10}" + "".join(f"{_fmt(m['recall_at_k']):>15}" for m in row)
                     + "".join(f"{_fmt(m['mrr']):>15}" for m in row))
    lines.append(f"{'search p50/p95 ms':30}" + "".join(
        f"{metrics[mode]['latency_ms']['p50']:>7.1f}/{metrics[mode]['latency_ms']['p95']:<7.1f}" for mode in modes))
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


# -- a run -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConversationOptions:
    limit: int = 5
    modes: tuple[str, ...] = MODES
    concurrency: int = 8
    as_messages: bool = False
    cleanup: bool = True


@dataclass(frozen=True)
class Writer:
    """Who writes and searches each conversation: one user for all (plain memories) or, with
    `--as-messages`, a user per conversation; `admin` (optional) triggers indexing."""

    token_of: Callable[[str], tuple[str, str]]  # conversation id -> (token, user)
    admin: str | None


def conversation_namespace(user: str, run_id: str, conversation: Conversation) -> list[str]:
    return ["user", user, "eval", run_id, conversation.id]


def run_conversations(conversations: Sequence[Conversation], questions: Sequence[Question], target: Target,
                      writer: Writer, options: ConversationOptions) -> tuple[list[QuestionResult], list[str], float]:
    """Writes the conversations, asks every question in every mode, then deletes what it wrote
    (`cleanup`); (results, leaks, load seconds)."""
    api = Api(target.url)
    try:
        return _ask_all(api, conversations, questions, target, writer, options)
    finally:
        if options.cleanup:
            _clean_up(api, writer, target, conversations, options)


def _ask_all(api: Api, conversations: Sequence[Conversation], questions: Sequence[Question], target: Target,
             writer: Writer, options: ConversationOptions) -> tuple[list[QuestionResult], list[str], float]:
    started = time.perf_counter()
    with _indexing(target.url, writer.admin):
        if options.as_messages:
            prefixes = _write_messages(api, target, writer, conversations, options)
        else:
            prefixes = _write_memories(api, target, writer, conversations, options)
    load_s = time.perf_counter() - started
    by_id = {c.id: c for c in conversations}
    jobs = [(mode, q) for mode in options.modes for q in questions]
    with ThreadPoolExecutor(options.concurrency) as workers:
        results = list(workers.map(lambda job: _ask(api, writer, prefixes[job[1].conversation],
                                                    by_id[job[1].conversation], job[1], job[0], options.limit), jobs))
    first_question = {}
    for question in questions:
        first_question.setdefault(question.conversation, question.query)
    leaks = [leak for c in conversations
             for leak in _probe(api, target, prefixes[c.id], c, first_question.get(c.id, c.turns[0].text))]
    return results, leaks, load_s


def _clean_up(api: Api, writer: Writer, target: Target, conversations: Sequence[Conversation],
              options: ConversationOptions) -> None:
    """Deletes every turn written (as a session: the session and its messages); idempotent."""
    deletes = []
    for conversation in conversations:
        token, user = writer.token_of(conversation.id)
        if options.as_messages:
            deletes += [(token, _session_path(s), []) for s in conversation.sessions]
        else:
            namespace = [("ns", part) for part in conversation_namespace(user, target.run_id, conversation)]
            deletes += [(token, "/v1/memories", [*namespace, ("key", turn.id)]) for turn in conversation.turns]
    with ThreadPoolExecutor(options.concurrency) as workers:
        list(workers.map(lambda d: _forget(api, *d), deletes))


def _forget(api: Api, token: str, path: str, query: list[tuple[str, str]]) -> None:
    status, answer = api.request("DELETE", path, token, query=query)
    if status not in (200, 204, 404):
        raise EvalError(f"deleting {path} {query} answered {status}: {answer}")


def _write_memories(api: Api, target: Target, writer: Writer, conversations: Sequence[Conversation],
                    options: ConversationOptions) -> dict[str, list[str]]:
    prefixes, writes = {}, []
    for conversation in conversations:
        token, user = writer.token_of(conversation.id)
        namespace = conversation_namespace(user, target.run_id, conversation)
        prefixes[conversation.id] = namespace
        writes.append((token, namespace, conversation.turns))
    sync = writer.admin is None

    def put_in_order(token: str, namespace: list[str], turns: Sequence[Turn]) -> None:
        # A conversation's turns one after the other, conversations side by side: each scope's
        # timestamps follow its turns on every run, and equal scores (a repeated line) go to the
        # newer memory. (Which of many equal scores a retriever hands over at its depth's edge
        # still follows the index's row order, so a run may differ from the next by a question.)
        for turn in turns:
            _put_turn(api, token, namespace, turn, sync)

    with ThreadPoolExecutor(options.concurrency) as workers:
        list(workers.map(lambda w: put_in_order(*w), writes))
    return prefixes


def _put_turn(api: Api, token: str, namespace: list[str], turn: Turn, sync: bool) -> None:
    body = {"namespace": namespace, "key": turn.id, "index_fields": ["content"], "sync_index": sync,
            "value": {"content": turn_content(turn), "speaker": turn.speaker, "date": turn.date,
                      "session": turn.session, **turn_valid_time(turn)}}
    _send(api, "PUT", "/v1/memories", token, body, (200,), f"writing turn {turn.id}")


def _write_messages(api: Api, target: Target, writer: Writer, conversations: Sequence[Conversation],
                    options: ConversationOptions) -> dict[str, list[str]]:
    prefixes, jobs = {}, []
    for conversation in conversations:
        token, user = writer.token_of(conversation.id)
        prefixes[conversation.id] = ["user", user, "sessions"]
        jobs += [(token, conversation, session) for session in conversation.sessions]
    with ThreadPoolExecutor(options.concurrency) as workers:
        list(workers.map(lambda job: _post_session(api, *job), jobs))
    return prefixes


def _post_session(api: Api, token: str, conversation: Conversation, session: Session) -> None:
    _send(api, "POST", "/v1/memory/sessions", token, {"session_id": session.id, "title": session.date}, (200, 201),
          f"creating session {session.id}")
    path = f"{_session_path(session)}/messages"
    for turn in session.turns:
        role = "user" if turn.speaker == conversation.speakers[0] else "assistant"
        _send(api, "POST", path, token, {"role": role, "name": turn.speaker, "content": message_content(turn)},
              (200, 201), f"posting turn {turn.id}")


def _session_path(session: Session) -> str:
    return f"/v1/memory/sessions/{quote(session.id, safe='')}"


def _send(api: Api, method: str, path: str, token: str, body: dict, ok: tuple[int, ...], what: str) -> Any:
    """The answer of a write; 429 and 503 are retried (writes are not timed)."""
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        status, answer = api.request(method, path, token, body)
        if status in ok:
            return answer
        if status not in (429, 503) or attempt == WRITE_ATTEMPTS:
            raise EvalError(f"{what} answered {status}: {answer}")
        time.sleep(attempt)


@contextmanager
def _indexing(url: str, admin: str | None) -> Iterator[None]:
    """While the body writes, and after it until nothing is pending, a thread asks the admin
    trigger to index the backlog in batches (without an admin token the writes were synchronous)."""
    if admin is None:
        yield
        return
    api = Api(url, timeout=INDEX_TIMEOUT_S)
    written, stop, errors = threading.Event(), threading.Event(), []

    def index() -> None:
        last_progress, last_pending = time.monotonic(), None
        try:
            while not stop.is_set():
                all_written = written.is_set()  # read before the request: its `pending` then counts every write
                status, answer = api.request("POST", "/admin/v1/memories/index/trigger", admin, {})
                if status != 200:
                    raise EvalError(f"triggering the indexer answered {status}: {answer}")
                if all_written and answer["pending"] == 0:
                    return
                if answer["processed"] or not all_written or answer["pending"] != last_pending:
                    last_progress, last_pending = time.monotonic(), answer["pending"]
                elif time.monotonic() - last_progress > INDEX_STALL_S:
                    raise EvalError(f"indexing stalled with {answer['pending']} items pending")
                if answer["processed"] == 0:
                    time.sleep(INDEX_POLL_S)
        except EvalError as exc:
            errors.append(exc)
        except Exception as exc:  # any other failure must fail the run too: never measure a half-indexed store
            errors.append(EvalError(f"indexing could not be followed: {type(exc).__name__}: {exc}"))

    thread = threading.Thread(target=index, name="eval-indexing", daemon=True)
    thread.start()
    try:
        yield
    except BaseException:
        stop.set()
        raise
    finally:
        written.set()
        thread.join()
    if errors:
        raise errors[0]


def _ask(api: Api, writer: Writer, prefix: list[str], conversation: Conversation, question: Question, mode: str,
         limit: int) -> QuestionResult:
    token, _ = writer.token_of(conversation.id)
    body = {"namespace_prefix": prefix, "query": question.query, "limit": limit, "mode": mode}
    status, answer, latency_ms = api.timed("POST", "/v1/memories/search", token, body)
    if status != 200:
        raise EvalError(f"the {mode} search for question {question.id} answered {status}: {answer}")
    returned = tuple(_turn_of(item, prefix, conversation) for item in answer["items"][:limit])
    return QuestionResult(question, mode, score_question(question.evidence, returned), latency_ms, returned)


def _turn_of(item: dict, prefix: list[str], conversation: Conversation) -> str | None:
    """The dataset turn an item is: its key for a plain memory; for a message, the turn at its
    seq in the session its namespace names."""
    namespace = item.get("namespace", [])
    if namespace[: len(prefix)] != prefix:
        return None
    if prefix[-1] != "sessions":
        return item.get("key")
    session_id = namespace[len(prefix)] if len(namespace) > len(prefix) else None
    session = next((s for s in conversation.sessions if s.id == session_id), None)
    seq = int(item.get("key", "0")) if str(item.get("key", "")).isdigit() else 0
    return session.turns[seq - 1].id if session is not None and 1 <= seq <= len(session.turns) else None


def _probe(api: Api, target: Target, prefix: list[str], conversation: Conversation, query: str) -> list[str]:
    """The second user searches the conversation's namespace: refused, or nothing."""
    status, answer = api.request("POST", "/v1/memories/search", target.other_token,
                                 {"namespace_prefix": prefix, "query": query, "limit": 5})
    if status == 200 and answer["items"]:
        return [f"the second user's search of conversation {conversation.id} returned {len(answer['items'])} items"]
    if status not in (200, 403, 404):
        raise EvalError(f"the cross-user probe of conversation {conversation.id} answered {status}: {answer}")
    return []


# -- the report --------------------------------------------------------------------------------


def build_report(results: Sequence[QuestionResult], leaks: Sequence[str], *, config: dict, started_at: str,
                 finished_at: str) -> dict:
    failures = [f"cross-user safety: {leak}" for leak in leaks]
    return {
        "report_version": 1, "started_at": started_at, "finished_at": finished_at, "config": config,
        "metrics": mode_metrics(results), "cross_user_leaks": list(leaks), "passed": not failures,
        "failures": failures,
        "questions": [{"id": r.question.id, "kind": r.question.kind, "split": r.question.split, "mode": r.mode,
                       "recall": r.score.recall, "reciprocal_rank": r.score.reciprocal_rank,
                       "latency_ms": round(r.latency_ms, 2), "returned": list(r.returned)} for r in results],
    }


def format_report(report: dict) -> str:
    config = report["config"]
    lines = [
        f"memsvc eval  run {config['run_id']}  {config['url']}  "
        f"dataset {config['dataset']} v{config['dataset_version']}",
        f"  {config['conversations']} conversations ({config['turns']} turns written "
        f"{'as session messages' if config['as_messages'] else 'as memories'} in {config['load_seconds']:.1f} s), "
        f"{config['questions']} questions (split {config['split']}), limit {config['limit']}",
        "",
        side_by_side(report["metrics"], config["limit"]),
        "",
        f"cross-user safety: {'no leak' if not report['cross_user_leaks'] else 'LEAKS'}",
        "PASS" if report["passed"] else "FAIL: " + "; ".join(report["failures"]),
    ]
    return "\n".join(lines)


# -- the command -------------------------------------------------------------------------------


def main(command: Any, doc: Any) -> int:
    """`memsvc eval` on a conversation dataset (`command` is evaluation.Command); the exit status."""
    from memsvc.evaluation import throwaway_server

    try:
        conversations, questions = check_conversations(doc, command.dataset)
        if command.check_dataset:
            print(dataset_summary(conversations, questions))
            return 0
        conversations, questions = select(conversations, questions, split=command.split, kinds=command.kinds,
                                          count=command.count)
        if not questions:
            raise EvalError("no question matches the split, kinds and count given")
        if command.serve:
            with throwaway_server() as (url, data_dir):
                report = measure(command, doc, conversations, questions, url, data_dir)
        else:
            report = measure(command, doc, conversations, questions, command.url, command.data_dir)
        if command.report:
            command.report.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    except (DatasetError, EvalError) as exc:
        print(f"memsvc eval: {exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    return 0 if report["passed"] else 1


def measure(command: Any, doc: dict, conversations: list[Conversation], questions: list[Question], url: str,
            data_dir: Path) -> dict:
    from memsvc.evaluation import _now, resolve_target

    target = resolve_target(command, url, data_dir)
    writer = _writer(command, target, data_dir, [c.id for c in conversations])
    # --serve's server and its data vanish when the run ends: nothing to clean up
    options = ConversationOptions(limit=command.options.limit, modes=command.modes or MODES,
                                  concurrency=command.options.concurrency, as_messages=command.as_messages,
                                  cleanup=command.options.cleanup and not command.serve)
    started_at = _now()
    results, leaks, load_s = run_conversations(conversations, questions, target, writer, options)
    config = {"run_id": target.run_id, "url": url, "dataset": str(command.dataset), "dataset_version": doc["version"],
              "split": command.split, "kinds": list(command.kinds), "conversations": len(conversations),
              "turns": sum(len(c.turns) for c in conversations), "questions": len(questions), "limit": options.limit,
              "modes": list(options.modes), "as_messages": options.as_messages, "load_seconds": round(load_s, 1),
              "user": target.user, "other_user": target.other_user, "served": command.serve}
    return build_report(results, leaks, config=config, started_at=started_at, finished_at=_now())


def _writer(command: Any, target: Target, data_dir: Path, conversation_ids: Sequence[str]) -> Writer:
    """Tokens minted from the local server's key (an admin to trigger indexing, a user per
    conversation for `--as-messages`), or the one `--token` given."""
    if command.token:
        if command.as_messages:
            raise EvalError("--as-messages mints a user per conversation: it needs the local server's --data-dir, "
                            "not --token")
        return Writer(lambda _: (target.token, target.user), None)
    from memsvc.adapters.local.issuer import LocalIssuer

    issuer = LocalIssuer(data_dir / "keys")
    admin = issuer.mint(sub=f"{target.user}-admin", tenant=command.tenant, roles=["admin"])
    if not command.as_messages:
        return Writer(lambda _: (target.token, target.user), admin)
    users = {cid: (issuer.mint(sub=f"{target.user}-{cid}", tenant=command.tenant), f"{target.user}-{cid}")
             for cid in conversation_ids}
    return Writer(users.__getitem__, admin)
