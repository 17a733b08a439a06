"""The local `EntityExtractor`: deterministic patterns, no model.

What it finds, sentence by sentence (docs/graph.md, "Knowledge graph", lists its limits):
- codes such as `INC-123` or `PROJ-7` (TICKET);
- runs of capitalised words or acronyms ("Alice Smith", "Project A", "Bank of England", "AWS");
  "Project X" and "X Project" are PROJECTs, "Team X" an ORGANIZATION, a name ending in Inc, Corp, Ltd, LLC,
  GmbH or Labs an ORGANIZATION, the subject of "works on" or "reports to" a PERSON, anything
  else a CONCEPT. A sentence's first word alone counts only as a relation's argument ("Deploy
  failed" names nothing; "Alice works on Apollo" names Alice);
- relations from a small set of verb patterns between two names, where either side may also be
  "the" and up to three lower-case words ("Project A caused the memory leak"): works on, caused /
  led to / was caused by, depends on, is part of, uses, blocks, fixed / was fixed by, reports to,
  owns, is a member of, is located in;
- any two names in one sentence with no pattern between them: RELATES_TO.

E-mail addresses and URLs are blanked out first: they are never entities.

Extraction is linear in the text's length (at most `MAX_EXTRACTED_CHARS`, but the bound holds
without it): a relation's argument starts only at the start of a word, so no pattern scans a
long word again from each of its characters, and the names of one sentence relate only as far
as they can be kept (the first `MAX_ENTITIES_PER_MEMORY`), not pairwise.
"""

from __future__ import annotations

import re
from itertools import islice

from memsvc.core.graph import MAX_ENTITIES_PER_MEMORY, MAX_RELATIONS_PER_MEMORY, Extraction

__all__ = ["PatternExtractor"]

# An address is a whole run of non-spaces (so it is looked for from a run's start only); a URL's
# scheme is at most 32 characters (so a long dotted run is not read to its end from each dot).
_EMAIL_OR_URL = re.compile(r"(?<!\S)\S+@\S+|\b[a-z][a-z0-9+.-]{0,31}://\S+", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?;:])\s+|\n+")
_CODE = r"[A-Z][A-Z0-9]{1,9}-\d{1,6}\b"
# Python's `re` has no \p{Lu}: every upper-case letter of the Basic Multilingual Plane ("Å", "Ø").
_UPPER = "[" + "".join(re.escape(c) for c in map(chr, range(0x10000)) if c.isupper()) + "]"
_CAP_WORD = rf"(?:{_UPPER}[\w'&]*(?:-[\w]+)*)"
_CAP_PHRASE = rf"{_CAP_WORD}(?:[ \t]+(?:of[ \t]+)?{_CAP_WORD}){{0,4}}"
_NAME = rf"(?:{_CODE}|{_CAP_PHRASE})"
# Words that end a lower-case noun phrase ("the memory leak in production": "memory leak").
_STOP = ("in", "on", "at", "for", "with", "by", "from", "to", "of", "and", "or", "but", "after", "before",
         "during", "when", "while", "yesterday", "today", "tomorrow", "again", "was", "is", "were", "are", "has",
         "had", "have", "be", "been", "that", "which", "who", "because", "since", "so", "then", "last", "this")
_NOUN_WORD = rf"(?!(?:{'|'.join(_STOP)})\b)[a-z][\w-]*"
_NOUN = rf"[Tt]he[ \t]+{_NOUN_WORD}(?:[ \t]+{_NOUN_WORD}){{0,2}}"
# Where an argument may start: at a word's start, or after one opening mark ("'Apollo'"). Never
# inside a word, or a long word would be read to its end again from each of its characters.
_WORD_START = r"(?:(?<![\w'&-])|(?<=(?<![\w'&-])['&-]))"
_ARG = rf"{_WORD_START}(?:{_NAME}|{_NOUN})"

# (pattern between the two arguments, relation type, whether the sentence's order is (target,
# source): "B was caused by A" is B -CAUSED_BY-> A like "A caused B" read backwards).
_VERBS: tuple[tuple[str, str, bool], ...] = (
    (r"(?:works|worked|is working|was working|work) on", "WORKS_ON", False),
    (r"(?:was|is|were|are|has been|had been)? ?caused by", "CAUSED_BY", False),
    (r"(?:caused|causes|cause|led to|leads to)", "CAUSED_BY", True),
    (r"(?:depends|depended|depend) on", "DEPENDS_ON", False),
    (r"(?:is|was|are|were) (?:a )?part of", "PART_OF", False),
    (r"(?:uses|used|use)", "USES", False),
    (r"(?:was|is|were|are) blocked by", "BLOCKS", True),
    (r"(?:blocks|blocked|block)", "BLOCKS", False),
    (r"(?:was|is|were|are|has been) fixed by", "FIXES", True),
    (r"(?:fixes|fixed|fix|resolved|resolves)", "FIXES", False),
    (r"(?:reports|reported|report) to", "REPORTS_TO", False),
    (r"(?:owns|owned|own)", "OWNS", False),
    (r"(?:is|was|are|were) (?:a )?members? of|joined|joins", "MEMBER_OF", False),
    (r"(?:is|was|are|were) located in", "LOCATED_IN", False),
)
_RELATIONS = [(re.compile(rf"(?P<a>{_ARG})[ \t]+(?:{verb})[ \t]+(?P<b>{_ARG})"), kind, backwards)
              for verb, kind, backwards in _VERBS]
# What every relation and every name needs somewhere in the sentence: one scan each, so the
# fourteen relation patterns and the name pattern run only where they can match at all.
_ANY_VERB = re.compile("|".join(f"(?:{verb})" for verb, _, _ in _VERBS))
_ANY_UPPER = re.compile(_UPPER)
_NAMES = re.compile(_NAME)
# Capitalised only because they start a sentence, or never a name on their own.
_NOT_NAMES = frozenset("""a an the i we you he she it they this that these those my our your his her its their
yesterday today tomorrow then also however after before when while if but and so in on at for from to of
monday tuesday wednesday thursday friday saturday sunday january february march april may june july august
september october november december ok yes no please thanks note todo""".split())
_ORG_SUFFIXES = ("inc", "corp", "ltd", "llc", "gmbh", "labs")
_PERSON_SUBJECT_OF = {"WORKS_ON", "REPORTS_TO", "MEMBER_OF"}


class PatternExtractor:
    def extract(self, text: str) -> Extraction:
        """The text's entities and relations. O(len(text))."""
        entities: dict[str, str] = {}  # name -> type, in order of appearance
        relations: dict[tuple[str, str], str] = {}  # (source, target) -> type
        for sentence in _SENTENCES.split(_EMAIL_OR_URL.sub(" ", text)):
            found = self._sentence(sentence, entities, relations)
            # Co-mention: names of one sentence relate. Only relations between the first entities
            # are kept, and whether a name is one of them is settled at its first mention, so the
            # pairs of the others (quadratic in a sentence's names) are never made.
            first = set(islice(entities, MAX_ENTITIES_PER_MEMORY))
            related = [n for n in found if n in first]
            for i, a in enumerate(related):
                for b in related[i + 1:]:
                    if (a, b) not in relations and (b, a) not in relations:
                        relations[(a, b)] = "RELATES_TO"
        names = list(entities)[:MAX_ENTITIES_PER_MEMORY]
        kept = set(names)
        return Extraction(
            entities=tuple((n, entities[n]) for n in names),
            relations=tuple((a, b, kind) for (a, b), kind in relations.items()
                            if a in kept and b in kept)[:MAX_RELATIONS_PER_MEMORY],
        )

    def _sentence(self, sentence: str, entities: dict[str, str], relations: dict[tuple[str, str], str]) -> list[str]:
        """Adds the sentence's names and typed relations; returns its names in order."""
        found: dict[str, None] = {}  # an ordered set

        def add(name: str, kind: str) -> None:
            if name not in entities or (entities[name] == "CONCEPT" and kind != "CONCEPT"):
                entities[name] = kind
            found[name] = None

        for pattern, kind, backwards in _RELATIONS if _ANY_VERB.search(sentence) else ():
            for m in pattern.finditer(sentence):
                a, b = _clean(m.group("a")), _clean(m.group("b"))
                if not a or not b or a == b:
                    continue
                add(a, _type_of(a, "PERSON" if kind in _PERSON_SUBJECT_OF else "CONCEPT"))
                add(b, _type_of(b, "PROJECT" if kind == "WORKS_ON" else
                                "ORGANIZATION" if kind == "MEMBER_OF" else
                                "PERSON" if kind == "REPORTS_TO" else "CONCEPT"))
                source, target = (b, a) if backwards else (a, b)
                relations.pop((target, source), None)  # a typed relation replaces a co-mention
                relations[(source, target)] = kind
        first = True
        for m in _NAMES.finditer(sentence) if _ANY_UPPER.search(sentence) else ():
            name = _clean(m.group(0))
            at_start = first and not sentence[:m.start()].strip()
            first = False
            if not name or (at_start and " " not in name and not re.fullmatch(_CODE, name) and not name.isupper()):
                continue
            add(name, _type_of(name, "CONCEPT"))
        return list(found)


def _clean(name: str) -> str:
    """A name without the leading words that are capitalised only by position ("The", "Yesterday")."""
    words = name.split()
    while words and words[0].casefold() in _NOT_NAMES:
        words = words[1:]
    return " ".join(words)


def _type_of(name: str, by_role: str) -> str:
    if re.fullmatch(_CODE, name):
        return "TICKET"
    first, last = name.split()[0].casefold(), name.split()[-1].casefold().rstrip(".")
    if "project" in (first, last) and " " in name:
        return "PROJECT"
    if first == "team" and " " in name or last in _ORG_SUFFIXES:
        return "ORGANIZATION"
    return by_role
