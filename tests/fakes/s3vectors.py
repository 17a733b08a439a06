"""QueryVectors for moto: exact cosine search over moto's S3 Vectors store, real filter semantics.

moto 5.2 implements the S3 Vectors bucket, index and vector calls but not QueryVectors, and an
unmocked call would go to the real endpoint. `install_query_vectors_fake(client)` hooks a real
boto3 `s3vectors` client (made under `mock_aws`):

- `before-call.s3vectors.QueryVectors` answers from moto's in-memory vectors (the backend dict
  `moto.s3vectors.models.s3vectors_backends[account][partition]`) without any HTTP: exact
  cosine distance (1 - cosine similarity), ranked nearest first, `topK` 1..100, the query
  vector's dimension and non-zero-ness checked, metadata and distance only when asked for.
- Filters follow the S3 Vectors user guide ("Metadata filtering"): `$eq $ne $gt $gte $lt
  $lte $in $nin $exists $and $or`; a bare value means `$eq`; several keys in one object, or
  several operators on one key, are ANDed; `$eq`/`$in` against a list-valued key match if any
  element does; comparisons are type-strict (1 never equals "1" or true); range operators take
  numbers only (a string operand is a ValidationException) and never match a string value.
  Non-filterable keys (recorded from CreateIndex) are invisible to filters.
  Where the docs are silent we chose, and say so: `$ne`/`$nin` match a vector without the key
  and, on a list, require that no element matches (MongoDB's rule).
- PutVectors / DeleteVectors (<= 500), GetVectors (<= 100), zero vectors in a cosine index and
  more than 50 metadata keys are rejected as the service does; moto accepts all of them.
- Any request that would still reach the network raises `NetworkRefused`.

Not emulated (they raise NotImplementedError): full-text/hybrid queries, `nextToken` paging,
euclidean indexes.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable
from typing import Any

from botocore.awsrequest import AWSResponse
from moto.core.botocore_stubber import MockRawResponse
from moto.iam.models import get_account_id_from
from moto.s3vectors.exceptions import IndexNotFound
from moto.s3vectors.models import s3vectors_backends
from moto.utilities.utils import get_partition

__all__ = [
    "install_query_vectors_fake",
    "S3VectorsFake",
    "NetworkRefused",
    "FilterError",
    "filter_matches",
    "cosine_distance",
]

MAX_TOP_K = 100
MAX_WRITE_BATCH = 500
MAX_GET_BATCH = 100
MAX_METADATA_KEYS = 50
MAX_NON_FILTERABLE_KEYS = 10

_RANGE: dict[str, Callable[[float, float], bool]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


class NetworkRefused(RuntimeError):
    """A request was about to leave the process."""


class FilterError(ValueError):
    """An invalid S3 Vectors filter (the service answers ValidationException)."""


def install_query_vectors_fake(client: Any) -> S3VectorsFake:
    """Hook the fake into `client` (a boto3 `s3vectors` client under `mock_aws`) and return it."""
    fake = S3VectorsFake(client)
    events = client.meta.events
    events.register("before-call.s3vectors.QueryVectors", fake.query_vectors)
    events.register("before-call.s3vectors.CreateIndex", fake.create_index)
    events.register("before-call.s3vectors.PutVectors", fake.put_vectors)
    events.register("before-call.s3vectors.DeleteVectors", fake.delete_vectors)
    events.register("before-call.s3vectors.GetVectors", fake.get_vectors)
    # moto's stubber answers the URLs it mocks at before-send; the endpoint's `_send` is the
    # actual HTTP request, reached only by what nothing answered.
    client._endpoint._send = _refuse_network
    return fake


class S3VectorsFake:
    def __init__(self, client: Any) -> None:
        self._client = client
        self.non_filterable: dict[tuple[str, str], frozenset[str]] = {}
        self.queries: list[dict[str, Any]] = []  # every QueryVectors request body, for assertions
        self.put_sizes: list[int] = []  # vectors in each PutVectors request, in order
        self.delete_sizes: list[int] = []  # keys in each DeleteVectors request, in order
        # A CLASSIC index filters during its approximate search, so a filtered query "may return
        # fewer than top K results" while more vectors match. True emulates the worst case: the
        # filter is applied to the topK nearest vectors of the whole index.
        self.filter_during_search = False
        # An AWS error code that every read (QueryVectors, GetVectors) answers while set, as when
        # the index is unreachable for this role; None: reads work.
        self.fail_reads: str | None = None

    # -- hooks (each returns None to let moto handle the call, or (http, parsed) to answer) --

    def create_index(self, params: dict[str, Any], **_: Any):
        body = _body(params)
        keys = (body.get("metadataConfiguration") or {}).get("nonFilterableMetadataKeys") or []
        if len(keys) > MAX_NON_FILTERABLE_KEYS:
            return _error("ValidationException", f"at most {MAX_NON_FILTERABLE_KEYS} non-filterable keys")
        self.non_filterable[(body.get("vectorBucketName"), body.get("indexName"))] = frozenset(keys)
        return None

    def put_vectors(self, params: dict[str, Any], **_: Any):
        body = _body(params)
        vectors = body.get("vectors") or []
        self.put_sizes.append(len(vectors))
        if len(vectors) > MAX_WRITE_BATCH:
            return _error("ValidationException", f"at most {MAX_WRITE_BATCH} vectors per PutVectors")
        index = self._index(body)
        for v in vectors:
            data = (v.get("data") or {}).get("float32") or []
            if index is not None and index.distance_metric == "cosine" and not any(data):
                return _error("ValidationException", f"Invalid record for key '{v['key']}': zero vector")
            if len(v.get("metadata") or {}) > MAX_METADATA_KEYS:
                return _error(
                    "ValidationException",
                    f"Invalid record for key '{v['key']}': Metadata object must have at most {MAX_METADATA_KEYS} keys",
                )
        return None

    def delete_vectors(self, params: dict[str, Any], **_: Any):
        self.delete_sizes.append(len(_body(params).get("keys") or []))
        if len(_body(params).get("keys") or []) > MAX_WRITE_BATCH:
            return _error("ValidationException", f"at most {MAX_WRITE_BATCH} keys per DeleteVectors")
        return None

    def get_vectors(self, params: dict[str, Any], **_: Any):
        if self.fail_reads:
            return _error(self.fail_reads, "injected failure: User is not authorized to perform s3vectors:GetVectors",
                          status=403)
        if len(_body(params).get("keys") or []) > MAX_GET_BATCH:
            return _error("ValidationException", f"at most {MAX_GET_BATCH} keys per GetVectors")
        return None

    def query_vectors(self, params: dict[str, Any], **_: Any):
        body = _body(params)
        self.queries.append(body)
        if self.fail_reads:
            return _error(self.fail_reads, "injected failure: User is not authorized to perform s3vectors:QueryVectors",
                          status=403)
        for unsupported in ("queryTexts", "nextToken", "returnScores"):
            if body.get(unsupported):
                raise NotImplementedError(f"the QueryVectors fake does not emulate {unsupported}")
        index = self._index(body)
        if index is None:
            return _error("NotFoundException", "The specified index could not be found", status=404)
        if index.distance_metric != "cosine":
            raise NotImplementedError("the QueryVectors fake emulates cosine indexes only")
        top_k = body.get("topK")
        if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= MAX_TOP_K:
            return _error("ValidationException", f"topK must be between 1 and {MAX_TOP_K}")
        query = (body.get("queryVector") or {}).get("float32")
        if not isinstance(query, list) or len(query) != index.dimension:
            return _error("ValidationException", f"queryVector must have {index.dimension} dimensions")
        if not any(query):
            return _error("ValidationException", "queryVector must not be a zero vector for the cosine metric")
        hidden = self.non_filterable.get((index.vectorBucketName, index.index_name), frozenset())
        flt = body.get("filter")
        scored = []
        try:
            if flt is not None:
                filter_matches(flt, {})  # validate even when the index is empty
            candidates = sorted((cosine_distance(query, v.data["float32"]), v.key, v.metadata or {})
                                for v in index.vectors.values())
            if self.filter_during_search:
                candidates = candidates[:top_k]
            for distance, key, metadata in candidates:
                visible = {k: v for k, v in metadata.items() if k not in hidden}
                if flt is None or filter_matches(flt, visible):
                    scored.append((distance, key, metadata))
        except FilterError as exc:
            return _error("ValidationException", f"Invalid filter: {exc}")
        out = []
        for distance, key, metadata in scored[:top_k]:
            item: dict[str, Any] = {"key": key}
            if body.get("returnDistance"):
                item["distance"] = distance
            if body.get("returnMetadata"):
                item["metadata"] = metadata
            out.append(item)
        return _ok({"vectors": out, "distanceMetric": "cosine"})

    # -- moto's store ----------------------------------------------------------------------

    def _index(self, body: dict[str, Any]):
        credentials = self._client._request_signer._credentials
        account = get_account_id_from(credentials.get_frozen_credentials().access_key)
        backend = s3vectors_backends[account][get_partition(self._client.meta.region_name)]
        try:
            return backend.get_index(body.get("vectorBucketName"), body.get("indexName"), body.get("indexArn"))
        except IndexNotFound:  # also what moto raises for a missing bucket
            return None


def cosine_distance(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 1.0 - dot / norm


def filter_matches(flt: Any, metadata: dict[str, Any]) -> bool:
    """Whether `metadata` satisfies an S3 Vectors filter. Raises FilterError for an invalid one.

    Every clause is evaluated (no short-circuit), so an invalid clause is reported even when an
    earlier one already decided the answer, as a service that validates first would.
    """
    if not isinstance(flt, dict) or not flt:
        raise FilterError("a filter must be a non-empty object")
    results = []
    for key, spec in flt.items():
        if key in ("$and", "$or"):
            if not isinstance(spec, list) or not spec:
                raise FilterError(f"{key} takes a non-empty array of filters")
            subs = [filter_matches(sub, metadata) for sub in spec]
            results.append(all(subs) if key == "$and" else any(subs))
        elif key.startswith("$"):
            raise FilterError(f"{key} must be applied to a metadata key")
        elif isinstance(spec, dict):
            if not spec or not all(isinstance(op, str) and op.startswith("$") for op in spec):
                raise FilterError(f"the condition on {key!r} must be a value or an object of operators")
            results.extend([_condition(key, op, operand, metadata) for op, operand in spec.items()])
        else:
            results.append(_condition(key, "$eq", spec, metadata))
    return all(results)


def _condition(key: str, op: str, operand: Any, metadata: dict[str, Any]) -> bool:
    present = key in metadata
    value = metadata.get(key)
    values = value if isinstance(value, list) else [value]
    if op in ("$eq", "$ne"):
        if not _is_primitive(operand):
            raise FilterError(f"{op} takes a string, number or boolean")
        hit = present and any(_same(v, operand) for v in values)
        return hit if op == "$eq" else not hit
    if op in ("$in", "$nin"):
        if not isinstance(operand, list) or not operand or not all(_is_primitive(x) for x in operand):
            raise FilterError(f"{op} takes a non-empty array of strings, numbers or booleans")
        hit = present and any(_same(v, x) for v in values for x in operand)
        return hit if op == "$in" else not hit
    if op in _RANGE:
        if not _is_number(operand):
            raise FilterError(f"{op} takes a number")
        return present and any(_is_number(v) and _RANGE[op](v, operand) for v in values)
    if op == "$exists":
        if not isinstance(operand, bool):
            raise FilterError("$exists takes a boolean")
        return present == operand
    raise FilterError(f"unknown operator {op}")


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _is_primitive(x: Any) -> bool:
    return isinstance(x, str | bool) or _is_number(x)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    return isinstance(a, str) and isinstance(b, str) and a == b


def _body(params: dict[str, Any]) -> dict[str, Any]:
    raw = params.get("body") or b"{}"
    return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)


def _ok(parsed: dict[str, Any]):
    http = AWSResponse("https://s3vectors.fake.invalid/QueryVectors", 200, {}, MockRawResponse(b""))
    parsed["ResponseMetadata"] = {"HTTPStatusCode": 200, "HTTPHeaders": {}, "RetryAttempts": 0}
    return http, parsed


def _error(code: str, message: str, *, status: int = 400):
    http = AWSResponse("https://s3vectors.fake.invalid/", status, {}, MockRawResponse(b""))
    parsed = {
        "Error": {"Code": code, "Message": message},
        "message": message,
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0},
    }
    return http, parsed


def _refuse_network(request: Any) -> None:
    raise NetworkRefused(
        f"refusing to send {request.method} {request.url}: this S3 Vectors call is not mocked "
        "(is mock_aws active, and does moto implement the operation?)"
    )
