"""The AWS vector index: Amazon S3 Vectors (one shared index, cosine, float32).

One vector per (memory version, indexed field). Its key is derived from (tenant, memory_id,
field), so writing the same version again overwrites the same vectors and a delete needs no
lookup. Each vector carries:

- filterable metadata: `tenant`; `ns`, a 16-hex-digit hash of each encoded ancestor of its namespace, as one list
  (`$eq` on a list matches any element, so "under prefix P" is one condition); and the
  pushed-down policy attributes as `pa.<name>` (strings, numbers, booleans or lists of them).
- non-filterable metadata (`NON_FILTERABLE_METADATA_KEYS`, declared at CreateIndex): what a
  search needs to rebuild the hit: `namespace` (a JSON list), `key`, `memory_id`, `version`,
  `field` (the service's keyed hash of the field path, never the path itself).

S3 Vectors limits (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-vectors-limitations.html)
are checked before any call, so an oversized vector fails with `InvalidArgument` and nothing is
written. The docs give the limits but not how a value is counted; we count like S3 object
metadata ("the sum of the number of bytes in the UTF-8 encoding of each key and value",
https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingMetadata.html): key bytes plus
value bytes, a string by its UTF-8 bytes, any other scalar as at least 8 bytes (a double) or
its JSON text if longer, a list as the sum of its elements. That errs on the large side.

Only conditions that S3 Vectors evaluates exactly as `memsvc.core.filters` does, or more
loosely, are pushed down: `eq`/`in` on plain strings, booleans and numbers, and ranges on
numbers. S3 Vectors may then return extra candidates (a list attribute matches `$eq` on any
element) but never drops a true match. That same rule makes `contains` a `$eq` and `any` an `$or`
of them, exactly (`$in` on a list is not documented). `exists: false` becomes `$exists: false`,
more loosely: a null or empty attribute is not stored here (`_attributes`), and is present to the
service. `ne`/`nin` (AWS does not document how they treat a missing key or a list), `exists: true`
(it would drop those null and empty attributes), `not` (S3 Vectors has none), timestamp strings
(we compare them as instants, S3 as text or not at all) and dotted paths (we resolve them inside
values) stay with the service, which re-checks every condition anyway.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.errors import aws_error
from memsvc.core.errors import InternalError, InvalidArgument
from memsvc.core.filters import Condition, Filter, condition_matches
from memsvc.core.models import VectorHit, VectorRef, VectorWrite
from memsvc.core.namespaces import ancestors, encode_namespace, is_under
from memsvc.core.ranking import commonness, mean_direction

__all__ = [
    "S3VectorsIndex",
    "NON_FILTERABLE_METADATA_KEYS",
    "MAX_TOP_K",
    "MAX_WRITE_BATCH",
    "MAX_GET_BATCH",
    "MAX_FILTERABLE_METADATA_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_KEYS",
    "MAX_VECTOR_KEY_LENGTH",
    "ATTRIBUTE_PREFIX",
    "vector_key",
    "build_filter",
    "metadata_size",
]

NON_FILTERABLE_METADATA_KEYS = ("namespace", "key", "memory_id", "version", "field")
ATTRIBUTE_PREFIX = "pa."
MAX_TOP_K = 100  # QueryVectors topK
MAX_WRITE_BATCH = 500  # vectors per PutVectors / keys per DeleteVectors
MAX_GET_BATCH = 100  # keys per GetVectors
MAX_FILTERABLE_METADATA_BYTES = 2048  # "Filterable metadata must have at most 2048 bytes"
MAX_METADATA_BYTES = 40 * 1024  # filterable + non-filterable
MAX_METADATA_KEYS = 50
MAX_VECTOR_KEY_LENGTH = 1024  # characters (botocore shape VectorKey)

_KEY_OVERHEAD = 34  # the two 16-character digests and two colons around the memory id
_MAX_EXACT_INT = 2**53  # numbers beyond this are not exact as doubles: not pushed down
_MAX_PUSHED_ANY = 50  # an `any` of more values stays with the service: the filter stays small
_T = TypeVar("_T")


def vector_key(tenant: str, memory_id: str, field: str) -> str:
    """The vector's key: tenant-bound, deterministic per (memory_id, field), 70 characters for a UUID."""
    return f"{_digest(tenant)}:{memory_id}:{_digest(field)}"


class S3VectorsIndex:
    """`VectorIndex` on one S3 Vectors index (cosine, float32, `dimension` dims).

    `client` is a boto3 `s3vectors` client; the index must declare `NON_FILTERABLE_METADATA_KEYS`
    as non-filterable.
    """

    max_top_k = MAX_TOP_K

    def __init__(self, client: Any, *, bucket: str, index: str, dimension: int) -> None:
        self._client = client
        self._target = {"vectorBucketName": bucket, "indexName": index}
        self._dimension = dimension
        self._enhanced: bool | None = None

    # -- writes ----------------------------------------------------------------------------

    def put_many(self, writes: Sequence[VectorWrite]) -> None:
        """Write these memory versions' vectors in `PutVectors` calls of up to 500 (each call is
        billed as at least 128 KB, and an index takes 1,000 write requests a second). Every
        vector is checked first, so a vector the index cannot hold writes nothing."""
        records = [record for write in writes for record in self._records(write)]
        for chunk in _chunks(records, MAX_WRITE_BATCH):
            self._call("PutVectors", self._client.put_vectors, vectors=chunk)

    def delete_many(self, refs: Sequence[VectorRef]) -> None:
        """Remove these vectors in `DeleteVectors` calls of up to 500 keys; absent keys are fine."""
        keys = list(dict.fromkeys(vector_key(r.tenant, r.memory_id, r.field) for r in refs))
        for chunk in _chunks(keys, MAX_WRITE_BATCH):
            self._call("DeleteVectors", self._client.delete_vectors, keys=chunk)

    def _records(self, write: VectorWrite) -> list[dict[str, Any]]:
        if not write.namespace:
            raise InvalidArgument("a vector needs a namespace", details={"field": "namespace"})
        _check_memory_id(write.memory_id)
        filterable = {"tenant": write.tenant, "ns": [_ancestor_id(a) for a in ancestors(write.namespace)],
                      **_attributes(write.policy_attributes)}
        base = {
            "namespace": json.dumps(list(write.namespace), ensure_ascii=False, separators=(",", ":")),
            "key": write.key,
            "memory_id": write.memory_id,
            "version": int(write.version),
        }
        records = []
        seen: set[str] = set()
        for field, vector in write.vectors:
            if field in seen:
                raise InvalidArgument(f"field {field!r} is given twice", details={"field": "vectors"})
            seen.add(field)
            metadata = {**filterable, **base, "field": field}
            _check_metadata(filterable, metadata)
            records.append(
                {
                    "key": vector_key(write.tenant, write.memory_id, field),
                    "data": {"float32": self._checked_vector(vector, what=f"the vector of field {field!r}")},
                    "metadata": metadata,
                }
            )
        return records

    # -- reads -----------------------------------------------------------------------------

    def query(
        self,
        tenant: str,
        prefix: tuple[str, ...],
        pushdown: Filter,
        vector: Sequence[float],
        top_k: int,
    ) -> list[VectorHit]:
        """Best `min(top_k, 100)` vectors by cosine similarity, best first, tenant- and prefix-bound."""
        if top_k < 1:
            raise InvalidArgument("top_k must be at least 1", details={"field": "top_k"})
        query_vector = self._checked_vector(vector, what="the query vector")
        params = {"queryVector": {"float32": query_vector}, "topK": min(top_k, MAX_TOP_K),
                  "filter": build_filter(tenant, prefix, pushdown), "returnMetadata": True, "returnDistance": True}
        hits = []
        while True:  # an answer may come in pages (`nextToken`), each with the same parameters
            response = self._call("QueryVectors", self._client.query_vectors, **params)
            for found in response.get("vectors", []):
                hit = _hit(found, tenant, prefix)
                if hit is not None:
                    hits.append(hit)
            if not response.get("nextToken"):
                break
            params["nextToken"] = response["nextToken"]
        hits.sort(key=lambda h: -h.score)  # already ranked by distance; stable for ties
        return hits

    def vectors_of(self, tenant: str, refs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[float]]:
        """`GetVectors` with `returnData`, up to 100 keys a call. The keys are derived from
        (tenant, memory id, field), so another tenant's vectors cannot be named."""
        by_key = {vector_key(tenant, memory_id, field): (memory_id, field) for memory_id, field in refs}
        out: dict[tuple[str, str], list[float]] = {}
        for chunk in _chunks(list(by_key), MAX_GET_BATCH):
            response = self._call("GetVectors", self._client.get_vectors, keys=chunk, returnData=True,
                                  returnMetadata=False)
            for found in response.get("vectors", []):
                ref = by_key.get(found.get("key"))
                data = (found.get("data") or {}).get("float32")
                if ref is not None and data:
                    norm = math.sqrt(sum(x * x for x in data)) or 1.0
                    out[ref] = [x / norm for x in data]
        return out

    def mean_direction(self, tenant: str, page: Sequence[tuple[str, str]]) -> list[float] | None:
        """From `vectors_of`, in `core.ranking` (a search reads it once, `GetVectors` of its first page)."""
        stored = self.vectors_of(tenant, page)
        return mean_direction([stored[ref] for ref in page if ref in stored])

    def cosines(self, tenant: str, directions: Sequence[Sequence[float]],
                refs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[float]]:
        """From one `vectors_of` of `refs` alone, in `core.ranking` (`commonness` per direction)."""
        stored = self.vectors_of(tenant, refs)
        held = [ref for ref in refs if ref in stored]
        per_direction = [commonness(direction, [stored[ref] for ref in held]) for direction in directions]
        return {ref: [found[n] for found in per_direction] for n, ref in enumerate(held)}

    def exact(self, tenant: str) -> bool:
        """Never: its search is approximate, and a CLASSIC index filters during it."""
        return False

    @property
    def short_page_is_end(self) -> bool:
        """Only an ENHANCED index filters before its search; a CLASSIC one (the default) filters
        during it, and "queries with filters may return fewer than top K results" (S3 Vectors,
        "Metadata filtering"). Every query here filters (by tenant at least). Read once."""
        if self._enhanced is None:
            self._enhanced = self._call("GetIndex", self._client.get_index)["index"].get("indexMode") == "ENHANCED"
        return self._enhanced

    def ping(self) -> None:
        index = self._call("GetIndex", self._client.get_index)["index"]
        if index.get("distanceMetric") != "cosine" or int(index.get("dimension", -1)) != self._dimension:
            raise InternalError(
                f"the S3 Vectors index is {index.get('distanceMetric')}/{index.get('dimension')}, "
                f"expected cosine/{self._dimension}"
            )

    # -- helpers ---------------------------------------------------------------------------

    def _checked_vector(self, vector: Sequence[float], *, what: str) -> list[float]:
        """The vector as the float32 values S3 Vectors will hold; InvalidArgument if it can't."""
        values = [float(x) for x in vector]
        if len(values) != self._dimension:
            raise InvalidArgument(
                f"{what} has {len(values)} dimensions, the index {self._dimension}",
                details={"field": "vector", "dimension": self._dimension},
            )
        try:
            values = list(struct.unpack(f"{len(values)}f", struct.pack(f"{len(values)}f", *values)))
        except OverflowError:  # some Pythons refuse what float32 can't hold instead of packing inf
            values = [math.inf]
        if not all(math.isfinite(x) for x in values):
            raise InvalidArgument(f"{what} has a NaN or infinite value", details={"field": "vector"})
        if not any(values):  # also what underflows to zero in float32
            raise InvalidArgument(
                f"{what} is all zeros, which cosine similarity cannot rank", details={"field": "vector"}
            )
        return values

    def _call(self, operation: str, method: Callable[..., _T], **params: Any) -> _T:
        try:
            return method(**self._target, **params)
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service="S3 Vectors", operation=operation) from None


def _ancestor_id(encoded: str) -> str:
    """A fixed-size stand-in for an encoded ancestor, so the filterable budget (2 KB) grows by
    16 bytes per level instead of with the square of the depth. A collision could only add a
    candidate, and every hit's namespace is checked against the prefix before it is returned."""
    return hashlib.sha256(encoded.encode()).hexdigest()[:16]


def build_filter(tenant: str, prefix: tuple[str, ...], pushdown: Filter) -> dict[str, Any]:
    """The QueryVectors filter: the tenant, the prefix and the pushable part of `pushdown`."""
    clauses: list[dict[str, Any]] = [{"tenant": {"$eq": tenant}}]
    if prefix:
        clauses.append({"ns": {"$eq": _ancestor_id(encode_namespace(prefix))}})
    for condition in pushdown.conditions:
        clause = _pushable(condition)
        if clause is not None:
            clauses.append(clause)
    return {"$and": clauses}


def _pushable(c: Condition) -> dict[str, Any] | None:
    """The S3 Vectors clause for a condition it evaluates as we do (or more loosely), else None."""
    if "." in c.path:
        return None  # a dot path reaches inside a value; stored attributes are flat
    name = ATTRIBUTE_PREFIX + c.path
    if c.op == "eq" and _exact_scalar(c.operand):
        return {name: {"$eq": c.operand}}
    if c.op == "in" and c.operand and all(_exact_scalar(x) for x in c.operand):
        return {name: {"$in": list(c.operand)}}
    if c.op in ("gt", "gte", "lt", "lte") and _exact_number(c.operand):
        return {name: {"$" + c.op: c.operand}}
    if c.op == "contains" and _exact_scalar(c.operand):
        return {name: {"$eq": c.operand}}
    if c.op == "any" and 0 < len(c.operand) <= _MAX_PUSHED_ANY and all(_exact_scalar(x) for x in c.operand):
        return {"$or": [{name: {"$eq": x}} for x in c.operand]}
    if c.op == "exists" and c.operand is False:
        return {name: {"$exists": False}}
    return None


def _exact_scalar(x: Any) -> bool:
    if isinstance(x, bool):
        return True
    if isinstance(x, str):
        # filters.py compares two timestamps as instants ("...Z" equals "...+00:00"); S3 compares
        # text. A string is >= itself there only when it parses as a timestamp.
        return not condition_matches(True, x, "gte", x)
    return _exact_number(x)


def _exact_number(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return abs(x) <= _MAX_EXACT_INT
    return isinstance(x, float) and math.isfinite(x)


def _hit(found: dict[str, Any], tenant: str, prefix: tuple[str, ...]) -> VectorHit | None:
    md = found.get("metadata") or {}
    try:
        namespace = tuple(json.loads(md["namespace"]))
        hit = VectorHit(
            namespace=namespace,
            key=md["key"],
            memory_id=md["memory_id"],
            version=int(md["version"]),
            field=md["field"],
            score=1.0 - float(found["distance"]),
        )
    except (KeyError, TypeError, ValueError):
        return None  # not written by this adapter
    # The filter already bound tenant and prefix; checked again so a bad filter can never leak.
    if md.get("tenant") != tenant or not is_under(encode_namespace(namespace), prefix):
        return None
    return hit


def _attributes(policy_attributes: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, value in policy_attributes.items():
        value = _metadata_value(name, value)
        # null and [] are left out: S3 Vectors has no null, and no pushed-down condition
        # (eq/in on a scalar, a numeric range) can match either of them.
        if value is not None and value != []:
            out[ATTRIBUTE_PREFIX + name] = value
    return out


def _metadata_value(name: str, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return [_scalar(name, v) for v in value]
    return _scalar(name, value)


def _scalar(name: str, value: Any) -> Any:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, Decimal):  # DynamoDB numbers
        value = int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    raise InvalidArgument(
        f"policy attribute {name!r} must be a string, number, boolean or a list of them to be indexed",
        details={"field": "policy_attributes", "attribute": name},
    )


def _check_memory_id(memory_id: str) -> None:
    longest = MAX_VECTOR_KEY_LENGTH - _KEY_OVERHEAD
    if not isinstance(memory_id, str) or not 1 <= len(memory_id) <= longest:
        raise InvalidArgument(f"memory_id must be 1..{longest} characters", details={"field": "memory_id"})


def _check_metadata(filterable: dict[str, Any], metadata: dict[str, Any]) -> None:
    if len(metadata) > MAX_METADATA_KEYS:
        raise InvalidArgument(
            f"a vector can carry at most {MAX_METADATA_KEYS} metadata keys (S3 Vectors limit), "
            f"this one needs {len(metadata)}: too many policy attributes",
            details={"field": "policy_attributes", "limit": "metadata_keys", "max": MAX_METADATA_KEYS},
        )
    size = metadata_size(filterable)
    if size > MAX_FILTERABLE_METADATA_BYTES:
        raise InvalidArgument(
            f"filterable metadata is {size} bytes, over the S3 Vectors limit of "
            f"{MAX_FILTERABLE_METADATA_BYTES} bytes: shorten the namespace or the policy attributes",
            details={
                "field": "metadata",
                "limit": "filterable_metadata_bytes",
                "max": MAX_FILTERABLE_METADATA_BYTES,
                "size": size,
            },
        )
    size = metadata_size(metadata)
    if size > MAX_METADATA_BYTES:
        raise InvalidArgument(
            f"metadata is {size} bytes, over the S3 Vectors limit of {MAX_METADATA_BYTES} bytes",
            details={"field": "metadata", "limit": "metadata_bytes", "max": MAX_METADATA_BYTES, "size": size},
        )


def metadata_size(metadata: dict[str, Any]) -> int:
    """Bytes counted against the S3 Vectors limits: key bytes plus value bytes (see module doc)."""
    return sum(len(k.encode("utf-8")) + _value_size(v) for k, v in metadata.items())


def _value_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, list):
        return sum(_value_size(v) for v in value)
    return max(8, len(json.dumps(value)))


def _digest(s: str) -> str:
    return hashlib.sha256(s.encode("utf-8")).hexdigest()[:16]


def _chunks(items: list[_T], size: int) -> Iterator[list[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
