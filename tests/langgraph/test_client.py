"""The client without a server: construction, the requests each op becomes, retries and errors.
Requests go to an in-process `httpx.MockTransport`; nothing touches the network."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp

import memsvc_client.store as lg
from memsvc_client import (
    AsyncMemsvcStore,
    AuthError,
    AwsSigV4Auth,
    ClientSettings,
    InvalidArgumentError,
    MemsvcClient,
    MemsvcError,
    MemsvcStore,
    NotFoundError,
    TransientError,
)
from memsvc_client.store import minutes_to_ttl_seconds

URL = "http://memsvc.test"
MEMORY = {
    "id": "m1",
    "namespace": ["user", "alice"],
    "key": "k",
    "value": {"a": 1},
    "attributes": None,
    "created_at": "2026-01-01T00:00:00.000000Z",
    "updated_at": "2026-01-02T03:04:05.123456Z",
    "expires_at": None,
    "version": 2,
}


class Recorder:
    """A MockTransport handler: answers from a list (or a function) and records each request."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer(request) if callable(answer) else answer

    def query(self, i=-1) -> list[tuple[str, str]]:
        return parse_qsl(urlsplit(str(self.requests[i].url)).query, keep_blank_values=True)

    def body(self, i=-1) -> dict:
        return json.loads(self.requests[i].content)


def ok(payload=None, status=200):
    return httpx.Response(status, json=payload) if payload is not None else httpx.Response(status)


def error(status, code, *, retryable=False, details=None, headers=None):
    body = {"error": {"code": code, "message": f"{code} happened", "retryable": retryable, "details": details or {}}}
    return httpx.Response(status, json=body, headers=headers)


def make(recorder, **kw) -> MemsvcStore:
    kw.setdefault("url", URL)
    kw.setdefault("token", "tok")
    return MemsvcStore(transport=httpx.MockTransport(recorder), backoff=0.001, **kw)


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    """Back-off delays are recorded, not slept."""
    delays: list[float] = []
    monkeypatch.setattr(lg, "_sleep", delays.append)
    return delays


# -- construction ---------------------------------------------------------------------------


def test_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("MEMORY_SERVICE_URL", URL + "/")
    monkeypatch.setenv("MEMORY_SERVICE_TOKEN", "env-token")
    assert ClientSettings.from_env() == ClientSettings(url=URL + "/", token="env-token")
    rec = Recorder(ok(MEMORY))
    store = MemsvcStore(transport=httpx.MockTransport(rec))
    store.get(("user", "alice"), "k")
    assert str(rec.requests[0].url).startswith(URL + "/v1/memories?")
    assert rec.requests[0].headers["authorization"] == "Bearer env-token"


def test_explicit_arguments_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("MEMORY_SERVICE_URL", "http://elsewhere")
    monkeypatch.setenv("MEMORY_SERVICE_TOKEN", "env-token")
    rec = Recorder(ok(MEMORY))
    calls = iter(["t1", "t2"])
    store = make(rec, token=lambda: next(calls), tenant_id="acme", headers={"User-Agent": "mine"})
    store.get(("user", "alice"), "k")
    store.get(("user", "alice"), "k")
    assert [r.headers["authorization"] for r in rec.requests] == ["Bearer t1", "Bearer t2"]
    assert rec.requests[0].url.host == "memsvc.test"
    assert rec.requests[0].headers["x-tenant-id"] == "acme"
    assert rec.requests[0].headers["user-agent"] == "mine"


def test_missing_configuration_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("MEMORY_SERVICE_URL", raising=False)
    monkeypatch.delenv("MEMORY_SERVICE_TOKEN", raising=False)
    with pytest.raises(ValueError, match="MEMORY_SERVICE_URL"):
        MemsvcStore()
    with pytest.raises(ValueError, match="no credentials"):
        MemsvcStore(url="http://127.0.0.1:8000")


def test_an_execute_api_url_without_a_token_means_sigv4(monkeypatch, tmp_path):
    monkeypatch.delenv("MEMORY_SERVICE_TOKEN", raising=False)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    store = MemsvcStore(url="https://abc123.execute-api.eu-west-1.amazonaws.com/prod")
    assert isinstance(store.auth, AwsSigV4Auth)
    assert (store.auth.region, store.auth.service) == ("eu-west-1", "execute-api")
    assert store.auth.credentials.access_key == "AKIDEXAMPLE"  # botocore's default chain
    # a custom domain needs the region named
    with pytest.raises(ValueError, match="region"):
        MemsvcStore(url="https://memory.example.com", credentials=store.auth.credentials)
    explicit = MemsvcStore(url="https://memory.example.com", aws_region="us-west-2")
    assert explicit.auth.region == "us-west-2"


@pytest.mark.parametrize(
    ("url", "region"),
    [
        ("https://abc.execute-api.us-east-1.amazonaws.com", "us-east-1"),
        ("https://abc.execute-api.ap-southeast-2.amazonaws.com/prod/", "ap-southeast-2"),
        ("https://abc-vpce-0123.execute-api.eu-central-1.vpce.amazonaws.com/x", "eu-central-1"),
        ("https://abc.execute-api.cn-north-1.amazonaws.com.cn", "cn-north-1"),
        ("https://memory.example.com", None),
        ("http://127.0.0.1:8000", None),
        ("https://execute-api.us-east-1.amazonaws.com.evil.com", None),
    ],
)
def test_region_from_url(url, region):
    assert lg.aws_region_from_url(url) == region


def test_ttl_conversion():
    assert minutes_to_ttl_seconds(None) is None
    assert minutes_to_ttl_seconds(0.02) == 2  # 1.2 s, rounded up
    assert minutes_to_ttl_seconds(1 / 60) == 1
    assert minutes_to_ttl_seconds(5 / 60) == 5
    assert minutes_to_ttl_seconds(0.0001) == 1  # at least a second
    assert minutes_to_ttl_seconds(90) == 5400
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            minutes_to_ttl_seconds(bad)


# -- the requests each op becomes -----------------------------------------------------------


def test_get_request_and_item():
    rec = Recorder(ok(MEMORY))
    store = make(rec)
    item = store.get(("user", "a b", "*", "é+&"), "k/1")
    assert rec.requests[0].method == "GET"
    assert rec.query() == [
        ("ns", "user"), ("ns", "a b"), ("ns", "*"), ("ns", "é+&"), ("key", "k/1"), ("refresh_ttl", "true")
    ]
    assert "+" not in rec.requests[0].url.query.decode()  # spaces as %20 (SigV4's canonical form)
    assert item.value == {"a": 1} and item.namespace == ("user", "alice")
    assert item.updated_at.isoformat() == "2026-01-02T03:04:05.123456+00:00"
    store.get(("user",), "k", refresh_ttl=False)
    assert ("refresh_ttl", "true") not in rec.query()


def test_get_missing_is_none_but_other_errors_raise():
    store = make(Recorder(error(404, "NOT_FOUND")))
    assert store.get(("user",), "k") is None
    store = make(Recorder(error(403, "FORBIDDEN")))
    with pytest.raises(AuthError):
        store.get(("user",), "k")


def test_put_and_delete_requests():
    rec = Recorder(ok({"id": "x"}))
    store = make(rec, ttl={"default_ttl": 0.5})
    store.put(("user", "a"), "k", {"text": "hi"})
    assert rec.requests[-1].method == "PUT" and rec.requests[-1].headers["content-type"] == "application/json"
    assert rec.body() == {
        "namespace": ["user", "a"], "key": "k", "value": {"text": "hi"}, "ttl_seconds": 30, "sync_index": True
    }
    store.put(("user", "a"), "k", {"text": "hi"}, index=False, ttl=None)
    assert rec.body() == {
        "namespace": ["user", "a"], "key": "k", "value": {"text": "hi"}, "index_fields": False, "sync_index": True
    }
    store.put(("user", "a"), "k", {"text": "hi"}, index=["text", "arr[*].x"], ttl=2)
    assert rec.body()["index_fields"] == ["text", "arr[*].x"] and rec.body()["ttl_seconds"] == 120

    rec2 = Recorder(ok(status=204))
    store2 = make(rec2, read_your_writes=False)
    store2.batch([PutOp(("user", "a"), "k", {"x": 1})])
    store2.delete(("user", "a"), "k")
    assert "sync_index" not in json.loads(rec2.requests[0].content)
    assert rec2.requests[1].method == "DELETE" and rec2.query(1) == [("ns", "user"), ("ns", "a"), ("key", "k")]


def test_search_request_and_items():
    item = {**MEMORY, "score": 0.75}
    rec = Recorder(ok({"items": [item]}))
    store = make(rec, ttl={"refresh_on_read": False})
    found = store.search(("user",), query="q", filter={"meta": {"lang": "en"}, "n": {"$gt": 1}}, limit=5, offset=3)
    assert rec.body() == {
        "namespace_prefix": ["user"],
        "query": "q",
        "filter": {"meta.lang": "en", "n": {"$gt": 1}},
        "limit": 5,
        "offset": 3,
    }
    assert found[0].score == 0.75 and found[0].key == "k"
    store.search((), query="  ", refresh_ttl=True)
    assert rec.body() == {"namespace_prefix": [], "refresh_ttl": True, "limit": 10, "offset": 0}


def test_search_mode_goes_with_a_query_only():
    rec = Recorder(ok({"items": []}))
    store = make(rec, search_mode="semantic")
    store.search(("user",), query="q")
    assert rec.body()["mode"] == "semantic"
    store.search(("user",), filter={"n": 1})
    assert "mode" not in rec.body()  # the API refuses `mode` without a query


def test_search_pages_past_the_api_limit():
    def answer(request):
        body = json.loads(request.content)
        start = body["offset"]
        n = max(0, min(body["limit"], 230 - start))
        return ok({"items": [{**MEMORY, "key": f"k{start + i}", "score": None} for i in range(n)]})

    rec = Recorder(answer)
    store = make(rec)
    found = store.search(("user",), limit=250, offset=5)
    assert [(r["limit"], r["offset"]) for r in map(json.loads, (q.content for q in rec.requests))] == [
        (100, 5), (100, 105), (50, 205)
    ]
    assert [i.key for i in found] == [f"k{i}" for i in range(5, 230)]


def test_list_namespaces_request():
    rec = Recorder(ok({"namespaces": [["user", "a", "b"]]}))
    store = make(rec)
    found = store.list_namespaces(prefix=("user", "*"), suffix=("b",), max_depth=3, limit=7, offset=2)
    assert found == [("user", "a", "b")]
    assert rec.query() == [
        ("prefix", "user"), ("prefix", "*"), ("suffix", "b"), ("max_depth", "3"), ("limit", "7"), ("offset", "2")
    ]
    store.batch([ListNamespacesOp((MatchCondition("prefix", ("user", "*")), MatchCondition("prefix", ("*", "a"))))])
    assert rec.query() == [("prefix", "user"), ("prefix", "a"), ("limit", "100"), ("offset", "0")]
    n = len(rec.requests)
    clash = (MatchCondition("suffix", ("x",)), MatchCondition("suffix", ("y",)))
    assert store.batch([ListNamespacesOp(clash)]) == [[]] and len(rec.requests) == n  # nothing to ask


def test_list_namespaces_max_depth_beyond_the_tenant_limit():
    rec = Recorder(error(400, "INVALID_ARGUMENT", details={"field": "max_depth"}), ok({"namespaces": [["user", "a"]]}))
    store = make(rec)
    assert store.list_namespaces(max_depth=99) == [("user", "a")]
    assert ("max_depth", "99") in rec.query(0) and not any(k == "max_depth" for k, _ in rec.query(1))
    store = make(Recorder(error(400, "INVALID_ARGUMENT", details={"field": "max_depth"})))
    with pytest.raises(InvalidArgumentError):
        store.list_namespaces(max_depth=0)


def test_unknown_ops_are_refused():
    with pytest.raises(ValueError, match="Unknown operation"):
        make(Recorder(ok({}))).batch([("not", "an", "op")])


# -- batch concurrency ----------------------------------------------------------------------


def test_batch_sends_independent_ops_concurrently():
    lock, state = threading.Lock(), {"now": 0, "max": 0}

    def slow(request):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return ok(MEMORY)

    store = make(Recorder(slow), max_concurrency=4)
    results = store.batch([GetOp(("user",), f"k{i}") for i in range(8)])
    assert len(results) == 8 and state["max"] == 4  # never more than max_concurrency in flight


def test_abatch_sends_independent_ops_concurrently():
    state = {"now": 0, "max": 0}

    async def slow(request):
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.05)
        state["now"] -= 1
        return ok(MEMORY)

    store = MemsvcStore(url=URL, token="t", async_transport=httpx.MockTransport(slow), max_concurrency=5)
    results = asyncio.run(store.abatch([GetOp(("user",), f"k{i}") for i in range(10)]))
    assert len(results) == 10 and state["max"] == 5


def test_concurrent_async_calls_share_one_limit():
    """Many coroutines each making their own call (LangGraph's async suite makes 6,000 at once)
    keep at most `max_concurrency` requests in flight per event loop. Without that shared limit
    they all queued inside httpcore's pool, which rescans its whole queue on every change and
    spun a core for minutes. Checked in several fresh event loops in turn, on one store."""
    state = {"now": 0, "max": 0}

    async def answer(request):
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        for _ in range(3):
            await asyncio.sleep(0)  # let every other waiting coroutine try to get in
        state["now"] -= 1
        return ok(MEMORY)

    store = MemsvcStore(url=URL, token="t", async_transport=httpx.MockTransport(answer), max_concurrency=4)

    async def many():
        items = await asyncio.gather(*(store.aget(("user",), f"k{i}") for i in range(200)))
        assert all(item.value == {"a": 1} for item in items)

    for _ in range(3):
        asyncio.run(many())
    assert state == {"now": 0, "max": 4}


def test_reads_go_before_the_writes_they_could_see():
    order: list[str] = []

    def answer(request):
        order.append(f"{request.method} {dict(parse_qsl(request.url.query.decode())).get('key', '')}")
        if request.method == "GET":
            time.sleep(0.05)  # a slow read must still come before the put on its key
            return error(404, "NOT_FOUND")
        return ok({"id": "x"})

    store = make(Recorder(answer))
    store.batch([PutOp(("user",), "a", {"v": 1}), GetOp(("user",), "a"), PutOp(("user", "x"), "b", {"v": 1})])
    assert order.index("PUT ") > order.index("GET a")  # the put on "a" waited for the get
    assert order.count("PUT ") == 2


# -- retries and errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        error(503, "EMBEDDING_FAILED", retryable=True),
        error(502, "PROVIDER_ERROR", retryable=True),
        httpx.Response(504, text="gateway timeout"),
        error(409, "CONFLICT", retryable=True),
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
    ],
)
def test_retryable_failures_are_retried_with_backoff(failure, no_sleep):
    rec = Recorder(failure, failure, ok(MEMORY))
    assert make(rec).get(("user",), "k").value == {"a": 1}
    assert len(rec.requests) == 3
    # backoff=0.001: the n-th wait is jittered within [0.001 * 2**n / 2, 0.001 * 2**n]
    assert len(no_sleep) == 2 and 0.0005 <= no_sleep[0] <= 0.001 <= no_sleep[1] <= 0.002


def test_retry_after_is_honoured(no_sleep):
    rec = Recorder(error(429, "RATE_LIMITED", retryable=True, headers={"Retry-After": "2"}), ok(MEMORY))
    make(rec).get(("user",), "k")
    assert no_sleep == [2.0]
    # longer than max_retry_after: give up at once rather than wait
    rec = Recorder(error(429, "RATE_LIMITED", retryable=True, headers={"Retry-After": "3600"}), ok(MEMORY))
    with pytest.raises(TransientError) as info:
        make(rec).get(("user",), "k")
    assert info.value.retry_after == 3600 and len(rec.requests) == 1


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (400, "INVALID_ARGUMENT", InvalidArgumentError),
        (401, "UNAUTHORIZED", AuthError),
        (403, "FORBIDDEN", AuthError),
        (404, "NOT_FOUND", NotFoundError),
        (413, "CONTENT_TOO_LONG", InvalidArgumentError),
        (500, "INTERNAL", MemsvcError),
    ],
)
def test_other_errors_are_not_retried(status, code, kind):
    rec = Recorder(error(status, code, details={"field": "x"}), ok({}))
    with pytest.raises(kind) as info:
        make(rec).put(("user",), "k", {"a": 1})
    assert len(rec.requests) == 1
    exc = info.value
    assert (exc.code, exc.status, exc.details, exc.message) == (code, status, {"field": "x"}, f"{code} happened")
    assert not isinstance(exc, TransientError)


def test_retries_give_up_after_max_retries(no_sleep):
    rec = Recorder(httpx.ConnectError("refused"))
    with pytest.raises(TransientError) as info:
        make(rec, max_retries=2).get(("user",), "k")
    assert info.value.code == "UNAVAILABLE" and info.value.status is None
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert len(rec.requests) == 3


def test_non_json_error_bodies():
    rec = Recorder(httpx.Response(403, json={"message": "Missing Authentication Token"}))
    with pytest.raises(AuthError) as info:
        make(rec).get(("user",), "k")
    assert info.value.code == "FORBIDDEN" and info.value.message == "Missing Authentication Token"


def test_async_retries():
    calls = []

    async def answer(request):
        calls.append(request)
        return error(503, "EMBEDDING_FAILED", retryable=True) if len(calls) < 3 else ok(MEMORY)

    store = MemsvcStore(url=URL, token="t", async_transport=httpx.MockTransport(answer), backoff=0.001)
    assert asyncio.run(store.aget(("user",), "k")).value == {"a": 1}
    assert len(calls) == 3
    store2 = MemsvcStore(url=URL, token="t", async_transport=httpx.MockTransport(lambda r: error(404, "NOT_FOUND")))
    assert asyncio.run(store2.aget(("user",), "k")) is None
    bad = httpx.MockTransport(lambda r: error(400, "INVALID_ARGUMENT"))
    store3 = MemsvcStore(url=URL, token="t", async_transport=bad)
    with pytest.raises(InvalidArgumentError):
        asyncio.run(store3.abatch([SearchOp(("user",))]))


def test_non_finite_filter_operands_go_tagged():
    rec = Recorder(ok({"items": []}))
    make(rec).search(("user",), filter={"p": {"$lt": float("inf"), "$gt": float("-inf")}, "q": float("nan"),
                                        "r": {"$in": [float("nan"), 1]}})
    assert rec.body()["filter"] == {
        "p": {"$lt": {"$numberDouble": "Infinity"}, "$gt": {"$numberDouble": "-Infinity"}},
        "q": {"$numberDouble": "NaN"},
        "r": {"$in": [{"$numberDouble": "NaN"}, 1]},
    }


@pytest.mark.parametrize("key", ["", "a.", ".a", "a..b", "access') = 'public' OR json_extract(value, '$."])
def test_an_invalid_filter_key_is_langgraphs_value_error_and_sends_nothing(key):
    rec = Recorder(ok({"items": []}))
    store = make(rec)
    with pytest.raises(ValueError, match="^Invalid filter key"):
        store.search(("user",), filter={key: 1})
    with pytest.raises(ValueError, match="^Invalid filter key"):
        store.batch([PutOp(("user", "x"), "k", {"a": 1}), SearchOp(("user",), filter={"meta": {key: 1}})])
    assert rec.requests == []


def test_ttl_sweeper_methods_as_langgraphs_stores_have_them():
    rec = Recorder(ok({**MEMORY, "expires_at": "2000-01-01T00:00:00Z"}))
    store = make(rec)
    assert store.start_ttl_sweeper().result(timeout=0) is None
    assert store.stop_ttl_sweeper() is True and store.stop_ttl_sweeper(timeout=1) is True
    assert store.sweep_ttl() == 0
    store.get(("user", "alice"), "k")  # seen with an expiry that has passed
    assert store.sweep_ttl() == 1 and store.sweep_ttl() == 0

    async def on_async():
        astore = AsyncMemsvcStore(url=URL, token="t", transport=httpx.MockTransport(rec))
        task = await astore.start_ttl_sweeper()
        await task
        assert await astore.sweep_ttl() == 0 and await astore.stop_ttl_sweeper() is True
        with pytest.raises(asyncio.InvalidStateError):
            astore.get(("user", "alice"), "k")  # would block this loop
        assert (await asyncio.to_thread(astore.get, ("user", "alice"), "k")).key == "k"  # other threads may

    asyncio.run(on_async())


def test_health_answers_an_unhealthy_services_report_at_once_and_other_503s_stay_errors(no_sleep):
    report = {"status": "unhealthy", "components": {"store": {"status": "unhealthy", "latency_ms": 1.0}}}
    rec = Recorder(httpx.Response(503, json=report))
    client = MemsvcClient(store=make(rec))
    assert client.health() == report and len(rec.requests) == 1 and no_sleep == []
    with pytest.raises(MemsvcError):
        client.get(("user", "alice"), "k")  # the same 503 on another route is an error, retried first
    assert len(rec.requests) > 2
