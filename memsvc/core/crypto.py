"""AES-256-GCM sealing of memory values, bound to the item they belong to.

The associated data names tenant, namespace, key, version and the part ("value" or
"attributes"), so a ciphertext copied onto another item, another version or the other part
fails to open.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import uuid
from collections.abc import Iterable, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["seal", "open_sealed", "associated_data", "field_id", "SealError", "FORMAT_V1"]

FORMAT_V1 = b"\x01"
_NONCE_BYTES = 12


class SealError(Exception):
    """A ciphertext did not open: wrong key, wrong item, or tampered."""


def associated_data(tenant: str, namespace: Sequence[str], key: str, version: int, part: str) -> bytes:
    return json.dumps([tenant, list(namespace), key, version, part], separators=(",", ":")).encode()


def seal(data_key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    nonce = os.urandom(_NONCE_BYTES)
    return FORMAT_V1 + nonce + AESGCM(data_key).encrypt(nonce, plaintext, aad)


def open_sealed(data_key: bytes, blob: bytes, aad: bytes) -> bytes:
    if not blob or blob[:1] != FORMAT_V1 or len(blob) < 1 + _NONCE_BYTES + 16:
        raise SealError("unknown ciphertext format")
    nonce, body = blob[1 : 1 + _NONCE_BYTES], blob[1 + _NONCE_BYTES :]
    try:
        return AESGCM(data_key).decrypt(nonce, body, aad)
    except InvalidTag as exc:
        raise SealError("ciphertext does not belong to this item or was altered") from exc


def field_id(data_key: bytes, field: str) -> str:
    """A field path's stand-in on disk: HMAC-SHA256 under a key derived from the tenant's data key
    (so never the AES key itself), 128 bits as hex. Stable per tenant, so a field's vectors can be
    found again; without the data key it is neither reversible nor guessable from a word list."""
    subkey = hmac.new(data_key, b"memsvc field ids v1", hashlib.sha256).digest()
    return hmac.new(subkey, field.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:32]


def entity_ids(data_key: bytes, names: Iterable[str]) -> list[str]:
    """Knowledge-graph entities' ids: HMAC-SHA256 of the normalised name under their own key
    derived from the tenant's data key, 128 bits as hex. Equal names of one tenant hash equal
    (that is what joins the graph); without the data key an id says nothing about its name."""
    subkey = hmac.new(data_key, b"memsvc graph entities v1", hashlib.sha256).digest()
    return [hmac.new(subkey, n.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:32] for n in names]


def term_ids(data_key: bytes, terms: Iterable[str]) -> list[str]:
    """Keyword terms' stand-ins in the keyword index: HMAC-SHA256 under their own key derived from
    the tenant's data key, 64 bits as hex (a tenant's vocabulary is far below where 64 bits
    collide). Equal terms of one tenant hash equal, which is what the index reveals; other
    tenants' hashes of the same word differ."""
    subkey = hmac.new(data_key, b"memsvc keyword terms v1", hashlib.sha256).digest()
    return [hmac.new(subkey, t.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:16] for t in terms]


def statement_key_space(data_key: bytes) -> uuid.UUID:
    """The UUIDv5 namespace of a tenant's `remember` keys (`core.consolidation.candidate_key`):
    128 bits of HMAC-SHA256 under the tenant's data key, so that a key derived from a statement
    cannot be recomputed, and a guessed statement not confirmed, without that key."""
    return uuid.UUID(bytes=hmac.new(data_key, b"memsvc statement keys v1", hashlib.sha256).digest()[:16])


def field_tokens(data_key: bytes, fields: Iterable[tuple[str, str]]) -> list[str]:
    """Blind field tokens for filters: HMAC-SHA256 of (dot path, equality key) under their own key
    derived from the tenant's data key, 128 bits as hex, so that a collision, which would make a
    filter return a non-match, is out of reach. Equal values at one path of one tenant share a
    token; other tenants' tokens of the same value differ."""
    subkey = hmac.new(data_key, b"memsvc field tokens v1", hashlib.sha256).digest()
    return [hmac.new(subkey, json.dumps(pair, ensure_ascii=False).encode("utf-8", "surrogatepass"),
                     hashlib.sha256).hexdigest()[:32] for pair in fields]
