r"""Text -> keyword terms, and BM25. Pure functions: the analyzer that the indexer runs on a
memory's texts and the search runs on a query, so both see the same terms.

Analysis: Unicode NFKC, case folding, words of letters and digits, Lucene's English stop words
dropped, Snowball (Porter2) English stemming. A query also drops a fuller list of English
function words (`query_terms`): "what did Maria say" asks for Maria and saying, and a memory
holding "what" or "did" is no closer to it. Only the query: the index keeps those words, so the
list can change without re-indexing. A word joined to the next by `-`, `.`, `/`, `:`
or `_` (a ticket id `INC-20931`, a version `3.12.1`, a date `2026-03-14`) is also kept whole,
so an exact code outranks the memories that only share its parts.

Analysis is linear in the text's length: words are found once by `\w+`, which never backtracks,
and compounds are put together from their spans (a pattern such as `\w+(?:[-./:_]\w+)+` tries
every start of a long word again: a 50,000-character word took 28 s).
"""

from __future__ import annotations

import importlib
import math
import re
import sys
import threading
import types
from collections import Counter
from collections.abc import Iterable
from functools import cache, lru_cache
from importlib.util import find_spec
from typing import Any

from memsvc.core.unicode_text import normalize

__all__ = ["STOP_WORDS", "QUERY_STOP_WORDS", "analyze", "query_terms", "term_counts", "idf", "bm25", "BM25_K1", "BM25_B", "MAX_TERM_LENGTH"]

BM25_K1 = 1.2  # Lucene's default
# No length normalisation: a memory is a few sentences, and normalising by length lifted every
# short line that shares a query's commonest words ("(8 May 2023) Maria said, 'Fair enough.'")
# above the longer one that answers it (benchmarks/README.md, "Retrieval on long conversations").
# With b = 0 a keyword match (`core.ranking.keyword_match`) is the share of the query's IDF that
# the memory holds (a repeated term counts up to (k1 + 1) times its IDF; the match is capped at 1).
BM25_B = 0.0
MAX_TERM_LENGTH = 64  # longer runs (base64 blobs, hashes) are noise to a keyword index

STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split()
)
# NLTK's English stop words, cut at apostrophes as words are (`don't` is `don` and `t`).
QUERY_STOP_WORDS = STOP_WORDS | frozenset(
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers "
    "herself its itself them theirs themselves what which who whom those am were been being have has had having "
    "do does did doing because until while about against between through during before after above below from "
    "up down out off over under again further once here when where why how all any both each few more most other "
    "some nor only own same so than too very s t can just don should now d ll m o re ve y ain aren couldn didn "
    "doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn".split())
_WORD = re.compile(r"\w+", re.UNICODE)
_JOINERS = frozenset("-./:")  # and `_`, which is a word character: it joins inside a word
_ENGLISH_ONLY = "_memsvc_snowballstemmer_english"


@cache
def _english_stemmer_class() -> Any:
    """snowballstemmer's English stemmer, imported alone when first used. The package's
    `__init__` imports the stemmers of all its 30 languages (15-20 ms of a Lambda cold start), so
    its directory is imported again under a private name, whose `__init__` is never run."""
    if _ENGLISH_ONLY not in sys.modules:
        package = types.ModuleType(_ENGLISH_ONLY)
        package.__path__ = list(find_spec("snowballstemmer").submodule_search_locations)
        sys.modules[_ENGLISH_ONLY] = package
    return importlib.import_module(f"{_ENGLISH_ONLY}.english_stemmer").EnglishStemmer


# A stemmer keeps the word it works on in itself: one shared by two threads stems one word with
# the other's letters (an IndexError, a 500 on a write, under concurrent requests and indexing).
_per_thread = threading.local()


def _english_stemmer() -> Any:
    stemmer = getattr(_per_thread, "english", None)
    if stemmer is None:
        stemmer = _per_thread.english = _english_stemmer_class()()
    return stemmer


@lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    return _english_stemmer().stemWord(word)


def analyze(text: str) -> list[str]:
    """The text's terms, in order, repeats kept (term frequency counts them): its words, then its
    compounds. O(len(text)); at most one term per word and one per compound, each at most
    `MAX_TERM_LENGTH` characters."""
    return _terms(text, STOP_WORDS)


def query_terms(text: str) -> list[str]:
    """A query's terms: `analyze`'s, without English function words. O(len(text))."""
    return _terms(text, QUERY_STOP_WORDS)


def _terms(text: str, stop_words: frozenset[str]) -> list[str]:
    folded = normalize("NFKC", text).casefold()
    words = [(m.start(), m.end()) for m in _WORD.finditer(folded)]
    terms = [_stem(w) for start, end in words
             if end - start <= MAX_TERM_LENGTH and (w := folded[start:end]) not in stop_words]
    terms.extend(_compounds(folded, words))
    return terms


def _compounds(folded: str, words: list[tuple[int, int]]) -> list[str]:
    r"""What `\w+(?:[-./:_]\w+)+` finds, in one pass over the words' spans: each chain of two or
    more words joined by single `-./:` (`inc-20931`, `3.12.1`), and each word alone that holds `_`
    between two of its characters (`snake_case`). O(number of words)."""
    found = []
    first = 0  # the index of the chain's first word
    for i, (_, end) in enumerate(words):
        if i + 1 < len(words) and words[i + 1][0] == end + 1 and folded[end] in _JOINERS:
            continue  # joined to the next word
        start = words[first][0]
        if end - start <= MAX_TERM_LENGTH and (i > first or "_" in folded[start + 1 : end - 1]):
            found.append(folded[start:end])
        first = i + 1
    return found


def term_counts(texts: Iterable[str]) -> Counter[str]:
    """Term frequencies over several texts (a memory's indexed fields form one document).
    O(total length of `texts`)."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(analyze(text))
    return counts


def idf(df: int, n_docs: int) -> float:
    """BM25's inverse document frequency (Lucene's form, never negative)."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def bm25(tf: int, df: int, n_docs: int, length: int, avg_length: float) -> float:
    """One term's BM25 contribution to one document."""
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * length / avg_length) if avg_length > 0 else BM25_K1
    return idf(df, n_docs) * tf * (BM25_K1 + 1.0) / (tf + norm)
