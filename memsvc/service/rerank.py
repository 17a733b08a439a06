"""Search's rerank step (issue 23): the fused ranking's best candidates reordered by a
cross-encoder (`ports.Reranker`), for tenants whose setting `rerank.enabled` is on.

What it does to an answer:
- the first `rerank.top_n` memories of the fused ranking (hybrid or keyword mode; `semantic`
  asks for the cosine order by name, and remember's neighbour check relies on it) are sent, each
  as its best-matching indexed text (a session message as its own content), with the query, and
  reordered by the reranker's score, ties in fused order; the memories after them follow in fused
  order. The window does not depend on `offset` or `limit`, so pages of one query agree;
- `score` stays the fused score (what `min_score` and recall's `recall_min_match` are calibrated
  on), so it no longer falls monotonically down the window; `scores.rerank` holds the reranker's
  score, set on the reranked memories only;
- when the reranker fails (a timeout, an error status, an answer that does not score every text)
  the fused order stands, unmarked: nothing is missing from the answer. The failure is counted
  (`RERANK_FAILED_METRIC`, per tenant) and logged by its kind, never with the query or a text;
- at most `max_in_flight` rerank calls wait on the reranker at once in a process: a search that
  finds them all taken does not queue, it answers in fused order, counted and logged like a
  failure. A slow endpoint then holds a few request threads, not all of them.

It applies to `POST /v1/memories/search` (modes `hybrid` and `keyword`), not to recall: recall
searches its layers in a shared pool and ranks by its own relevance, and a rerank call per layer
would hold that pool. The reranker bounds each call by its own deadline (`HttpReranker`'s
`timeout_seconds`; the Bedrock client's connect and read timeouts, one attempt).

Choosing a memory's text costs bounded work: at most `MAX_RERANK_TEXT_CHARS` of each text and
`MAX_BEST_TEXT_SCAN_CHARS` of all a memory's texts are analyzed for query terms, whatever the
size of its value.

The texts leave the process: to Bedrock in the deployment's account on AWS, to the endpoint the
operator named in `MEMSVC_RERANK_URL` locally.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from typing import TYPE_CHECKING, Any

from memsvc.core.keywords import analyze
from memsvc.core.message_context import is_session_message, turn_of
from memsvc.core.paths import MAX_INDEXED_FIELDS, extract_texts
from memsvc.ports import Metrics, Reranker
from memsvc.service.sealing import Sealer
from memsvc.service.tenant_config import RerankSetting, SettingsRegistry

if TYPE_CHECKING:
    from memsvc.service.search import Ranked

__all__ = ["Rerank", "RERANK_FAILED_METRIC", "MAX_RERANK_TEXT_CHARS", "MAX_BEST_TEXT_SCAN_CHARS",
           "MAX_RERANK_IN_FLIGHT", "best_text"]

log = logging.getLogger(__name__)

RERANK_FAILED_METRIC = "memory.search.rerank_failed"
# A memory's text as the reranker gets it: cross-encoders read a few hundred tokens of a document
# (Amazon Rerank 1.0 and Cohere Rerank 3.5 cut the rest), so more is only bytes on the wire.
MAX_RERANK_TEXT_CHARS = 4000
# Of all of one memory's texts, how much is analyzed to find the one sharing the most query terms:
# a 256 KB value analyzed whole cost 0.14 s per candidate, times top_n.
MAX_BEST_TEXT_SCAN_CHARS = 4 * MAX_RERANK_TEXT_CHARS
# Rerank calls waiting on the reranker at once, per process (per `Rerank`: one per app).
MAX_RERANK_IN_FLIGHT = 4


class Rerank:
    """The step, given the reranker of the backend (None locally without `MEMSVC_RERANK_URL`:
    then it does nothing, and the setting cannot be turned on). `max_in_flight`: rerank calls
    allowed to wait on the reranker at once; a search finding none free keeps the fused order."""

    def __init__(self, *, reranker: Reranker | None, settings: SettingsRegistry, sealer: Sealer,
                 metrics: Metrics, max_in_flight: int = MAX_RERANK_IN_FLIGHT) -> None:
        self._reranker = reranker
        self._settings = settings
        self._sealer = sealer
        self._metrics = metrics
        self._in_flight = threading.BoundedSemaphore(max_in_flight)

    def depth(self, tenant: str, mode: str) -> int:
        """How many of the fused ranking's best the step reorders for a query of `mode` (0: none),
        so that search opens at least that many."""
        setting = self._setting(tenant, mode)
        return setting.top_n if setting is not None else 0

    def reorder(self, tenant: str, query: str, mode: str, ranked: list[Ranked]) -> list[Ranked]:
        """`ranked` (fused order, best first) with its first `top_n` in the reranker's order."""
        setting = self._setting(tenant, mode)
        if setting is None or len(ranked) < 2:
            return ranked
        window, rest = ranked[: setting.top_n], ranked[setting.top_n:]
        if not self._in_flight.acquire(blocking=False):  # never queue behind a slow reranker
            self._metrics.count(RERANK_FAILED_METRIC, tenant)
            log.warning("rerank skipped (too many calls in flight); the fused order stands",
                        extra={"tenant": tenant, "candidates": len(window)})
            return ranked
        try:
            return self._reranked(tenant, query, setting, window, rest)
        finally:
            self._in_flight.release()

    def _reranked(self, tenant: str, query: str, setting: RerankSetting, window: list[Ranked],
                  rest: list[Ranked]) -> list[Ranked]:
        terms = set(analyze(query))
        texts = [best_text(self._sealer, tenant, r.memory.value, r.field, terms,
                           message=is_session_message(r.memory.namespace, r.memory.key))[:MAX_RERANK_TEXT_CHARS]
                 or r.memory.key for r in window]
        try:
            scores = self._reranker.rerank(query, texts, model_id=setting.model_id)  # type: ignore[union-attr]
            if len(scores) != len(window) or not all(math.isfinite(s) for s in scores):
                raise ValueError("the reranker did not score every text")
        except Exception as exc:  # any failure of the reranker leaves the fused order: search must answer
            self._metrics.count(RERANK_FAILED_METRIC, tenant)
            log.warning("rerank failed (%s); the fused order stands", type(exc).__name__,
                        extra={"tenant": tenant, "candidates": len(window)})
            return window + rest
        order = sorted(range(len(window)), key=lambda i: -scores[i])  # stable: ties keep the fused order
        return [_with_rerank_score(window[i], scores[i]) for i in order] + rest

    def _setting(self, tenant: str, mode: str) -> RerankSetting | None:
        if self._reranker is None or mode == "semantic":
            return None
        setting = self._settings.get(tenant).rerank
        return setting if setting.enabled else None


def best_text(sealer: Sealer, tenant: str, value: dict[str, Any], field: str | None, terms: set[str], *,
              message: bool = False) -> str:
    """A memory's indexed text that matched best: the one whose vector did (`field`, a keyed
    hash), or (found by keywords alone) the one sharing the most query terms. A session message
    (`message`: under its seq in a session's messages) is its own content, whichever of its texts
    matched: its vectors are of texts no value holds (`core.message_context`), and its other
    leaves are its role and its speaker's name, which say nothing of what was said.

    The work is bounded whatever the value's size: only each text's first
    `MAX_RERANK_TEXT_CHARS` (what the reranker is sent) are analyzed, and texts after the first
    `MAX_BEST_TEXT_SCAN_CHARS` analyzed are not candidates."""
    if message and (turn := turn_of(value)) is not None:
        return turn.content
    texts = extract_texts(value, None, limit=MAX_INDEXED_FIELDS)
    if field is not None:
        for path, text in texts:
            if sealer.field_id(tenant, path) == field:
                return text
    if not terms:
        return texts[0][1] if texts else ""
    best, best_shared, budget = "", -1, MAX_BEST_TEXT_SCAN_CHARS
    for _, text in texts:
        if budget <= 0:
            break
        head = text[:min(MAX_RERANK_TEXT_CHARS, budget)]
        budget -= len(head)
        shared = len(terms & set(analyze(head)))
        if shared > best_shared:  # ties: the first
            best, best_shared = text, shared
    return best


def _with_rerank_score(ranked: Ranked, score: float) -> Ranked:
    memory = ranked.memory
    scores = {**(memory.scores or {}), "rerank": round(score, 6)}
    return dataclasses.replace(ranked, memory=dataclasses.replace(memory, scores=scores))
