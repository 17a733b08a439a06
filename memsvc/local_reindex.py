"""`memsvc reindex`: embed a data dir's items again, with the server stopped: after a change of
the local embedding model (`MEMSVC_LOCAL_EMBEDDER`), whose vectors the old index cannot hold.

The item store is the source: the vector index is deleted, every live item's indexed mark is
cleared, and each tenant's items are indexed afresh in batches, as the admin's index trigger
does; the keyword index and the graph do not depend on the model. An interrupted run
leaves the unfinished items pending: running it again, or starting the server and calling
`POST /admin/v1/memories/index/trigger`, finishes them. Quarantined items stay quarantined.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memsvc.ports import Embedder, SystemClock

__all__ = ["ReindexReport", "DataDirBusy", "data_dir_lock", "reindex"]

BATCH = 256


@dataclass(frozen=True)
class ReindexReport:
    model_id: str
    indexed: int  # items indexed afresh
    quarantined: int  # items the model refused (`GET /admin/v1/memories/index/status` lists them)
    left: int  # items still pending (a batch failed: run it again)


class DataDirBusy(Exception):
    """A `memsvc serve` holds the data dir (or a reindex does)."""


@contextmanager
def data_dir_lock(data_dir: Path, *, exclusive: bool) -> Iterator[None]:
    """Held shared by `memsvc serve` and exclusively by `memsvc reindex`: a reindex never runs
    beside a server of the data dir, whose writes would go to the vector index it deletes."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "data-dir.lock", "a") as held:
        try:
            fcntl.flock(held, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataDirBusy(f"{data_dir} is in use by {'a server' if exclusive else 'memsvc reindex'}") from None
        yield


def reindex(data_dir: Path, model: str, *, embedder: Embedder | None = None) -> ReindexReport:
    """Re-embed every item of `data_dir` with `model` (`bootstrap.local_embedder`; `auto`: the
    model the vectors were made with), or `embedder`."""
    from memsvc.bootstrap import build_local, local_embedder

    with data_dir_lock(data_dir, exclusive=True):
        embedder = embedder or local_embedder(data_dir, model)  # before the old vectors go
        for suffix in ("", "-wal", "-shm"):
            (data_dir / f"vectors.db{suffix}").unlink(missing_ok=True)
        app = build_local(data_dir, embedder=embedder, start_workers=False)
        clock = SystemClock()
        try:
            indexed = quarantined = left = 0
            for tenant in app.store.reset_indexing():
                while items := app.store.unindexed(tenant, clock.now(), BATCH):
                    settled = app.indexer.index_pending(items)
                    indexed += len(items) - len(settled.failed) - len(settled.quarantined)
                    quarantined += len(settled.quarantined)
                    if settled.failed:
                        break
                left += app.store.pending_index(tenant, clock.now())
            return ReindexReport(app.embedder.model_id, indexed, quarantined, left)
        finally:
            app.close()
