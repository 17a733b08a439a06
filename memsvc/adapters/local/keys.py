"""The local key provider: a 256-bit key-encryption key in a file (mode 0600) in the data dir."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memsvc.adapters.local.secret_files import write_private

__all__ = ["FileKeyProvider"]


class FileKeyProvider:
    """Wraps data keys with AES-256-GCM under the KEK; the tenant is the associated data, as the
    tenant is the encryption context with KMS, so a wrapped key moved to another tenant fails."""

    def __init__(self, key_file: Path) -> None:
        self._kek = _load_or_create(key_file)

    def generate_data_key(self, tenant: str) -> tuple[bytes, bytes]:
        plaintext = AESGCM.generate_key(bit_length=256)
        return plaintext, self._wrap(tenant, plaintext)

    def decrypt_data_key(self, tenant: str, wrapped: bytes) -> bytes:
        return AESGCM(self._kek).decrypt(wrapped[:12], wrapped[12:], _context(tenant))

    def _wrap(self, tenant: str, plaintext: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + AESGCM(self._kek).encrypt(nonce, plaintext, _context(tenant))


def _context(tenant: str) -> bytes:
    return b"memsvc-data-key\x00" + tenant.encode()


def _load_or_create(path: Path) -> bytes:
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        key = AESGCM.generate_key(bit_length=256)
        write_private(path, key)
        return key
    if len(key) != 32:
        raise RuntimeError(f"{path} is not a 256-bit key")
    return key
