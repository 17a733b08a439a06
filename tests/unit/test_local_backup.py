"""`memsvc backup` and `memsvc restore` on a data dir built in process: the files and keys a backup
holds, one instant across files while writers run, the refusals, and a restore that never leaves
a half-replaced data dir a server would open."""

from __future__ import annotations

import json
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from memsvc.adapters.local.data_dir_lock import RESTORE_MARKER, DataDirBusy, data_dir_lock
from memsvc.bootstrap import build_local
from memsvc.cli import main
from memsvc.local_backup import BackupError, backup, read_manifest, restore
from tests.conftest import alice, local_data_dir
from tests.fakes.embedder import HashEmbedder


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """A data dir as `memsvc serve` leaves it, with one memory indexed."""
    from memsvc.api.schemas import PutMemoryBody

    data_dir = local_data_dir(tmp_path)
    app = build_local(data_dir, embedder=HashEmbedder(), start_workers=False)
    try:
        app.services.memories.put(alice(), PutMemoryBody(namespace=["user", "alice", "notes"], key="tip",
                                                         value={"text": "indentation matters"}, sync_index=True))
    finally:
        app.close()
    return data_dir


def _modes(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*") if p.is_file()}


def test_a_backup_holds_every_sqlite_file_the_data_dir_has_and_the_keys_with_their_modes(data_dir, tmp_path):
    manifest = backup(data_dir, tmp_path / "backup")

    databases = sorted(p.name for p in data_dir.glob("*.db"))
    assert len(databases) >= 8  # what build_local makes today; a new file is found by its header
    assert sorted(f.path for f in manifest.files if f.kind == "sqlite") == databases
    assert {f.path for f in manifest.files if f.kind == "file"} == {"keys/kek.key", "keys/jwt-private.pem"}
    modes = _modes(tmp_path / "backup")
    assert modes["keys/kek.key"] == modes["keys/jwt-private.pem"] == 0o600
    assert stat.S_IMODE((tmp_path / "backup").stat().st_mode) == 0o700
    assert not list((tmp_path / "backup").glob("*-wal"))  # each copy is one self-contained file
    doc = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert doc["format"] == "memsvc-backup" and doc["format_version"] == 1
    assert doc["embedder_model_id"] == HashEmbedder().model_id
    assert {f["path"]: f["mode"] for f in doc["files"]}["keys/kek.key"] == "0600"


def test_restore_puts_back_the_same_files_and_modes(data_dir, tmp_path):
    backup(data_dir, tmp_path / "backup")
    restore(tmp_path / "backup", tmp_path / "restored")

    restored = tmp_path / "restored"
    assert not (restored / RESTORE_MARKER).exists() and not (restored / ".restore-staging").exists()
    assert _modes(restored)["keys/kek.key"] == 0o600
    assert (restored / "keys" / "kek.key").read_bytes() == (data_dir / "keys" / "kek.key").read_bytes()
    app = build_local(restored, embedder=HashEmbedder(), start_workers=False)
    try:
        assert app.services.memories.get(alice(), ("user", "alice", "notes"), "tip").value == {
            "text": "indentation matters"}
    finally:
        app.close()


def test_the_files_are_copied_as_they_all_were_at_one_instant_while_a_writer_runs(tmp_path, monkeypatch):
    """A writer commits to first.db, then to second.db, over and over: a copy of each taken at its
    own moment would see second.db far ahead of or behind first.db; one instant sees them equal,
    or first.db one commit ahead. Each backup waits, once its snapshots are taken, until the
    writer has committed more pairs, so the copy runs while writes land (counted, not timed)."""
    import memsvc.local_backup as local_backup

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for name in ("memsvc.db", "first.db", "second.db"):
        with sqlite3.connect(data_dir / name, isolation_level=None) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE counter (n INTEGER)")
    stop = threading.Event()
    progress = threading.Condition()
    pairs = [0]  # pairs the writer committed

    def write() -> None:
        first = sqlite3.connect(data_dir / "first.db", isolation_level=None, timeout=30)
        second = sqlite3.connect(data_dir / "second.db", isolation_level=None, timeout=30)
        n = 0
        while not stop.is_set():
            n += 1
            first.execute("INSERT INTO counter VALUES (?)", (n,))
            second.execute("INSERT INTO counter VALUES (?)", (n,))
            with progress:
                pairs[0] = n
                progress.notify_all()

    def wait_for_pairs(at_least: int) -> int:
        with progress:
            assert progress.wait_for(lambda: pairs[0] >= at_least, timeout=60), "the writer stopped"
            return pairs[0]

    real_snapshots = local_backup._snapshots_at_one_instant

    def snapshots_then_more_writes(databases, stack):
        readers = real_snapshots(databases, stack)
        taken_at.append(pairs[0])
        wait_for_pairs(pairs[0] + 20)  # the writer goes on while the snapshots are open
        return readers

    monkeypatch.setattr(local_backup, "_snapshots_at_one_instant", snapshots_then_more_writes)
    writer = threading.Thread(target=write)
    writer.start()
    try:
        counts, before, after, taken_at = [], [], [], []
        for i in range(5):
            before.append(wait_for_pairs(1))
            backup(data_dir, tmp_path / f"backup-{i}")
            after.append(pairs[0])
            counts.append([sqlite3.connect(tmp_path / f"backup-{i}" / name).execute(
                "SELECT count(*) FROM counter").fetchone()[0] for name in ("first.db", "second.db")])
    finally:
        stop.set()
        writer.join()
    for (first, second), started, snapshot, finished in zip(counts, before, taken_at, after):
        assert first - second in (0, 1)
        assert started <= second and first <= snapshot + 1  # the copy is the snapshot's instant...
        assert finished >= snapshot + 20 > first  # ...while the writer committed 20 pairs more


def test_a_changed_file_is_refused_before_the_data_dir_is_touched(data_dir, tmp_path):
    backup(data_dir, tmp_path / "backup")
    restore(tmp_path / "backup", tmp_path / "restored")
    before = {p: p.read_bytes() for p in (tmp_path / "restored").rglob("*") if p.is_file()}
    with open(tmp_path / "backup" / "keywords.db", "r+b") as f:
        f.seek(200)
        f.write(b"\x01")

    with pytest.raises(BackupError, match="keywords.db does not match its checksum"):
        restore(tmp_path / "backup", tmp_path / "restored", force=True)
    assert {p: p.read_bytes() for p in (tmp_path / "restored").rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("path", ["../outside", "/etc/passwd", "data-dir.lock"])
def test_a_manifest_naming_a_path_outside_the_data_dir_is_refused(data_dir, tmp_path, path):
    backup(data_dir, tmp_path / "backup")
    doc = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    doc["files"][0]["path"] = path
    (tmp_path / "backup" / "manifest.json").write_text(json.dumps(doc))

    with pytest.raises(BackupError, match="lacks a field or has one of the wrong type"):
        read_manifest(tmp_path / "backup")


def test_a_data_dir_that_holds_files_is_replaced_only_with_force(data_dir, tmp_path):
    backup(data_dir, tmp_path / "backup")
    with pytest.raises(BackupError, match="is not empty"):
        restore(tmp_path / "backup", data_dir)
    (data_dir / "memsvc.db-wal").write_bytes(b"an old write-ahead log must not meet the restored file")
    (data_dir / "keys" / "old.key").write_bytes(b"a key of before")
    (data_dir / "notes.txt").write_text("the operator's")
    (data_dir / "archive").mkdir()
    (data_dir / "archive" / "old.tar").write_bytes(b"kept")

    restore(tmp_path / "backup", data_dir, force=True)
    assert not (data_dir / "memsvc.db-wal").exists() and not (data_dir / "keys" / "old.key").exists()
    # --force replaces what memsvc keeps in a data dir, nothing else
    assert (data_dir / "notes.txt").read_text() == "the operator's"
    assert (data_dir / "archive" / "old.tar").read_bytes() == b"kept"


def test_something_not_memsvcs_where_a_backup_file_goes_is_refused_before_the_data_dir_is_touched(data_dir,
                                                                                                    tmp_path):
    backup(data_dir, tmp_path / "backup")
    target = tmp_path / "target"
    (target / "memsvc.db").mkdir(parents=True)
    (target / "memsvc.db" / "mine.txt").write_text("an operator's")

    with pytest.raises(BackupError, match="memsvc.db is in the way of the backup's memsvc.db and is not memsvc's"):
        restore(tmp_path / "backup", target, force=True)
    assert sorted(p.name for p in target.iterdir()) == ["data-dir.lock", "memsvc.db"]


def test_a_backup_inside_the_data_dir_and_a_data_dir_inside_a_backup_are_refused(data_dir, tmp_path):
    with pytest.raises(BackupError, match="the backup .*/data/bk1 lies inside the data dir .*/data: name a "
                                          "directory outside it"):
        backup(data_dir, data_dir / "bk1")
    with pytest.raises(BackupError, match="lies inside the data dir"):
        backup(data_dir, data_dir / "." / "keys" / ".." / "bk1")  # the same place, spelled otherwise
    with pytest.raises(BackupError, match="the data dir .* lies inside the backup"):
        backup(data_dir, data_dir.parent)
    assert sorted(p.name for p in data_dir.iterdir() if p.name.startswith(("bk", ".bk"))) == []

    backup(data_dir, tmp_path / "backup")
    (tmp_path / "backup").rename(data_dir / "bk1")  # put there by hand
    with pytest.raises(BackupError, match="the backup .*/data/bk1 lies inside the data dir"):
        restore(data_dir / "bk1", data_dir, force=True)
    assert read_manifest(data_dir / "bk1").files  # untouched
    with pytest.raises(BackupError, match="the data dir .* lies inside the backup"):
        restore(data_dir / "bk1", data_dir / "bk1" / "inner", force=True)


def test_a_restore_interrupted_while_a_backup_sits_in_the_data_dir_can_be_finished(data_dir, tmp_path, monkeypatch):
    """The data dir holds a backup an operator put there; an interrupted forced restore from
    another backup leaves it, and the second run finishes."""
    import memsvc.local_backup as local_backup

    backup(data_dir, tmp_path / "backup")
    backup(data_dir, tmp_path / "kept")
    (tmp_path / "kept").rename(data_dir / "kept")

    def die(source, target):
        raise KeyboardInterrupt

    monkeypatch.setattr(local_backup.os, "rename", die)
    with pytest.raises(KeyboardInterrupt):
        restore(tmp_path / "backup", data_dir, force=True)
    monkeypatch.undo()
    assert read_manifest(data_dir / "kept").files
    restore(tmp_path / "backup", data_dir)
    assert read_manifest(data_dir / "kept").files


def test_a_backup_waits_for_no_reindex_and_no_restore_but_runs_beside_a_server(data_dir, tmp_path):
    with data_dir_lock(data_dir, exclusive=False):  # a server
        backup(data_dir, tmp_path / "beside-a-server")
    with data_dir_lock(data_dir, exclusive=True), \
            pytest.raises(BackupError, match="is in use by memsvc reindex or memsvc restore"):  # a reindex
        backup(data_dir, tmp_path / "beside-a-reindex")
    assert not (tmp_path / "beside-a-reindex").exists()
    assert [p.name for p in tmp_path.iterdir() if ".partial-" in p.name] == []


def test_a_database_that_vanishes_under_the_backup_is_one_line_without_a_traceback(data_dir, tmp_path, capsys,
                                                                                    monkeypatch):
    """What a reindex (which unlinks vectors.db) would do to a backup that did not hold the lock."""
    import memsvc.local_backup as local_backup

    real_files = local_backup._data_dir_files

    def listed_then_unlinked(directory):
        found = real_files(directory)
        (directory / "vectors.db").unlink()
        return found

    monkeypatch.setattr(local_backup, "_data_dir_files", listed_then_unlinked)
    assert main(["backup", "--data-dir", str(data_dir), "--to", str(tmp_path / "backup")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"memsvc: a database of {data_dir} could not be read") and err.count("\n") == 1
    assert "Traceback" not in err and "unable to open" not in err
    assert not (tmp_path / "backup").exists() and not list(tmp_path.glob(".backup.partial-*"))


def test_a_target_that_cannot_be_written_is_one_line(data_dir, tmp_path, capsys):
    (tmp_path / "file").write_text("not a directory")
    assert main(["backup", "--data-dir", str(data_dir), "--to", str(tmp_path / "file" / "backup")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"memsvc: the backup of {data_dir} into {tmp_path / 'file' / 'backup'} failed: ")
    assert "nothing was kept" in err and "Traceback" not in err


def test_restore_refuses_a_data_dir_a_server_holds(data_dir, tmp_path):
    backup(data_dir, tmp_path / "backup")
    with data_dir_lock(data_dir, exclusive=False), pytest.raises(DataDirBusy, match="in use by a server"):
        restore(tmp_path / "backup", data_dir, force=True)


def test_an_interrupted_restore_keeps_the_server_out_until_a_restore_finishes(data_dir, tmp_path, monkeypatch):
    import memsvc.local_backup as local_backup

    backup(data_dir, tmp_path / "backup")
    renamed = []

    def rename_then_die(source, target):
        if renamed:
            raise KeyboardInterrupt  # the operator's ^C, between two files
        renamed.append(target)
        return real_rename(source, target)

    real_rename = local_backup.os.rename
    monkeypatch.setattr(local_backup.os, "rename", rename_then_die)
    with pytest.raises(KeyboardInterrupt):
        restore(tmp_path / "backup", data_dir, force=True)
    monkeypatch.setattr(local_backup.os, "rename", real_rename)

    with pytest.raises(DataDirBusy, match="interrupted restore"), data_dir_lock(data_dir, exclusive=False):
        pass
    with pytest.raises(BackupError, match="interrupted restore"):
        backup(data_dir, tmp_path / "backup-of-half")
    restore(tmp_path / "backup", data_dir)  # no --force needed: what is there is half a restore
    with data_dir_lock(data_dir, exclusive=False):
        pass


def test_the_cli_reports_refusals_in_one_line(data_dir, tmp_path, capsys):
    assert main(["backup", "--data-dir", str(data_dir), "--to", str(tmp_path / "backup")]) == 0
    files = len(read_manifest(tmp_path / "backup").files)
    assert f"backed up {files} files" in capsys.readouterr().out
    assert main(["backup", "--data-dir", str(data_dir), "--to", str(tmp_path / "backup")]) == 1
    assert capsys.readouterr().err.strip().endswith("already exists: name a new directory")
    assert main(["restore", "--from", str(tmp_path / "nothing"), "--data-dir", str(tmp_path / "new")]) == 1
    assert "is not a memsvc backup" in capsys.readouterr().err
    assert main(["restore", "--from", str(tmp_path / "backup"), "--data-dir", str(data_dir)]) == 1
    assert "is not empty" in capsys.readouterr().err
    assert main(["restore", "--from", str(tmp_path / "backup"), "--data-dir", str(tmp_path / "new")]) == 0
    assert f"restored {files} files" in capsys.readouterr().out
