"""Envelope encryption: one data key per tenant, wrapped by the key provider, cached briefly.

`Sealer` seals and opens the parts of items (and of timeline events, which carry an item's
parts). `CursorCodec` seals opaque page cursors under the same data key, bound to their own
associated data, so a cursor can never be mistaken for an item part or the other way round.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memsvc.core.crypto import (SealError, associated_data, entity_ids, field_id, field_tokens, open_sealed, seal,
                                statement_key_space, term_ids)
from memsvc.core.errors import InternalError, InvalidArgument
from memsvc.ports import DataKeyStore, KeyProvider

__all__ = ["Sealer", "SealedParts", "CursorCodec"]


class _Sealed(Protocol):
    """What carries an item's sealed parts: a `StoredItem` or a `TimelineEvent`."""

    tenant: str
    namespace: tuple[str, ...]
    key: str
    version: int
    value_ct: bytes | None
    attributes_ct: bytes | None


@dataclass(frozen=True)
class SealedParts:
    value_ct: bytes
    attributes_ct: bytes | None


class Sealer:
    """Seals and opens item parts with the tenant's data key.

    The associated data binds tenant, namespace, key, version and part, so a ciphertext moved
    to another item, version or part fails to open. The plaintext data key lives in memory for
    at most `cache_seconds`; after that the wrapped key is unwrapped again by the key provider
    (KMS `Decrypt` on AWS).
    """

    def __init__(self, key_store: DataKeyStore, keys: KeyProvider, *, cache_seconds: float = 300.0) -> None:
        self._key_store = key_store
        self._keys = keys
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[bytes, float]] = {}
        self._lock = threading.Lock()

    def seal_item(self, tenant: str, namespace: Sequence[str], key: str, version: int, *,
                  value: dict[str, Any], attributes: dict[str, Any] | None) -> SealedParts:
        data_key = self.data_key(tenant)
        return SealedParts(
            value_ct=seal(data_key, _json(value), associated_data(tenant, namespace, key, version, "value")),
            attributes_ct=None if attributes is None else seal(
                data_key, _json(attributes), associated_data(tenant, namespace, key, version, "attributes")),
        )

    def open_item(self, item: _Sealed) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(value, attributes); either is None when the item carries no such part."""
        return self.open_value(item), self._open(item, "attributes", item.attributes_ct)

    def open_value(self, item: _Sealed) -> dict[str, Any] | None:
        return self._open(item, "value", item.value_ct)

    def _open(self, item: _Sealed, part: str, blob: bytes | None) -> Any:
        if blob is None:
            return None
        data_key = self.data_key(item.tenant)  # a key-provider outage is its own (retryable) error
        try:
            return json.loads(open_sealed(data_key, blob, associated_data(
                item.tenant, item.namespace, item.key, item.version, part)))
        except Exception as exc:  # a sealed part that won't open is corruption, not bad input
            raise InternalError("a stored memory could not be decrypted") from exc

    def seal_record(self, tenant: str, ids: Sequence[str], payload: dict[str, Any]) -> bytes:
        """A workflow object's sealed part (a task context's, plan's or working value's contents,
        a session's title and metadata), bound to its tenant and ids (e.g. `("plan", user,
        plan_id)`), so it opens nowhere else."""
        return seal(self.data_key(tenant), _json(payload), _record_aad(tenant, ids))

    def open_record(self, tenant: str, ids: Sequence[str], sealed: bytes) -> dict[str, Any]:
        data_key = self.data_key(tenant)  # a key-provider outage is its own (retryable) error
        try:
            return json.loads(open_sealed(data_key, sealed, _record_aad(tenant, ids)))
        except Exception as exc:  # a sealed part that won't open is corruption, not bad input
            raise InternalError("a stored workflow object could not be decrypted") from exc

    def seal_job(self, tenant: str, job_id: str, payload: dict[str, Any]) -> bytes:
        """A background job's payload (it may hold a memory's content), bound to its tenant and id."""
        return seal(self.data_key(tenant), _json(payload), _job_aad(tenant, job_id))

    def open_job(self, tenant: str, job_id: str, sealed: bytes) -> dict[str, Any]:
        try:
            return json.loads(open_sealed(self.data_key(tenant, create=False), sealed, _job_aad(tenant, job_id)))
        except (SealError, LookupError, ValueError) as exc:
            raise InternalError("a queued job could not be decrypted") from exc

    def field_id(self, tenant: str, field: str) -> str:
        """The keyed hash that stands for a value's field path wherever it is stored in the clear
        (indexed fields, the change feed, vector keys and metadata)."""
        return field_id(self.data_key(tenant), field)

    def term_ids(self, tenant: str, terms: Iterable[str], *, create: bool = True) -> list[str]:
        """The keyed hashes that stand for keyword terms in the keyword index (a query's terms are
        hashed with `create=False`: searching a tenant that has no key yet makes none)."""
        return term_ids(self.data_key(tenant, create=create), terms)

    def entity_ids(self, tenant: str, normalised_names: Iterable[str], *, create: bool = True) -> list[str]:
        """The knowledge graph's entity ids of these normalised names (`core.graph.normalise_name`);
        a query's names are hashed with `create=False`, like keyword terms."""
        return entity_ids(self.data_key(tenant, create=create), normalised_names)

    def seal_entity_name(self, tenant: str, entity_id: str, name: str) -> bytes:
        """A graph node's display name, bound to its tenant and entity id."""
        return seal(self.data_key(tenant), name.encode("utf-8", "surrogatepass"), _entity_aad(tenant, entity_id))

    def open_entity_name(self, tenant: str, entity_id: str, sealed: bytes) -> str:
        data_key = self.data_key(tenant)  # a key-provider outage is its own (retryable) error
        try:
            return open_sealed(data_key, sealed, _entity_aad(tenant, entity_id)).decode("utf-8", "surrogatepass")
        except Exception as exc:  # a sealed name that won't open is corruption, not bad input
            raise InternalError("a stored graph entity could not be decrypted") from exc

    def field_tokens(self, tenant: str, fields: Iterable[tuple[str, str]], *, create: bool = True) -> list[str]:
        """The blind tokens of (dot path, equality key) pairs that filters are decided on (a
        filter's are made with `create=False`, like a query's terms)."""
        return field_tokens(self.data_key(tenant, create=create), fields)

    def statement_keys(self, tenant: str) -> uuid.UUID:
        """The key space of the tenant's `remember` keys (`core.crypto.statement_key_space`)."""
        return statement_key_space(self.data_key(tenant))

    def data_key(self, tenant: str, *, create: bool = True) -> bytes:
        """The tenant's plaintext data key. With `create=False`, a tenant without one raises
        `LookupError` instead of getting one (reading something a caller sent changes nothing)."""
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(tenant)
            if hit and hit[1] > now:
                return hit[0]
        wrapped = self._key_store.get_wrapped_key(tenant)
        if wrapped is None and not create:
            raise LookupError("the tenant has no data key")
        if wrapped is None:
            plaintext, wrapped_new = self._keys.generate_data_key(tenant)
            wrapped = self._key_store.put_wrapped_key_if_absent(tenant, wrapped_new)
            if wrapped != wrapped_new:  # another writer created the tenant's key first
                plaintext = self._keys.decrypt_data_key(tenant, wrapped)
        else:
            plaintext = self._keys.decrypt_data_key(tenant, wrapped)
        with self._lock:
            self._cache[tenant] = (plaintext, now + self._cache_seconds)
        return plaintext


class CursorCodec:
    """Opaque page cursors: a small JSON position sealed under the tenant's data key, bound to
    the tenant and to what the cursor pages (`purpose`), base64url without padding. A forged,
    altered, foreign or other-purpose cursor fails to open: an `InvalidArgument` naming `field`."""

    MAX_CHARS = 1024

    def __init__(self, sealer: Sealer) -> None:
        self._sealer = sealer

    def encode(self, tenant: str, purpose: str, position: dict[str, Any]) -> str:
        sealed = seal(self._sealer.data_key(tenant), _json(position), _cursor_aad(tenant, purpose))
        return base64.urlsafe_b64encode(sealed).decode().rstrip("=")

    def decode(self, tenant: str, purpose: str, cursor: Any, *, field: str) -> dict[str, Any]:
        invalid = InvalidArgument(f"{field} is not a cursor this service gave this caller", details={"field": field})
        if not isinstance(cursor, str) or not cursor or len(cursor) > self.MAX_CHARS:
            raise invalid
        try:
            sealed = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            position = json.loads(open_sealed(self._sealer.data_key(tenant, create=False), sealed,
                                              _cursor_aad(tenant, purpose)))
        except (ValueError, LookupError, SealError):  # garbled, from a tenant without a key, or not ours
            raise invalid from None
        if not isinstance(position, dict):
            raise invalid
        return position


def _entity_aad(tenant: str, entity_id: str) -> bytes:
    return json.dumps(["graph-entity", tenant, entity_id], separators=(",", ":")).encode()


def _job_aad(tenant: str, job_id: str) -> bytes:
    return json.dumps(["job", tenant, job_id], separators=(",", ":")).encode()


def _record_aad(tenant: str, ids: Sequence[str]) -> bytes:
    return json.dumps(["workflow", tenant, *ids], separators=(",", ":")).encode()


def _cursor_aad(tenant: str, purpose: str) -> bytes:
    return json.dumps(["cursor", tenant, purpose], separators=(",", ":")).encode()


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
