"""The data dir's lock: held shared by `memsvc serve` and exclusively by `memsvc reindex`, so a
reindex never runs beside a server of the data dir, whose writes would go to the vector index it
deletes."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["DataDirBusy", "data_dir_lock"]


class DataDirBusy(Exception):
    """A `memsvc serve` holds the data dir (or a reindex does)."""


@contextmanager
def data_dir_lock(data_dir: Path, *, exclusive: bool) -> Iterator[None]:
    """The lock, or `DataDirBusy` at once when it is held the other way."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "data-dir.lock", "a") as held:
        try:
            fcntl.flock(held, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataDirBusy(f"{data_dir} is in use by {'a server' if exclusive else 'memsvc reindex'}") from None
        yield
