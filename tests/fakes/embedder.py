"""A deterministic embedder for fast unit tests: hashed bag of words, unit length.

Texts sharing words are similar, texts sharing none are orthogonal. `memsvc serve` and the API
tests use the real MiniLM model; this one only keeps service-level unit tests quick.

It can also play a poison item (issue 22), as a real model meets one: a text holding one of the
`poison` words is refused with a `ValueError`, every call holding it, while every other text is
embedded as usual (the indexer's probe of a known-good text succeeds); a text holding one of the
`deadly` words raises `ProcessKilled`, which no `except Exception` stops, as if the kernel had
killed the process (out of memory) in the middle of that call: nothing after it runs.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading


class ProcessKilled(BaseException):
    """The process died here (a test stands in for the kernel's OOM kill or a Lambda timeout)."""


class HashEmbedder:
    model_id = "test/hash-bow-64"
    dimension = 64

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.fail_next = 0
        self.poison: set[str] = set()  # words whose texts the model refuses
        self.deadly: set[str] = set()  # words whose texts kill the process
        self._lock = threading.Lock()

    def embed(self, texts):
        with self._lock:
            self.calls.append(list(texts))
            if self.fail_next:
                self.fail_next -= 1
                raise RuntimeError("embedder unavailable (injected)")
        words = {w for t in texts for w in re.findall(r"\w+", t.lower())}
        if self.deadly & words:
            raise ProcessKilled("killed while embedding (injected)")
        if self.poison & words:
            raise ValueError("the model cannot embed this text (injected)")
        return [self._one(t) for t in texts]

    def _one(self, text: str) -> list[float]:
        vec = [0.0] * self.dimension
        for word in re.findall(r"\w+", text.lower()):
            h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
            vec[h % self.dimension] += 1.0
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        if norm == 1.0 and not any(vec):
            vec[0] = 1.0
        return [x / norm for x in vec]
