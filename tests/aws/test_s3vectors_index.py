"""S3VectorsIndex on moto, with the QueryVectors fake; and the fake itself against hand-computed answers."""

from __future__ import annotations

import hashlib

import json
import math
from types import SimpleNamespace

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from memsvc.adapters.aws.s3vectors_index import (
    MAX_FILTERABLE_METADATA_BYTES,
    MAX_METADATA_BYTES,
    MAX_METADATA_KEYS,
    NON_FILTERABLE_METADATA_KEYS,
    S3VectorsIndex,
    build_filter,
    vector_key,
)
from memsvc.core.errors import InternalError, InvalidArgument, ProviderError, RateLimited
from memsvc.core.filters import Filter, parse_filter
from memsvc.core.models import VectorRef, VectorWrite
from tests.fakes.aws_stack import moto_client
from tests.fakes.s3vectors import (
    FilterError,
    NetworkRefused,
    filter_matches,
    install_query_vectors_fake,
)
from tests.fakes.s3vectors import _error as fake_error

BUCKET, INDEX, DIM = "memsvc-test-vectors", "memories", 8
MEMORY_A, MEMORY_B = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"


def e(i: int, j: int | None = None) -> list[float]:
    """A basis vector (or the sum of two), in DIM dimensions."""
    v = [0.0] * DIM
    v[i] = 1.0
    if j is not None:
        v[j] = 1.0
    return v


@pytest.fixture
def aws(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        client = moto_client("s3vectors")
        fake = install_query_vectors_fake(client)
        client.create_vector_bucket(vectorBucketName=BUCKET)
        client.create_index(
            vectorBucketName=BUCKET,
            indexName=INDEX,
            dataType="float32",
            dimension=DIM,
            distanceMetric="cosine",
            metadataConfiguration={"nonFilterableMetadataKeys": list(NON_FILTERABLE_METADATA_KEYS)},
        )
        index = S3VectorsIndex(client, bucket=BUCKET, index=INDEX, dimension=DIM)
        yield SimpleNamespace(client=client, fake=fake, index=index)


def stored_keys(aws) -> set[str]:
    return {v["key"] for v in aws.client.list_vectors(vectorBucketName=BUCKET, indexName=INDEX)["vectors"]}


def count_calls(aws, operation: str) -> list[int]:
    """Sizes of the batches of each later `operation` call (PutVectors: vectors, DeleteVectors: keys)."""
    sizes: list[int] = []

    def hook(params, **_):
        body = json.loads(params["body"])
        sizes.append(len(body.get("vectors") or body.get("keys") or []))

    aws.client.meta.events.register(f"before-call.s3vectors.{operation}", hook)
    return sizes


def inject(aws, operation: str, code: str, status: int, message: str = "injected") -> None:
    aws.client.meta.events.register_first(
        f"before-call.s3vectors.{operation}", lambda **_: fake_error(code, message, status=status)
    )


def put(aws, tenant="acme", ns=("user", "alice"), key="k1", memory_id=MEMORY_A, *, attrs=None, vectors=None):
    vectors = vectors if vectors is not None else [("text", e(0))]
    aws.index.put_many([VectorWrite(tenant, ns, key, memory_id, 1, attrs or {}, tuple(vectors))])


def delete(aws, tenant: str, memory_id: str, fields) -> None:
    aws.index.delete_many([VectorRef(tenant, memory_id, f) for f in fields])


# -- the adapter -------------------------------------------------------------------------------


def test_put_then_query_finds_it_with_score_one(aws):
    put(aws, vectors=[("text", e(0)), ("meta.title", e(1))])
    hits = aws.index.query("acme", (), Filter(), e(0), 10)
    assert [(h.field, round(h.score, 6)) for h in hits] == [("text", 1.0), ("meta.title", 0.0)]
    top = hits[0]
    assert (top.namespace, top.key, top.memory_id, top.version) == (("user", "alice"), "k1", MEMORY_A, 1)


def test_scores_are_cosine_similarity_best_first(aws):
    put(aws, key="a", memory_id=MEMORY_A, vectors=[("text", e(0, 1))])
    put(aws, key="b", memory_id=MEMORY_B, vectors=[("text", [3.0, 0, 0, 0, 0, 0, 0, 0])])
    hits = aws.index.query("acme", (), Filter(), [2.0, 0, 0, 0, 0, 0, 0, 0], 10)
    assert [h.key for h in hits] == ["b", "a"]
    assert hits[0].score == pytest.approx(1.0)
    assert hits[1].score == pytest.approx(1 / math.sqrt(2))


def test_prefix_never_crosses_a_segment_boundary(aws):
    put(aws, ns=("user", "alice"), key="mine", memory_id="m-alice")
    put(aws, ns=("user", "alice", "notes"), key="deeper", memory_id="m-notes")
    put(aws, ns=("user", "alicea"), key="other", memory_id="m-alicea")
    put(aws, ns=("user", "ali ce/x"), key="odd", memory_id="m-odd")

    def keys(prefix):
        return sorted(h.key for h in aws.index.query("acme", prefix, Filter(), e(0), 10))

    assert keys(("user", "alice")) == ["deeper", "mine"]
    assert keys(("user", "alicea")) == ["other"]
    assert keys(("user", "ali ce/x")) == ["odd"]
    assert keys(("user",)) == ["deeper", "mine", "odd", "other"]
    assert keys(()) == ["deeper", "mine", "odd", "other"]
    assert keys(("user", "ali")) == []


def test_tenant_b_never_sees_tenant_a(aws):
    put(aws, tenant="tenant-a", ns=("user", "alice"), memory_id=MEMORY_A, vectors=[("text", e(2))])
    put(aws, tenant="tenant-b", ns=("user", "alice"), memory_id=MEMORY_B, vectors=[("text", e(5))])
    hits = aws.index.query("tenant-b", ("user", "alice"), Filter(), e(2), 10)  # A's exact vector
    assert [h.memory_id for h in hits] == [MEMORY_B]
    assert aws.fake.queries[-1]["filter"]["$and"][0] == {"tenant": {"$eq": "tenant-b"}}
    # Keys are tenant-bound too: B deleting A's memory id removes nothing of A's.
    delete(aws, "tenant-b", MEMORY_A, ["text"])
    assert [h.memory_id for h in aws.index.query("tenant-a", (), Filter(), e(2), 10)] == [MEMORY_A]


ATTRS = {
    "m1": {"lang": "en", "year": 2024, "score": 0.5, "pinned": True, "tags": ["a", "b"]},
    "m2": {"lang": "fr", "year": 2025, "score": 0.9, "pinned": False, "tags": ["c"]},
    "m3": {"lang": "de", "year": 2026, "score": 0.1, "tags": []},
}


@pytest.fixture
def attributed(aws):
    for i, (memory_id, attrs) in enumerate(ATTRS.items()):
        put(aws, key=memory_id, memory_id=memory_id, attrs=attrs, vectors=[("text", e(0, i + 1))])
    return aws


@pytest.mark.parametrize(
    "flt, expected",
    [
        ({"lang": "en"}, {"m1"}),
        ({"lang": {"in": ["en", "fr"]}}, {"m1", "m2"}),
        ({"year": {"gte": 2025, "lt": 2026}}, {"m2"}),
        ({"year": {"gt": 2024}}, {"m2", "m3"}),
        ({"year": {"lte": 2024.0}}, {"m1"}),
        ({"year": 2025.0}, {"m2"}),  # 2025 == 2025.0 in both languages
        ({"score": {"gt": 0.3}}, {"m1", "m2"}),
        ({"pinned": True}, {"m1"}),
        ({"pinned": False}, {"m2"}),
        ({"lang": "en", "year": {"gte": 2025}}, set()),
    ],
)
def test_pushdown_filters_on_policy_attributes(attributed, flt, expected):
    hits = attributed.index.query("acme", (), parse_filter(flt), e(0), 10)
    assert {h.memory_id for h in hits} == expected
    pushed = attributed.fake.queries[-1]["filter"]["$and"][1:]
    assert len(pushed) == len(parse_filter(flt).conditions)  # everything here is pushable


def test_list_attribute_eq_matches_any_element_a_superset_the_service_rechecks(attributed):
    # S3 Vectors matches a list on any element, our filter language compares whole values:
    # pushing eq down can only add candidates, never lose one.
    hits = attributed.index.query("acme", (), parse_filter({"tags": "a"}), e(0), 10)
    assert {h.memory_id for h in hits} == {"m1"}


def test_build_filter_translates_and_keeps_back_what_s3_would_evaluate_differently():
    flt = parse_filter(
        {
            "lang": {"eq": "en", "ne": "fr", "nin": ["de"]},
            "year": {"in": [2024, 2025], "gte": 2020},
            "at": {"gte": "2024-01-01T00:00:00Z"},  # timestamps compare as instants here
            "day": "2024-05-01",  # equal to "2024-05-01T00:00:00Z" here, not in S3
            "meta.kind": "note",  # a dot path reaches into a value
            "huge": 2**60,  # not exact as a double
            "n": {"in": ["x", ["nested"]]},
            "empty": {"in": []},
        }
    )
    assert build_filter("t1", ("user", "al\x1eice"), flt) == {
        "$and": [
            {"tenant": {"$eq": "t1"}},
            {"ns": {"$eq": hashlib.sha256("user\x1eal%1Eice".encode()).hexdigest()[:16]}},
            {"pa.lang": {"$eq": "en"}},
            {"pa.year": {"$in": [2024, 2025]}},
            {"pa.year": {"$gte": 2020}},
        ]
    }
    assert build_filter("t1", (), Filter()) == {"$and": [{"tenant": {"$eq": "t1"}}]}


def test_delete_removes_exactly_that_versions_fields(aws):
    put(aws, key="k", memory_id=MEMORY_A, vectors=[("a", e(0)), ("b", e(1)), ("c", e(2))])
    put(aws, key="k", memory_id=MEMORY_B, vectors=[("a", e(3))])  # the next version
    delete(aws, "acme", MEMORY_A, ["a", "b", "never-indexed"])
    left = {(h.memory_id, h.field) for h in aws.index.query("acme", (), Filter(), e(0, 2), 10)}
    assert left == {(MEMORY_A, "c"), (MEMORY_B, "a")}
    assert stored_keys(aws) == {vector_key("acme", MEMORY_A, "c"), vector_key("acme", MEMORY_B, "a")}


def test_put_is_idempotent(aws):
    put(aws, vectors=[("a", e(0)), ("b", e(1))])
    before = stored_keys(aws)
    put(aws, vectors=[("a", e(0)), ("b", e(1))])
    assert stored_keys(aws) == before == {vector_key("acme", MEMORY_A, f) for f in ("a", "b")}
    assert len(aws.index.query("acme", (), Filter(), e(0), 10)) == 2


def test_vector_keys_are_deterministic_and_short():
    assert vector_key("acme", MEMORY_A, "text") == vector_key("acme", MEMORY_A, "text")
    assert vector_key("acme", MEMORY_A, "text") != vector_key("acme", MEMORY_A, "title")
    assert vector_key("acme", MEMORY_A, "text") != vector_key("other", MEMORY_A, "text")
    assert len(vector_key("acme", MEMORY_A, "x" * 5000)) == 70


def test_writes_go_in_chunks_of_at_most_500(aws):
    puts, deletes = count_calls(aws, "PutVectors"), count_calls(aws, "DeleteVectors")
    fields = [f"f{i}" for i in range(1200)]
    vectors = [(f, [1.0 + i % 7, i % 3, i % 5, 1, 0, 0, 0, 0]) for i, f in enumerate(fields)]
    put(aws, vectors=vectors)
    assert puts == [500, 500, 200]
    assert len(stored_keys(aws)) == 1200
    delete(aws, "acme", MEMORY_A, fields)
    assert deletes == [500, 500, 200]
    assert stored_keys(aws) == set()


def test_filterable_metadata_over_2kb_is_rejected_before_any_write(aws):
    puts = count_calls(aws, "PutVectors")
    # tenant "t": 6 + 1; ns, one level: 2 + 16; pa.x: 4 + N. 29 + 2019 = 2048 fits exactly.
    put(aws, tenant="t", ns=("n",), key="fits", attrs={"x": "y" * 2019})
    with pytest.raises(InvalidArgument) as raised:
        put(aws, tenant="t", ns=("n",), key="too-big", memory_id=MEMORY_B, attrs={"x": "y" * 2020})
    assert str(MAX_FILTERABLE_METADATA_BYTES) in raised.value.message
    assert raised.value.details["limit"] == "filterable_metadata_bytes"
    assert puts == [1]
    assert stored_keys(aws) == {vector_key("t", MEMORY_A, "text")}


def test_deep_namespace_with_long_segments_fits(aws):
    # Ancestors are stored as 16-character hashes, so the budget grows linearly with depth:
    # ten levels of 200-character segments cost 2 + 160 bytes, not tens of kilobytes.
    deep = tuple(f"{i}" + "s" * 199 for i in range(10))
    put(aws, ns=deep)
    hits = aws.index.query("acme", deep[:3], Filter(), e(0), 10)
    assert [(h.namespace, h.key) for h in hits] == [(deep, "k1")]
    assert aws.index.query("acme", deep[:2] + ("other",), Filter(), e(0), 10) == []


def test_total_metadata_and_key_count_limits(aws):
    with pytest.raises(InvalidArgument, match=str(MAX_METADATA_BYTES)):
        put(aws, key="k" * (MAX_METADATA_BYTES + 1))
    too_many = {f"a{i}": i for i in range(MAX_METADATA_KEYS - 7 + 1)}  # 7 keys are ours
    with pytest.raises(InvalidArgument, match=f"at most {MAX_METADATA_KEYS} metadata keys"):
        put(aws, attrs=too_many)
    put(aws, attrs=dict(list(too_many.items())[:-1]))  # exactly 50 keys
    assert len(stored_keys(aws)) == 1


@pytest.mark.parametrize("value", [{"nested": 1}, [{"x": 1}], [[1]], [None], float("nan"), object()])
def test_attribute_values_s3_cannot_filter_are_rejected(aws, value):
    with pytest.raises(InvalidArgument, match="policy attribute 'bad'"):
        put(aws, attrs={"ok": "yes", "bad": value})
    assert stored_keys(aws) == set()


def test_null_and_empty_list_attributes_are_left_out(aws):
    put(aws, attrs={"gone": None, "none": [], "kept": ["x"]})
    (stored,) = aws.client.list_vectors(vectorBucketName=BUCKET, indexName=INDEX, returnMetadata=True)["vectors"]
    assert {k for k in stored["metadata"] if k.startswith("pa.")} == {"pa.kept"}


def test_top_k_is_capped_at_100(aws):
    vectors = [(f"f{i}", [1.0, i / 150, 0, 0, 0, 0, 0, 0]) for i in range(150)]
    put(aws, vectors=vectors)
    hits = aws.index.query("acme", (), Filter(), e(0), 500)
    assert len(hits) == 100 == aws.index.max_top_k
    assert aws.fake.queries[-1]["topK"] == 100
    assert [h.field for h in hits] == [f"f{i}" for i in range(100)]  # nearest first


def test_zero_and_malformed_vectors_are_rejected(aws):
    with pytest.raises(InvalidArgument, match="all zeros"):
        aws.index.query("acme", (), Filter(), [0.0] * DIM, 10)
    with pytest.raises(InvalidArgument, match="all zeros"):
        put(aws, vectors=[("text", e(0)), ("empty", [0.0] * DIM)])
    with pytest.raises(InvalidArgument, match="3 dimensions"):
        aws.index.query("acme", (), Filter(), [1.0, 2.0, 3.0], 10)
    with pytest.raises(InvalidArgument, match="NaN"):
        put(aws, vectors=[("text", [float("nan")] + [1.0] * (DIM - 1))])
    with pytest.raises(InvalidArgument, match="infinite"):
        put(aws, vectors=[("text", [1e39] + [1.0] * (DIM - 1))])  # beyond float32
    with pytest.raises(InvalidArgument, match="all zeros"):
        aws.index.query("acme", (), Filter(), [1e-50] * DIM, 10)  # zero in float32
    with pytest.raises(InvalidArgument, match="given twice"):
        put(aws, vectors=[("text", e(0)), ("text", e(1))])
    assert stored_keys(aws) == set()
    assert aws.fake.queries == []


@pytest.mark.parametrize("code", ["TooManyRequestsException", "ThrottlingException"])
def test_throttling_is_rate_limited(aws, code):
    inject(aws, "QueryVectors", code, 429)
    with pytest.raises(RateLimited) as raised:
        aws.index.query("acme", (), Filter(), e(0), 10)
    assert raised.value.retryable and raised.value.details["aws_error_code"] == code


def test_other_aws_errors_are_provider_errors_without_the_aws_message(aws):
    inject(aws, "PutVectors", "InternalServerException", 500, message="key tenant-b/secret-memory failed")
    with pytest.raises(ProviderError) as raised:
        put(aws)
    assert raised.value.retryable
    assert "secret" not in raised.value.message and "secret" not in str(raised.value.details)
    missing = S3VectorsIndex(aws.client, bucket=BUCKET, index="no-such-index", dimension=DIM)
    with pytest.raises(ProviderError, match="NotFoundException"):
        missing.query("acme", (), Filter(), e(0), 10)


def test_ping_checks_the_index(aws):
    aws.index.ping()
    with pytest.raises(InternalError, match="cosine/1024"):
        S3VectorsIndex(aws.client, bucket=BUCKET, index=INDEX, dimension=1024).ping()


# -- the fake itself ---------------------------------------------------------------------------


def raw_put(aws, key, data, metadata):
    vector = {"key": key, "data": {"float32": data}, "metadata": metadata}
    aws.client.put_vectors(vectorBucketName=BUCKET, indexName=INDEX, vectors=[vector])


def raw_query(aws, vector, top_k=10, **kw):
    return aws.client.query_vectors(
        vectorBucketName=BUCKET, indexName=INDEX, queryVector={"float32": vector}, topK=top_k, **kw
    )


def test_fake_ranks_by_exact_cosine_distance(aws):
    raw_put(aws, "same", e(0), {"g": "x"})
    raw_put(aws, "diag", e(0, 1), {"g": "y"})
    raw_put(aws, "ortho", e(1), {})
    raw_put(aws, "opposite", [-1.0] + [0.0] * (DIM - 1), {})
    out = raw_query(aws, [5.0] + [0.0] * (DIM - 1), returnDistance=True)
    assert out["distanceMetric"] == "cosine"
    assert [(v["key"], round(v["distance"], 6)) for v in out["vectors"]] == [
        ("same", 0.0),
        ("diag", round(1 - 1 / math.sqrt(2), 6)),  # 0.292893
        ("ortho", 1.0),
        ("opposite", 2.0),
    ]
    assert all("metadata" not in v for v in out["vectors"])
    out = raw_query(aws, e(0), top_k=1, returnMetadata=True)
    assert out["vectors"] == [{"key": "same", "metadata": {"g": "x"}}]


def test_fake_filters_through_the_client_and_hides_non_filterable_keys(aws):
    raw_put(aws, "a", e(0), {"genre": ["comedy", "documentary"], "year": 2020, "key": "visible-only-on-read"})
    raw_put(aws, "b", e(1), {"genre": "drama", "year": 2023})

    def keys(flt):
        return sorted(v["key"] for v in raw_query(aws, e(0), filter=flt)["vectors"])

    assert keys({"genre": "comedy"}) == ["a"]
    assert keys({"$and": [{"genre": "comedy"}, {"genre": "documentary"}]}) == ["a"]
    assert keys({"$and": [{"genre": "comedy"}, {"genre": "drama"}]}) == []
    assert keys({"$or": [{"genre": "drama"}, {"year": {"$lt": 2021}}]}) == ["a", "b"]
    assert keys({"year": {"$gte": 2021, "$lte": 2023}}) == ["b"]
    assert keys({"key": "visible-only-on-read"}) == []  # "key" is non-filterable
    assert keys({"key": {"$exists": False}}) == ["a", "b"]
    with pytest.raises(ClientError) as raised:
        raw_query(aws, e(0), filter={"year": {"$gt": "2020"}})
    assert raised.value.response["Error"]["Code"] == "ValidationException"


@pytest.mark.parametrize(
    "flt, metadata, expected",
    [
        ({"g": "comedy"}, {"g": ["comedy", "drama"]}, True),
        ({"g": {"$in": ["x", "drama"]}}, {"g": ["comedy", "drama"]}, True),
        ({"g": {"$nin": ["x", "drama"]}}, {"g": ["comedy", "drama"]}, False),
        ({"g": {"$ne": "comedy"}}, {"g": ["comedy", "drama"]}, False),
        ({"g": {"$ne": "comedy"}}, {}, True),
        ({"g": {"$nin": ["comedy"]}}, {}, True),
        ({"g": "comedy"}, {}, False),
        ({"n": 1}, {"n": "1"}, False),
        ({"n": 1}, {"n": 1.0}, True),
        ({"b": True}, {"b": 1}, False),
        ({"n": 1}, {"n": True}, False),
        ({"n": {"$gt": 1}}, {"n": "5"}, False),
        ({"n": {"$gt": 1}}, {"n": [0, 5]}, True),
        ({"n": {"$exists": True}}, {"n": 0}, True),
        ({"a": 1, "b": 2}, {"a": 1, "b": 3}, False),
    ],
)
def test_fake_filter_semantics(flt, metadata, expected):
    assert filter_matches(flt, metadata) is expected


@pytest.mark.parametrize(
    "flt",
    [
        {},
        {"g": ["comedy"]},
        {"g": {"$in": []}},
        {"g": {"$in": [{"x": 1}]}},
        {"g": {"$gt": "2020"}},
        {"g": {"$gt": True}},
        {"g": {"$exists": "yes"}},
        {"g": {"$regex": "x"}},
        {"g": {"plain": 1}},
        {"$and": []},
        {"$or": {"g": 1}},
        {"$eq": {"g": 1}},
        {"g": None},
    ],
)
def test_fake_rejects_invalid_filters(flt):
    with pytest.raises(FilterError):
        filter_matches(flt, {"g": "x"})


def test_fake_validates_like_the_service(aws):
    def code(call):
        with pytest.raises(ClientError) as raised:
            call()
        return raised.value.response["Error"]["Code"]

    assert code(lambda: raw_query(aws, e(0), top_k=101)) == "ValidationException"
    assert code(lambda: raw_query(aws, [0.0] * DIM)) == "ValidationException"
    assert code(lambda: raw_query(aws, [1.0, 2.0])) == "ValidationException"
    assert code(lambda: raw_put(aws, "zero", [0.0] * DIM, {})) == "ValidationException"
    many = [{"key": f"k{i}", "data": {"float32": e(0)}} for i in range(501)]
    too_many = {"vectorBucketName": BUCKET, "indexName": INDEX, "vectors": many}
    assert code(lambda: aws.client.put_vectors(**too_many)) == "ValidationException"
    wrong_index = {"vectorBucketName": BUCKET, "indexName": "nope", "queryVector": {"float32": e(0)}, "topK": 1}
    assert code(lambda: aws.client.query_vectors(**wrong_index)) == "NotFoundException"
    assert stored_keys(aws) == set()


def test_fake_refuses_the_network(aws):
    # Same client setup, pointed at a closed local port: if the guard failed, nothing leaves the host.
    local = boto3.client(
        "s3vectors",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        config=Config(retries={"max_attempts": 1}),
    )
    install_query_vectors_fake(local)
    with pytest.raises(NetworkRefused):
        local.list_vectors(vectorBucketName=BUCKET, indexName=INDEX)


def test_vectors_of_reads_stored_vectors_100_keys_a_call(aws):
    """Recall's near-duplicate check reads the stored vectors (GetVectors, returnData) instead of
    embedding the finalists again."""
    gets = count_calls(aws, "GetVectors")
    fields = [f"f{i}" for i in range(150)]
    put(aws, vectors=[(f, [3.0, 4.0, 0, 0, 0, 0, 0, 0]) for f in fields])
    found = aws.index.vectors_of("acme", [(MEMORY_A, f) for f in fields] + [(MEMORY_B, "f0")])
    assert gets == [100, 51]
    assert set(found) == {(MEMORY_A, f) for f in fields}  # an absent vector is left out
    assert found[(MEMORY_A, "f7")] == pytest.approx([0.6, 0.8, 0, 0, 0, 0, 0, 0])  # unit length


def test_vectors_of_cannot_name_another_tenants_vector(aws):
    put(aws, tenant="tenant-a")
    assert aws.index.vectors_of("tenant-b", [(MEMORY_A, "text")]) == {}
    assert aws.index.vectors_of("tenant-a", [(MEMORY_A, "text")]) == {(MEMORY_A, "text"): pytest.approx(e(0))}
