"""Key material of the embedded default: created once, owner-only, never overwritten."""

from __future__ import annotations

import stat

import jwt
import pytest

from memsvc.adapters.local.issuer import AUDIENCE, ISSUER, InvalidToken, LocalIssuer
from memsvc.adapters.local.keys import FileKeyProvider
from memsvc.cli import main


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_key_files_are_private_and_stable(tmp_path):
    keys = FileKeyProvider(tmp_path / "keys" / "kek.key")
    issuer = LocalIssuer(tmp_path / "keys")
    assert mode(tmp_path / "keys" / "kek.key") == 0o600
    assert mode(tmp_path / "keys" / "jwt-private.pem") == 0o600
    plaintext, wrapped = keys.generate_data_key("acme")
    token = issuer.mint(sub="alice")
    # a restart reads the same keys: old wrapped keys and old tokens still work
    assert FileKeyProvider(tmp_path / "keys" / "kek.key").decrypt_data_key("acme", wrapped) == plaintext
    assert LocalIssuer(tmp_path / "keys").verify(token)["sub"] == "alice"


def test_a_wrapped_key_is_bound_to_its_tenant(tmp_path):
    keys = FileKeyProvider(tmp_path / "kek.key")
    _, wrapped = keys.generate_data_key("acme")
    with pytest.raises(Exception):
        keys.decrypt_data_key("globex", wrapped)


def test_tokens_are_checked_like_the_api_gateway_authorizer(tmp_path):
    issuer = LocalIssuer(tmp_path)
    claims = issuer.verify(issuer.mint(sub="alice", tenant="acme", roles=["admin"]))
    assert (claims["iss"], claims["aud"], claims["tenant_id"], claims["roles"]) == (ISSUER, AUDIENCE, "acme", ["admin"])
    with pytest.raises(InvalidToken):
        issuer.verify(issuer.mint(sub="alice", ttl_seconds=-60))
    other = LocalIssuer(tmp_path / "other")
    with pytest.raises(InvalidToken):
        issuer.verify(other.mint(sub="alice"))
    forged = jwt.encode({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": 9999999999}, "an-hmac-secret-that-is-32-bytes!", algorithm="HS256")
    with pytest.raises(InvalidToken):
        issuer.verify(forged)


def test_tokens_carry_the_shared_layers_only_when_given(tmp_path, capsys):
    issuer = LocalIssuer(tmp_path / "keys")
    claims = issuer.verify(issuer.mint(sub="alice", projects=["p1", "p2"], teams=["t1"], orgs=["o1"]))
    assert (claims["projects"], claims["teams"], claims["orgs"]) == (["p1", "p2"], ["t1"], ["o1"])
    assert not {"projects", "teams", "orgs"} & set(issuer.verify(issuer.mint(sub="alice")))
    assert main(["token", "--sub", "bob", "--projects", "p1, p2", "--orgs", "o1", "--data-dir", str(tmp_path)]) == 0
    claims = issuer.verify(capsys.readouterr().out.strip())
    assert (claims["projects"], claims["orgs"]) == (["p1", "p2"], ["o1"]) and "teams" not in claims
