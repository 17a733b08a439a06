"""The extraction golden set (eval/extraction): well formed, both halves non-empty and varied; and
`memsvc eval --extraction` reports its numbers. Targets are the benchmark's, not asserted here."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from memsvc import cli
from memsvc.extraction_eval import (DATASET_DIR, SPLITS, TYPES, Conversation, DatasetError, evaluate, load_split,
                                    match)


@pytest.fixture(scope="module")
def halves() -> dict[str, list[Conversation]]:
    return {split: load_split(split) for split in SPLITS}


def test_both_halves_hold_at_least_thirty_valid_conversations(halves):
    assert {split: len(c) >= 30 for split, c in halves.items()} == {"dev": True, "test": True}
    ids = [c.id for half in halves.values() for c in half]
    assert len(ids) == len(set(ids))
    for half in halves.values():
        for c in half:
            assert 4 <= len(c.messages) <= 14
            assert {m.role for m in c.messages} >= {"user", "assistant"}
            assert all(e.type in TYPES and e.content.strip() for e in c.expected)


def test_each_half_is_varied(halves):
    for half in halves.values():
        assert sum(not c.expected for c in half) >= 5  # chit-chat, questions, suggestions not taken
        assert any(m.name for c in half for m in c.messages)  # named speakers
        assert sum(any(m.role in ("system", "tool") for m in c.messages) for c in half) >= 1
        assert set(Counter(e.type for c in half for e in c.expected)) == set(TYPES)
        corrections = [c for c in half if any(m.content.lower().startswith(("actually", "no wait", "sorry, actually"))
                                              for m in c.messages if m.role == "user")]
        assert len(corrections) >= 2


def test_a_malformed_conversation_is_refused(tmp_path):
    doc = json.loads((DATASET_DIR / "dev.json").read_text())
    doc["conversations"][0]["expected"] = [{"content": "User is tall", "type": "opinion"}]
    (tmp_path / "dev.json").write_text(json.dumps(doc))
    with pytest.raises(DatasetError):
        load_split("dev", tmp_path)


class ExactEmbedder:
    """Equal texts have cosine 1, others 0: only the judge can match a paraphrase."""

    model_id, dimension = "exact", 16

    def embed(self, texts):
        index = {t: n for n, t in enumerate(dict.fromkeys(texts))}
        return [[1.0 if i == index[t] else 0.0 for i in range(self.dimension)] for t in texts]


def test_matching_is_one_to_one_and_the_judge_counts():
    assert match(["User lives in Berlin", "User lives in Berlin, Germany"], ["User lives in Berlin"],
                 ExactEmbedder()) == [(0, 0)]
    assert match(["User is vegan"], ["User loves jazz"], ExactEmbedder()) == []
    assert match([], ["User loves jazz"], ExactEmbedder()) == []
    assert match(["User adores jazz", "User loves jazz"], ["User loves jazz"], ExactEmbedder()) == [(1, 0)]


@pytest.mark.slow
def test_the_eval_reports_precision_recall_and_time_on_dev(halves):
    from memsvc.adapters.local.embedder import MiniLMEmbedder
    from memsvc.adapters.local.pattern_memory_extractor import PatternMemoryExtractor

    embedder = MiniLMEmbedder()
    report = evaluate(PatternMemoryExtractor(embedder), embedder, halves["dev"], "dev")
    assert report.conversations == len(halves["dev"])
    assert report.expected == sum(len(c.expected) for c in halves["dev"])
    assert 0 <= report.matched <= min(report.expected, report.extracted)
    assert 0.0 <= report.precision <= 1.0 and 0.0 <= report.recall <= 1.0
    assert 0 < report.p50_ms <= report.p95_ms


@pytest.mark.slow
def test_the_cli_runs_it_without_a_server(capsys):
    assert cli.main(["eval", "--extraction", "--split", "dev"]) == 0  # only the test half has targets
    out = capsys.readouterr().out
    assert "precision" in out and out.splitlines()[-1].startswith("dev ")
