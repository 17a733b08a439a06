"""Hand-placed unit vectors for the tests that stand in for e5-small with vectors of their own
choosing (a crowd close to the query and to each other, an outsider apart from it)."""

from __future__ import annotations

import math

DIMENSION = 16


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def axis(n: int, scale: float) -> list[float]:
    return [scale if i == n else 0.0 for i in range(DIMENSION)]


def plus(*vectors: list[float]) -> list[float]:
    return [sum(column) for column in zip(*vectors)]
