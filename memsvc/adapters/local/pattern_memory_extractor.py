"""The local `MemoryExtractor`: `core.memory_patterns` decides what a sentence says, the embedder
what the patterns cannot (issue 24).

The patterns find statements of known kinds (identity, place, diet, family, preferences,
decisions, plans, corrections) and leave every other first-person clause "open". One embed call
per extraction then compares each statement with two small labelled prototype sets: facts worth
remembering, and chit-chat (thanks, "I'll think about it", a reaction). A pattern's statement that
reads as chit-chat is dropped; an open clause is kept only when it reads clearly as a personal fact
(`OPEN_MIN_SIMILARITY`, `OPEN_MARGIN`, calibrated on eval/extraction's dev half). The prototypes
are embedded once, with the first extraction's statements, and kept.

Then, within the extraction: a statement the same-fact judge calls the same as an earlier one
replaces it (the later wins, with both messages as its sources), and a correction ("actually, ...")
replaces the speaker's earlier statement of its category that it contradicts or resembles.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memsvc.core.extraction import MAX_CANDIDATES, Candidate, ConversationMessage, cut_candidate
from memsvc.core.memory_patterns import Finding, find_memories
from memsvc.core.same_fact import judge_statements, normalize_content
from memsvc.ports import Embedder

__all__ = ["PatternMemoryExtractor", "KEEP_PROTOTYPES", "CHITCHAT_PROTOTYPES"]

KEEP_PROTOTYPES = (
    "User lives in Berlin", "User is allergic to nuts", "User works as a teacher", "User has two children",
    "User prefers aisle seats", "User decided to use Postgres", "User is training for a marathon",
    "User takes medication every day", "User uses Linux at work", "User is saving for a house",
    "User's budget is 500 dollars", "User plays the piano", "User is cooking dinner for their parents on Sunday",
    "User wants to learn Spanish this year", "User is choosing a database for their project",
    "User teaches history at a school", "User drinks coffee every morning",
    "User is moving to a new apartment next month", "User's sister is getting married in June",
)
CHITCHAT_PROTOTYPES = (
    "User says thanks", "User will think about it", "User is just saying hi", "User is bored",
    "User will check it out", "User is fine", "User says okay", "User is curious", "User laughs at the joke",
    "User has a question", "User is not sure", "User says goodbye", "User will paste the code",
    "User will send the link", "User agrees with that", "User likes the idea", "User needs help with something",
    "User will get back to you", "User will try that", "User is happy to hear that",
    "User will let you know", "User doesn't know", "User wants a recommendation",
)
# Cosines of MiniLM unit vectors, chosen on eval/extraction/dev.json (`memsvc eval --extraction`).
# MiniLM scores these short statements low and close together ("User is 29 years old" is 0.66 from
# "User is fine"), so the embedder overrules a pattern only when the statement is plainly chit-chat.
OPEN_MIN_SIMILARITY = 0.45  # an open clause this close to a fact worth keeping ...
OPEN_MARGIN = 0.05  # ... and this much closer to one than to any chit-chat
DROP_MIN_SIMILARITY = 0.6  # a pattern's statement this close to chit-chat ...
DROP_MARGIN = 0.15  # ... and this much closer to it than to any fact is dropped
SUPERSEDE_SIMILARITY = 0.6  # a correction replaces an earlier statement of its category this close
MAX_FINDINGS = 100  # the last ones: an adversarial conversation embeds no more than this


class PatternMemoryExtractor:
    """`MemoryExtractor` without a language model. Safe to share between threads."""

    model_id = "deterministic"

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._prototypes: tuple[np.ndarray, np.ndarray] | None = None  # (keep, chit-chat) vectors

    def extract(self, tenant: str, messages: Sequence[ConversationMessage]) -> list[Candidate]:
        findings = find_memories(messages)[-MAX_FINDINGS:]
        if not findings:
            return []
        # The prototypes are about "User": a named speaker's statements are compared as the user's.
        vectors, keep, chat = self._embed([_as_user(f) for f in findings])
        kept: list[tuple[Finding, np.ndarray]] = []
        for finding, vector, k, c in zip(findings, vectors, keep, chat, strict=True):
            if finding.pattern == "open":
                if k < OPEN_MIN_SIMILARITY or k - c < OPEN_MARGIN:
                    continue
            elif c >= DROP_MIN_SIMILARITY and c - k >= DROP_MARGIN:
                continue
            kept.append((finding, vector))
        return _ranked(_deduplicated(kept))

    def _embed(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The texts' vectors and, for each, its best cosine to the keep and the chit-chat
        prototypes: one embed call (the prototypes ride along the first time)."""
        prototypes = self._prototypes
        extra = [] if prototypes else [*KEEP_PROTOTYPES, *CHITCHAT_PROTOTYPES]
        vectors = np.asarray(self._embedder.embed(texts + extra), dtype=np.float32)
        if prototypes is None:
            rest = vectors[len(texts):]
            prototypes = (rest[:len(KEEP_PROTOTYPES)], rest[len(KEEP_PROTOTYPES):])
            self._prototypes = prototypes  # a race only embeds them twice
        vectors = vectors[:len(texts)]
        return vectors, (vectors @ prototypes[0].T).max(axis=1), (vectors @ prototypes[1].T).max(axis=1)


def _as_user(finding: Finding) -> str:
    if finding.speaker != "User" and finding.content.startswith(finding.speaker):
        return "User" + finding.content[len(finding.speaker):]
    return finding.content


def _deduplicated(found: list[tuple[Finding, np.ndarray]]) -> list[Finding]:
    """Later statements win: one the judge calls the same as an earlier one replaces it, and a
    correction replaces the speaker's earlier statements of its category that it contradicts or
    resembles."""
    out: list[tuple[Finding, np.ndarray]] = []
    for finding, vector in found:
        key = normalize_content(finding.content).casefold()
        seqs = set(finding.seqs)
        survivors = []
        for earlier, earlier_vector in out:
            relation = judge_statements(earlier.content, finding.content, existing_category=earlier.category,
                                        candidate_category=finding.category).relation
            same = relation == "same" or normalize_content(earlier.content).casefold() == key
            corrected = (finding.correction and earlier.speaker == finding.speaker
                         and earlier.category == finding.category
                         and (relation == "contradiction"
                              or float(earlier_vector @ vector) >= SUPERSEDE_SIMILARITY))
            if same or corrected:
                seqs |= set(earlier.seqs)
            else:
                survivors.append((earlier, earlier_vector))
        merged = Finding(finding.content, finding.type, finding.category, finding.importance,
                         tuple(sorted(seqs)), finding.pattern, finding.speaker, finding.correction)
        out = [*survivors, (merged, vector)]
    return [f for f, _ in out]


def _ranked(findings: list[Finding]) -> list[Candidate]:
    """The most important first (message order among equals), at most `MAX_CANDIDATES`."""
    ordered = sorted(findings, key=lambda f: -f.importance)  # stable: message order kept
    return [Candidate(content=cut_candidate(f.content), type=f.type, importance=f.importance, category=f.category,
                      source_seqs=f.seqs) for f in ordered[:MAX_CANDIDATES]]

