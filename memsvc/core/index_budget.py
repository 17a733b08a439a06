"""What indexing one memory version may cost (issue 22, "Bounded work"). Pure: the indexer checks
these bounds between its stages (`memsvc.service.indexer`), and a version over one is set aside
(quarantined) instead of holding up everything behind it.

Memory. A version's value is at most `VALUE_BYTES` (the API refuses bigger writes), and every
stage's output is bounded linearly by it: its texts (at most `MAX_INDEXED_FIELDS` of them) hold at
most `max_text_chars` characters, its field tokens at most `max_field_chars` characters of paths and
equality keys, its keyword document at most `max_terms` terms. Each bound is checked as soon as
its stage has produced its output, before the next stage multiplies it (sealing, embedding,
writing), so a stage that goes wrong on some input is stopped at the first check after it. Field
tokens are an optimisation: a version over their bound gets none (filters decrypt it), where
over any other bound it is quarantined.

Time. `seconds` for one version's work, checked after each stage with an injected timer (never
preemptively: Python cannot stop a thread in the middle of a stage). A stage that never ends, or
that takes the process down, is what the attempt marks are for (`StoredItem.index_attempt`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["VALUE_BYTES", "NESTING", "ItemBudget", "OverBudget", "Stopwatch"]

# The API's limits on a value (a unit test keeps these equal to the service's): its size with its
# attributes, as JSON (`service.tenant_config.MAX_VALUE_BYTES`), and its nesting.
VALUE_BYTES = 256 * 1024
NESTING = 32  # levels of objects and arrays in a value (`service.memories.MAX_NESTING`)


class OverBudget(Exception):
    """A version's indexing went over one of its bounds. The message says which, in the service's
    words, and never quotes the memory."""


@dataclass(frozen=True)
class ItemBudget:
    """The bounds on one version's indexing (defaults: see README, "Poison items").

    `seconds`: an item's whole work is ~1-2 s at most on either backend (64 texts on MiniLM, or 64
    Titan calls 8 at a time, plus one entity extraction); 30 s is 15 times that, so only a
    pathological item or a stalled dependency goes over, and a stream batch with its suspects run
    alone still fits in the indexer Lambda's 300 s. The texts and terms bounds hold for every
    valid value (its texts are distinct leaves of it, and a term takes at least a character of
    text); the field tokens' bound for every value but a pathological one: a node's equality key
    holds its subtree, and a node is inside at most `NESTING` others, but a path repeats its
    ancestors' names, so a long name over many elements (`{"<200 KB>": [0, ...]}`) goes over."""

    seconds: float = 30.0
    max_text_chars: int = VALUE_BYTES
    max_field_chars: int = 2 * NESTING * VALUE_BYTES
    max_terms: int = VALUE_BYTES

    def check_texts(self, texts: Iterable[tuple[str, str]]) -> None:
        """The (path, text) pairs to embed: their texts, together."""
        _at_most(sum(len(text) for _, text in texts), self.max_text_chars, "its texts take {n} characters")

    def check_fields(self, fields: Iterable[tuple[str, str]]) -> None:
        """The (path, equality key) pairs its field tokens are made of, together."""
        _at_most(sum(len(path) + len(key) for path, key in fields), self.max_field_chars,
                 "its field tokens take {n} characters")

    def check_terms(self, terms: int) -> None:
        """Its keyword document's terms, repeats included."""
        _at_most(terms, self.max_terms, "its keyword document has {n} terms")


def _at_most(n: int, bound: int, what: str) -> None:
    if n > bound:
        raise OverBudget(f"{what.format(n=n)}, over the budget of {bound}")


class Stopwatch:
    """One unit of indexing work against the budget's `seconds`, on an injected timer (tests use a
    fake one)."""

    def __init__(self, timer: Callable[[], float], seconds: float) -> None:
        self._timer = timer
        self._seconds = seconds
        self._started = timer()

    def check(self, stage: str) -> None:
        """Raise `OverBudget` when the work so far, `stage` included, took longer than the budget."""
        elapsed = self._timer() - self._started
        if elapsed > self._seconds:
            raise OverBudget(f"{stage} took it to {elapsed:.1f} s, over the budget of {self._seconds:g} s")
