"""Envelope encryption: one data key per tenant, wrapped by the key provider, cached briefly."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from memsvc.core.crypto import associated_data, field_id, open_sealed, seal
from memsvc.core.errors import InternalError
from memsvc.ports import ItemStore, KeyProvider

__all__ = ["Sealer"]


class Sealer:
    """Seals and opens item parts with the tenant's data key.

    The plaintext data key lives in memory for at most `cache_seconds`; after that the wrapped
    key is unwrapped again by the key provider (KMS `Decrypt` on AWS).
    """

    def __init__(self, store: ItemStore, keys: KeyProvider, *, cache_seconds: float = 300.0) -> None:
        self._store = store
        self._keys = keys
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[bytes, float]] = {}
        self._lock = threading.Lock()

    def seal_json(self, tenant: str, namespace, key: str, version: int, part: str, obj: Any) -> bytes:
        plaintext = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
        return seal(self._data_key(tenant), plaintext, associated_data(tenant, namespace, key, version, part))

    def open_json(self, tenant: str, namespace, key: str, version: int, part: str, blob: bytes, *,
                  create_key: bool = True) -> Any:
        """Open a sealed part. With `create_key=False`, a tenant without a data key raises
        `LookupError` instead of getting one (reading something a caller sent changes nothing)."""
        aad = associated_data(tenant, namespace, key, version, part)
        data_key = self._data_key(tenant, create=create_key)  # a key-provider outage is its own (retryable) error
        try:
            return json.loads(open_sealed(data_key, blob, aad))
        except Exception as exc:  # a sealed part that won't open is corruption, not bad input
            raise InternalError("a stored memory could not be decrypted") from exc

    def field_id(self, tenant: str, field: str) -> str:
        """The keyed hash that stands for a value's field path wherever it is stored in the clear
        (indexed fields, the change feed, vector keys and metadata)."""
        return field_id(self._data_key(tenant), field)

    def _data_key(self, tenant: str, *, create: bool = True) -> bytes:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(tenant)
            if hit and hit[1] > now:
                return hit[0]
        wrapped = self._store.get_wrapped_key(tenant)
        if wrapped is None and not create:
            raise LookupError("the tenant has no data key")
        if wrapped is None:
            plaintext, wrapped_new = self._keys.generate_data_key(tenant)
            wrapped = self._store.put_wrapped_key_if_absent(tenant, wrapped_new)
            if wrapped != wrapped_new:  # another writer created the tenant's key first
                plaintext = self._keys.decrypt_data_key(tenant, wrapped)
        else:
            plaintext = self._keys.decrypt_data_key(tenant, wrapped)
        with self._lock:
            self._cache[tenant] = (plaintext, now + self._cache_seconds)
        return plaintext
