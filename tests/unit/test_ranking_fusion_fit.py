"""The learned-fusion study's fitting code (benchmarks/fusion_fit.py): its numbers rest on these."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.fusion_fit import FEATURES, Rows, calibrate, fit, fit_listwise, monotone, per_question

COLUMNS = [FEATURES.index("sem"), FEATURES.index("kw")]


def _questions(seed: int, coefficients: tuple[float, float, float], n: int = 300, split: str = "dev") -> list[Rows]:
    """Questions of 20 candidates whose relevance is drawn from a known logistic model of two
    features (the others 0)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        features = np.zeros((20, len(FEATURES)))
        features[:, COLUMNS] = rng.uniform(0, 1, (20, 2))
        b0, b1, b2 = coefficients
        p = 1 / (1 + np.exp(-(b0 + b1 * features[:, COLUMNS[0]] + b2 * features[:, COLUMNS[1]])))
        relevant = (rng.uniform(0, 1, 20) < p).astype(float)
        cands = np.arange(20)
        out.append(Rows(split, features, relevant, cands, np.full(20, 0.8),
                        frozenset(cands[relevant > 0].tolist())))
    return out


def test_the_pointwise_fit_recovers_a_known_model():
    beta = fit({"set": _questions(1, (-3.0, 2.0, 4.0))}, COLUMNS, l2=0.0)
    assert beta == pytest.approx([-3.0, 2.0, 4.0], abs=0.4)


def test_the_fit_reads_only_the_split_asked():
    data = {"set": _questions(2, (-3.0, 2.0, 4.0)) + _questions(3, (-3.0, 4.0, -2.0), split="test")}
    assert fit(data, COLUMNS, l2=0.0)[2] > 3.0
    assert fit(data, COLUMNS, l2=0.0, split="test")[2] < -1.0


def test_regularisation_shrinks_the_coefficients():
    data = {"set": _questions(4, (-3.0, 2.0, 4.0))}
    assert np.abs(fit(data, COLUMNS, l2=1000.0)[1:]).sum() < np.abs(fit(data, COLUMNS, l2=0.0)[1:]).sum()


def test_the_listwise_fit_ranks_by_the_stronger_signal_and_calibration_gives_a_probability():
    data = {"set": _questions(5, (-3.0, 1.0, 5.0))}
    ranking = fit_listwise(data, COLUMNS, l2=0.01)
    assert ranking[1] > ranking[0] > 0
    beta = calibrate(data, COLUMNS, ranking)
    rows = data["set"]
    p = np.concatenate([1 / (1 + np.exp(-(beta[0] + r.features[:, COLUMNS] @ beta[1:]))) for r in rows])
    assert p.mean() == pytest.approx(np.concatenate([r.relevant for r in rows]).mean(), abs=0.02)


def test_monotone_drops_features_whose_coefficient_is_negative():
    data = {"set": _questions(6, (-2.0, -3.0, 4.0))}
    kept, beta = monotone(lambda c: fit(data, c, l2=0.0), COLUMNS, intercept=True)
    assert kept == [COLUMNS[1]]
    assert beta[1] > 0


def test_recall_counts_the_share_of_expected_memories_in_the_top_five():
    features = np.zeros((7, len(FEATURES)))
    row = Rows("test", features, np.zeros(7), np.arange(7), np.full(7, 0.8), frozenset({0, 6}))
    score = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    assert per_question([row], lambda r: score, "test") == [0.5]
    assert per_question([row], lambda r: score, "dev") == []
    latest = Rows("test", features, np.zeros(7), np.arange(7), np.full(7, 0.8), frozenset({6}))
    assert per_question([latest], lambda r: np.zeros(7), "test") == [1.0]  # a tie goes to the later turn
