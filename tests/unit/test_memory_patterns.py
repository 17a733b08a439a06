"""`core.memory_patterns`: what the speaker says of themselves, per kind, and what is skipped."""

from __future__ import annotations

import pytest

from memsvc.core.extraction import CATEGORIES, ConversationMessage
from memsvc.core.memory_patterns import (MAX_CLAUSE_CHARS, find_memories, is_hedged, is_question, split_clauses,
                                         split_sentences, third_person)


def said(*texts: str, role: str = "user", name: str | None = None) -> list[tuple[str, str, str]]:
    """(content, type, pattern) of each finding in `texts`, one message each."""
    messages = [ConversationMessage(role=role, content=t, seq=n, name=name)  # type: ignore[arg-type]
                for n, t in enumerate(texts)]
    return [(f.content, f.type, f.pattern) for f in find_memories(messages)]


def contents(*texts: str, **kwargs) -> list[str]:
    return [c for c, _, _ in said(*texts, **kwargs)]


@pytest.mark.parametrize("text, expected", [
    ("My name is Kenji.", "User's name is Kenji"),
    ("Hi, I'm Maria.", "User's name is Maria"),
    ("I'm 34.", "User is 34 years old"),
    ("I'm Japanese.", "User is Japanese"),
    ("I'm a data engineer at a logistics company.", "User is a data engineer at a logistics company"),
    ("I live in Berlin.", "User lives in Berlin"),
    ("I work as a nurse.", "User works as a nurse"),
    ("I study mechanical engineering at TU Delft.", "User studies mechanical engineering at TU Delft"),
    ("I'm vegetarian.", "User is vegetarian"),
    ("I'm allergic to peanuts.", "User is allergic to peanuts"),
    ("I don't eat red meat.", "User doesn't eat red meat"),
    ("I have asthma.", "User has asthma"),
    ("I have two kids.", "User has two kids"),
    ("We adopted a dog named Biscuit.", "User adopted a dog named Biscuit"),
    ("My son is allergic to eggs.", "User's son is allergic to eggs"),
    ("I love hiking in the Alps.", "User loves hiking in the Alps"),
    ("I always prefer window seats.", "User always prefers window seats"),
    ("I can't stand cilantro.", "User can't stand cilantro"),
    ("I hate grading on weekends.", "User hates grading on weekends"),
    ("I've decided to switch to Postgres.", "User decided to switch to Postgres"),
    ("We'll go with the lentil menu.", "User decided to go with the lentil menu"),
    ("I'm flying to Tokyo on March 3rd.", "User plans to fly to Tokyo on March 3rd"),
    ("Next week I start a new job at Deloitte.", "User plans to start a new job at Deloitte next week"),
    ("Next month I'm going to Japan with my husband.", "User plans to go to Japan with their husband next month"),
    ("My dentist appointment is on Tuesday.", "User's dentist appointment is on Tuesday"),
])
def test_each_kind_becomes_a_third_person_statement(text, expected):
    assert expected in contents(text)


@pytest.mark.parametrize("text, type_", [
    ("I live in Berlin.", "fact"), ("I prefer tea.", "preference"),
    ("I've decided to sell my car.", "decision"), ("I'm flying to Rome on May 2nd.", "note"),
])
def test_the_kind_types_the_statement(text, type_):
    assert said(text)[0][1] == type_


def test_categories_and_importance_follow_the_kind():
    messages = [ConversationMessage("user", "I'm allergic to peanuts. I'm flying to Rome on May 2nd.", 0)]
    allergy, plan = find_memories(messages)
    assert allergy.category == "health" and plan.category == "travel"
    assert allergy.importance > plan.importance
    assert {f.category for f in find_memories([ConversationMessage("user", t, 0) for t in (
        "I'm vegan.", "My wife is a doctor.", "I live in Oslo.", "I work at Stripe.", "I love jazz.")])} <= set(CATEGORIES)


def test_a_named_speaker_is_named():
    assert contents("I live in Lisbon and I work as a nurse.", name="Maria") == [
        "Maria lives in Lisbon", "Maria works as a nurse"]
    assert contents("Hi, I'm Maria.", name="Maria") == []  # her own name is no news


@pytest.mark.parametrize("text", [
    "What's the capital of Australia?", "How do I boil an egg", "Do you know a good sushi place in Zurich",
    "Can you book a table?", "Should I use React or Svelte?", "I live in Berlin, right?",
])
def test_questions_are_skipped(text):
    assert said(text) == []


@pytest.mark.parametrize("text", [
    "If I ever move to Canada, taxes would be high.", "Maybe I'd rather go to New Zealand.",
    "I might move to Porto next year.", "Someday I'll live in Japan.", "I'm thinking about going vegan.",
])
def test_hedged_and_hypothetical_sentences_are_skipped(text):
    assert said(text) == []


@pytest.mark.parametrize("text", [
    "My coworker Tom lives in Berlin.", "My neighbor is a dentist.", "Her boyfriend hates mushrooms.",
    "My friend Ana is a vegetarian.", "Tom loves techno.",
])
def test_other_peoples_facts_are_skipped(text):
    assert said(text) == []


def test_family_facts_are_kept():
    assert contents("My daughter Emma loves dinosaurs.") == [
        "User's daughter Emma loves dinosaurs", "User has a daughter named Emma"]


@pytest.mark.parametrize("role", ["assistant", "system", "tool"])
def test_only_the_users_messages_are_read(role):
    assert said("I live in Paris. I love octopuses. I've decided to use Postgres.", role=role) == []


@pytest.mark.parametrize("text", ["ok cool", "lol that's funny", "Thanks!", "Good morning!", "Nice weather today, huh."])
def test_chit_chat_finds_nothing(text):
    assert said(text) == []


def test_a_reaction_is_no_preference():
    assert [p for _, _, p in said("I love it!", "I like that.")] == []


def test_a_first_person_clause_no_pattern_knows_is_open():
    assert said("I collect vintage stamps from Portugal.") == [
        ("User collects vintage stamps from Portugal", "note", "open")]


def test_a_correction_yields_the_corrected_statement():
    found = find_memories([ConversationMessage("user", "I live in Madrid.", 0),
                           ConversationMessage("assistant", "Madrid, noted.", 1),
                           ConversationMessage("user", "Actually, I moved to Porto last month.", 2)])
    assert [(f.content, f.correction) for f in found] == [("User lives in Madrid", False), ("User lives in Porto", True)]


def test_no_wait_its_rewrites_the_speakers_previous_statement():
    found = find_memories([ConversationMessage("user", "My flight leaves at 7am on Friday.", 0),
                           ConversationMessage("assistant", "Leave by 5am.", 1),
                           ConversationMessage("user", "No wait, it's at 9am.", 2)])
    assert found[-1].content == "User's flight leaves at 9am on Friday"
    assert found[-1].correction and found[-1].seqs == (0, 2)


def test_a_correction_with_nothing_to_correct_finds_nothing():
    assert said("No wait, it's on Thursday.") == []


def test_sentences_and_clauses():
    assert split_sentences("I'm Kenji.  I live in Toronto!\nBye") == ["I'm Kenji.", "I live in Toronto!", "Bye"]
    assert split_clauses("I'm Japanese but I live in Toronto, and my wife is Canadian") == [
        "I'm Japanese", "I live in Toronto", "my wife is Canadian"]
    assert split_clauses("I live in Madrid, so please give me tips") == ["I live in Madrid, so please give me tips"]
    assert is_question("Any ideas?") and is_question("what is this") and not is_question("I live here.")
    assert is_hedged("If I ever go") and not is_hedged("I live in Berlin")
    assert third_person("I study at MIT with my sister", "Ana") == "Ana studies at MIT with their sister"


# Built to make a careless pattern backtrack: long runs of what the patterns repeat.
ADVERSARIAL = [
    "I " * 100_000,
    "a" * 200_000,
    "I'm a " * 34_000,
    "my " * 67_000 + "is",
    ", and I" * 29_000,
    "I love " + "x " * 100_000,
    "I live in " + "Aa " * 66_000,
    "I'm " + "really " * 28_000 + "vegan",
    ("I'm flying to Tokyo on March 3rd " + "on " * 10) * 4_000,
    "I love tea. " * 17_000,
    "No wait, it's " + "on " * 66_000,
    "I have a " + "big " * 50_000 + "dog",
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_a_200_kb_adversarial_message_is_read(text):
    messages = [ConversationMessage("user", "My flight leaves at 7am on Friday.", 0),
                ConversationMessage("user", text[:200_000], 1)]
    found = find_memories(messages)
    assert found[0].content == "User's flight leaves at 7am on Friday"
    assert all(len(f.content) <= 2 * MAX_CLAUSE_CHARS for f in found)


def test_many_short_sentences_are_each_read():
    found = find_memories([ConversationMessage("user", "I love tea. " * 17_000, 0)])
    assert len(found) == 17_000 and {f.content for f in found} == {"User loves tea"}
