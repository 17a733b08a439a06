"""The data dir's lock: held shared by `memsvc serve` and exclusively by `memsvc reindex` and
`memsvc restore`, so neither runs beside a server of the data dir (a reindex deletes the vector
index the server writes to; a restore replaces every file under it).

A restore marks the data dir while it replaces its files; a data dir still marked is half old and
half new, and nothing but another restore may take its lock."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["DataDirBusy", "LOCK_FILE", "RESTORE_MARKER", "data_dir_lock"]

LOCK_FILE = "data-dir.lock"
RESTORE_MARKER = "restore-in-progress"


class DataDirBusy(Exception):
    """A `memsvc serve` holds the data dir (or a reindex or a restore does), or a restore was interrupted."""


@contextmanager
def data_dir_lock(data_dir: Path, *, exclusive: bool, restoring: bool = False) -> Iterator[None]:
    """The lock, or `DataDirBusy` at once when it is held the other way or a restore left the data
    dir incomplete (`restoring`: the restore that finishes it)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / LOCK_FILE, "a") as held:
        try:
            fcntl.flock(held, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = "a server: stop it first" if exclusive else "memsvc reindex or memsvc restore"
            raise DataDirBusy(f"{data_dir} is in use by {holder}") from None
        if not restoring and (data_dir / RESTORE_MARKER).exists():
            raise DataDirBusy(f"{data_dir} holds an interrupted restore: run memsvc restore again")
        yield
