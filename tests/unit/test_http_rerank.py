"""`HttpReranker` against a rerank endpoint on 127.0.0.1 (`tests.fakes.rerank_server`): the two
request shapes, finding out which one the endpoint takes, the recorded answers of Cohere, Jina
and TEI (`tests/fixtures/rerank`), and every way an answer can fail."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from memsvc.adapters.local import http_rerank
from memsvc.adapters.local.http_rerank import HttpReranker, RerankRefused
from tests.fakes.rerank_server import FakeRerankServer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rerank"
TEXTS = ["the ferry leaves at noon", "bring sunscreen", "Maria started pottery classes in May"]


def recorded(name: str):
    return json.loads((FIXTURES / name).read_text())


@pytest.fixture
def tei():
    with FakeRerankServer("tei") as server:
        yield server


@pytest.fixture
def cohere():
    with FakeRerankServer("cohere") as server:
        yield server


@pytest.mark.parametrize(("fixture", "expected"), [
    ("cohere_v2.json", [0.2113, 0.0071, 0.9996]),
    ("jina_v2.json", [0.1207, 0.0412, 0.8123]),
    ("tei.json", [0.022949183, 0.0000351, 0.99864566]),
])
def test_recorded_answers_are_read_back_in_input_order(tei, fixture, expected):
    tei.answer = lambda body: (200, recorded(fixture))
    assert HttpReranker(tei.url).rerank("what did Maria start?", TEXTS, model_id=None) == expected


def test_cohere_shape_names_the_tenants_model_and_asks_for_every_text(cohere):
    reranker = HttpReranker(cohere.url, api="cohere")
    scores = reranker.rerank("pottery in May", TEXTS, model_id="rerank-v3.5")
    reranker.rerank("pottery in May", TEXTS, model_id=None)
    assert cohere.requests == [{"model": "rerank-v3.5", "query": "pottery in May", "documents": TEXTS, "top_n": 3},
                               {"query": "pottery in May", "documents": TEXTS, "top_n": 3}]
    assert scores.index(max(scores)) == 2


def test_tei_shape_sends_query_and_texts_only(tei):
    scores = HttpReranker(tei.url, api="tei").rerank("pottery in May", TEXTS, model_id="not for TEI")
    assert tei.requests == [{"query": "pottery in May", "texts": TEXTS}]
    assert scores.index(max(scores)) == 2


def test_auto_finds_tei_by_its_refusal_and_then_sends_its_shape_only(tei):
    reranker = HttpReranker(tei.url)
    first = reranker.rerank("pottery in May", TEXTS, model_id=None)
    second = reranker.rerank("the ferry", TEXTS, model_id=None)
    assert ["documents" in r for r in tei.requests] == [True, False, False]
    assert first.index(max(first)) == 2 and second.index(max(second)) == 0


def test_auto_keeps_the_cohere_shape_when_it_is_taken(cohere):
    reranker = HttpReranker(cohere.url)
    reranker.rerank("q", TEXTS, model_id=None)
    reranker.rerank("q", TEXTS, model_id=None)
    assert all("documents" in r for r in cohere.requests) and len(cohere.requests) == 2


def test_a_server_error_is_raised_without_trying_the_other_shape(tei):
    tei.fail_with = 503
    with pytest.raises(RerankRefused) as refused:
        HttpReranker(tei.url).rerank("q", TEXTS, model_id=None)
    assert refused.value.status == 503 and len(tei.requests) == 1


@pytest.mark.parametrize("answer", [
    {"scores": [1, 2, 3]},  # no results
    [{"index": 0, "score": 0.1}, {"index": 1, "score": 0.2}],  # a text unscored
    [{"index": 0, "score": 0.1}, {"index": 0, "score": 0.2}, {"index": 1, "score": 0.3}],  # one scored twice
    [{"index": 0, "score": 0.1}, {"index": 1, "score": 0.2}, {"index": 3, "score": 0.3}],  # not a text sent
    [{"index": 0, "score": 0.1}, {"index": 1, "score": "high"}, {"index": 2, "score": 0.3}],
    [{"index": 0, "score": 0.1}, {"index": 1, "score": True}, {"index": 2, "score": 0.3}],
    [{"index": 0, "score": 0.1}, {"index": 1, "score": float("nan")}, {"index": 2, "score": 0.3}],
    [{"index": 0.0, "score": 0.1}, {"index": 1, "score": 0.2}, {"index": 2, "score": 0.3}],
    "a string, not a ranking",
])
def test_an_answer_that_does_not_score_every_text_once_is_refused(tei, answer):
    tei.answer = lambda body: (200, answer)
    with pytest.raises(ValueError):
        HttpReranker(tei.url, api="tei").rerank("q", TEXTS, model_id=None)


def test_an_endpoint_that_never_answers_times_out():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        reranker = HttpReranker(f"http://127.0.0.1:{silent.getsockname()[1]}/rerank", timeout_seconds=0.05)
        with pytest.raises(TimeoutError):
            reranker.rerank("q", TEXTS, model_id=None)


def test_nothing_to_rerank_sends_nothing(tei):
    assert HttpReranker(tei.url).rerank("q", [], model_id=None) == [] and tei.requests == []


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/rerank", "127.0.0.1:8080/rerank", "http:///rerank"])
def test_only_http_urls_are_taken(url):
    with pytest.raises(ValueError):
        HttpReranker(url)


# -- one deadline per call ----------------------------------------------------------------------
# A socket's timeout bounds one read: an endpoint dripping its answer never trips it. The margins
# are wide (a call must end within a few times its deadline, where the drip alone takes ~10 s).

@pytest.mark.parametrize("body_only", [False, True], ids=["status-line-and-headers", "body"])
def test_an_answer_dripped_a_byte_at_a_time_ends_at_the_deadline(tei, body_only):
    tei.drip_seconds, tei.drip_body_only = 0.05, body_only
    reranker = HttpReranker(tei.url, api="tei", timeout_seconds=0.5)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        reranker.rerank("q", TEXTS, model_id=None)
    assert time.monotonic() - started < 3.0


def test_auto_charges_both_attempts_to_one_deadline(tei):
    """Each answer comes within the timeout, the two together do not."""
    tei.delay_seconds = 0.7
    with pytest.raises(TimeoutError):
        HttpReranker(tei.url, timeout_seconds=1.0).rerank("q", TEXTS, model_id=None)
    assert ["documents" in r for r in tei.requests][:1] == [True]


def test_auto_keeps_a_shape_only_once_it_answered_every_text(tei):
    reranker = HttpReranker(tei.url)
    tei.garbage = True
    with pytest.raises(ValueError):
        reranker.rerank("q", TEXTS, model_id=None)
    tei.garbage = False
    reranker.rerank("q", TEXTS, model_id=None)
    reranker.rerank("q", TEXTS, model_id=None)
    assert ["documents" in r for r in tei.requests] == [True, False, True, False, False]


def test_an_answer_over_the_cap_is_refused(tei, monkeypatch):
    monkeypatch.setattr(http_rerank, "MAX_ANSWER_BYTES", 50)
    with pytest.raises(ValueError, match="too large"):
        HttpReranker(tei.url, api="tei").rerank("q", TEXTS, model_id=None)
