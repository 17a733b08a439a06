"""`python -m benchmarks.export_import --memories 10000`: export and import throughput on the local
backend (SQLite), in process, excluding re-indexing. Target (issue 26): >= 2,000 memories/s each
way at 100k memories.

A tenant is seeded with `--memories` memories (about 300 bytes of text each, spread over 100 users'
layers), each written `--versions` times, and the timeline records every version (its consumer
run once), so that the export carries each memory's history. The tenant is then exported sealed
under a passphrase by the job's steps (run here one after the other, as the jobs thread runs
them), then imported into a new data dir's tenant. The background workers are not started, so
the import's writes are measured, not the indexing the change feed then does; each way is timed
from the job's start to its state `done`, the file's transfer in parts included.
"""

from __future__ import annotations

import argparse
import base64
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from memsvc.bootstrap import build_local
from memsvc.core.models import Caller
from memsvc.core.transfer_jobs import MAX_PART_BYTES
from memsvc.service.data_export import StartExport
from memsvc.service.data_import import CreateImport, ImportPart, StartImport

PASSPHRASE = "benchmark passphrase"


class _NoEmbedder:
    """Nothing is indexed here (the workers are not started): the model is never loaded."""

    model_id = "none"
    dimension = 4

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise AssertionError("the benchmark does not index")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--versions", type=int, default=1, help="versions of each memory (its history)")
    args = parser.parse_args(argv)
    admin = Caller("bench", "root", ("admin",))
    with tempfile.TemporaryDirectory(prefix="memsvc-transfer-") as tmp:
        source = build_local(Path(tmp) / "source", embedder=_NoEmbedder(), start_workers=False)
        target = build_local(Path(tmp) / "target", embedder=_NoEmbedder(), start_workers=False)
        try:
            seeded = time.perf_counter()
            for n in range(args.memories):
                ns, key, old = ("user", f"u{n % 100}", "memories"), f"m{n:07d}", None
                for _ in range(args.versions):
                    old = source.services.memories.write_version(
                        "bench", ns, key, {"text": f"memory {n}: " + os.urandom(140).hex()}, old=old,
                        attributes={"n": n}, policy_attributes={}, index_fields=None, ttl_seconds=None)
            source.workers.run_cycle("timeline")
            print(f"seeded {args.memories} memories x {args.versions} versions, on the timeline, "
                  f"in {time.perf_counter() - seeded:.1f} s")

            started = time.perf_counter()
            job = source.services.exports.start(admin, StartExport.parse({"passphrase": PASSPHRASE}))
            while source.workers.run_remember_jobs():
                pass
            job = source.services.exports.status(admin, job.job_id)
            data = b"".join(source.services.exports.part(admin, job.job_id, i)[0] for i in range(job.parts))
            export_s = time.perf_counter() - started
            assert job.state == "done" and job.counts["memory"]["exported"] == args.memories, job
            assert job.counts["memory_version"]["exported"] == args.memories * args.versions, job

            started = time.perf_counter()
            imported = target.services.imports.create(admin, CreateImport.parse({}))
            pieces = [data[i:i + MAX_PART_BYTES] for i in range(0, len(data), MAX_PART_BYTES)]
            for index, piece in enumerate(pieces):
                target.services.imports.put_part(admin, imported.job_id, ImportPart.parse(
                    {"index": index, "data": base64.b64encode(piece).decode()}))
            target.services.imports.start(admin, imported.job_id,
                                          StartImport.parse({"parts": len(pieces), "passphrase": PASSPHRASE}))
            while target.workers.run_remember_jobs():
                pass
            imported = target.services.imports.status(admin, imported.job_id)
            import_s = time.perf_counter() - started
            assert imported.state == "done" and imported.counts == {
                "memory": {"create": args.memories},
                "memory_version": {"create": args.memories * args.versions}}, imported
        finally:
            source.close()
            target.close()
    print(f"{args.memories} memories with {args.versions} version(s) each, a sealed file of "
          f"{len(data) / 1e6:.1f} MB in {job.parts} parts (load average {os.getloadavg()[0]:.1f}):")
    print(f"  export {export_s:.2f} s = {args.memories / export_s:,.0f} memories/s")
    print(f"  import {import_s:.2f} s = {args.memories / import_s:,.0f} memories/s (checked end to end, then "
          "written; re-indexing excluded)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
