"""`python -m benchmarks.fusion_fit`: a learned, calibrated hybrid fusion, fitted and measured.

A logistic model of P(relevant | features) over each question's candidates (the best `--pool` of
each retriever in its scope, as `benchmarks.retrieval_lab` builds them), fitted on the DEV halves
of every set at once (each set weighs the same, each question within a set the same), L2
regularised (`--l2`), by Newton's method in numpy. Two fits of each feature set: pointwise (the
log loss of each candidate's relevance) and listwise (the softmax of each question's candidates
against its relevant ones, then one logistic fit of relevance on that score, so that it reads as
a probability too), and a `monotone` refit of each without the features whose coefficient came
out negative (search's early stop bounds an unseen memory by its retrievers' lowest signals: the
score must not fall as a signal grows). Features are per candidate, from what search has, and
mean the same for any query:
- `sem`: the cosine on the model's range (`Fusion.cosine_none`..`cosine_full` onto 0..1, 0 below,
  unclipped above; 0 when the semantic retriever did not hand the candidate over);
  `sem_gap`: `sem` less the query's best `sem`;
- `kw`: the keyword match (`core.ranking.keyword_match`, 0..1); `kw_gap`: less the query's best;
- `cover`: the share of the query's terms the candidate holds;
- `sem_rank`, `kw_rank`: 1 / (1 + rank) in each retriever's list (0 when not in it);
- `both`: 1 when both retrievers handed it over;
- `shipped`: what ships scores it (`core.ranking.fusion_for`);
- `sem_x_sep`, `kw_x_sep`: `sem` and `kw` times the query's separation of that signal
  (`core.ranking.separation`); `sem_lead`, `kw_lead`: that separation for the signal's best
  candidate, 0 for the others; `kw_full`: 1 when `kw` is 1.
The monotone fit chosen on the dev halves (by the best mean R@5 over the sets, and by the least
loss to the better single mode over the sets) is reported on the TEST halves beside what ships
and the single modes, with its coefficients, how many test questions it answers better and worse
than what ships, and its calibration. `--bonus-grid` adds the cheaper variant: what ships plus
fixed bonuses for `both`, `cover` and `sem_rank`. benchmarks/README.md, issue 23, has the results.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.retrieval_lab import KEYWORD_VARIANTS, MODEL_IDS, K, Scope, Vectors, candidates, load
from memsvc.core.ranking import fusion_for, separation

FEATURES = ("sem", "sem_gap", "kw", "kw_gap", "cover", "sem_rank", "kw_rank", "both", "shipped", "sem_x_sep",
            "kw_x_sep", "kw_full", "kw_lead", "sem_lead")


@dataclass
class Rows:
    """One question's candidates: their features (one row each), relevance, and ids for ties."""

    split: str
    features: np.ndarray  # candidates x FEATURES
    relevant: np.ndarray
    cands: np.ndarray
    cosine: np.ndarray  # -1 where the semantic retriever did not hand the candidate over
    expected: frozenset[int]


def _rank_feature(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    out = np.zeros(len(values))
    idx = np.flatnonzero(present)
    order = idx[np.argsort(-values[idx], kind="stable")]
    out[order] = 1.0 / (2.0 + np.arange(len(order)))  # the first: 1 / (1 + 1)
    return out


def build(scopes: list[Scope], vectors: Vectors, model: str, pool: int) -> list[Rows]:
    analyzer, bm25 = KEYWORD_VARIANTS["memsvc now"]
    fusion = fusion_for(MODEL_IDS[model])
    out = []
    for found in candidates(scopes, vectors, analyzer, bm25, pool):
        question, index, raw, cands = found.question, found.index, found.raw, found.ids
        c, k, sin, kin = found.cos, found.match, found.by_meaning, found.by_keyword
        sem = np.maximum(np.where(sin, (c - fusion.cosine_none) / (fusion.cosine_full - fusion.cosine_none), 0.0), 0.0)
        terms = set(dataclasses.replace(analyzer, stop=bm25.query_stop)(question.query))
        cover = np.array([sum(1 for t in terms if index.docs[i].get(t)) / len(terms) if terms else 0.0
                          for i in cands])
        best_sem = sem[sin].max() if sin.any() else 0.0
        best_kw = k[kin].max() if kin.any() else 0.0
        sem_matches = sorted((fusion.semantic_match(x) for x in c[sin]), reverse=True)
        kw_matches = sorted(k[kin], reverse=True)
        sem_sep, kw_sep = separation(sem_matches, 0.0), separation(kw_matches, 0.0)
        w = fusion.semantic_weight(sem_sep, kw_sep)
        shipped = np.array([fusion.hybrid_score(x if i else None, m, w) for x, m, i in zip(c, k, sin)])
        feats = np.column_stack([
            sem, sem - best_sem, k, k - best_kw, cover,
            _rank_feature(c, sin), _rank_feature(raw[cands], kin), (sin & kin).astype(float), shipped,
            sem * sem_sep, k * kw_sep, (k >= 0.999).astype(float),
            kw_sep * (k >= best_kw) * kin, sem_sep * (sem >= best_sem) * sin])
        relevant = np.array([i in question.expected for i in cands], dtype=float)
        out.append(Rows(question.split, feats, relevant, cands, c, question.expected))
    return out


def fit(data: dict[str, list[Rows]], columns: Sequence[int], l2: float, split: str = "dev") -> np.ndarray:
    """Weighted L2 logistic regression (intercept unpenalised), Newton's method."""
    xs, ys, ws = [], [], []
    for rows in data.values():
        chosen = [r for r in rows if r.split == split]
        for r in chosen:
            xs.append(r.features[:, columns])
            ys.append(r.relevant)
            ws.append(np.full(len(r.relevant), 1.0 / (len(chosen) * len(data))))
    x = np.column_stack([np.ones(sum(len(y) for y in ys)), np.vstack(xs)])
    y, w = np.concatenate(ys), np.concatenate(ws)
    w = w / w.mean()  # a candidate weighs 1 on average: l2 reads against the number of candidates
    beta = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(x @ beta)))
        grad = x.T @ (w * (p - y)) + penalty * beta
        hess = (x * (w * p * (1 - p))[:, None]).T @ x + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-9:
            break
    return beta


def fit_listwise(data: dict[str, list[Rows]], columns: Sequence[int], l2: float, split: str = "dev") -> np.ndarray:
    """A ranking fit: per question, the softmax of the linear score over its candidates against
    its relevant ones (each set weighs the same, each question within a set the same), L2
    regularised, Newton's method. No intercept: a question's scores shift together."""
    questions = []
    for rows in data.values():
        chosen = [r for r in rows if r.split == split and r.relevant.any()]
        questions += [(r.features[:, columns], r.relevant / r.relevant.sum(), 1.0 / (len(chosen) * len(data)))
                      for r in chosen]
    total = sum(q[2] for q in questions)
    weights = [weight / total * len(questions) for _, _, weight in questions]

    def loss(beta: np.ndarray) -> float:
        out = 0.5 * l2 * beta @ beta
        for (x, target, _), w in zip(questions, weights):
            z = x @ beta
            out += w * (z.max() + np.log(np.exp(z - z.max()).sum()) - target @ z)
        return out

    beta = np.zeros(len(columns))
    current = loss(beta)
    for _ in range(100):
        grad = l2 * beta
        hess = l2 * np.eye(len(columns))
        for (x, target, _), w in zip(questions, weights):
            z = x @ beta
            p = np.exp(z - z.max())
            p /= p.sum()
            mean = p @ x
            grad += w * (mean - target @ x)
            centred = x - mean
            hess += w * (centred * p[:, None]).T @ centred
        step = np.linalg.solve(hess, grad)
        scale = 1.0
        while loss(beta - scale * step) > current and scale > 1e-6:  # damped: a full step may overshoot
            scale /= 2
        beta -= scale * step
        previous, current = current, loss(beta)
        if previous - current < 1e-10:
            break
    return beta


def monotone(fitter: Callable[[Sequence[int]], np.ndarray], columns: Sequence[int],
             intercept: bool) -> tuple[list[int], np.ndarray]:
    """Refit without the features whose coefficient came out negative, until none is: search's
    early stop bounds an unseen memory's score by its retrievers' lowest signals, which needs a
    score that never falls as a signal grows."""
    kept = list(columns)
    while True:
        beta = fitter(kept)
        weights = beta[1:] if intercept else beta
        if (weights >= 0).all() or len(kept) == 1:
            return kept, beta
        kept = [c for c, w in zip(kept, weights) if w >= 0]


def calibrate(data: dict[str, list[Rows]], columns: Sequence[int], beta: np.ndarray, split: str = "dev") -> np.ndarray:
    """The ranking fit's score made a probability: a logistic fit of relevance on it (a, b), so
    P = sigmoid(b + a x score); returns the model's coefficients, intercept first."""
    scored = {name: [Rows(r.split, (r.features[:, columns] @ beta)[:, None], r.relevant, r.cands, r.cosine, r.expected)
                     for r in rows] for name, rows in data.items()}
    ab = fit(scored, [0], 0.0, split)
    return np.concatenate([[ab[0]], ab[1] * beta])


def per_question(rows: list[Rows], score: Callable, split: str, by_meaning: bool = True) -> list[float]:
    """Each of the split's questions' recall at 5; ties go to the closer meaning (not in keyword
    mode, which has none), then to the later turn, as in the service and
    `retrieval_lab.recall_at_k`."""
    got = []
    for r in rows:
        if r.split != split:
            continue
        s = score(r)
        closer = np.where(r.cosine > -1, -r.cosine, 0.0) if by_meaning else np.zeros(len(s))
        order = np.lexsort((-r.cands, closer, -np.round(s, 6)))
        top = set(r.cands[[i for i in order if s[i] > -np.inf][:K]].tolist())
        got.append(len(r.expected & top) / len(r.expected))
    return got


def recall(rows: list[Rows], score: Callable, split: str, by_meaning: bool = True) -> float:
    got = per_question(rows, score, split, by_meaning)
    return sum(got) / len(got) if got else float("nan")


def _paired(data: dict[str, list[Rows]], model: Callable, col: dict[str, int]) -> str:
    """How many test questions `model` answers better and worse than what ships, per set."""
    def shipped(r: Rows) -> np.ndarray:
        return r.features[:, col["shipped"]]
    counts = []
    for name, rows in data.items():
        pairs = list(zip(per_question(rows, model, "test"), per_question(rows, shipped, "test")))
        counts.append(f"{name} {sum(a > b for a, b in pairs)} / {sum(a < b for a, b in pairs)}")
    return "    test questions it answers better / worse than shipped: " + ", ".join(counts)


def _calibration(data: dict[str, list[Rows]], model: Callable) -> str:
    """Whether the model's output reads as a probability: over every set's test candidates, the
    share relevant among those it gives each band of probability."""
    p = np.concatenate([1 / (1 + np.exp(-model(r))) for rows in data.values() for r in rows if r.split == "test"])
    y = np.concatenate([r.relevant for rows in data.values() for r in rows if r.split == "test"])
    bands = []
    for lo, hi in ((0.0, 0.1), (0.1, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, 1.01)):
        inside = (p >= lo) & (p < hi)
        if inside.any():
            bands.append(f"{lo:.1f}-{min(hi, 1):.1f}: {inside.sum()} candidates, mean p {p[inside].mean():.3f}, "
                         f"relevant {y[inside].mean():.3f}")
    return "    calibration on the test halves: " + "; ".join(bands)


def _bonus_grid(data: dict[str, list[Rows]], col: dict[str, int], line: Callable,
                covers: Sequence[float] = (0.0, 0.02, 0.05, 0.1, 0.2)) -> None:
    """The cheaper variant: what ships plus fixed bonuses for being found by both retrievers, for
    the query's terms held, and for the semantic rank, rescaled onto 0..1; the grid's best by the
    mean dev R@5 over the sets, the top ten printed with both halves."""
    results = []
    for both in (0.0, 0.02, 0.05, 0.1, 0.2):
        for cover in covers:
            for rank in (0.0, 0.05, 0.1, 0.2, 0.3):
                def score(r, b=both, c=cover, k=rank):
                    f = r.features
                    return (f[:, col["shipped"]] + b * f[:, col["both"]] + c * f[:, col["cover"]]
                            + k * f[:, col["sem_rank"]]) / (1 + b + c + k)
                dev = np.mean([recall(rows, score, "dev") for rows in data.values()])
                results.append((dev, f"shipped +both {both} +cover {cover} +rank {rank}", score))
    results.sort(key=lambda x: -x[0])
    for dev, label, score in results[:10]:
        line(label, score)
    print(_paired(data, results[0][2], col))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["conversations", "conversations-plain", "lexical-plain",
                                                      "lexical-common-plain", "golden", "golden+50"])
    parser.add_argument("--golden", type=Path, default=Path("eval/memory_golden_dataset.json"))
    parser.add_argument("--conversations", type=Path, default=Path("eval/conversations.json"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/memsvc-retrieval-lab"))
    parser.add_argument("--model", default="e5-onnx")
    parser.add_argument("--pool", type=int, default=50)
    parser.add_argument("--l2", type=float, nargs="+", default=[1.0])
    parser.add_argument("--bonus-grid", action="store_true", help="also the shipped fusion plus fixed bonuses")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sets = load(args.sets, args.golden, args.conversations)
    vectors = Vectors(args.cache, args.model)
    data = {name: build(scopes, vectors, args.model, args.pool) for name, scopes in sets.items()}
    col = {name: i for i, name in enumerate(FEATURES)}
    variants = {
        "all but shipped": [f for f in FEATURES if f != "shipped"],
        "no ranks": ["sem", "sem_gap", "kw", "kw_gap", "cover", "both"],
        "no ranks, no cover": ["sem", "sem_gap", "kw", "kw_gap", "both"],
        "values only": ["sem", "kw"],
        "shipped + both + cover": ["shipped", "both", "cover"],
        "shipped + gaps": ["shipped", "sem_gap", "kw_gap", "both"],
        "all": list(FEATURES),
        "values, gaps, leads": ["sem", "sem_gap", "kw", "kw_gap", "kw_lead", "sem_lead"],
        "values, gaps, leads, full, cover": ["sem", "sem_gap", "kw", "kw_gap", "kw_lead", "sem_lead", "kw_full",
                                             "cover"],
        "shipped, leads, full, cover": ["shipped", "kw_lead", "sem_lead", "kw_full", "cover"],
        "shipped, gaps, leads, full, cover, sem_rank": ["shipped", "sem_gap", "kw_gap", "kw_lead", "sem_lead",
                                                       "kw_full", "cover", "sem_rank"],
        "values + separations": ["sem", "kw", "sem_x_sep", "kw_x_sep"],
        "values + separations + gaps + both": ["sem", "kw", "sem_x_sep", "kw_x_sep", "sem_gap", "kw_gap", "both"],
        "values + separations + both + cover": ["sem", "kw", "sem_x_sep", "kw_x_sep", "both", "cover"],
    }
    widths = [max(len(n), 13) for n in data]
    print(f"{'fusion':<36} " + " ".join(f"{n:>{w}}" for n, w in zip(data, widths)))

    def line(label: str, score, by_meaning: bool = True) -> list[float]:
        """Prints the row; returns each set's dev R@5 (what a choice may read)."""
        dev = [recall(rows, score, "dev", by_meaning) for rows in data.values()]
        test = [recall(rows, score, "test", by_meaning) for rows in data.values()]
        cells = [f"{d:.3f} / {t:.3f}" for d, t in zip(dev, test)]
        print(f"{label:<36} " + " ".join(f"{c:>{w}}" for c, w in zip(cells, widths))
              + f"  (mean dev {np.mean(dev):.4f})", flush=True)
        return dev

    semantic = line("semantic", lambda r: np.where(r.cosine > -1, r.cosine, -np.inf))
    keyword = line("keyword", lambda r: np.where(r.features[:, col["kw_rank"]] > 0, r.features[:, col["kw"]], -np.inf),
                   by_meaning=False)
    better_half = np.maximum(semantic, keyword)
    shipped = line("shipped", lambda r: r.features[:, col["shipped"]])
    print(f"{'':<36} shipped: mean dev {np.mean(shipped):.4f}, least dev lead over the better half "
          f"{np.min(np.array(shipped) - better_half):+.3f}")
    print()
    shippable = []  # monotone fits: (dev R@5 of each set, label, columns, coefficients)
    for label, names in variants.items():
        columns = [col[n] for n in names]
        for l2 in args.l2:
            beta = fit(data, columns, l2)
            line(f"{label}, l2 {l2}", lambda r, b=beta, c=columns: b[0] + r.features[:, c] @ b[1:])
            print("    " + ", ".join(f"{n} {v:+.3f}" for n, v in zip(["intercept", *names], beta)))
            beta = calibrate(data, columns, fit_listwise(data, columns, l2))
            line(f"{label}, listwise l2 {l2}", lambda r, b=beta, c=columns: b[0] + r.features[:, c] @ b[1:])
            print("    " + ", ".join(f"{n} {v:+.3f}" for n, v in zip(["intercept", *names], beta)))
            for kind, fitter, intercept in (
                    ("monotone", lambda c, l2=l2: fit(data, c, l2), True),
                    ("monotone listwise", lambda c, l2=l2: fit_listwise(data, c, l2), False)):
                kept, beta = monotone(fitter, columns, intercept)
                if not intercept:
                    beta = calibrate(data, kept, beta)
                dev = line(f"{label}, {kind} l2 {l2}", lambda r, b=beta, c=kept: b[0] + r.features[:, c] @ b[1:])
                shippable.append((dev, f"{label}, {kind} l2 {l2}", kept, beta))
                print("    " + ", ".join(f"{n} {v:+.3f}"
                                      for n, v in zip(["intercept", *[FEATURES[c] for c in kept]], beta)))
    rules = {"the best mean dev R@5": lambda dev: np.mean(dev),
             "the least dev loss to the better half": lambda dev: np.min(np.array(dev) - better_half)}
    for rule, key in rules.items():
        dev, label, kept, beta = max(shippable, key=lambda x: key(x[0]))
        print(f"\nchosen by {rule} of the monotone fits ({key(dev):+.4f}; shipped {key(shipped):+.4f}): {label}")

        def model(r: Rows, b: np.ndarray = beta, c: list[int] = kept) -> np.ndarray:
            return b[0] + r.features[:, c] @ b[1:]

        line("chosen", model)
        print("    " + ", ".join(f"{n} {v:+.4f}" for n, v in zip(["intercept", *[FEATURES[c] for c in kept]], beta)))
        print(_paired(data, model, col))
        print(_calibration(data, model))
    if args.bonus_grid:
        _bonus_grid(data, col, line)
        print("without the share of terms held (the keyword index does not report it):")
        _bonus_grid(data, col, line, covers=(0.0,))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
