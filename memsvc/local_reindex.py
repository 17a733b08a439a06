"""`memsvc reindex`: embed a data dir's items again, with the server stopped: after a change of
the local embedding model (`MEMSVC_LOCAL_EMBEDDER`), whose vectors the old index cannot hold.

The item store is the source: the vector index is deleted, every live item's indexed mark is
cleared, and each tenant's items are indexed afresh in batches, as the admin's index trigger
does; the keyword index and the graph do not depend on the model. An interrupted run
leaves the unfinished items pending: running it again, or starting the server and calling
`POST /admin/v1/memories/index/trigger`, finishes them. Quarantined items stay quarantined.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memsvc.adapters.local.data_dir_lock import data_dir_lock
from memsvc.ports import Embedder, SystemClock

__all__ = ["ReindexReport", "reindex"]

BATCH = 256


@dataclass(frozen=True)
class ReindexReport:
    model_id: str
    indexed: int  # items indexed afresh
    quarantined: int  # items the model refused (`GET /admin/v1/memories/index/status` lists them)
    left: int  # items still pending (a batch failed: run it again)


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
                processed, refused, failed = app.indexer.index_backlog(tenant, clock.now(), batch_size=BATCH)
                indexed += processed - refused - failed
                quarantined += refused
                left += app.store.pending_index(tenant, clock.now())
            return ReindexReport(app.embedder.model_id, indexed, quarantined, left)
        finally:
            app.close()
