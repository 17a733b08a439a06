"""SigV4 signing, checked two ways:

1. AWS's published test-suite vectors (aws-sig-v4-test-suite: get-vanilla,
   get-vanilla-query-order-key-case, post-vanilla), signed by `AwsSigV4Auth` at their fixed time.
2. A small independent SigV4 written here from the steps in AWS's documentation (canonical
   request, string to sign, derived key), which itself reproduces the published vectors, used to
   verify what the store actually sends for execute-api: repeated `ns` parameters, characters that
   need encoding, JSON bodies, a session token and `X-Tenant-Id`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime
from urllib.parse import parse_qsl, quote, urlsplit

import botocore.auth
import httpx
import pytest
from botocore.credentials import Credentials
from langgraph.store.base import GetOp, ListNamespacesOp, PutOp, SearchOp

from memsvc_client import AwsSigV4Auth, MemsvcStore

ACCESS_KEY = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SUITE_TIME = datetime(2015, 8, 30, 12, 36, 0)  # 20150830T123600Z, the suite's clock
SUITE_CREDENTIAL = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request"


@pytest.fixture
def frozen_clock(monkeypatch):
    """botocore's signer reads the time through botocore.auth.get_current_datetime."""
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: SUITE_TIME)


# -- an independent SigV4 (AWS docs: "Create a signed AWS API request") ------------------------


def _uri_encode(s: str) -> str:
    return quote(s, safe="-_.~")


def reference_signature(
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes,
    *,
    secret_key: str,
    region: str,
    service: str,
    amz_date: str,
) -> tuple[str, str]:
    """(signed headers, signature) for a request as the receiving side sees it.
    `headers` are the headers to sign, by name (any case)."""
    parts = urlsplit(url)
    # canonical URI: every segment URI-encoded (again; twice overall for non-S3 services)
    canonical_uri = "/".join(_uri_encode(segment) for segment in (parts.path or "/").split("/"))
    # canonical query: decode what was sent, encode per RFC 3986, sort by name then value
    pairs = sorted((_uri_encode(k), _uri_encode(v)) for k, v in parse_qsl(parts.query, keep_blank_values=True))
    canonical_query = "&".join(f"{k}={v}" for k, v in pairs)
    lowered = {name.lower(): " ".join(value.strip().split()) for name, value in headers.items()}
    names = sorted(lowered)
    canonical_headers = "".join(f"{name}:{lowered[name]}\n" for name in names)
    signed_headers = ";".join(names)
    canonical_request = "\n".join(
        [method, canonical_uri, canonical_query, canonical_headers, signed_headers, hashlib.sha256(body).hexdigest()]
    )
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
    )

    def mac(key: bytes, msg: str) -> bytes:
        return hmac.new(key, msg.encode(), hashlib.sha256).digest()

    key = mac(mac(mac(mac(f"AWS4{secret_key}".encode(), amz_date[:8]), region), service), "aws4_request")
    return signed_headers, hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()


SUITE = [  # (method, url, published signature)
    ("GET", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    (
        "GET",
        "https://example.amazonaws.com/?Param2=value2&Param1=value1",
        "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
    ),
    ("POST", "https://example.amazonaws.com/", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
]


@pytest.mark.parametrize(("method", "url", "signature"), SUITE)
def test_reference_implementation_reproduces_the_aws_test_suite(method, url, signature):
    headers = {"Host": "example.amazonaws.com", "X-Amz-Date": "20150830T123600Z"}
    assert reference_signature(
        method, url, headers, b"", secret_key=SECRET_KEY, region="us-east-1", service="service",
        amz_date="20150830T123600Z",
    ) == ("host;x-amz-date", signature)


@pytest.mark.parametrize(("method", "url", "signature"), SUITE)
def test_signer_matches_the_aws_test_suite(frozen_clock, method, url, signature):
    request = httpx.Request(method, url)
    AwsSigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "us-east-1", service="service").sign(request)
    assert request.headers["x-amz-date"] == "20150830T123600Z"
    assert request.headers["authorization"] == (
        f"{SUITE_CREDENTIAL}, SignedHeaders=host;x-amz-date, Signature={signature}"
    )


# -- what the store sends ---------------------------------------------------------------------


def verify(request: httpx.Request, *, secret_key: str, region: str) -> dict[str, str]:
    """Check a captured request's signature the way the receiving side would; return its parts."""
    scheme, _, rest = request.headers["authorization"].partition(" ")
    assert scheme == "AWS4-HMAC-SHA256"
    fields = dict(part.strip().split("=", 1) for part in rest.split(","))
    access_key, date, region_, service, terminator = fields["Credential"].split("/")
    assert (region_, service, terminator) == (region, "execute-api", "aws4_request")
    amz_date = request.headers["x-amz-date"]
    assert amz_date.startswith(date)
    names = fields["SignedHeaders"].split(";")
    signed, signature = reference_signature(
        request.method,
        str(request.url),
        {name: request.headers[name] for name in names},
        request.content,
        secret_key=secret_key,
        region=region,
        service="execute-api",
        amz_date=amz_date,
    )
    assert signed == fields["SignedHeaders"]
    assert signature == fields["Signature"], "signature does not verify"
    return {"access_key": access_key, **fields}


def test_store_requests_verify_against_the_reference(frozen_clock):
    captured: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        captured.append(request)
        if request.method == "GET" and request.url.path.endswith("/namespaces"):
            return httpx.Response(200, json={"namespaces": []})
        if request.method == "GET":
            missing = {"code": "NOT_FOUND", "message": "no", "retryable": False, "details": {}}
            return httpx.Response(404, json={"error": missing})
        if request.method == "POST":
            return httpx.Response(200, json={"items": []})
        return httpx.Response(200 if request.method == "PUT" else 204, json={} if request.method == "PUT" else None)

    creds = Credentials("ASIAEXAMPLE", SECRET_KEY, token="session/token+with=odd chars")
    store = MemsvcStore(
        url="https://abc123.execute-api.eu-west-1.amazonaws.com/prod",
        credentials=creds,
        tenant_id="acme",
        transport=httpx.MockTransport(answer),
    )
    namespace = ("user", "a b", "*", "é+&=", "x/y")
    store.batch(
        [
            GetOp(namespace, "key with spaces/and+plus"),
            SearchOp(("user",), filter={"lang": "ü"}, query="naïve query"),
            ListNamespacesOp(),
        ]
    )
    store.put(namespace, "k", {"text": "héllo wörld", "n": 1})
    store.delete(namespace, "k")
    store.list_namespaces(prefix=("user", "*"), suffix=("a b",), max_depth=3)

    assert len(captured) == 6
    for request in captured:
        assert request.url.path.startswith("/prod/v1/memories")
        parts = verify(request, secret_key=SECRET_KEY, region="eu-west-1")
        assert parts["access_key"] == "ASIAEXAMPLE"
        signed = parts["SignedHeaders"].split(";")
        assert {"host", "x-amz-date", "x-amz-security-token", "x-tenant-id"} <= set(signed)
        assert request.headers["x-amz-security-token"] == "session/token+with=odd chars"
        assert request.headers["x-tenant-id"] == "acme"
        if request.content:
            assert "content-type" in signed
    get = captured[0]
    assert parse_qsl(get.url.query.decode()) == [
        *(("ns", s) for s in namespace), ("key", "key with spaces/and+plus"), ("refresh_ttl", "true")
    ]
    put = next(r for r in captured if r.method == "PUT")
    assert json.loads(put.content)["value"] == {"text": "héllo wörld", "n": 1}


def test_a_tampered_request_does_not_verify(frozen_clock):
    request = httpx.Request("GET", "https://abc.execute-api.us-east-1.amazonaws.com/v1/memories?ns=user&ns=a&key=k")
    AwsSigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "us-east-1").sign(request)
    verify(request, secret_key=SECRET_KEY, region="us-east-1")
    moved = httpx.Request("GET", "https://abc.execute-api.us-east-1.amazonaws.com/v1/memories?ns=user&ns=b&key=k",
                          headers=request.headers)
    with pytest.raises(AssertionError, match="does not verify"):
        verify(moved, secret_key=SECRET_KEY, region="us-east-1")


def test_refreshable_credentials_are_frozen_per_request(frozen_clock):
    class Rotating:
        """Stands in for botocore's RefreshableCredentials."""

        def __init__(self):
            self.n = 0

        def get_frozen_credentials(self):
            self.n += 1
            return Credentials(f"AKID{self.n}", SECRET_KEY).get_frozen_credentials()

    auth = AwsSigV4Auth(Rotating(), "us-east-1")
    first, second = (httpx.Request("GET", "https://abc.execute-api.us-east-1.amazonaws.com/") for _ in range(2))
    auth.sign(first)
    auth.sign(second)
    assert "Credential=AKID1/" in first.headers["authorization"]
    assert "Credential=AKID2/" in second.headers["authorization"]
