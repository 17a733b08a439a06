"""`python -m benchmarks.local_backup --items 100000`: how long `memsvc backup` and `memsvc restore`
take on a data dir of N memories, and how long a write waits while a backup runs.

Builds the data dir in process (`build_local`, the hash embedder: the vectors' size is what a
384-dimension model gives, and the model's speed is not what is measured), indexes it, then
backs it up from another process (as `memsvc backup` runs beside `memsvc serve`) while a thread
of this one writes memories as fast as it can, and restores the backup into a new directory. The
writer's slowest write during the backup, beside its slowest before it, is what the backup costs
the server's writers: its one-instant cut, and its reads of the disk and of the CPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from memsvc.api.schemas import PutMemoryBody
from memsvc.bootstrap import build_local
from memsvc.core.models import Caller
from memsvc.local_backup import restore
from memsvc.ports import SystemClock
from tests.fakes.embedder import HashEmbedder

ALICE = Caller(tenant_id="acme", user_id="alice", roles=("user",))


def _put(app, n: int, namespace: str = "notes") -> None:
    app.services.memories.put(ALICE, PutMemoryBody(namespace=["user", "alice", f"{namespace}{n % 50}"], key=f"k{n}",
                                                   value={"text": f"note {n} about topic {n % 97} and a few more words"}))


_BACKUP = """
import json, sys, time
from pathlib import Path
from memsvc.local_backup import backup
root = Path(sys.argv[1])
started = time.perf_counter()
manifest = backup(root / "data", root / "backup")
print(json.dumps({"files": len(manifest.files), "bytes": manifest.total_bytes, "seconds": time.perf_counter() - started}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="memsvc-backup-bench-"))
    app = build_local(root / "data", embedder=HashEmbedder(), start_workers=False)
    try:
        started = time.perf_counter()
        for n in range(args.items):
            _put(app, n)
        app.indexer.index_backlog("acme", SystemClock().now(), batch_size=256)
        print(f"{args.items} memories written and indexed in {time.perf_counter() - started:.0f} s")

        slowest = {"before": 0.0, "during": 0.0}
        phase = ["before"]
        stop = threading.Event()

        def write() -> None:
            n = 0
            while not stop.is_set():
                began = time.perf_counter()
                _put(app, n, namespace="live")
                slowest[phase[0]] = max(slowest[phase[0]], time.perf_counter() - began)
                n += 1

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(2)
        phase[0] = "during"
        measured = json.loads(subprocess.run([sys.executable, "-c", _BACKUP, str(root)], check=True,
                                             capture_output=True, text=True).stdout)
        stop.set()
        writer.join()
    finally:
        app.close()
    megabytes, took = measured["bytes"] / 1e6, measured["seconds"]
    print(f"backup: {measured['files']} files, {megabytes:.0f} MB in {took:.2f} s ({megabytes / took:.0f} MB/s)")
    print(f"slowest write: {slowest['before'] * 1000:.1f} ms before the backup, "
          f"{slowest['during'] * 1000:.1f} ms during it")
    started = time.perf_counter()
    restore(root / "backup", root / "restored")
    took = time.perf_counter() - started
    print(f"restore: {took:.2f} s ({megabytes / took:.0f} MB/s)")
    print(f"(files in {root})")


if __name__ == "__main__":
    main()
