"""Recent embeddings, kept: `remember` embeds a candidate's content to find its neighbours and
then again to index the memory it writes; with a model that embeds queries and stored texts alike
(MiniLM) the second is a lookup here, with e5 (a query is "query: ...") it is not. A query's
vectors and a stored text's are cached apart. (On AWS the Titan adapter has its own cache,
`LruEmbeddingCache`.)"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

from memsvc.ports import Embedder

__all__ = ["CachedEmbedder"]


class CachedEmbedder:
    """An `Embedder` that remembers the vectors of the last `max_entries` texts, keyed by the
    SHA-256 of the text (the cache holds vectors, never texts). Embeddings are deterministic, so
    a hit is exactly what the model would answer."""

    def __init__(self, inner: Embedder, *, max_entries: int = 1024) -> None:
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self._inner = inner
        self._max = max_entries
        self._vectors: OrderedDict[bytes, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """A query's vector, where the model embeds queries apart (e5, bge); else `embed`."""
        inner = getattr(self._inner, "embed_queries", None)
        if inner is None:
            return self.embed(texts)
        return self._cached(texts, inner, b"q\0")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self._cached(texts, self._inner.embed, b"p\0")

    def _cached(self, texts: Sequence[str], embed, salt: bytes) -> list[list[float]]:
        keys = [hashlib.sha256(salt + t.encode("utf-8", "surrogatepass")).digest() for t in texts]
        out: list[list[float] | None] = [None] * len(keys)
        with self._lock:
            for n, key in enumerate(keys):
                if key in self._vectors:
                    self._vectors.move_to_end(key)
                    out[n] = self._vectors[key]
        missing = [n for n, v in enumerate(out) if v is None]
        if missing:
            for n, vector in zip(missing, embed([texts[n] for n in missing])):
                out[n] = vector
            with self._lock:
                for n in missing:
                    self._vectors[keys[n]] = out[n]  # type: ignore[assignment]
                while len(self._vectors) > self._max:
                    self._vectors.popitem(last=False)
        return out  # type: ignore[return-value]
