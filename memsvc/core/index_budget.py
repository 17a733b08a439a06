"""What indexing one memory version may cost (issue 22, "Bounded work"). Pure: the indexer checks
these bounds between its stages (`memsvc.service.indexer`), and a version over one is set aside
(quarantined) instead of holding up everything behind it.

Memory. A version's value is at most `VALUE_BYTES` (the API refuses bigger writes), and every
stage's output is bounded linearly by it: its texts (at most `MAX_INDEXED_FIELDS` of them) hold at
most `max_text_chars` characters, its keyword document at most `max_terms` terms, its field tokens
at most `MAX_FIELD_TOKENS` (`core.field_tokens`). Each bound is checked as soon as its stage has
produced its output, before the next stage multiplies it (sealing, embedding, writing), so a
stage that goes wrong on some input is stopped at the first check after it, and the version is
quarantined.

Time. `seconds` for one version's work, checked after each stage with an injected timer (never
preemptively: Python cannot stop a thread in the middle of a stage). A stage that never ends, or
that takes the process down, is what the attempt marks are for (`StoredItem.index_attempt`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["VALUE_BYTES", "NFKC_GROWTH", "ItemBudget", "OverBudget", "Stopwatch"]

# The API's limit on a value with its attributes, as JSON (`service.tenant_config.MAX_VALUE_BYTES`;
# a unit test keeps them equal: core cannot import the service).
VALUE_BYTES = 256 * 1024
NFKC_GROWTH = 18  # the most characters NFKC and case folding make of one (U+FDFA)


class OverBudget(Exception):
    """A version's indexing went over one of its bounds. The message says which, in the service's
    words, and never quotes the memory. `waiting_on_a_model`: one call to a model (embedding,
    entity extraction) took longer than the whole budget by itself, which says more about the
    model than about a version whose input to it is bounded (the indexer retries it rather than
    blame it)."""

    def __init__(self, message: str, *, waiting_on_a_model: bool = False) -> None:
        super().__init__(message)
        self.waiting_on_a_model = waiting_on_a_model


@dataclass(frozen=True)
class ItemBudget:
    """The bounds on one version's indexing (defaults: see docs/api.md, "Poison items").

    `seconds`: an item's whole work with short texts is ~1-2 s at most on either backend (64 texts
    on MiniLM, or 64 Titan calls 8 at a time, plus one entity extraction); 30 s is 15 times that,
    so only a pathological item or a stalled model goes over (a model's time is the model's:
    retried, not blamed; 64 texts of 500 words on e5-small come near it on a slow machine). The
    sizes hold for every valid value, so only a fault trips them: its texts are distinct leaves
    of it; a term takes at least a character of its analysed text, which NFKC and case folding
    make at most `NFKC_GROWTH` times longer (U+FDFA is 18 characters). Its
    field tokens need no bound here: `core.field_tokens.value_fields` keeps at most
    `MAX_FIELD_TOKENS` of them, on paths of at most `MAX_FIELD_PATH_CHARS`."""

    seconds: float = 30.0
    max_text_chars: int = VALUE_BYTES
    max_terms: int = NFKC_GROWTH * VALUE_BYTES

    def check_texts(self, texts: Iterable[tuple[str, str]]) -> None:
        """The (path, text) pairs to embed: their texts, together."""
        _at_most(sum(len(text) for _, text in texts), self.max_text_chars, "its texts take {n} characters")

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

    def now(self) -> float:
        return self._timer()

    def check(self, stage: str, *, model_seconds: float = 0.0) -> None:
        """Raise `OverBudget` when the work so far, `stage` included, took longer than the budget;
        `model_seconds` of it were one call to a model, which alone may be what went over."""
        elapsed = self._timer() - self._started
        if elapsed > self._seconds:
            raise OverBudget(f"{stage} took it to {elapsed:.1f} s, over the budget of {self._seconds:g} s",
                             waiting_on_a_model=model_seconds > self._seconds)
