"""`PatternMemoryExtractor` on the real local embedder: the patterns' statements kept, chit-chat
dropped, duplicates and corrections resolved within one extraction, one embed call each time."""

from __future__ import annotations

import time

import pytest

from memsvc.adapters.local.embedder import MiniLMEmbedder
from memsvc.adapters.local.pattern_memory_extractor import PatternMemoryExtractor
from memsvc.core.extraction import CATEGORIES, MAX_CANDIDATES, ConversationMessage
from memsvc.ports import MemoryExtractor

pytestmark = pytest.mark.slow


class CountingEmbedder:
    """The real embedder, counting its calls."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.model_id, self.dimension = inner.model_id, inner.dimension
        self.inner = inner
        self.calls: list[int] = []

    def embed(self, texts):
        self.calls.append(len(texts))
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture
def embedder(minilm) -> CountingEmbedder:
    return CountingEmbedder(minilm)


@pytest.fixture
def extractor(embedder) -> PatternMemoryExtractor:
    return PatternMemoryExtractor(embedder)


def conversation(*turns: str | tuple[str, str]) -> list[ConversationMessage]:
    """Alternating user and assistant turns; a (name, text) pair is a named user."""
    out = []
    for seq, turn in enumerate(turns):
        if isinstance(turn, tuple):
            out.append(ConversationMessage("user", turn[1], seq, name=turn[0]))
        else:
            out.append(ConversationMessage("user" if seq % 2 == 0 else "assistant", turn, seq))
    return out


def test_it_is_a_memory_extractor(extractor):
    extractor_port: MemoryExtractor = extractor
    assert extractor_port.model_id == "deterministic"


def test_the_users_facts_are_candidates_most_important_first(extractor):
    found = extractor.extract("t", conversation(
        "I'm flying to Lisbon on June 12th. I prefer window seats.", "Noted! Want a hotel too?",
        "Yes. I'm allergic to peanuts, by the way.", "I'd suggest the Hotel Avenida Palace."))
    assert [c.content for c in found] == ["User is allergic to peanuts", "User prefers window seats",
                                          "User plans to fly to Lisbon on June 12th"]
    assert [c.type for c in found] == ["fact", "preference", "note"]
    assert [c.source_seqs for c in found] == [(2,), (0,), (0,)]
    assert all(c.category in CATEGORIES and 0 <= c.importance <= 1 for c in found)
    assert found[0].importance > found[-1].importance


def test_chit_chat_questions_and_the_assistants_suggestions_are_not(extractor):
    assert extractor.extract("t", conversation(
        "Hey, how's it going?", "Great! You should try the new ramen place, I love it.",
        "Thanks, I'll think about it.", "I live in the cloud, so I'm always here.",
        "What's the capital of Australia?", "Canberra.")) == []


def test_an_open_statement_is_kept_only_when_it_reads_as_a_personal_fact(extractor):
    kept = extractor.extract("t", conversation("I'm cooking for my in-laws on Saturday.", "Nice!"))
    assert [c.content for c in kept] == ["User is cooking for their in-laws on Saturday"]
    assert extractor.extract("t", conversation("I'll paste the manifests in a minute.", "OK.")) == []


def test_a_correction_wins(extractor):
    found = extractor.extract("t", conversation(
        "I live in Madrid.", "Madrid it is.", "Actually, I moved to Porto last month.", "Porto, noted."))
    assert [(c.content, c.source_seqs) for c in found] == [("User lives in Porto", (0, 2))]


def test_no_wait_corrects_the_value(extractor):
    found = extractor.extract("t", conversation(
        "My dentist appointment is on Tuesday.", "Noted.", "No wait, it's on Thursday.", "Updated."))
    assert [c.content for c in found] == ["User's dentist appointment is on Thursday"]


def test_the_same_fact_twice_is_one_candidate_the_later_kept(extractor):
    found = extractor.extract("t", conversation("I'm vegetarian.", "OK.", "Like I said, I'm vegetarian!", "Sure."))
    assert [(c.content, c.source_seqs) for c in found] == [("User is vegetarian", (0, 2))]


def test_named_speakers_keep_their_own_facts(extractor):
    found = extractor.extract("t", conversation(("Priya", "I'm allergic to shellfish."), ("Daniel", "And I'm vegan.")))
    assert sorted(c.content for c in found) == ["Daniel is vegan", "Priya is allergic to shellfish"]


def test_at_most_max_candidates(extractor):
    cities = ["Berlin", "Paris", "Rome", "Oslo", "Lima", "Quito", "Cairo", "Tunis", "Dakar", "Accra", "Seoul", "Hanoi",
              "Delhi", "Perth", "Dhaka", "Kyiv", "Riga", "Bern", "Baku", "Doha", "Male", "Suva"]
    text = " ".join(f"I'm flying to {c} on May {n + 1}th." for n, c in enumerate(cities))
    found = extractor.extract("t", conversation(text, "Busy!"))
    assert len(found) == MAX_CANDIDATES


def test_nothing_to_say_embeds_nothing(extractor, embedder):
    assert extractor.extract("t", conversation("ok", "Anything else?", "nope, bye!", "Bye!")) == []
    assert embedder.calls == []


def test_one_embed_call_per_extraction_and_the_prototypes_once(extractor, embedder):
    messages = conversation("I live in Oslo and I love skiing.", "Nice!")
    extractor.extract("t", messages)
    extractor.extract("t", messages)
    assert len(embedder.calls) == 2 and embedder.calls[0] > embedder.calls[1] == 2


def test_ten_messages_are_fast_with_the_embedder_warm(extractor):
    messages = conversation(
        "Hi! I'm Kenji and I'm 34.", "Nice to meet you!", "I live in Toronto and I work as a UX designer.",
        "Great.", "I'm vegetarian and I hate cilantro.", "Noted.", "I'm flying to Tokyo on March 3rd.",
        "Exciting!", "We'll go with the window seat.", "Done.")
    extractor.extract("t", messages)
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        found = extractor.extract("t", messages)
        timings.append(time.perf_counter() - start)
    assert len(found) >= 6
    assert min(timings) < 0.25  # well under 50 ms on one idle core; generous for a loaded CI machine


def test_an_adversarial_conversation_is_bounded(extractor, embedder):
    found = extractor.extract("t", conversation("I love tea. " * 17_000, "OK."))
    assert [c.content for c in found] == ["User loves tea"]
    assert embedder.calls[0] <= 100 + 50  # the last findings only, and the prototypes
