"""The AWS embedder: Amazon Titan Text Embeddings V2 on Bedrock Runtime `InvokeModel`.

Titan embeds one text per request and is throttled by requests per minute, so this adapter
runs several requests at once (a bounded thread pool it owns), retries throttling and
transient failures itself with exponential backoff and full jitter, and keeps an embedding
cache keyed by sha256(model, dimension, text) so that re-indexing unchanged text makes no call
(seed 001, "Cache repeated embeddings").

The caller builds the boto3 client (nothing here reads the environment): `AwsClients` builds it
in botocore's `adaptive` mode with one attempt, so botocore paces requests and does not retry
underneath this adapter's own retries.
The text itself is never logged or stored: logs carry error codes, the cache holds vectors
under a hash.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random as _random
import re
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import ClientError, ConnectionError as BotoConnectionError, HTTPClientError

from memsvc.core.errors import EmbeddingFailed, InvalidArgument, MemsvcError, RateLimited

__all__ = [
    "TITAN_V2_MODEL_ID",
    "TITAN_V2_DIMENSIONS",
    "MAX_INPUT_CHARS",
    "EmbeddingCache",
    "LruEmbeddingCache",
    "EmbedderStats",
    "EmbeddingRejected",
    "TitanEmbedder",
]

log = logging.getLogger(__name__)

TITAN_V2_MODEL_ID = "amazon.titan-embed-text-v2:0"
TITAN_V2_DIMENSIONS = (256, 512, 1024)
MAX_INPUT_CHARS = 50_000  # Titan V2's documented limit (alongside 8,192 tokens)

_THROTTLING = {"ThrottlingException", "ServiceQuotaExceededException", "TooManyRequestsException"}
_TRANSIENT = {"ModelNotReadyException", "ServiceUnavailableException", "InternalServerException",
              "ModelTimeoutException"}
# Titan's answer to a text over 8,192 tokens (a ValidationException), e.g. "400 Bad Request: Too many
# input tokens. Max input tokens: 8192, request input token count: 9875".
_TOO_MANY_TOKENS = re.compile(r"max input tokens:\s*(\d+),\s*request input token count:\s*(\d+)", re.I)
_MAX_SHRINKS = 4  # each shrink aims under the limit; a few cover a bad estimate


class EmbeddingCache(Protocol):
    """Vectors by cache key (a hex sha256). Keys not held are absent from `get_many`'s answer."""

    def get_many(self, keys: Sequence[str]) -> dict[str, list[float]]: ...

    def put_many(self, items: Mapping[str, Sequence[float]]) -> None: ...


class LruEmbeddingCache:
    """An in-process LRU cache of at most `max_entries` vectors, thread-safe.

    Vectors are held as float32 arrays (what S3 Vectors stores anyway): 4 KB per 1024-d vector,
    so the default 4096 entries cost about 17 MB, not the ~35 MB a list of Python floats would.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self._max = max_entries
        self._items: OrderedDict[str, array] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def get_many(self, keys: Sequence[str]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        with self._lock:
            for key in keys:
                vec = self._items.get(key)
                if vec is not None:
                    self._items.move_to_end(key)
                    out[key] = vec.tolist()
        return out

    def put_many(self, items: Mapping[str, Sequence[float]]) -> None:
        with self._lock:
            for key, vec in items.items():
                self._items[key] = array("f", vec)
                self._items.move_to_end(key)
            while len(self._items) > self._max:
                self._items.popitem(last=False)


@dataclass(frozen=True)
class EmbedderStats:
    """Counters since the embedder was built (diff two snapshots for a period's metrics).

    `cache_hits + cache_misses` is the number of texts asked for; a text repeated within one call
    is a hit after its first occurrence. `calls` counts every InvokeModel request sent, retries
    included (that is what Bedrock bills and throttles).
    """

    texts: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    calls: int = 0
    retries: int = 0
    throttles: int = 0
    failures: int = 0
    input_tokens: int = 0
    cache_errors: int = 0


class EmbeddingRejected(EmbeddingFailed):
    """Titan refused the text itself (a `ValidationException`): sending it again cannot succeed,
    so it is not retryable (an indexer should park the change instead of retrying it)."""

    status, retryable = 502, False


class TitanEmbedder:
    """`Embedder` on Titan Text Embeddings V2: unit-length vectors of `dimension` floats, in order.

    Args:
        client: a boto3 `bedrock-runtime` client (thread-safe; `AwsClients.bedrock_runtime`).
        model_id: the Bedrock model id (or an inference profile ARN for the same model).
        dimension: 256, 512 or 1024 (Titan V2's choices); must match the vector index.
        max_concurrency: InvokeModel requests in flight at once, across all callers of this
            instance (the pool is shared, so a burst of callers cannot exceed the model's quota
            faster than this).
        cache: any `EmbeddingCache`; a fresh `LruEmbeddingCache()` when None. Cache failures are
            counted and ignored: the cache saves money, it must not fail an embedding.
        max_attempts, base_delay, max_delay: per text, at most `max_attempts` requests; before
            retry n (1-based) sleep `random() * min(max_delay, base_delay * 2**(n-1))` seconds
            ("full jitter", so throttled workers spread out instead of retrying in lockstep).
        sleep, random: injectable so tests do not sleep and can check the delays.

    Texts longer than 50,000 characters are truncated (Titan's limit); a text Titan finds over
    its 8,192 tokens is cut in proportion and sent again. Blank texts raise `InvalidArgument`
    before any request: Titan rejects empty input and a vector of nothing would only add noise to
    search (the indexer and search already drop blank texts, so this is a caller bug).

    Failures, once retries are spent: throttling -> `RateLimited`; other transient failures ->
    `EmbeddingFailed` (retryable); a text Titan rejects -> `EmbeddingRejected` (not retryable,
    never retried here). On a failure the texts already embedded are still cached, so retrying
    the batch only pays for the rest.
    """

    def __init__(
        self,
        client: Any,
        *,
        model_id: str = TITAN_V2_MODEL_ID,
        dimension: int = 1024,
        max_concurrency: int = 8,
        cache: EmbeddingCache | None = None,
        max_attempts: int = 6,
        base_delay: float = 0.25,
        max_delay: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
        random: Callable[[], float] = _random.random,
    ) -> None:
        if dimension not in TITAN_V2_DIMENSIONS:
            raise ValueError(f"dimension must be one of {TITAN_V2_DIMENSIONS}, not {dimension!r}")
        if max_concurrency < 1 or max_attempts < 1:
            raise ValueError("max_concurrency and max_attempts must be >= 1")
        self.model_id = model_id
        self.dimension = dimension
        self._client = client
        self._cache: EmbeddingCache = cache if cache is not None else LruEmbeddingCache()
        self._max_attempts = max_attempts
        self._base_delay = base_delay
        self._max_delay = max_delay
        # Backoff hooks, public so that a test can observe the waits instead of sleeping them.
        self.sleep = sleep
        self.random = random
        # Threads start on first use, not here (nothing heavy happens at construction).
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="titan-embed")
        self._stats_lock = threading.Lock()
        self._stats: dict[str, int] = dict.fromkeys(EmbedderStats.__dataclass_fields__, 0)

    @property
    def stats(self) -> EmbedderStats:
        with self._stats_lock:
            return EmbedderStats(**self._stats)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> TitanEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        prepared = [_prepare(t) for t in texts]  # validate all before spending a request
        keys = [self._cache_key(t) for t in prepared]
        found = self._cache_get(list(dict.fromkeys(keys)))
        todo = {k: t for k, t in zip(keys, prepared) if k not in found}  # one request per distinct text
        self._count(texts=len(keys), cache_misses=len(todo), cache_hits=len(keys) - len(todo))
        if todo:
            fresh, error = self._embed_all(todo)
            if fresh:
                self._cache_put(fresh)
            if error is not None:
                raise error
            found.update(fresh)
        return [list(found[k]) for k in keys]

    # -- internals ------------------------------------------------------------------------------

    def _cache_key(self, text: str) -> str:
        # Versioned, and NUL-separated so no (model, dimension, text) triple can collide with another.
        material = f"titan-v2-cache/1\0{self.model_id}\0{self.dimension}\0{text}"
        return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()

    def _cache_get(self, keys: list[str]) -> dict[str, list[float]]:
        try:
            return dict(self._cache.get_many(keys))
        except Exception as exc:
            self._count(cache_errors=1)
            log.warning("embedding cache read failed (%s); embedding without it", type(exc).__name__)
            return {}

    def _cache_put(self, items: dict[str, list[float]]) -> None:
        try:
            self._cache.put_many(items)
        except Exception as exc:
            self._count(cache_errors=1)
            log.warning("embedding cache write failed (%s)", type(exc).__name__)

    def _embed_all(self, todo: dict[str, str]) -> tuple[dict[str, list[float]], MemsvcError | None]:
        """Embed every text; return the vectors obtained and the first failure (in input order)."""
        if len(todo) == 1:  # a search query: no thread hop
            (key, text), = todo.items()
            try:
                return {key: self._embed_one(text)}, None
            except MemsvcError as exc:
                return {}, exc
        # On the first failure stop sending requests: when Titan throttles, the rest of the batch
        # would only deepen the throttling. The failing thread says so itself (`stop`), so no
        # request starts after it, however late this thread wakes; requests already sent finish
        # and are kept, and none of them is retried.
        stop = threading.Event()
        futures: dict[str, Future] = {k: self._pool.submit(self._embed_one, t, stop) for k, t in todo.items()}
        wait(futures.values(), return_when=FIRST_EXCEPTION)
        for f in futures.values():
            f.cancel()
        wait([f for f in futures.values() if not f.cancelled()])
        fresh, error = {}, None
        for key, f in futures.items():
            if f.cancelled() or isinstance(f.exception(), _Stopped):
                continue
            exc = f.exception()
            if exc is None:
                fresh[key] = f.result()
            elif error is None:
                error = exc if isinstance(exc, MemsvcError) else EmbeddingFailed("the embedding model failed")
        return fresh, error

    def _embed_one(self, text: str, stop: threading.Event | None = None) -> list[float]:
        # Hand-written rather than botocore's retries (the client makes one attempt, in adaptive
        # mode for its rate limiter): a text Titan finds too long must be shortened before it is
        # sent again, which no retry mode can do, and the throttles and retries per text are
        # counted for the embedding metrics.
        failures = shrinks = 0
        while True:
            if stop is not None and stop.is_set():
                raise _Stopped
            self._count(calls=1)
            try:
                return self._invoke(text)
            except Exception as exc:
                kind, code = _classify(exc)
                if kind == "too_long" and shrinks < _MAX_SHRINKS:
                    shrinks += 1
                    text = _shrink(text, exc)
                    continue
                failures += 1
                retryable = kind in ("throttle", "transient")
                if kind == "throttle":
                    self._count(throttles=1)
                if retryable and failures < self._max_attempts:
                    delay = self.random() * self._ceiling(failures)
                    self._count(retries=1)
                    log.info("titan %s (%s); retry %d in %.2fs", kind, code, failures, delay)
                    self.sleep(delay)
                    continue
                self._count(failures=1)
                if stop is not None:
                    stop.set()
                log.warning("titan embedding failed: %s (%s) after %d attempt(s)", kind, code, failures)
                raise self._error(kind, code, failures) from None

    def _invoke(self, text: str) -> list[float]:
        response = self._client.invoke_model(
            modelId=self.model_id,
            contentType="application/json",
            accept="application/json",
            body=json.dumps({"inputText": text, "dimensions": self.dimension, "normalize": True}),
        )
        try:
            payload = json.loads(response["body"].read())
            vector = [float(x) for x in payload["embedding"]]
            tokens = int(payload.get("inputTextTokenCount") or 0)
        except (KeyError, TypeError, ValueError) as exc:
            raise _BadResponse("the response has no readable embedding") from exc
        self._count(input_tokens=tokens)
        if len(vector) != self.dimension:
            raise _BadResponse(f"expected {self.dimension} dimensions, got {len(vector)}")
        return _unit(vector)

    def _ceiling(self, failures: int) -> float:
        return min(self._max_delay, self._base_delay * 2 ** (failures - 1))

    def _error(self, kind: str, code: str, attempts: int) -> MemsvcError:
        details = {"provider": "bedrock", "attempts": attempts}
        if kind == "throttle":
            return RateLimited(
                "the embedding model is throttling requests; try again shortly",
                retry_after_seconds=max(1, math.ceil(self._ceiling(attempts))),
                details=details,
            )
        if kind in ("rejected", "too_long"):
            return EmbeddingRejected("the embedding model rejected the text", details=details)
        return EmbeddingFailed("the embedding model is unavailable; try again later", details=details)

    def _count(self, **deltas: int) -> None:
        with self._stats_lock:
            for name, n in deltas.items():
                self._stats[name] += n


class _BadResponse(Exception):
    """Titan answered 200 with something that is not a usable embedding."""


class _Stopped(Exception):
    """Another text of the batch failed first: this one was not sent (`TitanEmbedder._embed_all`)."""


def _prepare(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument("texts to embed must be non-blank strings", details={"field": "texts"})
    if len(text) <= MAX_INPUT_CHARS and (text.isascii() or _utf16_units(text) <= MAX_INPUT_CHARS):
        return text
    # Titan is a Java service and may count UTF-16 units; cutting to 50,000 of those satisfies
    # either reading of "characters". A surrogate pair split at the cut is dropped.
    return text.encode("utf-16-le", "surrogatepass")[: 2 * MAX_INPUT_CHARS].decode("utf-16-le", "ignore")


def _utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _shrink(text: str, exc: Exception) -> str:
    """Cut `text` to about 90% of the share of it that fits Titan's token limit."""
    match = _TOO_MANY_TOKENS.search(_message(exc))
    limit, count = (int(match[1]), int(match[2])) if match else (1, 2)
    keep = int(len(text) * min(limit / max(count, 1), 1.0) * 0.9)
    return text[: max(1, min(keep, len(text) - 1))]


def _classify(exc: Exception) -> tuple[str, str]:
    """(kind, code): kind is throttle | transient | too_long | rejected | fatal."""
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "Unknown")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        if code in _TRANSIENT or status >= 500:
            return "transient", code
        if code in _THROTTLING or status == 429:
            return "throttle", code
        if code == "ValidationException":
            return ("too_long" if _TOO_MANY_TOKENS.search(_message(exc)) else "rejected"), code
        # AccessDenied, ResourceNotFound (model not enabled), ModelError...: retrying now will not
        # help, but an operator fix will, so the failure stays retryable for the change feed.
        return "fatal", code
    if isinstance(exc, (BotoConnectionError, HTTPClientError)):  # connect/read timeouts, resets
        return "transient", type(exc).__name__
    if isinstance(exc, _BadResponse):
        return "fatal", "BadResponse"
    return "fatal", type(exc).__name__


def _message(exc: Exception) -> str:
    return exc.response.get("Error", {}).get("Message", "") if isinstance(exc, ClientError) else ""


def _unit(vector: list[float]) -> list[float]:
    """Re-normalise (Titan was asked to, but a stored vector must be unit length) and round to
    float32, so a vector from the cache is bit-for-bit the one first returned."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if not math.isfinite(norm) or norm == 0.0:  # S3 Vectors' cosine rejects a zero vector
        raise _BadResponse("the embedding is zero or not finite")
    return array("f", (x / norm for x in vector)).tolist()
