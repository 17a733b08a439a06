"""The sealed form of an export file (docs/export-format.md, "Encryption"). Pure.

A first line of JSON says how the file is sealed and how to get its content key: under a
passphrase (scrypt) or a KMS key (the wrapped data key `GenerateDataKey` gave). Frames follow,
each a 4-byte big-endian length, a random 12-byte nonce and the AES-256-GCM ciphertext of a piece
of the export's lines. The associated data of a frame binds the digest of the first line, the
frame's index and whether it is the last, so frames cannot be reordered, dropped, moved to another
file, or cut off at a frame boundary without the reader noticing. Nonces are random (not a
counter) because a job that writes a page again after a crash encrypts its frame again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from memsvc.core.export_format import BadExportFile

__all__ = ["SEALED_FORMAT", "SealedHeader", "passphrase_header", "kms_header", "content_key_of_passphrase",
           "kms_wrapped_key", "seal_frame", "FrameReader", "WrongPassphrase", "is_sealed", "MIN_PASSPHRASE_CHARS"]

SEALED_FORMAT = "memsvc-export-sealed"
_NONCE_BYTES = 12
_KEY_WRAP_AAD = b"memsvc-export-content-key"
# scrypt at N=2^15, r=8: 32 MiB and about 0.1 s per derivation, once per export or import.
_SCRYPT = {"n": 2 ** 15, "r": 8, "p": 1}
# A file may ask for more than ours, within reason: the import's `start` derives its key in the
# request, and scrypt (OpenSSL's) takes about 128 * r * (n + p) bytes and time in n * r * p. A file
# asking n = 2^20, r = 32 held a request for 23 s and 4 GiB. So at most 4 times our work and
# 128 MiB: about 0.4 s.
_MAX_SCRYPT_WORK = 4 * _SCRYPT["n"] * _SCRYPT["r"] * _SCRYPT["p"]
_MAX_SCRYPT_BYTES = 128 * 1024 * 1024
# Derivations at once in this process, whatever the requests: concurrent starts (of one job or
# many) take at most this many times `_MAX_SCRYPT_BYTES` of memory.
_DERIVING = threading.BoundedSemaphore(2)
MAX_FRAME_BYTES = 4 * 1024 * 1024
MIN_PASSPHRASE_CHARS = 12


class WrongPassphrase(BadExportFile):
    """The passphrase (or KMS key) does not open the file's content key."""


@dataclass(frozen=True)
class SealedHeader:
    """The first line of a sealed export."""

    doc: dict[str, Any]
    line: bytes = field(repr=False)

    @property
    def digest(self) -> bytes:
        return hashlib.sha256(self.line).digest()

    @classmethod
    def read(cls, line: bytes) -> "SealedHeader":
        try:
            doc = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            doc = None
        if not isinstance(doc, dict) or doc.get("format") != SEALED_FORMAT or doc.get("format_version") != 1:
            raise BadExportFile("the file is not a sealed memsvc export")
        return cls(doc, line)


def is_sealed(first_bytes: bytes) -> bool:
    return first_bytes.lstrip().startswith(b'{"format":"' + SEALED_FORMAT.encode())


def _line(doc: dict[str, Any]) -> SealedHeader:
    line = json.dumps(doc, separators=(",", ":")).encode()
    return SealedHeader(doc, line)


def passphrase_header(passphrase: str) -> tuple[SealedHeader, bytes]:
    """A fresh content key wrapped under `passphrase`: (the header, the content key)."""
    content_key = AESGCM.generate_key(bit_length=256)
    salt = os.urandom(16)
    nonce = os.urandom(_NONCE_BYTES)
    wrapped = nonce + AESGCM(_derive(passphrase, salt, _SCRYPT)).encrypt(nonce, content_key, _KEY_WRAP_AAD)
    return _line({"format": SEALED_FORMAT, "format_version": 1, "cipher": "AES-256-GCM",
                  "key": {"kind": "passphrase", "kdf": "scrypt", **_SCRYPT, "salt": _b64(salt),
                          "wrapped": _b64(wrapped)}}), content_key


def kms_header(key_id: str, wrapped: bytes) -> SealedHeader:
    """The header of a file whose content key is a KMS data key (`GenerateDataKey` of `key_id`)."""
    return _line({"format": SEALED_FORMAT, "format_version": 1, "cipher": "AES-256-GCM",
                  "key": {"kind": "kms", "key_id": key_id, "wrapped": _b64(wrapped)}})


def content_key_of_passphrase(header: SealedHeader, passphrase: str) -> bytes:
    key = header.doc.get("key")
    if not isinstance(key, dict) or key.get("kind") != "passphrase":
        raise BadExportFile("the file is not sealed under a passphrase", details={"field": "passphrase"})
    try:
        params = {"n": int(key["n"]), "r": int(key["r"]), "p": int(key["p"])}
        salt, wrapped = _unb64(key["salt"]), _unb64(key["wrapped"])
    except (KeyError, TypeError, ValueError, OverflowError):  # OverflowError: 1e400, read as infinity
        raise BadExportFile("the file's key section is damaged") from None
    n, r, p = params["n"], params["r"], params["p"]
    if not (n >= 2 and n & (n - 1) == 0 and r >= 1 and p >= 1 and 128 * r * (n + p + 2) <= _MAX_SCRYPT_BYTES
            and n * r * p <= _MAX_SCRYPT_WORK):
        raise BadExportFile("the file asks for scrypt parameters out of range",
                            details={"max_work": _MAX_SCRYPT_WORK, "max_bytes": _MAX_SCRYPT_BYTES})
    try:
        return AESGCM(_derive(passphrase, salt, params)).decrypt(wrapped[:_NONCE_BYTES], wrapped[_NONCE_BYTES:],
                                                                 _KEY_WRAP_AAD)
    except (InvalidTag, ValueError):
        raise WrongPassphrase("the passphrase does not open this export", details={"field": "passphrase"}) from None


def kms_wrapped_key(header: SealedHeader) -> tuple[str, bytes]:
    key = header.doc.get("key")
    if not isinstance(key, dict) or key.get("kind") != "kms":
        raise BadExportFile("the file is not sealed under a KMS key", details={"field": "kms_key_id"})
    try:
        return str(key["key_id"]), _unb64(key["wrapped"])
    except (KeyError, TypeError, ValueError):
        raise BadExportFile("the file's key section is damaged") from None


def seal_frame(content_key: bytes, header: SealedHeader, index: int, plaintext: bytes, *, last: bool) -> bytes:
    nonce = os.urandom(_NONCE_BYTES)
    sealed = AESGCM(content_key).encrypt(nonce, plaintext, _frame_aad(header, index, last))
    return struct.pack(">I", len(nonce) + len(sealed)) + nonce + sealed


@dataclass
class FrameReader:
    """Opens frames as their bytes come (a frame may span pieces). The last frame is known only
    when the input ends, so each complete frame is held until the next one starts."""

    content_key: bytes
    header: SealedHeader
    index: int = 0
    pending: bytes = b""

    def feed(self, data: bytes) -> Iterator[bytes]:
        self.pending += data
        while True:
            frame = self._next_frame(complete_after=True)
            if frame is None:
                return
            yield self._open(frame, last=False)

    def finish(self) -> bytes:
        frame = self._next_frame(complete_after=False)
        if frame is None or self.pending:
            raise BadExportFile("the file ends in the middle of a frame: it was cut short")
        return self._open(frame, last=True)

    def _next_frame(self, *, complete_after: bool) -> bytes | None:
        """The next complete frame, taken off `pending`; with `complete_after`, only when bytes of
        another frame follow it (so it is not the last)."""
        if len(self.pending) < 4:
            return None
        (length,) = struct.unpack(">I", self.pending[:4])
        if length > MAX_FRAME_BYTES + 64 or length <= _NONCE_BYTES:
            raise BadExportFile("the file holds a frame of an impossible length: it was changed")
        end = 4 + length
        if len(self.pending) < end or (complete_after and len(self.pending) == end):
            return None
        frame, self.pending = self.pending[4:end], self.pending[end:]
        return frame

    def _open(self, frame: bytes, *, last: bool) -> bytes:
        try:
            plaintext = AESGCM(self.content_key).decrypt(frame[:_NONCE_BYTES], frame[_NONCE_BYTES:],
                                                         _frame_aad(self.header, self.index, last))
        except InvalidTag:
            reason = "it was cut short or changed" if last else "it was changed"
            raise BadExportFile(f"frame {self.index} of the file does not open: {reason}",
                                details={"frame": self.index}) from None
        self.index += 1
        return plaintext


def _frame_aad(header: SealedHeader, index: int, last: bool) -> bytes:
    return header.digest + struct.pack(">QB", index, 1 if last else 0)


def _derive(passphrase: str, salt: bytes, params: dict[str, int]) -> bytes:
    with _DERIVING:
        kdf = Scrypt(salt=salt, length=32, n=params["n"], r=params["r"], p=params["p"])
        return kdf.derive(passphrase.encode("utf-8"))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise ValueError("not base64 text")
    return base64.b64decode(text, validate=True)
