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

A memory's text is the one recall would show (`service.best_text`), cut to
`MAX_RERANK_TEXT_CHARS`.

The texts leave the process: to Bedrock in the deployment's account on AWS, to the endpoint the
operator named in `MEMSVC_RERANK_URL` locally.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from typing import TYPE_CHECKING

from memsvc.core.keywords import query_terms
from memsvc.core.message_context import is_session_message
from memsvc.ports import Metrics, Reranker
from memsvc.service.best_text import best_text
from memsvc.service.sealing import Sealer
from memsvc.service.tenant_config import RerankSetting, SettingsRegistry

if TYPE_CHECKING:
    from memsvc.service.search import Ranked

__all__ = ["Rerank", "RERANK_FAILED_METRIC", "MAX_RERANK_TEXT_CHARS", "MAX_RERANK_IN_FLIGHT"]

log = logging.getLogger(__name__)

RERANK_FAILED_METRIC = "memory.search.rerank_failed"
# A memory's text as the reranker gets it: cross-encoders read a few hundred tokens of a document
# (Amazon Rerank 1.0 and Cohere Rerank 3.5 cut the rest), so more is only bytes on the wire.
MAX_RERANK_TEXT_CHARS = 4000
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
        terms = set(query_terms(query))
        texts = [best_text(self._sealer, tenant, r.memory.value, r.field, terms,
                           message=is_session_message(r.memory.namespace, r.memory.key))[0][:MAX_RERANK_TEXT_CHARS]
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


def _with_rerank_score(ranked: Ranked, score: float) -> Ranked:
    memory = ranked.memory
    scores = {**(memory.scores or {}), "rerank": round(score, 6)}
    return dataclasses.replace(ranked, memory=dataclasses.replace(memory, scores=scores))
