"""`memsvc backup` and `memsvc restore`: a data dir copied whole while `memsvc serve` runs on it,
and put back with the server stopped.

What a backup holds, and why it is consistent:
- Every SQLite file of the data dir, found by its header (a file a new release adds is backed up
  without a change here), copied with SQLite's online backup API from a read transaction. The
  read transactions of all files begin while the backup holds every file's write lock (for the
  milliseconds it takes to begin them), so the files are copied as they all were at one instant:
  the state a crash of the server at that instant would leave, which the server recovers from at
  start (the change feed is at-least-once, its consumers idempotent).
- Every other file (the key files: `keys/kek.key`, `keys/jwt-private.pem`, ...), byte for byte,
  with its mode: a private key stays 0600.
- `manifest.json`: the format's version, memsvc's, the embedding model of the vectors, the time,
  and each file's size, mode and sha256.

A backup holds the data dir's lock shared, as `memsvc serve` does: it runs beside a server, never
beside `memsvc reindex` or `memsvc restore`, which hold it exclusively (a reindex deletes
vectors.db, a restore replaces every file). A backup lies outside its data dir, and a restore's
source outside the data dir it replaces: a backup inside would be copied into the next one, and a
forced restore would delete it.

A backup is written under a temporary name and renamed when complete, so a backup that exists is
whole. A restore checks every checksum before it touches the data dir, marks the data dir while
it replaces the files (`data_dir_lock.RESTORE_MARKER`: a server refuses a marked data dir, and
running the restore again finishes it), and removes the mark last. With `force` it deletes only
what memsvc keeps in a data dir (its SQLite files with their side files, `keys/`): anything else
an operator put there stays.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import sqlite3
import stat
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from memsvc.adapters.local.data_dir_lock import LOCK_FILE, RESTORE_MARKER, DataDirBusy, data_dir_lock

__all__ = ["BackupError", "BackupFile", "Manifest", "backup", "read_manifest", "restore"]

FORMAT = "memsvc-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
STAGING = ".restore-staging"
KEYS = "keys"
_SQLITE_HEADER = b"SQLite format 3\x00"
_SQLITE_SIDECARS = ("-wal", "-shm", "-journal")
_PAGES_PER_STEP = 1024  # between steps the server's writers commit (WAL); the copy keeps its snapshot
_LOCK_WAIT_SECONDS = 5.0  # a writer's transactions take milliseconds; waiting longer means something holds a lock
_LOCK_ATTEMPTS = 5


class BackupError(Exception):
    """Why a backup or a restore refused, in words for the operator."""


@dataclass(frozen=True)
class BackupFile:
    path: str  # relative to the data dir, with '/'
    kind: str  # "sqlite" (copied through SQLite's backup API) or "file" (byte for byte)
    bytes: int
    sha256: str
    mode: int  # permission bits, e.g. 0o600


@dataclass(frozen=True)
class Manifest:
    memsvc_version: str
    created_at: str
    embedder_model_id: str | None  # the model of vectors.db's vectors; None before the first vector
    files: tuple[BackupFile, ...]

    def to_json(self) -> dict:
        return {"format": FORMAT, "format_version": FORMAT_VERSION, "memsvc_version": self.memsvc_version,
                "created_at": self.created_at, "embedder_model_id": self.embedder_model_id,
                "files": [{"path": f.path, "kind": f.kind, "bytes": f.bytes, "sha256": f.sha256,
                           "mode": f"{f.mode:04o}"} for f in self.files]}

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files)


def backup(data_dir: Path, target: Path) -> Manifest:
    """Copy `data_dir` into the new directory `target`, whether or not a server is running on it."""
    if (data_dir / RESTORE_MARKER).exists():
        raise BackupError(f"{data_dir} holds an interrupted restore: finish it with memsvc restore first")
    if not (data_dir / "memsvc.db").is_file():
        raise BackupError(f"{data_dir} is not a memsvc data dir (it has no memsvc.db)")
    _refuse_nested(data_dir, target, "the backup")
    if target.exists():
        raise BackupError(f"{target} already exists: name a new directory")
    try:
        with data_dir_lock(data_dir, exclusive=False):
            return _backup_locked(data_dir, target)
    except DataDirBusy as exc:
        raise BackupError(str(exc)) from None
    except sqlite3.Error:
        raise BackupError(f"a database of {data_dir} could not be read (it vanished under the backup, or it is "
                          "damaged); nothing was kept: try again") from None
    except OSError as exc:
        raise BackupError(f"the backup of {data_dir} into {target} failed: {exc.strerror or 'an I/O error'}"
                          f"{f' ({exc.filename})' if exc.filename else ''}; nothing was kept") from None


def _backup_locked(data_dir: Path, target: Path) -> Manifest:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.parent / f".{target.name}.partial-{uuid.uuid4().hex[:8]}"
    partial.mkdir(mode=0o700)
    try:
        databases, others = _data_dir_files(data_dir)
        files = [*_copy_databases(data_dir, databases, partial), *(_copy_file(data_dir, p, partial) for p in others)]
        manifest = Manifest(memsvc_version=importlib.metadata.version("memsvc"),
                            created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                            embedder_model_id=_embedder_model_id(partial / "vectors.db"),
                            files=tuple(sorted(files, key=lambda f: f.path)))
        _write_durably(partial / MANIFEST, json.dumps(manifest.to_json(), indent=2).encode() + b"\n", 0o600)
        _fsync_dir(partial)
        os.rename(partial, target)
        _fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return manifest


def _refuse_nested(data_dir: Path, other: Path, what: str) -> None:
    """`other` (a backup, or a restore's source) and the data dir must not hold one another: a
    backup inside its data dir is copied into the next backup, and a forced restore deletes it."""
    resolved_data_dir, resolved = data_dir.resolve(), other.resolve()
    if resolved == resolved_data_dir or resolved_data_dir in resolved.parents:
        raise BackupError(f"{what} {other} lies inside the data dir {data_dir}: name a directory outside it")
    if resolved in resolved_data_dir.parents:
        raise BackupError(f"the data dir {data_dir} lies inside {what} {other}: name a directory outside it")


def read_manifest(source: Path) -> Manifest:
    """The manifest of the backup at `source`, once every file it lists is there with its checksum."""
    try:
        doc = json.loads((source / MANIFEST).read_bytes())
    except FileNotFoundError:
        raise BackupError(f"{source} is not a memsvc backup (it has no {MANIFEST})") from None
    except (OSError, ValueError):
        raise BackupError(f"{source / MANIFEST} is not readable JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise BackupError(f"{source / MANIFEST} is not a memsvc backup manifest")
    if doc.get("format_version") != FORMAT_VERSION:
        raise BackupError(f"{source} is a backup of format version {doc.get('format_version')!r}; this memsvc "
                          f"reads version {FORMAT_VERSION}")
    try:
        manifest = Manifest(memsvc_version=str(doc["memsvc_version"]), created_at=str(doc["created_at"]),
                            embedder_model_id=doc["embedder_model_id"],
                            files=tuple(BackupFile(path=_safe_path(f["path"]), kind=f["kind"], bytes=int(f["bytes"]),
                                                   sha256=str(f["sha256"]), mode=int(f["mode"], 8) & 0o777)
                                        for f in doc["files"]))
    except (KeyError, TypeError, ValueError):
        raise BackupError(f"{source / MANIFEST} lacks a field or has one of the wrong type") from None
    if not any(f.path == "memsvc.db" for f in manifest.files):
        raise BackupError(f"{source} holds no memsvc.db")
    for f in manifest.files:
        if _sha256(source / f.path) != f.sha256:
            raise BackupError(f"{source / f.path} does not match its checksum in the manifest: the backup is "
                              "damaged or was changed, and nothing was restored")
    return manifest


def restore(source: Path, data_dir: Path, *, force: bool = False) -> Manifest:
    """Replace `data_dir`'s files with the backup at `source`; the server must be stopped. A data
    dir that holds any file is refused unless `force` (or it holds an interrupted restore); `force`
    deletes only what memsvc keeps there (`_memsvc_entries`)."""
    _refuse_nested(data_dir, source, "the backup")
    manifest = read_manifest(source)
    with data_dir_lock(data_dir, exclusive=True, restoring=True):
        marker = data_dir / RESTORE_MARKER
        entries = [p for p in data_dir.iterdir() if p.name not in (LOCK_FILE, RESTORE_MARKER, STAGING)]
        if entries and not force and not marker.exists():
            raise BackupError(f"{data_dir} is not empty: restore into an empty directory, or pass --force to "
                              "replace memsvc's files in it")
        replaced = _memsvc_entries(data_dir, manifest)
        for f in manifest.files:
            _refuse_in_the_way(data_dir, data_dir / f.path, replaced)
        staging = data_dir / STAGING  # on the data dir's file system, so each file's move is a rename
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(mode=0o700)
        try:
            for f in manifest.files:
                _copy_checked(source / f.path, staging / f.path, f)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _write_durably(marker, f"restoring {source}\n".encode(), 0o600, replace=True)
        _fsync_dir(data_dir)
        for path in replaced:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        for f in manifest.files:
            (data_dir / f.path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.rename(staging / f.path, data_dir / f.path)
        for directory in {(data_dir / f.path).parent for f in manifest.files}:
            _fsync_dir(directory)
        shutil.rmtree(staging)
        marker.unlink()
        _fsync_dir(data_dir)
    return manifest


def _memsvc_entries(data_dir: Path, manifest: Manifest) -> list[Path]:
    """What memsvc keeps in a data dir, which a restore replaces: its SQLite files (found by their
    header, as a backup finds them, or named in the manifest) with their `-wal`, `-shm` and
    `-journal` files (an old write-ahead log must never be replayed into a restored file), and
    `keys/`. Anything else (an operator's notes, a backup put there by hand) stays."""
    listed = {PurePosixPath(f.path).parts[0] for f in manifest.files}
    databases = {p.name for p in data_dir.iterdir() if p.is_file() and not p.is_symlink()
                 and (_is_sqlite(p) or p.name in listed)}
    return sorted(p for p in data_dir.iterdir()
                  if p.name in databases or p.name == KEYS
                  or (p.name.endswith(_SQLITE_SIDECARS) and _sidecar_base(p.name) in databases | listed))


def _refuse_in_the_way(data_dir: Path, path: Path, replaced: list[Path]) -> None:
    """A path of the backup where the data dir holds something memsvc does not own (a directory
    named like a database): refused before anything is touched."""
    for p in (path, *path.parents):
        if p == data_dir:
            return
        if p in replaced:
            return
        if p.exists() and (p.is_symlink() or (p == path) == p.is_dir()):
            raise BackupError(f"{p} is in the way of the backup's {path.relative_to(data_dir).as_posix()} and is "
                              "not memsvc's: move it away first")


# -- what a data dir holds ---------------------------------------------------------------------


def _data_dir_files(data_dir: Path) -> tuple[list[Path], list[Path]]:
    """The SQLite files and the other files (keys) of the data dir, without what is not data: the
    lock, SQLite's own side files (a read transaction sees their committed pages) and a restore's leftovers."""
    databases, others = [], []
    for path in sorted(_walk(data_dir)):
        relative = path.relative_to(data_dir)
        if relative.parts[0] == STAGING or relative.as_posix() in (LOCK_FILE, RESTORE_MARKER):
            continue
        if path.name.endswith(_SQLITE_SIDECARS) and _is_sqlite(path.with_name(_sidecar_base(path.name))):
            continue
        (databases if _is_sqlite(path) else others).append(path)
    return databases, others


def _walk(directory: Path) -> Iterator[Path]:
    for path in directory.iterdir():
        if path.is_symlink():
            raise BackupError(f"{path} is a symbolic link: a data dir holds only files and directories")
        if path.is_dir():
            yield from _walk(path)
        else:
            yield path


def _sidecar_base(name: str) -> str:
    return next(name.removesuffix(s) for s in _SQLITE_SIDECARS if name.endswith(s))


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    except FileNotFoundError:
        return False


# -- copying -----------------------------------------------------------------------------------


def _copy_databases(data_dir: Path, databases: list[Path], target: Path) -> list[BackupFile]:
    with ExitStack() as stack:
        snapshots = _snapshots_at_one_instant(databases, stack)
        copied = []
        for path, snapshot in zip(databases, snapshots):
            copy = target / path.relative_to(data_dir)
            copy.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with closing(sqlite3.connect(copy, isolation_level=None)) as out:
                snapshot.backup(out, pages=_PAGES_PER_STEP)
                out.execute("PRAGMA journal_mode=DELETE")  # one self-contained file; the server sets WAL again
            os.chmod(copy, stat.S_IMODE(path.stat().st_mode))
            copied.append(_described(copy, target, "sqlite"))
        return copied


def _snapshots_at_one_instant(databases: list[Path], stack: ExitStack) -> list[sqlite3.Connection]:
    """A read transaction on each file, all begun while every file's write lock was held, so no
    commit falls between two of them. A lock that stays taken (a writer holding one file's lock
    while it waits for another's) makes the attempt give all its locks back and try again."""
    for attempt in range(_LOCK_ATTEMPTS):
        writers = [_open(path) for path in databases]
        readers = [_open(path) for path in databases]
        try:
            for writer in writers:
                writer.execute("BEGIN IMMEDIATE")
            for reader in readers:
                reader.execute("BEGIN")
                reader.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot starts here
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise
            for reader in readers:
                reader.close()
            time.sleep(0.1 * (attempt + 1))
            continue
        finally:
            for writer in writers:
                writer.close()  # closing ends its transaction: the server's writers go on
        for reader in readers:
            stack.callback(reader.close)
        return readers
    raise BackupError("the data dir's files stayed locked by their writers; try again")


def _open(path: Path) -> sqlite3.Connection:
    # mode=rw: never create a file that vanished since it was listed.
    return sqlite3.connect(f"file:{path}?mode=rw", uri=True, isolation_level=None, timeout=_LOCK_WAIT_SECONDS)


def _copy_file(data_dir: Path, path: Path, target: Path) -> BackupFile:
    copy = target / path.relative_to(data_dir)
    copy.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _copy_durably(path, copy, stat.S_IMODE(path.stat().st_mode))
    return _described(copy, target, "file")


def _copy_checked(source: Path, target: Path, expected: BackupFile) -> None:
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if _copy_durably(source, target, expected.mode) != expected.sha256:
        raise BackupError(f"{source} changed while it was copied, and nothing of the data dir was replaced: "
                          "run the restore again")


def _described(copy: Path, root: Path, kind: str) -> BackupFile:
    return BackupFile(path=copy.relative_to(root).as_posix(), kind=kind, bytes=copy.stat().st_size,
                      sha256=_sha256(copy), mode=stat.S_IMODE(copy.stat().st_mode))


def _embedder_model_id(vectors: Path) -> str | None:
    from memsvc.adapters.local.vector_index import LocalVectorIndex

    return LocalVectorIndex.stored_model(vectors)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        raise BackupError(f"{path} is listed in the manifest but missing: the backup is incomplete") from None
    return digest.hexdigest()


def _safe_path(text: str) -> str:
    """A manifest's file path, refused if it would land outside the data dir or on its lock."""
    path = PurePosixPath(text)
    if path.is_absolute() or not path.parts or ".." in path.parts or path.as_posix() in (LOCK_FILE, RESTORE_MARKER,
                                                                                          MANIFEST):
        raise ValueError(text)
    return path.as_posix()


def _write_durably(path: Path, data: bytes, mode: int, *, replace: bool = False) -> None:
    with _created(path, mode, replace=replace) as out:
        out.write(data)


def _copy_durably(source: Path, target: Path, mode: int) -> str:
    """Copy `source` to the new file `target`; the sha256 of what was copied."""
    digest = hashlib.sha256()
    with open(source, "rb") as f, _created(target, mode) as out:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


@contextmanager
def _created(path: Path, mode: int, *, replace: bool = False) -> Iterator[BinaryIO]:
    """A file created with `mode` from the start (a key is never readable by others, not even for
    a moment), on disk once the block ends."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if replace else os.O_EXCL), mode)
    os.fchmod(fd, mode)  # the umask may have taken bits away
    with os.fdopen(fd, "wb") as out:
        yield out
        out.flush()
        os.fsync(out.fileno())


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
