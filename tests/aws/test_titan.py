"""TitanEmbedder against the Titan fake on a real boto3 bedrock-runtime client (no network)."""

from __future__ import annotations

import math
import random
import threading

import boto3
import pytest
from botocore.config import Config

from memsvc.adapters.aws.clients import RETRIES
from memsvc.adapters.aws.titan import (
    MAX_INPUT_CHARS,
    TITAN_V2_MODEL_ID,
    EmbeddingRejected,
    LruEmbeddingCache,
    TitanEmbedder,
)
from memsvc.core.errors import EmbeddingFailed, InvalidArgument, RateLimited
from tests.fakes.titan import NetworkBlocked, fake_embedding, install_titan_fake


@pytest.fixture
def client():
    # Explicit fake credentials and a closed local port: even a request that slipped past the
    # fake's guard could not reach AWS.
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        endpoint_url="http://127.0.0.1:9",
        config=Config(retries=RETRIES["bedrock-runtime"]),
    )


class Sleeps(list):
    """An injected `sleep` that records the delays instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def embedder(client, **kw) -> TitanEmbedder:
    kw.setdefault("sleep", Sleeps())
    return TitanEmbedder(client, **kw)


def cosine(a, b) -> float:
    return sum(x * y for x, y in zip(a, b))


# -- the request and the response --------------------------------------------------------------


def test_request_body_is_the_titan_v2_shape(client):
    fake = install_titan_fake(client)
    embedder(client).embed(["remember the milk"])
    (call,) = fake.calls
    assert call["model_id"] == TITAN_V2_MODEL_ID
    assert call["content_type"] == "application/json" and call["accept"] == "application/json"
    assert call["body"] == {"inputText": "remember the milk", "dimensions": 1024, "normalize": True}
    assert call["outcome"] == "ok"


@pytest.mark.parametrize("dims", [256, 512, 1024])
def test_dimension_is_configurable(client, dims):
    fake = install_titan_fake(client)
    e = embedder(client, dimension=dims)
    (vec,) = e.embed(["a text"])
    assert e.dimension == dims and len(vec) == dims
    assert fake.bodies[0]["dimensions"] == dims


@pytest.mark.parametrize("dims", [0, 128, 768, 1536])
def test_dimension_titan_does_not_offer_is_refused(client, dims):
    with pytest.raises(ValueError, match="dimension"):
        TitanEmbedder(client, dimension=dims)


def test_model_id_is_configurable(client):
    profile = "us.amazon.titan-embed-text-v2:0"
    fake = install_titan_fake(client, model_ids=(profile,))
    embedder(client, model_id=profile).embed(["x"])
    assert fake.calls[0]["model_id"] == profile


def test_vectors_are_unit_length_even_when_titan_does_not_normalise(client):
    install_titan_fake(client, ignore_normalize=True)
    vecs = embedder(client).embed(["the the the cat", "dog"])
    for vec in vecs:
        assert math.isclose(math.sqrt(sum(x * x for x in vec)), 1.0, abs_tol=1e-6)
    assert cosine(vecs[0], fake_embedding("the the the cat")) == pytest.approx(1.0, abs=1e-6)


def test_texts_sharing_words_are_nearer(client):
    install_titan_fake(client)
    cat, kitten, stocks = embedder(client).embed(
        ["the cat sat on the mat", "a cat sat on a mat", "stock markets fell sharply"]
    )
    assert cosine(cat, kitten) > 0.4 > 0.1 > cosine(cat, stocks)


def test_zero_vector_from_the_model_is_a_failure_not_a_vector(client, monkeypatch):
    import tests.fakes.titan as titan_fake

    install_titan_fake(client)
    monkeypatch.setattr(titan_fake, "fake_embedding", lambda text, dim, norm: [0.0] * dim)
    with pytest.raises(EmbeddingFailed):  # cosine indexes reject a zero vector: never return one
        embedder(client).embed(["anything"])


# -- concurrency -------------------------------------------------------------------------------


def test_order_is_preserved_under_bounded_concurrency(client):
    fake = install_titan_fake(client, latency=0.02)
    texts = [f"text number {i} about topic {i % 7}" for i in range(40)]
    with embedder(client, max_concurrency=4) as e:
        vecs = e.embed(texts)
    assert [cosine(v, fake_embedding(t)) for v, t in zip(vecs, texts)] == pytest.approx([1.0] * 40, abs=1e-6)
    assert 1 < fake.max_in_flight <= 4
    assert e.stats.calls == 40


def test_concurrent_callers_share_the_bound(client):
    fake = install_titan_fake(client, latency=0.01)
    e = embedder(client, max_concurrency=3)
    results = {}

    def work(n):
        results[n] = e.embed([f"caller {n} text {i}" for i in range(6)])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and fake.max_in_flight <= 3
    e.close()


def test_single_text_is_embedded_on_the_calling_thread(client):
    seen = []
    fake = install_titan_fake(client)
    client.meta.events.register_first("before-call.bedrock-runtime.InvokeModel",
                                      lambda **kw: seen.append(threading.current_thread().name))
    embedder(client).embed(["a query"])
    assert seen == [threading.current_thread().name] and len(fake.calls) == 1


# -- retries -----------------------------------------------------------------------------------


def test_throttling_then_recovery_backs_off_exponentially_with_full_jitter(client):
    fake = install_titan_fake(client, throttle_first=4)
    draws = []
    rng = random.Random(42)

    def jitter():
        draws.append(rng.random())
        return draws[-1]

    sleeps = Sleeps()
    e = TitanEmbedder(client, base_delay=0.5, max_delay=3.0, max_attempts=6, sleep=sleeps, random=jitter)
    (vec,) = e.embed(["busy day"])
    assert cosine(vec, fake_embedding("busy day")) == pytest.approx(1.0, abs=1e-6)
    ceilings = [0.5, 1.0, 2.0, 3.0]  # doubling, capped at max_delay
    assert sleeps == pytest.approx([d * c for d, c in zip(draws, ceilings)])
    assert all(0 <= s <= c for s, c in zip(sleeps, ceilings))
    assert [c["outcome"] for c in fake.calls] == ["ThrottlingException"] * 4 + ["ok"]
    assert (e.stats.calls, e.stats.retries, e.stats.throttles, e.stats.failures) == (5, 4, 4, 0)


def test_sleep_ceilings_grow_exponentially_when_jitter_draws_its_maximum(client):
    install_titan_fake(client, throttle_first=5)
    sleeps = Sleeps()
    TitanEmbedder(client, base_delay=0.25, max_delay=100, sleep=sleeps, random=lambda: 1.0).embed(["x"])
    assert sleeps == [0.25, 0.5, 1.0, 2.0, 4.0]


@pytest.mark.parametrize("code", ["ThrottlingException", "ServiceQuotaExceededException"])
def test_throttling_that_outlasts_the_retries_is_rate_limited(client, code):
    fake = install_titan_fake(client, throttle_first=100)
    fake.throttle_code = code
    sleeps = Sleeps()
    e = TitanEmbedder(client, max_attempts=4, base_delay=1.0, max_delay=10.0, sleep=sleeps, random=lambda: 1.0)
    with pytest.raises(RateLimited) as info:
        e.embed(["x"])
    assert len(fake.calls) == 4 and sleeps == [1.0, 2.0, 4.0]
    assert info.value.retryable and info.value.retry_after_seconds == 8
    assert info.value.to_body()["error"]["code"] == "RATE_LIMITED"
    assert "x" not in info.value.message


@pytest.mark.parametrize(
    "code",
    ["ServiceUnavailableException", "InternalServerException", "ModelNotReadyException", "ModelTimeoutException"],
)
def test_transient_failures_are_retried_then_reported_as_embedding_failed(client, code):
    fake = install_titan_fake(client, fail_first=100, fail_code=code)
    with pytest.raises(EmbeddingFailed) as info:
        embedder(client, max_attempts=3).embed(["x"])
    assert type(info.value) is EmbeddingFailed and info.value.retryable
    assert len(fake.calls) == 3


def test_transient_failure_then_recovery(client):
    fake = install_titan_fake(client, fail_first=2, fail_code="InternalServerException")
    assert len(embedder(client).embed(["x"])[0]) == 1024
    assert [c["outcome"] for c in fake.calls] == ["InternalServerException"] * 2 + ["ok"]


def test_read_timeouts_are_retried(client):
    fake = install_titan_fake(client, timeout_first=2)
    sleeps = Sleeps()
    embedder(client, sleep=sleeps).embed(["slow"])
    assert [c["outcome"] for c in fake.calls] == ["timeout", "timeout", "ok"] and len(sleeps) == 2


def test_validation_error_is_not_retried_and_not_retryable(client):
    fake = install_titan_fake(client, fail_first=1, fail_code="ValidationException")
    sleeps = Sleeps()
    with pytest.raises(EmbeddingRejected) as info:
        embedder(client, sleep=sleeps).embed(["x"])
    assert len(fake.calls) == 1 and sleeps == []
    assert isinstance(info.value, EmbeddingFailed) and not info.value.retryable
    assert info.value.to_body()["error"]["code"] == "EMBEDDING_FAILED"


def test_access_denied_is_not_retried_here_but_stays_retryable(client):
    fake = install_titan_fake(client, fail_first=1, fail_code="AccessDeniedException")
    with pytest.raises(EmbeddingFailed) as info:
        embedder(client).embed(["x"])
    assert len(fake.calls) == 1 and info.value.retryable


def test_one_failing_text_fails_the_batch_but_the_rest_is_cached(client):
    fake = install_titan_fake(client, error_for=lambda text: "ValidationException" if text == "bad" else None)
    e = embedder(client, max_concurrency=1)  # one at a time: the texts before "bad" are done
    with pytest.raises(EmbeddingRejected):
        e.embed(["one", "two", "bad", "three"])
    sent = len(fake.calls)
    fake.error_for = None
    e.embed(["one", "two"])
    assert len(fake.calls) == sent  # both came from the cache


def test_the_first_failure_stops_new_requests(client):
    fake = install_titan_fake(client, throttle_first=10_000)
    e = embedder(client, max_concurrency=2, max_attempts=2)
    with pytest.raises(RateLimited):
        e.embed([f"t{i}" for i in range(50)])
    # Not 100: once a text has failed, no request starts, however late the caller's thread wakes.
    # At most the failed text's two attempts and the other thread's two.
    assert len(fake.calls) <= 4


# -- input limits ------------------------------------------------------------------------------


def test_text_over_50k_characters_is_truncated(client):
    fake = install_titan_fake(client, max_tokens=10**6)
    text = "word " * 12_000  # 60,000 characters
    embedder(client).embed([text])
    sent = fake.bodies[0]["inputText"]
    assert len(sent) == MAX_INPUT_CHARS and text.startswith(sent)


def test_truncation_counts_utf16_units_and_never_splits_a_pair(client):
    fake = install_titan_fake(client, max_tokens=10**6)
    embedder(client).embed(["\N{GRINNING FACE}" * 30_000])  # 60,000 UTF-16 units
    sent = fake.bodies[0]["inputText"]
    assert sent == "\N{GRINNING FACE}" * 25_000


def test_text_over_the_token_limit_is_shrunk_and_sent_again(client):
    fake = install_titan_fake(client, max_tokens=100)
    text = " ".join(f"w{i}" for i in range(300))
    e = embedder(client)
    (vec,) = e.embed([text])
    assert len(vec) == 1024
    outcomes = [c["outcome"] for c in fake.calls]
    assert outcomes[0] == "ValidationException" and outcomes[-1] == "ok"
    assert text.startswith(fake.bodies[-1]["inputText"])
    e.embed([text])  # cached under the whole text
    assert len(fake.calls) == len(outcomes)


@pytest.mark.parametrize("bad", ["", "   ", "\n\t", None, 42])
def test_blank_or_non_text_input_is_invalid_and_costs_nothing(client, bad):
    fake = install_titan_fake(client)
    with pytest.raises(InvalidArgument):
        embedder(client).embed(["fine", bad])
    assert fake.calls == []


def test_no_texts_no_calls(client):
    fake = install_titan_fake(client)
    assert embedder(client).embed([]) == [] and fake.calls == []


# -- the cache ---------------------------------------------------------------------------------


def test_second_embedding_of_the_same_text_makes_no_call(client):
    fake = install_titan_fake(client)
    e = embedder(client)
    first = e.embed(["seen before"])
    assert e.embed(["seen before"]) == first
    assert len(fake.calls) == 1
    s = e.stats
    assert (s.texts, s.cache_hits, s.cache_misses, s.calls) == (2, 1, 1, 1)


def test_repeats_within_one_call_are_embedded_once(client):
    fake = install_titan_fake(client)
    a, b, a2 = embedder(client).embed(["same", "other", "same"])
    assert a == a2 and a != b and len(fake.calls) == 2


def test_cache_entries_do_not_collide_across_dimension_or_model(client):
    fake = install_titan_fake(client, model_ids=(TITAN_V2_MODEL_ID, "us.amazon.titan-embed-text-v2:0"))
    shared = LruEmbeddingCache()
    v1024 = embedder(client, cache=shared).embed(["hello"])[0]
    v256 = embedder(client, cache=shared, dimension=256).embed(["hello"])[0]
    vprof = embedder(client, cache=shared, model_id="us.amazon.titan-embed-text-v2:0").embed(["hello"])[0]
    assert (len(v1024), len(v256), len(vprof)) == (1024, 256, 1024)
    assert len(fake.calls) == 3 and len(shared) == 3
    embedder(client, cache=shared, dimension=256).embed(["hello"])  # a new embedder, same cache
    assert len(fake.calls) == 3


def test_cache_holds_hashes_and_vectors_never_text(client):
    install_titan_fake(client)
    cache = LruEmbeddingCache()
    embedder(client, cache=cache).embed(["my secret diary entry"])
    (key,) = cache.keys()
    assert len(key) == 64 and int(key, 16) >= 0
    assert "secret" not in key


def test_lru_is_bounded_and_evicts_the_least_recently_used():
    cache = LruEmbeddingCache(max_entries=2)
    cache.put_many({"a": [1.0], "b": [2.0]})
    cache.get_many(["a"])
    cache.put_many({"c": [3.0]})
    assert set(cache.get_many(["a", "b", "c"])) == {"a", "c"}
    with pytest.raises(ValueError):
        LruEmbeddingCache(max_entries=0)


def test_a_failing_cache_does_not_fail_embedding(client):
    class Broken:
        def get_many(self, keys):
            raise ConnectionError("cache down")

        def put_many(self, items):
            raise ConnectionError("cache down")

    install_titan_fake(client)
    e = embedder(client, cache=Broken())
    assert len(e.embed(["x", "y"])) == 2
    assert e.stats.cache_errors == 2


def test_any_object_with_the_cache_interface_is_used(client):
    class DictCache:
        def __init__(self):
            self.data, self.gets, self.puts = {}, [], []

        def get_many(self, keys):
            self.gets.append(list(keys))
            return {k: self.data[k] for k in keys if k in self.data}

        def put_many(self, items):
            self.puts.append(dict(items))
            self.data.update(items)

    fake = install_titan_fake(client)
    cache = DictCache()
    embedder(client, cache=cache).embed(["p", "q"])
    embedder(client, cache=cache).embed(["q", "p"])
    assert len(fake.calls) == 2 and len(cache.puts) == 1 and len(cache.gets) == 2


# -- configuration and isolation ---------------------------------------------------------------


def test_botocore_paces_but_does_not_retry_under_the_embedders_own_retries():
    assert RETRIES["bedrock-runtime"] == {"mode": "adaptive", "total_max_attempts": 1}


def test_no_request_leaves_the_process(client):
    install_titan_fake(client)
    with pytest.raises(NetworkBlocked):  # an operation the fake does not serve hits the guard
        client.converse(modelId=TITAN_V2_MODEL_ID, messages=[{"role": "user", "content": [{"text": "hi"}]}])
