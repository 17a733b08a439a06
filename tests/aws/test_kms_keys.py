"""KmsKeyProvider on moto's KMS, and the Sealer end to end over it."""

from __future__ import annotations

from types import SimpleNamespace

import threading

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError
from moto import mock_aws

from memsvc.adapters.aws.kms_keys import ENCRYPTION_CONTEXT_KEY, KmsKeyProvider
from memsvc.core.errors import InternalError, ProviderError, RateLimited
from memsvc.service.sealing import Sealer
from tests.fakes.aws_stack import _no_rsa_for_symmetric_keys, moto_client

REGION = "us-east-1"


@pytest.fixture
def aws(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws(), _no_rsa_for_symmetric_keys():
        yield


@pytest.fixture
def kms(aws):
    return moto_client("kms")


@pytest.fixture
def key_id(kms):
    return kms.create_key(Description="memsvc test CMK")["KeyMetadata"]["KeyId"]


class Calls:
    """Counts a client's calls per operation (a `before-call` hook that lets the call through)."""

    def __init__(self, client):
        self.counts: dict[str, int] = {}
        self.params: list[tuple[str, dict]] = []
        client.meta.events.register("before-call.kms", self._count)
        client.meta.events.register("before-parameter-build.kms", self._params)

    def _count(self, model, **_):
        self.counts[model.name] = self.counts.get(model.name, 0) + 1

    def _params(self, model, params, **_):
        self.params.append((model.name, dict(params)))

    def __getitem__(self, op: str) -> int:
        return self.counts.get(op, 0)


def fail_kms(client, operation: str, code: str, status: int, message: str = "injected"):
    """Answer `operation` with a KMS error (a before-call short-circuit; moto never sees it)."""

    def answer(params, **_):
        parsed = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
        return AWSResponse(params["url"], status, {}, None), parsed

    client.meta.events.register_first(f"before-call.kms.{operation}", answer)


class KeyRows:
    """The two ItemStore methods the Sealer uses, in memory."""

    def __init__(self):
        self.rows: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def get_wrapped_key(self, tenant):
        return self.rows.get(tenant)

    def put_wrapped_key_if_absent(self, tenant, wrapped):
        with self._lock:
            return self.rows.setdefault(tenant, wrapped)


# -- the provider ------------------------------------------------------------------------------


def test_round_trip(kms, key_id):
    keys = KmsKeyProvider(kms, key_id)
    plaintext, wrapped = keys.generate_data_key("acme")
    assert len(plaintext) == 32 and wrapped != plaintext and plaintext not in wrapped
    assert keys.decrypt_data_key("acme", wrapped) == plaintext


def test_requests_name_the_key_spec_the_tenant_context_and_pin_the_key(kms, key_id):
    calls = Calls(kms)
    keys = KmsKeyProvider(kms, key_id)
    _, wrapped = keys.generate_data_key("acme")
    keys.decrypt_data_key("acme", wrapped)
    (op1, gdk), (op2, dec) = calls.params
    assert op1 == "GenerateDataKey" and gdk == {
        "KeyId": key_id, "KeySpec": "AES_256", "EncryptionContext": {ENCRYPTION_CONTEXT_KEY: "acme"}}
    assert op2 == "Decrypt" and dec == {
        "CiphertextBlob": wrapped, "KeyId": key_id, "EncryptionContext": {ENCRYPTION_CONTEXT_KEY: "acme"}}


def test_each_tenant_gets_its_own_key(kms, key_id):
    keys = KmsKeyProvider(kms, key_id)
    assert keys.generate_data_key("acme")[0] != keys.generate_data_key("globex")[0]


def test_a_wrapped_key_does_not_open_for_another_tenant(kms, key_id):
    keys = KmsKeyProvider(kms, key_id)
    _, wrapped = keys.generate_data_key("acme")
    with pytest.raises(ProviderError) as info:
        keys.decrypt_data_key("globex", wrapped)
    assert info.value.retryable is False  # a moved wrapped key never opens; retrying is pointless
    assert ProviderError.retryable is True  # the instance flag did not leak into the class


def test_a_wrapped_key_from_another_cmk_is_refused(kms, key_id):
    other = kms.create_key(Description="someone else's CMK")["KeyMetadata"]["KeyId"]
    _, wrapped = KmsKeyProvider(kms, other).generate_data_key("acme")
    with pytest.raises(ProviderError):
        KmsKeyProvider(kms, key_id).decrypt_data_key("acme", wrapped)


def test_an_alias_works_as_the_key_id(kms, key_id):
    kms.create_alias(AliasName="alias/memsvc-test", TargetKeyId=key_id)
    keys = KmsKeyProvider(kms, "alias/memsvc-test")
    plaintext, wrapped = keys.generate_data_key("acme")
    assert keys.decrypt_data_key("acme", wrapped) == plaintext


def test_throttling_is_rate_limited(kms, key_id):
    fail_kms(kms, "GenerateDataKey", "ThrottlingException", 400, "Rate exceeded")
    with pytest.raises(RateLimited) as info:
        KmsKeyProvider(kms, key_id).generate_data_key("acme")
    assert info.value.retryable and info.value.retry_after_seconds >= 1


@pytest.mark.parametrize(
    "code,status", [("KMSInternalException", 500), ("DependencyTimeoutException", 503), ("AccessDeniedException", 400)]
)
def test_other_kms_failures_are_retryable_provider_errors(kms, key_id, code, status):
    keys = KmsKeyProvider(kms, key_id)
    _, wrapped = keys.generate_data_key("acme")
    fail_kms(kms, "Decrypt", code, status, f"key {key_id} is unhappy")
    with pytest.raises(ProviderError) as info:
        keys.decrypt_data_key("acme", wrapped)
    body = info.value.to_body()["error"]
    assert body["code"] == "PROVIDER_ERROR" and body["retryable"] is True
    assert key_id not in str(body)  # neither the key id nor anything KMS said is passed on


def test_a_missing_key_is_a_provider_error(kms, key_id):
    # (moto does not refuse a disabled key, so a deleted-or-never-made one stands in for it)
    with pytest.raises(ProviderError):
        KmsKeyProvider(kms, "00000000-0000-0000-0000-000000000000").generate_data_key("acme")


def test_an_unreachable_kms_is_a_provider_error(kms, key_id):
    def unreachable(params, **_):
        raise EndpointConnectionError(endpoint_url=params["url"])

    kms.meta.events.register_first("before-call.kms.GenerateDataKey", unreachable)
    with pytest.raises(ProviderError):
        KmsKeyProvider(kms, key_id).generate_data_key("acme")


def test_a_key_id_is_required(kms):
    with pytest.raises(ValueError):
        KmsKeyProvider(kms, "")


# -- the Sealer over KMS -----------------------------------------------------------------------


def seal(sealer: Sealer, tenant, ns, key, value) -> bytes:
    return sealer.seal_item(tenant, ns, key, 1, value=value, attributes=None).value_ct


def open_value(sealer: Sealer, tenant, ns, key, blob: bytes):
    return sealer.open_value(SimpleNamespace(tenant=tenant, namespace=ns, key=key, version=1, value_ct=blob,
                                             attributes_ct=None))


def test_sealer_end_to_end_decrypts_only_on_a_cache_miss(kms, key_id):
    calls = Calls(kms)
    rows = KeyRows()
    keys = KmsKeyProvider(kms, key_id)
    ns = ("users", "alice")

    writer = Sealer(rows, keys)
    blob = seal(writer, "acme", ns, "k1", {"text": "likes tea"})
    assert open_value(writer, "acme", ns, "k1", blob) == {"text": "likes tea"}
    assert (calls["GenerateDataKey"], calls["Decrypt"]) == (1, 0)  # the new key stayed cached
    assert set(rows.rows) == {"acme"} and b"likes tea" not in blob

    reader = Sealer(rows, keys)  # a cold start: the wrapped key is in the store, not in memory
    for _ in range(3):
        assert open_value(reader, "acme", ns, "k1", blob) == {"text": "likes tea"}
    assert (calls["GenerateDataKey"], calls["Decrypt"]) == (1, 1)

    expiring = Sealer(rows, keys, cache_seconds=0)  # every use is a miss
    open_value(expiring, "acme", ns, "k1", blob)
    open_value(expiring, "acme", ns, "k1", blob)
    assert calls["Decrypt"] == 3


def test_sealer_tenants_have_separate_keys(kms, key_id):
    rows = KeyRows()
    sealer = Sealer(rows, KmsKeyProvider(kms, key_id))
    blob = seal(sealer, "acme", ("a",), "k", {"v": 1})
    seal(sealer, "globex", ("a",), "k", {"v": 2})
    assert rows.rows["acme"] != rows.rows["globex"]
    with pytest.raises(InternalError):  # another tenant's key does not open acme's data
        open_value(sealer, "globex", ("a",), "k", blob)


def test_sealer_losing_the_key_creation_race_unwraps_the_winner(kms, key_id):
    calls = Calls(kms)
    rows = KeyRows()
    keys = KmsKeyProvider(kms, key_id)
    winner_plain, winner_wrapped = keys.generate_data_key("acme")
    rows.rows["acme"] = winner_wrapped

    class LateStore(KeyRows):  # reads before the winner wrote, writes after
        def get_wrapped_key(self, tenant):
            return None

        def put_wrapped_key_if_absent(self, tenant, wrapped):
            return rows.put_wrapped_key_if_absent(tenant, wrapped)

    late = Sealer(LateStore(), keys)
    blob = seal(late, "acme", ("a",), "k", {"v": 1})
    assert open_value(Sealer(rows, keys), "acme", ("a",), "k", blob) == {"v": 1}
    assert calls["Decrypt"] == 2  # the loser unwrapped the winner's key; so did the fresh reader


def test_sealer_write_fails_cleanly_when_kms_fails(kms, key_id):
    rows = KeyRows()
    fail_kms(kms, "GenerateDataKey", "KMSInternalException", 500)
    with pytest.raises(ProviderError):
        seal(Sealer(rows, KmsKeyProvider(kms, key_id)), "acme", ("a",), "k", {"v": 1})
    assert rows.rows == {}  # no wrapped key stored for a key that was never made


def test_sealer_read_surfaces_a_kms_throttle_as_rate_limited(kms, key_id):
    rows = KeyRows()
    keys = KmsKeyProvider(kms, key_id)
    blob = seal(Sealer(rows, keys), "acme", ("a",), "k", {"v": 1})
    fail_kms(kms, "Decrypt", "ThrottlingException", 400)
    with pytest.raises(RateLimited):
        open_value(Sealer(rows, keys), "acme", ("a",), "k", blob)
