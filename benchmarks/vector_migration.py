"""`python -m benchmarks.vector_migration --sizes 100000 1000000`: what converting a vectors file of the first layout costs at start.

For each size N: a `vectors.db` of the first layout (a WITHOUT ROWID table, as commits before the
`ann` branch wrote it) with N random 384-d unit vectors in namespaces of 200, written with SQL in
a temp dir; then `LocalVectorIndex` opens it (conversion to the rowid table, VACUUM, load), and
opens it a second time (a plain load). Prints the file's size before and after, both open times
and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.vector_scale import DIM, MODEL, TENANT, WRITE_BATCH, namespace
from memsvc.adapters.local.index_changes import changes_schema
from memsvc.adapters.local.vector_index import LocalVectorIndex
from memsvc.core.namespaces import encode_namespace

FIRST_LAYOUT = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE vectors (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, field TEXT NOT NULL,
    ns TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, policy_attributes TEXT NOT NULL,
    vec BLOB NOT NULL,
    PRIMARY KEY (tenant, memory_id, field)
) WITHOUT ROWID;
"""


def write_first_layout(path: Path, n: int) -> None:
    rng = np.random.default_rng(n)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(FIRST_LAYOUT + changes_schema("vectors"))
    db.execute("INSERT INTO meta VALUES ('embedding', ?)", (json.dumps({"model": MODEL, "dimension": DIM}),))
    for start in range(0, n, WRITE_BATCH):
        block = rng.standard_normal((min(WRITE_BATCH, n - start), DIM), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        db.execute("BEGIN")
        db.executemany("INSERT INTO vectors VALUES (?, ?, 'text', ?, ?, 1, '{}', ?)",
                       [(TENANT, f"m{start + j}", encode_namespace(namespace(start + j, n)), f"k{start + j}",
                         v.tobytes()) for j, v in enumerate(block)])
        db.execute("COMMIT")
    db.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.vector_migration", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    args = parser.parse_args(argv)
    print("| vectors | first-layout file | converted file | first open (convert, VACUUM, load) | next open | load |\n"
          "|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="memsvc-vector-migration-") as tmp:
            path = Path(tmp) / "vectors.db"
            write_first_layout(path, n)
            before = path.stat().st_size / 2**20
            t0 = time.perf_counter()
            index = LocalVectorIndex(path, dimension=DIM, model_id=MODEL)
            first = time.perf_counter() - t0
            assert len(index.memory_ids(TENANT)) == n, "every vector is there after the conversion"
            index.close()
            t0 = time.perf_counter()
            LocalVectorIndex(path, dimension=DIM, model_id=MODEL).close()
            second = time.perf_counter() - t0
            print(f"| {n:,} | {before:,.0f} MiB | {path.stat().st_size / 2**20:,.0f} MiB | {first:.1f} s | "
                  f"{second:.1f} s | {os.getloadavg()[0]:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
