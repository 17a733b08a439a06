"""benchmarks.peers' targets table: every number issue 14's targets name, judged against them."""

from benchmarks.peers import MEMSVC, READS, SQLITE, targets


def phases(per_s: float, p95_ms: float, *, clients: int = 8, scale: float = 2.0) -> dict:
    names = ["put (read-your-writes)", "put (async indexing)", *READS]
    out = {f"{name} / 1": {"per_s": per_s, "p95_ms": p95_ms} for name in names}
    out |= {f"{name} / {clients}": {"per_s": per_s * scale, "p95_ms": p95_ms} for name in names}
    return out


def rows(table: str) -> dict[str, str]:
    """target -> met, for the table's rows."""
    return {cells[1]: cells[3] for line in table.splitlines() if line.startswith("| 10,000")
            for cells in [[c.strip() for c in line.strip("|").split("|")]]}


def test_each_target_is_judged():
    memsvc = phases(100.0, 2.5)
    memsvc["semantic / 1"]["p95_ms"] = 16.0
    memsvc["put (async indexing) / 1"]["per_s"] = 250.0
    memsvc["hybrid / 8"]["per_s"] = 150.0
    results = [{"items": 10_000, "stores": {MEMSVC: {"phases": memsvc}, SQLITE: {"phases": phases(90.0, 1.0)}}}]
    met = rows(targets(results, 8))
    assert met["filter (value field) p95 <= 3.0 ms"] == "yes"
    assert met["semantic p95 <= 15.0 ms"] == "NO"
    assert met["put, read-your-writes >= SqliteStore's"] == "yes"
    assert met["put, async indexing > 3x SqliteStore's"] == "NO"  # 250 against 3 x 90
    assert met["get: 8 clients >= 1.6x one client's throughput"] == "yes"
    assert met["hybrid: 8 clients >= 1.6x one client's throughput"] == "NO"
    assert len(met) == 4 + len(READS)


def test_without_sqlitestore_the_put_targets_are_not_judged():
    results = [{"items": 10_000, "stores": {MEMSVC: {"phases": phases(100.0, 2.5)}}}]
    met = rows(targets(results, 8))
    assert met["put, read-your-writes >= SqliteStore's"] == "-"
    assert met["filter (value field) p95 <= 3.0 ms"] == "yes"
