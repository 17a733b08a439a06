"""`python -m benchmarks.fusion`: how to fuse the semantic and keyword signals, measured.

In-process (no HTTP), on the embedded default (MiniLM, the local indexes): every memory of the
golden dataset is written and indexed, then each case's query is searched in `semantic` and in
`keyword` mode (50 candidates each, with their signals), and candidate fusions are scored
offline on the same lists. Two settings:
- `case`: each case searches only its own memories (3..8), as `memsvc eval` does;
- `pooled`: each case searches every memory of every case (about a thousand), which is closer
  to a real memory store and much harder.

For each fusion: Recall@5 and MRR over the cases that have an answer, then the score threshold
that maximises the F1 of Precision@5 and Recall@5 on the dev half, and P@5 / R@5 /
no-answer accuracy at that threshold on the test half (a threshold chosen on the cases it is
judged on would flatter it).

`benchmarks.retrieval_lab` measures the same without the service, in seconds, on the long
conversations of eval/conversations.json too; the fusion was chosen there (issue 23).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from memsvc.core.models import Caller
from memsvc.core.ranking import MINILM
from memsvc.service.memories import PutMemory
from memsvc.service.search import SearchQuery

CALLER = Caller(tenant_id="fusion", user_id="u")
POOL = 50
K = 5

Candidate = dict  # {"content", "semantic": cos | None, "keyword": match | None}


def _rrf(ranked: dict[str, list[str]]) -> dict[str, float]:
    scores: dict[str, float] = {}
    for ids in ranked.values():
        for rank, memory_id in enumerate(ids, start=1):
            scores[memory_id] = scores.get(memory_id, 0.0) + 1.0 / (60 + rank)
    return scores


FUSIONS: dict[str, Callable[[float | None, float | None], float] | None] = {
    "semantic only": lambda s, k: s if s is not None else -1.0,
    "keyword only": lambda s, k: k if k is not None else 0.0,
    "rrf k=60": None,  # rank based: computed from the two lists
    "convex 0.3 sem": lambda s, k: 0.3 * max(s or 0, 0) + 0.7 * (k or 0),
    "convex 0.5 sem": lambda s, k: 0.5 * max(s or 0, 0) + 0.5 * (k or 0),
    "convex 0.7 sem": lambda s, k: 0.7 * max(s or 0, 0) + 0.3 * (k or 0),
    "max": lambda s, k: max(max(s or 0, 0), k or 0),
    "noisy-or (before issue 23)": lambda s, k: 1 - (1 - max(s or 0, 0)) * (1 - (k or 0)),
    "calibrated mean, even weight": lambda s, k: MINILM.hybrid_score(s, k, 0.5),
}


def _build(dataset: list[dict], data_dir: Path):
    from memsvc.bootstrap import build_local

    app = build_local(data_dir, start_workers=False)
    for case in dataset:
        for n, memory in enumerate(case["setup_memories"]):
            app.services.memories.put(CALLER, PutMemory(
                namespace=["user", "u", "eval", case["id"]], key=str(n),
                value={"content": memory["content"], "type": memory.get("type")}, index_fields=["content"]))
    while app.workers.run_cycle("indexer").total:
        pass
    return app


def _candidates(app, case: dict, prefix: list[str]) -> dict[str, Candidate]:
    out: dict[str, Candidate] = {}
    for mode in ("semantic", "keyword"):
        for m in app.services.search.search(CALLER, SearchQuery(namespace_prefix=prefix, query=case["query"],
                                                                mode=mode, limit=POOL)):
            c = out.setdefault(m.id, {"content": m.value["content"], "semantic": None, "keyword": None,
                                      "updated": m.updated_at})
            c[mode] = m.score
    return out


def _ranked(name: str, cands: dict[str, Candidate]) -> list[tuple[str, float]]:
    fuse = FUSIONS[name]
    if fuse is None:
        lists = {mode: [i for i, _ in sorted(((i, c[mode]) for i, c in cands.items() if c[mode] is not None),
                                              key=lambda p: -p[1])] for mode in ("semantic", "keyword")}
        scores = _rrf(lists)
    else:
        scores = {i: fuse(c["semantic"], c["keyword"]) for i, c in cands.items()}
    return sorted(scores.items(), key=lambda p: -p[1])


def _case_metrics(ranked, cands, expected: set[str], threshold: float | None) -> tuple[float, float, float, int]:
    top = [(i, s) for i, s in ranked[:K] if threshold is None or s >= threshold]
    hits = [cands[i]["content"] in expected for i, _ in top]
    recall = len({cands[i]["content"] for i, _ in top} & expected) / len(expected) if expected else 1.0
    precision = (sum(hits) / len(hits)) if hits else (1.0 if not expected else 0.0)
    rr = next((1.0 / r for r, (i, _) in enumerate(ranked, 1) if cands[i]["content"] in expected), 0.0)
    return recall, precision, rr, len(top)


def evaluate(app, dataset: list[dict], setting: str) -> dict[str, dict[str, float]]:
    runs = []
    for case in dataset:
        prefix = ["user", "u", "eval", case["id"]] if setting == "case" else ["user", "u"]
        runs.append((case, _candidates(app, case, prefix)))
    report = {}
    for name, fuse in FUSIONS.items():
        ranked = [(case, cands, _ranked(name, cands)) for case, cands in runs]
        answered = [(c, cs, r) for c, cs, r in ranked if c["expected_retrievals"]]
        r5 = sum(_case_metrics(r, cs, set(c["expected_retrievals"]), None)[0] for c, cs, r in answered) / len(answered)
        mrr = sum(_case_metrics(r, cs, set(c["expected_retrievals"]), None)[2] for c, cs, r in answered) / len(answered)
        best_t, best_f1 = None, -1.0
        dev = [x for x in ranked if x[0]["split"] == "dev"]
        test = [x for x in ranked if x[0]["split"] == "test"]
        for t in sorted({round(s, 3) for _, _, r in dev for _, s in r[:K]}):
            m = [_case_metrics(r, cs, set(c["expected_retrievals"]), t) for c, cs, r in dev]
            rec, prec = sum(x[0] for x in m) / len(m), sum(x[1] for x in m) / len(m)
            f1 = 2 * rec * prec / (rec + prec) if rec + prec else 0
            if f1 > best_f1:
                best_t, best_f1 = t, f1
        m = [_case_metrics(r, cs, set(c["expected_retrievals"]), best_t) for c, cs, r in test]
        no_answer = [x for (c, _, _), x in zip(test, m) if not c["expected_retrievals"]]
        report[name] = {"R@5": r5, "MRR": mrr, "threshold": best_t,
                        "test P@5": sum(x[1] for x in m) / len(m), "test R@5": sum(x[0] for x in m) / len(m),
                        "test no-answer": sum(x[3] == 0 for x in no_answer) / max(1, len(no_answer))}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=Path("eval/memory_golden_dataset.json"))
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    dataset = json.loads(args.dataset.read_text())["cases"]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        app = _build(dataset, Path(tmp) / "data")
        try:
            out = {setting: evaluate(app, dataset, setting) for setting in ("case", "pooled")}
        finally:
            app.close()
    for setting, report in out.items():
        print(f"\n{setting}: {len(dataset)} cases, model {app.embedder.model_id}")
        print(f"{'fusion':<20} {'R@5':>6} {'MRR':>6} {'thresh':>7} {'test P@5':>9} {'test R@5':>9} {'no-ans':>7}")
        for name, r in report.items():
            print(f"{name:<20} {r['R@5']:6.3f} {r['MRR']:6.3f} {r['threshold'] or 0:7.3f} {r['test P@5']:9.3f} "
                  f"{r['test R@5']:9.3f} {r['test no-answer']:7.3f}")
    print(f"\n({time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
