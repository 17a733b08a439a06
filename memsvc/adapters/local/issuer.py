"""The local token issuer: an RS256 key pair in the data dir, verified the way the API Gateway
JWT authorizer verifies (signature, expiry, issuer, audience)."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from memsvc.adapters.local.secret_files import write_private

__all__ = ["LocalIssuer", "ISSUER", "AUDIENCE", "InvalidToken"]

ISSUER = "memsvc-local"
AUDIENCE = "memsvc"
LEEWAY_SECONDS = 5
VERIFIED_TOKENS_KEPT = 4096


class InvalidToken(Exception):
    """Why a token was refused, in our words (never PyJWT's text)."""


# PyJWT's failures as our reasons, most specific first (InvalidSignatureError is a DecodeError).
_REASONS: tuple[tuple[type[jwt.PyJWTError], str], ...] = (
    (jwt.ExpiredSignatureError, "the token has expired"),
    (jwt.ImmatureSignatureError, "the token is not valid yet"),
    (jwt.InvalidAudienceError, f"the token is not for audience {AUDIENCE}"),
    (jwt.InvalidIssuerError, f"the token is not from issuer {ISSUER}"),
    (jwt.MissingRequiredClaimError, "the token lacks a required claim (exp, iss, aud, sub)"),
    (jwt.InvalidAlgorithmError, "the token is not signed with RS256"),
    (jwt.InvalidSignatureError, "the token's signature does not verify"),
    (jwt.DecodeError, "the token is not a well-formed JWT"),
)


class LocalIssuer:
    def __init__(self, key_dir: Path) -> None:
        self._private_path = key_dir / "jwt-private.pem"
        self._private = _load_or_create(self._private_path)
        self._public = self._private.public_key()
        self.key_id = "local-1"
        # A client sends the same token with every request, and checking its RS256 signature is a
        # fifth of a small request's work; a token is immutable, so one that verified once stays
        # verified until it expires, which is checked on every use.
        self._verified: dict[str, dict[str, Any]] = {}
        self._verified_lock = threading.Lock()

    def mint(self, *, sub: str, tenant: str | None = None, roles: list[str] | None = None,
             ttl_seconds: int = 3600, client_id: str = "memsvc-cli", projects: list[str] | None = None,
             teams: list[str] | None = None, orgs: list[str] | None = None) -> str:
        """A signed token; `projects`, `teams` and `orgs` are the shared layers the user is a member of."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "nbf": now,
            "exp": now + ttl_seconds, "jti": str(uuid.uuid4()), "client_id": client_id,
        }
        if tenant:
            claims["tenant_id"] = tenant
        if roles:
            claims["roles"] = roles
        for name, ids in (("projects", projects), ("teams", teams), ("orgs", orgs)):
            if ids:
                claims[name] = ids
        return jwt.encode(claims, self._private, algorithm="RS256", headers={"kid": self.key_id})

    def verify(self, token: str) -> dict[str, Any]:
        claims = self._verified.get(token)
        if claims is None:
            claims = self._decode(token)
            with self._verified_lock:
                if len(self._verified) >= VERIFIED_TOKENS_KEPT:
                    del self._verified[next(iter(self._verified))]  # the oldest
                self._verified[token] = claims
        elif time.time() > claims["exp"] + LEEWAY_SECONDS:
            raise InvalidToken("the token has expired")
        return dict(claims)

    def _decode(self, token: str) -> dict[str, Any]:
        try:
            return jwt.decode(
                token, self._public, algorithms=["RS256"], audience=AUDIENCE, issuer=ISSUER,
                options={"require": ["exp", "iss", "aud", "sub"]}, leeway=LEEWAY_SECONDS,
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(next((why for kind, why in _REASONS if isinstance(exc, kind)),
                                    "the token is not valid")) from None


def _load_or_create(path: Path) -> rsa.RSAPrivateKey:
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        assert isinstance(key, rsa.RSAPrivateKey)
        return key
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    write_private(path, pem)
    (path.parent / "jwt-public.pem").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return key
