"""Calibrate remember's thresholds (seed 002) for an embedding model: the cosine similarity of
hand-made pairs (eval/same_fact_pairs.json: same fact / contradiction / different facts), per
label, and what the deterministic same-fact judge says about each pair.

    python -m benchmarks.same_fact_calibration            # MiniLM, the local default
    python -m benchmarks.same_fact_calibration --hash     # the tests' hash embedder

Prints each label's cosine distribution, the pairs, and the judge's accuracy; benchmarks/README.md
("Remember: thresholds") says how the defaults were read off it.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from memsvc.core.same_fact import judge_statements

PAIRS = Path(__file__).resolve().parent.parent / "eval" / "same_fact_pairs.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hash", action="store_true", help="the tests' hash embedder instead of MiniLM")
    parser.add_argument("--e5", action="store_true", help="e5-small on onnxruntime (adapters.local.e5_onnx): "
                        "a candidate embedded as a query against stored passages, as search embeds it")
    args = parser.parse_args()
    if args.e5:
        from memsvc.adapters.local.e5_onnx import E5SmallOnnxEmbedder

        embedder = E5SmallOnnxEmbedder()
    elif args.hash:
        from tests.fakes.embedder import HashEmbedder

        embedder = HashEmbedder()
    else:
        from memsvc.adapters.local.embedder import MiniLMEmbedder

        embedder = MiniLMEmbedder()
    pairs = json.loads(PAIRS.read_text())["pairs"]
    if args.e5:
        queries, passages = embedder.embed_queries([p["a"] for p in pairs]), embedder.embed([p["b"] for p in pairs])
        vectors = [v for pair in zip(queries, passages) for v in pair]
    else:
        vectors = embedder.embed([text for p in pairs for text in (p["a"], p["b"])])
    by_label: dict[str, list[float]] = {}
    correct = 0
    print(f"model: {embedder.model_id}\n")
    print(f"{'label':<14} {'cosine':>6}  {'judge':<14} pair")
    for n, pair in enumerate(pairs):
        a, b = vectors[2 * n], vectors[2 * n + 1]
        cosine = sum(x * y for x, y in zip(a, b))
        by_label.setdefault(pair["label"], []).append(cosine)
        verdict = judge_statements(pair["a"], pair["b"]).relation
        correct += verdict == pair["label"]
        print(f"{pair['label']:<14} {cosine:6.3f}  {verdict:<14} {pair['a']!r} / {pair['b']!r}")
    print("\ncosine by label: n, min, p25, median, p75, max")
    for label, scores in sorted(by_label.items()):
        q = statistics.quantiles(scores, n=4)
        print(f"  {label:<14} {len(scores):3d} {min(scores):6.3f} {q[0]:6.3f} {statistics.median(scores):6.3f} "
              f"{q[2]:6.3f} {max(scores):6.3f}")
    print(f"\ndeterministic judge: {correct}/{len(pairs)} pairs labelled right")


if __name__ == "__main__":
    main()
