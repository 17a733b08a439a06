"""The export file (issue 26, docs/export-format.md): its lines and checksum, and its sealed form.
Whatever is cut off or changed, the reader says so before the import writes anything."""

from __future__ import annotations

import json

import pytest

from memsvc.core.export_crypto import (FrameReader, SealedHeader, WrongPassphrase, content_key_of_passphrase,
                                       passphrase_header, seal_frame)
from memsvc.core.export_format import BadExportFile, ExportHeader, LineChecker, LineWriter

HEADER = ExportHeader("1.0", "acme", {"tenant": True}, "2026-01-01T00:00:00.000000Z")
RECORDS = [{"kind": "memory", "key": f"k{n}", "value": {"text": f"memory {n}"}} for n in range(5)]


def plain_file() -> bytes:
    writer = LineWriter()
    return writer.lines([HEADER.to_json(), *RECORDS]) + writer.trailer()


def read_plain(data: bytes, piece: int = 7) -> list[dict]:
    checker = LineChecker()
    records = [r for at in range(0, len(data), piece) for r in checker.feed(data[at:at + piece])]
    checker.finish()
    return records


def test_lines_read_back_in_any_pieces_with_their_header_and_counts():
    data = plain_file()
    assert read_plain(data) == RECORDS == read_plain(data, piece=len(data))
    trailer = json.loads(data.splitlines()[-1])
    assert trailer["records"] == 5 and trailer["counts"] == {"memory": 5} and len(trailer["sha256"]) == 64


def test_a_changed_dropped_or_moved_line_breaks_the_checksum():
    lines = plain_file().splitlines(keepends=True)
    changed = [lines[0], lines[1].replace(b"memory 0", b"memory 9"), *lines[2:]]
    dropped = [lines[0], *lines[2:]]
    moved = [lines[0], lines[2], lines[1], *lines[3:]]
    for broken in (changed, dropped, moved):
        with pytest.raises(BadExportFile, match="checksum does not match"):
            read_plain(b"".join(broken))


def test_a_file_cut_short_or_going_on_after_its_trailer_is_refused():
    data = plain_file()
    with pytest.raises(BadExportFile, match="no trailer"):
        read_plain(data[:data.rindex(b'{"kind":"trailer"')])
    with pytest.raises(BadExportFile, match="middle of a line"):
        read_plain(data[:-10])
    with pytest.raises(BadExportFile, match="after its trailer"):
        read_plain(data + data.splitlines(keepends=True)[1])


def test_version_3_is_written_and_the_versions_before_it_are_read():
    assert HEADER.to_json()["format_version"] == 3
    for version in (1, 2, 3):
        writer = LineWriter()
        data = writer.lines([{**HEADER.to_json(), "format_version": version}, *RECORDS]) + writer.trailer()
        assert read_plain(data) == RECORDS
    history = {"kind": "memory_version", "key": "k0", "version": 1, "change": "add", "value": {"text": "memory 0"}}
    writer = LineWriter()
    assert read_plain(writer.lines([HEADER.to_json(), history, *RECORDS]) + writer.trailer())[0] == history


def test_what_is_not_an_export_of_this_version_says_so():
    with pytest.raises(BadExportFile, match="does not start with a memsvc export header"):
        read_plain(b'{"kind": "memory"}\n')
    with pytest.raises(BadExportFile, match="format version 4 is not one this server reads"):
        read_plain(json.dumps({**HEADER.to_json(), "format_version": 4}).encode() + b"\n")
    with pytest.raises(BadExportFile, match="line 2 is not JSON"):
        read_plain(LineWriter().lines([HEADER.to_json()]) + b"{nope\n")
    with pytest.raises(BadExportFile, match="line 2 has an unknown kind"):
        read_plain(LineWriter().lines([HEADER.to_json()]) + b'{"kind": "vectors"}\n')


def sealed_file(passphrase: str = "a passphrase long enough") -> tuple[SealedHeader, bytes, list[bytes]]:
    header, key = passphrase_header(passphrase)
    lines = plain_file().splitlines(keepends=True)
    pieces = [b"".join(lines[:3]), b"".join(lines[3:6]), b"".join(lines[6:])]
    frames = [seal_frame(key, header, i, piece, last=i == len(pieces) - 1) for i, piece in enumerate(pieces)]
    return header, key, frames


def open_frames(header: SealedHeader, key: bytes, data: bytes, piece: int = 11) -> bytes:
    reader = FrameReader(key, header)
    out = b"".join(p for at in range(0, len(data), piece) for p in reader.feed(data[at:at + piece]))
    return out + reader.finish()


def test_sealed_frames_open_in_any_pieces_and_hold_the_lines():
    header, key, frames = sealed_file()
    assert read_plain(open_frames(header, key, b"".join(frames))) == RECORDS
    assert b"memory 1" not in b"".join(frames)
    assert content_key_of_passphrase(SealedHeader.read(header.line), "a passphrase long enough") == key


def test_a_wrong_passphrase_is_told_apart_from_a_damaged_file():
    header, _, _ = sealed_file()
    with pytest.raises(WrongPassphrase, match="the passphrase does not open this export"):
        content_key_of_passphrase(header, "another passphrase")


def test_sealed_frames_cut_reordered_or_changed_do_not_open():
    header, key, frames = sealed_file()
    with pytest.raises(BadExportFile, match="frame 1 of the file does not open: it was cut short or changed"):
        open_frames(header, key, b"".join(frames[:2]))  # cut at a frame boundary: no last frame
    with pytest.raises(BadExportFile, match="frame 0 of the file does not open: it was changed"):
        open_frames(header, key, b"".join([frames[1], frames[0], frames[2]]))
    changed = bytearray(b"".join(frames))
    changed[30] ^= 1
    with pytest.raises(BadExportFile, match="does not open"):
        open_frames(header, key, bytes(changed))
    with pytest.raises(BadExportFile, match="middle of a frame"):
        open_frames(header, key, b"".join(frames)[:-5])
    other_header, _ = passphrase_header("a passphrase long enough")  # the same key under another header
    with pytest.raises(BadExportFile, match="frame 0"):
        open_frames(other_header, key, b"".join(frames))


@pytest.mark.parametrize("n, r, p", [
    (2 ** 20, 8, 1),  # 1 GiB and 8 s of one import's `start`
    (2 ** 20, 32, 1),  # 4 GiB and 23 s
    (2 ** 14, 8, 16),  # 16 derivations
    (2 ** 15, 64, 1),
    (3 * 2 ** 14, 8, 1),  # not a power of two
    (2 ** 15, 0, 1),
    (1e400, 8, 1),  # JSON's 1e400 reads as infinity
])
def test_a_file_asking_scrypt_for_more_than_four_times_our_work_is_refused_before_deriving(monkeypatch, n, r, p):
    header, _, _ = sealed_file()
    doc = json.loads(header.line)
    doc["key"].update(n=n, r=r, p=p)
    monkeypatch.setattr("memsvc.core.export_crypto._derive", lambda *_: pytest.fail("derived a key"))
    with pytest.raises(BadExportFile, match="scrypt parameters out of range|key section is damaged") as refused:
        content_key_of_passphrase(SealedHeader.read(json.dumps(doc).encode().replace(b"Infinity", b"1e400")),
                                  "a passphrase long enough")
    assert not isinstance(refused.value, WrongPassphrase)


def test_a_file_asking_up_to_four_times_our_scrypt_work_opens():
    header, key, _ = sealed_file()
    doc = json.loads(header.line)
    assert (doc["key"]["n"], doc["key"]["r"], doc["key"]["p"]) == (2 ** 15, 8, 1)  # ours
    doc["key"].update(n=2 ** 16, r=8, p=2)  # as much work as a file may ask: another key, so the wrong passphrase
    with pytest.raises(WrongPassphrase):
        content_key_of_passphrase(SealedHeader.read(json.dumps(doc).encode()), "a passphrase long enough")


def test_at_most_two_keys_are_derived_at_once_whatever_the_requests(monkeypatch):
    import threading

    from memsvc.core import export_crypto

    inside, most, lock, release = 0, 0, threading.Lock(), threading.Event()
    real = export_crypto.Scrypt

    class Counting:
        def __init__(self, **params):
            self._kdf = real(**params)

        def derive(self, key_material):
            nonlocal inside, most
            with lock:
                inside += 1
                most = max(most, inside)
            release.wait(60)
            with lock:
                inside -= 1
            return self._kdf.derive(key_material)

    monkeypatch.setattr(export_crypto, "Scrypt", Counting)
    threads = [threading.Thread(target=passphrase_header, args=("a passphrase long enough",)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for _ in range(600):  # until two are in; the four others wait at the gate, never in `derive`
        with lock:
            if inside == 2:
                break
        release.wait(0.1)
    release.set()
    for thread in threads:
        thread.join()
    assert most == 2
