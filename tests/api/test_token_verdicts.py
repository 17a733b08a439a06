"""`memsvc serve` checks bearer tokens off its event loop and keeps every verdict (`TokenVerdicts`):
a burst of bad tokens never holds a request whose token is known, each bad token is verified
once however often it is sent, and a kept refusal answers exactly as the first one did. Checked
in process by order and by counting calls, never by time."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import threading
from typing import Any

import pytest

from memsvc.adapters.local.issuer import LEEWAY_SECONDS, InvalidToken, LocalIssuer
from memsvc.local_server import MAX_TOKEN_BYTES, LocalServer, TokenVerdicts
from tests.api.helpers import asgi_get


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _garbage(alg: str, n: int, size: int = 64) -> str:
    header = _b64(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    payload = _b64(json.dumps({"sub": f"mallory-{n}", "pad": "x" * size}).encode())
    return f"{header}.{payload}.{_b64(bytes([n % 256]) * 256)}"


BAD_TOKENS = ([_garbage("RS256", n) for n in range(6)] + [_garbage("ES256", n) for n in range(6, 10)]
              + [_garbage("RS256", 10, size=5000), "not.a.jwt", "x" * 200])


class _Router:
    def __init__(self) -> None:
        self.answered: list[str] = []

    def handle(self, event: dict[str, Any]) -> dict[str, Any]:
        self.answered.append(event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"])
        return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": "{}"}


class _HeldIssuer:
    """The real issuer, counting the tokens it is asked to verify; a bad token's verification
    waits for `release` (as a slow signature check would), a good one's does not."""

    def __init__(self, issuer: LocalIssuer) -> None:
        self._issuer = issuer
        self.asked: list[str] = []
        self.holding = threading.Event()
        self.release = threading.Event()

    def verify(self, token: str) -> dict[str, Any]:
        self.asked.append(token)
        if token in BAD_TOKENS:
            self.holding.set()
            assert self.release.wait(120), "the test never released the bad tokens"
        return self._issuer.verify(token)


async def _request(server: LocalServer, token: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    sent = await asgi_get(server, "/v1/identity", headers=[(b"authorization", f"Bearer {token}".encode("latin-1"))])
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return sent[0]["status"], json.loads(sent[1]["body"]), headers


@pytest.fixture
def issuer(tmp_path) -> LocalIssuer:
    return LocalIssuer(tmp_path / "keys")


def test_a_burst_of_bad_tokens_never_holds_a_request_whose_token_is_known(issuer):
    held = _HeldIssuer(issuer)
    router = _Router()
    server = LocalServer(router, held, threads=1)  # type: ignore[arg-type]
    good = issuer.mint(sub="alice", tenant="acme")
    # The watchdog only ends a run that would otherwise hang: the answer's order is what is checked.
    watchdog = threading.Timer(60, held.release.set)
    watchdog.start()

    async def scenario() -> tuple[list[tuple[int, dict[str, Any], dict[str, str]]], bool, int]:
        assert (await _request(server, good))[0] == 200
        burst = [asyncio.create_task(_request(server, token)) for token in BAD_TOKENS * 2]
        assert await asyncio.to_thread(held.holding.wait, 60)
        status, _, _ = await _request(server, good)
        answered_while_held = not held.release.is_set()
        held.release.set()
        return await asyncio.gather(*burst), answered_while_held, status

    try:
        refusals, answered_while_held, status = asyncio.run(scenario())
    finally:
        watchdog.cancel()
        held.release.set()
        server._pool.shutdown()
    assert status == 200
    assert answered_while_held, "the known token's request waited for the bad tokens' checks"
    assert router.answered == ["alice", "alice"]
    assert held.asked.count(good) == 1  # the second request took the kept verdict
    assert sorted(held.asked[1:]) == sorted(BAD_TOKENS)  # each bad token checked once, though sent twice
    for status, body, _ in refusals:
        assert status == 401
        assert body["error"]["code"] == "UNAUTHORIZED" and body["error"]["message"].startswith("invalid token: ")


def test_a_kept_refusal_answers_exactly_as_the_first_one(issuer):
    held = _HeldIssuer(issuer)
    held.release.set()
    server = LocalServer(_Router(), held, threads=1)  # type: ignore[arg-type]
    expired = issuer.mint(sub="alice", tenant="acme", ttl_seconds=-3600)

    async def twice() -> list[tuple[int, dict[str, Any], dict[str, str]]]:
        return [await _request(server, token) for token in [*BAD_TOKENS, expired] * 2]

    try:
        answers = asyncio.run(twice())
    finally:
        server._pool.shutdown()
    first, again = answers[: len(answers) // 2], answers[len(answers) // 2:]
    assert [(s, b) for s, b, _ in again] == [(s, b) for s, b, _ in first]
    assert all(s == 401 and set(b["error"]) == {"code", "message", "retryable", "details"} for s, b, _ in first)
    assert first[-1][1]["error"]["message"] == "invalid token: the token has expired"
    assert len(held.asked) == len(BAD_TOKENS) + 1  # the second round verified nothing


def test_a_token_over_the_size_limit_is_refused_unverified(issuer):
    held = _HeldIssuer(issuer)
    server = LocalServer(_Router(), held, threads=1)  # type: ignore[arg-type]
    try:
        status, body, _ = asyncio.run(_request(server, "e" * (MAX_TOKEN_BYTES + 1)))
    finally:
        server._pool.shutdown()
    assert (status, body["error"]["code"], body["error"]["message"]) == (401, "UNAUTHORIZED",
                                                                         "invalid token: the token is too long")
    assert held.asked == []


def test_new_tokens_past_the_waiting_bound_are_told_to_retry(issuer):
    held = _HeldIssuer(issuer)
    server = LocalServer(_Router(), held, threads=1, max_verifying=2)  # type: ignore[arg-type]

    async def burst() -> tuple[list[Any], tuple[int, dict[str, Any], dict[str, str]]]:
        waiting = [asyncio.create_task(_request(server, token)) for token in BAD_TOKENS[:2]]
        assert await asyncio.to_thread(held.holding.wait, 60)
        while len(server._verifying) < 2:  # both taken in (the loop runs them in order)
            await asyncio.sleep(0)
        third = await _request(server, BAD_TOKENS[2])
        held.release.set()
        return await asyncio.gather(*waiting), third

    try:
        refused, (status, body, headers) = asyncio.run(burst())
    finally:
        held.release.set()
        server._pool.shutdown()
    assert [r[0] for r in refused] == [401, 401]
    assert (status, body["error"]["code"], body["error"]["retryable"]) == (429, "RATE_LIMITED", True)
    assert headers["retry-after"] == "1"
    assert BAD_TOKENS[2] not in held.asked


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _digest(n: int) -> bytes:
    return hashlib.sha256(str(n).encode()).digest()


def test_a_valid_verdict_is_kept_no_longer_than_the_token_lives():
    clock = _Clock(1000.0)
    verdicts = TokenVerdicts(clock=clock)
    verdicts.put(_digest(1), {"sub": "alice", "exp": 1100})
    clock.now = 1100 + LEEWAY_SECONDS
    assert verdicts.get(_digest(1)) == {"sub": "alice", "exp": 1100}
    clock.now += 0.5
    assert verdicts.get(_digest(1)) == "the token has expired"
    assert verdicts.get(_digest(1)) is None  # then it is verified again


def test_a_refusal_is_kept_for_its_time_then_checked_again():
    clock = _Clock(1000.0)
    verdicts = TokenVerdicts(clock=clock, invalid_seconds=60)
    verdicts.put(_digest(1), "the token's signature does not verify")
    clock.now = 1060
    assert verdicts.get(_digest(1)) == "the token's signature does not verify"
    clock.now = 1060.5
    assert verdicts.get(_digest(1)) is None


def test_a_flood_of_refusals_never_pushes_out_a_valid_verdict():
    verdicts = TokenVerdicts(clock=_Clock(0.0), kept=4)
    verdicts.put(_digest(0), {"sub": "alice", "exp": 100})
    for n in range(1, 50):
        verdicts.put(_digest(n), "the token is not a well-formed JWT")
    assert verdicts.get(_digest(0)) == {"sub": "alice", "exp": 100}
    assert [verdicts.get(_digest(n)) is not None for n in range(1, 50)] == [False] * 45 + [True] * 4


def test_the_issuer_refuses_the_bad_tokens_in_our_words(issuer):
    for token in BAD_TOKENS:
        with pytest.raises(InvalidToken) as refused:
            issuer.verify(token)
        assert str(refused.value).startswith("the token")
