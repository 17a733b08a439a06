"""The local issuer remembers tokens it has verified: that must never keep an expired or a
forged one alive."""

import time

import pytest

from memsvc.adapters.local import issuer as issuer_module
from memsvc.adapters.local.issuer import InvalidToken, LocalIssuer


@pytest.fixture(scope="module")
def issuer(tmp_path_factory):
    return LocalIssuer(tmp_path_factory.mktemp("keys"))


def test_a_verified_token_still_expires(issuer, monkeypatch):
    token = issuer.mint(sub="alice", tenant="t1", ttl_seconds=60)
    assert issuer.verify(token)["sub"] == "alice"
    later = time.time() + 60 + issuer_module.LEEWAY_SECONDS + 1
    monkeypatch.setattr(issuer_module.time, "time", lambda: later)
    with pytest.raises(InvalidToken, match="expired"):
        issuer.verify(token)


def test_a_token_that_differs_in_one_byte_is_checked_again(issuer):
    token = issuer.mint(sub="alice", tenant="t1")
    issuer.verify(token)
    head, payload, signature = token.split(".")
    forged = ".".join([head, payload, ("A" if signature[0] != "A" else "B") + signature[1:]])
    with pytest.raises(InvalidToken):
        issuer.verify(forged)


def test_callers_get_their_own_copy_of_the_claims(issuer):
    token = issuer.mint(sub="alice", tenant="t1", roles=["admin"])
    issuer.verify(token)["sub"] = "mallory"
    assert issuer.verify(token)["sub"] == "alice"


def test_the_remembered_tokens_are_bounded(issuer, monkeypatch):
    monkeypatch.setattr(issuer_module, "VERIFIED_TOKENS_KEPT", 3)
    tokens = [issuer.mint(sub=f"u{n}", tenant="t1") for n in range(5)]
    for token in tokens:
        issuer.verify(token)
    assert len(issuer._verified) == 3
    assert all(issuer.verify(t)["sub"] == f"u{n}" for n, t in enumerate(tokens))
