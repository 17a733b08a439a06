"""Learning from conversations with a language model (issue 24): `LlmMemoryExtractor` asks one
`LanguageModel` question per conversation and reads its answer into candidates
(`core.extraction`).

The prompt is bounded: the conversation is written one message per line, `[seq] speaker: text`,
the newest messages kept when it is longer than `MAX_EXTRACT_CHARS` (each message cut to a
quarter of that first, so one pasted document cannot crowd out the rest), and `MAX_TOKENS`
bounds the answer. The answer is read defensively: an entry of the wrong shape is dropped, an
unknown type is a fact, an unknown category `other`, an importance outside 0..1 clamped, a source
that names no message of the conversation forgotten. An answer that is not the JSON asked for
raises `ProviderError` (reason `malformed`): the caller retries later and loses nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from memsvc.core.errors import ProviderError
from memsvc.core.extraction import (CATEGORIES, MAX_CANDIDATES, MAX_EXTRACT_CHARS, MAX_EXTRACT_MESSAGES,
                                    MAX_MESSAGE_CHARS, Candidate, ConversationMessage, cut_candidate)
from memsvc.core.message_context import MAX_NAME_CHARS
from memsvc.core.typed_memory import MEMORY_TYPES, MemoryType
from memsvc.ports import LanguageModel

__all__ = ["LlmMemoryExtractor", "SYSTEM_PROMPT", "MAX_TOKENS", "conversation_prompt", "read_candidates"]

# 20 memories of ~45 tokens each, in compact JSON, with room for a fence.
MAX_TOKENS = 1200
_SPACES = re.compile(r"\s+")
# System prompts and tool results are the agent's, never the user's own words, and often long.
_SHOWN_ROLES = ("user", "assistant")

SYSTEM_PROMPT = (
    "You read a conversation between a user and an AI assistant and note what is worth remembering "
    "about the user in later conversations. Answer with one JSON object and nothing else: "
    '{"memories": [{"content": "...", "type": "fact|preference|decision|note", "importance": 0.0-1.0, '
    '"category": "...", "source": [seq, ...]}]}. '
    "Each line of the conversation is [seq] speaker: text. "
    "content: one short standalone statement in the third person about the person who said it: "
    '"User is vegetarian", "User lives in Lisbon", "User plans to visit Tokyo in March 2026"; '
    "a speaker shown with a name goes by that name (\"Maria works at Siemens\"). "
    "Keep only what the user (or a named human speaker) says about themselves: identity, where they live "
    "and work, education, diet and health, family and relationships, hobbies, preferences and dislikes, "
    "decisions, plans with their dates (write a date, not \"tomorrow\", when the conversation's date is "
    "given), and corrections of something said earlier (write the corrected statement). "
    "Never note the assistant's suggestions, questions or statements, general knowledge, small talk, "
    "or what the user only asks about. "
    "type: preference for likes and dislikes, decision for choices made, fact for the rest, note for "
    "anything else worth keeping. importance: 0.9 for identity and lasting facts, 0.6 for preferences "
    "and plans, 0.3 for passing details. "
    f"category: one of {', '.join(CATEGORIES)}. source: the seq numbers of the lines it comes from. "
    f"At most {MAX_CANDIDATES} memories, the most important first. "
    'Nothing worth keeping: {"memories": []}.'
)


def conversation_prompt(messages: Sequence[ConversationMessage]) -> tuple[str, tuple[int, ...]]:
    """The user message for `messages` and the seqs of the messages it shows: the user's and the
    assistant's, newest first until their texts reach `MAX_EXTRACT_CHARS`, then in order. O(total size)."""
    lines: list[str] = []
    shown: list[int] = []
    budget = MAX_EXTRACT_CHARS
    for message in reversed(messages[-MAX_EXTRACT_MESSAGES:]):
        if message.role not in _SHOWN_ROLES:
            continue
        text = _one_line(message.content[:MAX_MESSAGE_CHARS])
        if not text:
            continue
        # The budget counts the text alone (`core.extraction.read_chars`), so that a batch that
        # fits it is shown whole; the framing adds at most ~80 characters a line.
        if len(text) > budget:
            break  # older messages than this one would leave a gap in what the model reads
        lines.append(f"[{message.seq}] {_speaker(message)}: {text}")
        shown.append(message.seq)
        budget -= len(text)
    # The date lets the model write "next Friday" as a date.
    last = next((m.created_at for m in reversed(messages) if m.created_at is not None), None)
    header = f"The conversation (last message on {last.date().isoformat()}):" if last else "The conversation:"
    return "\n".join([header, *reversed(lines)]), tuple(shown)


def read_candidates(answer: Any, shown_seqs: Sequence[int]) -> list[Candidate] | None:
    """The candidates in the model's answer, the most important first (at most `MAX_CANDIDATES`);
    None when the answer is not the object asked for. O(size of the answer)."""
    entries = answer.get("memories") if isinstance(answer, dict) else answer
    if not isinstance(entries, list):
        return None
    if entries and not isinstance(answer, dict) and not any(isinstance(e, dict) for e in entries):
        return None  # a bare list of no memories is more likely prose's "[1]" than an answer
    seqs = frozenset(shown_seqs)
    candidates: list[Candidate] = []
    seen: set[str] = set()
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
            continue
        content = cut_candidate(_one_line(entry["content"]))
        if not content or content.casefold() in seen:
            continue
        seen.add(content.casefold())
        candidates.append(Candidate(content=content, type=_type(entry.get("type")),
                                    importance=_importance(entry.get("importance")),
                                    category=_category(entry.get("category")),
                                    source_seqs=_sources(entry.get("source"), seqs)))
    candidates.sort(key=lambda c: -c.importance)  # stable: the model's order among equals
    return candidates[:MAX_CANDIDATES]


class LlmMemoryExtractor:
    """`MemoryExtractor` on a `LanguageModel`. `model_id_of(tenant)`: a tenant's model, None for
    the deployment's."""

    def __init__(self, llm: LanguageModel, model_id_of: Callable[[str], str | None] = lambda tenant: None) -> None:
        self._llm = llm
        self._model_id_of = model_id_of
        self.model_id = llm.model_id

    def extract(self, tenant: str, messages: Sequence[ConversationMessage]) -> list[Candidate]:
        prompt, shown = conversation_prompt(messages)
        if not shown:
            return []  # nothing the user or the assistant said: no call
        answer = self._llm.chat_json(SYSTEM_PROMPT, [("user", prompt)], max_tokens=MAX_TOKENS,
                                     model_id=self._model_id_of(tenant))
        candidates = read_candidates(answer, shown)
        if candidates is None:
            raise ProviderError("the language model's answer is not the memories asked for",
                                details={"reason": "malformed"})
        return candidates


def _one_line(text: str) -> str:
    """Whitespace collapsed: a message's own line breaks cannot start a line of another speaker."""
    return _SPACES.sub(" ", text).strip()


def _speaker(message: ConversationMessage) -> str:
    # A name cannot end the speaker early (":") nor read as a seq ("]").
    name = _one_line((message.name or "")[:MAX_NAME_CHARS].replace(":", " ").replace("]", " "))
    return f"{name} ({message.role})" if name else message.role


def _type(value: Any) -> MemoryType:
    return value if isinstance(value, str) and value in MEMORY_TYPES else "fact"  # type: ignore[return-value]


def _importance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.5
    return min(1.0, max(0.0, float(value)))


def _category(value: Any) -> str:
    category = value.strip().lower() if isinstance(value, str) else ""
    return category if category in CATEGORIES else "other"


def _sources(value: Any, seqs: frozenset[int]) -> tuple[int, ...]:
    values = value if isinstance(value, list) else [value]
    return tuple(sorted({v for v in values if isinstance(v, int) and not isinstance(v, bool) and v in seqs}))
