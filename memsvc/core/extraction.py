"""Learning from conversations (issue 24): what an extractor is given and what it answers. Pure.

A conversation is a list of messages; an extractor turns it into *candidates*: short standalone
statements about the user, each typed (fact, preference, decision, note), with an importance, a
category, and the messages it came from. Every candidate then goes through `remember`'s
consolidation, so extracting the same conversation twice changes nothing the second time.

Candidates are written in the third person about the speaker ("User is vegetarian", "Maria lives
in Lisbon"), so that they read the same whichever agent recalls them later.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memsvc.core.typed_memory import MemoryKind, MemoryType

__all__ = ["Role", "ConversationMessage", "Candidate", "MAX_EXTRACT_MESSAGES", "MAX_EXTRACT_CHARS", "MAX_MESSAGE_CHARS",
           "read_chars",
           "cut_candidate", "MAX_CANDIDATES", "MAX_CANDIDATE_CHARS", "CATEGORIES"]

Role = Literal["user", "assistant", "system", "tool"]

MAX_EXTRACT_MESSAGES = 100  # messages per extraction (a request, or one batch of a session)
MAX_EXTRACT_CHARS = 32_000  # their contents together: what one model prompt may carry
MAX_MESSAGE_CHARS = MAX_EXTRACT_CHARS // 4  # a message's share: one pasted document cannot crowd out the rest
MAX_CANDIDATES = 20  # candidates kept from one extraction, the most important first
MAX_CANDIDATE_CHARS = 500  # a candidate's content; a longer one is cut at a word boundary
# The categories extractors assign (a caller's remember may use any). Small and fixed, so that
# consolidation's category guard compares like with like.
CATEGORIES = ("identity", "location", "work", "education", "family", "relationships", "diet", "health",
              "hobbies", "travel", "preferences", "plans", "schedule", "finance", "technology", "other")


@dataclass(frozen=True)
class ConversationMessage:
    """One message of a conversation. `seq`: its number in its session, or its index in the
    request's list; candidates name the messages they came from by it."""

    role: Role
    content: str
    seq: int
    name: str | None = None  # who spoke (e.g. Maria); the role's speaker without one
    created_at: datetime | None = None


@dataclass(frozen=True)
class Candidate:
    """A memory worth keeping, as an extractor proposes it."""

    content: str
    type: MemoryType
    importance: float  # 0..1
    category: str | None
    source_seqs: tuple[int, ...]  # the `seq`s of the messages it came from, ascending
    kind: MemoryKind = "semantic"


def read_chars(content: str) -> int:
    """The characters of a message an extractor reads (its first `MAX_MESSAGE_CHARS`): a batch
    whose messages' `read_chars` add up to at most `MAX_EXTRACT_CHARS` is read whole."""
    return min(len(content), MAX_MESSAGE_CHARS)


def cut_candidate(content: str) -> str:
    """At most `MAX_CANDIDATE_CHARS`, cut at a word boundary when there is one in its second half."""
    if len(content) <= MAX_CANDIDATE_CHARS:
        return content
    cut = content[:MAX_CANDIDATE_CHARS]
    space = cut.rfind(" ")
    return (cut[:space] if space > MAX_CANDIDATE_CHARS // 2 else cut).rstrip()
