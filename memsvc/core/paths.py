"""Which text of a memory's value gets embedded: the `index_fields` paths.

Path grammar: dot-separated names, each optionally followed by selectors `[N]`, `[-N]` (from the
end) or `[*]` (every element): `"text"`, `"meta.title"`, `"items[*].name"`, `"log[-1]"`.
Extracted texts are labelled with concrete paths in the same syntax: `"items[1].name"`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import chain
from typing import Any, Literal

from memsvc.core.errors import InvalidArgument

__all__ = ["MAX_INDEX_FIELDS", "MAX_INDEXED_FIELDS", "extract_texts", "worth_embedding", "validate_index_fields"]

MAX_INDEX_FIELDS = 64  # paths an `index_fields` list may name
MAX_INDEXED_FIELDS = 64  # text fields one version has embedded (a write with more is refused)

_SEGMENT = re.compile(r"([^.\[\]]+)((?:\[(?:\*|-?[0-9]+)\])*)")
_SELECTOR = re.compile(r"\[(\*|-?[0-9]+)\]")

Token = str | int | None  # a dict key, a list index, or None for [*]
Location = tuple[str | int, ...]  # a concrete leaf: dict keys and non-negative list indexes


def worth_embedding(texts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Of the leaves a value without `index_fields` gives, those worth a vector: all but labels, one
    ASCII word each, unless nothing else is left. A label (`"type": "preference"`, an id, a date) says
    nothing to an embedding model, yet a memory's vectors are max-pooled over its fields, so the
    label's cosine stood for the memory: e5-small scores such words 0.8 against any question,
    above the sentence beside them (`"I am allergic to peanuts"` lost "what food should I avoid?"
    to a seat preference). Every leaf stays in the keyword index. Only ASCII counts as a label: a
    sentence of a script written without spaces (Chinese, Japanese, Thai) is one "word" to `split`."""
    sentences = [(path, text) for path, text in texts if not (text.isascii() and len(text.split(maxsplit=1)) == 1)]
    return sentences or texts


def extract_texts(value: dict[str, Any], index_fields: list[str] | None | Literal[False], *,
                  limit: int | None = None) -> list[tuple[str, str]]:
    """The `(field_path, text)` pairs to embed, one per concrete leaf, in a stable order; the first
    `limit` of them when given (the walk stops there).

    `index_fields=None` takes every non-blank string leaf of `value` in document order. Explicit
    fields are taken in the order given; a number or bool they reach is included as its JSON
    text, a dict or list they reach contributes its string leaves. A leaf is reported once even
    when several fields reach it; `False` yields nothing.

    O(len(index_fields) x size of `value` x nesting) in time, at most 64 walks of the value (a
    path visits a node once, and a location is a tuple as long as its node is deep; nesting is
    bounded by the API, `memories.MAX_NESTING`, and so is the recursion), and O(size of `value`)
    in memory. The walks share their leaf listings (`_Walk`): a subtree's leaves are listed once,
    however many paths reach it, so paths that all lead into one big list no longer list it
    once each (64 of them took 2 s). The value must be a tree, as parsed JSON is.
    """
    if index_fields is False:
        return []
    walk = _Walk()
    if index_fields is None:
        found = walk.leaves(value, (), scalars=False)
    else:
        found = chain.from_iterable(walk.resolve(value, _tokenize(field), 0, ()) for field in dict.fromkeys(index_fields))
    seen: set[Location] = set()
    texts = []
    for location, text in found:
        if location not in seen:
            seen.add(location)
            texts.append((_render(location), text))
            if len(texts) == limit:
                break
    return texts


def validate_index_fields(obj: Any) -> list[str] | None | Literal[False]:
    """Check `index_fields`: None (the default), False or [] (no indexing: what a LangGraph store
    does with `index=[]`), or up to 64 valid paths.

    Raises `InvalidArgument` (details field `index_fields`) otherwise. O(total length of the paths).
    """
    if obj is None or obj is False:
        return obj
    if not isinstance(obj, (list, tuple)) or len(obj) > MAX_INDEX_FIELDS:
        raise InvalidArgument(
            f"index_fields must be false or a list of at most {MAX_INDEX_FIELDS} paths",
            details={"field": "index_fields", "max_fields": MAX_INDEX_FIELDS},
        )
    for path in obj:
        _tokenize(path)
    return list(obj) if obj else False


def _tokenize(path: Any) -> list[Token]:
    segments = [_SEGMENT.fullmatch(s) for s in path.split(".")] if isinstance(path, str) else [None]
    if any(m is None for m in segments):
        raise InvalidArgument(
            f"index field {path!r} is not a valid path (e.g. 'text', 'meta.title', 'items[*].name')",
            details={"field": "index_fields", "path": path},
        )
    tokens: list[Token] = []
    for m in segments:
        tokens.append(m[1])
        tokens.extend(None if s == "*" else _index(s) for s in _SELECTOR.findall(m[2]))
    return tokens


def _index(selector: str) -> int:
    """A selector's list index. One with more than 18 digits is beyond every list (int() refuses
    more than 4,300 digits, and is quadratic in them below that)."""
    if len(selector.lstrip("-").lstrip("0")) > 18:
        return -_BEYOND if selector.startswith("-") else _BEYOND
    return int(selector)


_BEYOND = 10**18


class _Walk:
    """Several paths' walks of one value (a tree: nodes told apart by `id`), which list a subtree's
    leaves once, whichever path reaches it first."""

    def __init__(self) -> None:
        self._listed: set[int] = set()

    def resolve(self, obj: Any, tokens: list[Token], at: int, location: Location) -> Iterator[tuple[Location, str]]:
        """The leaves that `tokens[at:]` reaches from `obj`, but those another path listed already."""
        if at == len(tokens):
            yield from self.leaves(obj, location, scalars=True)
            return
        head = tokens[at]
        if isinstance(head, str):
            if isinstance(obj, dict) and head in obj:
                yield from self.resolve(obj[head], tokens, at + 1, location + (head,))
        elif isinstance(obj, list):
            indexes = range(len(obj)) if head is None else [head + len(obj) if head < 0 else head]
            # An element without the next name leads nowhere: skipped without a generator of its own
            # (64 paths over 87,000 elements took 0.9 s).
            name = tokens[at + 1] if at + 1 < len(tokens) and isinstance(tokens[at + 1], str) else None
            for i in indexes:
                if 0 <= i < len(obj) and (name is None or (isinstance(obj[i], dict) and name in obj[i])):
                    yield from self.resolve(obj[i], tokens, at + 1, location + (i,))

    def leaves(self, obj: Any, location: Location, *, scalars: bool) -> Iterator[tuple[Location, str]]:
        if isinstance(obj, str):
            if obj.strip():
                yield location, obj
        elif isinstance(obj, (dict, list)):
            if id(obj) in self._listed:
                return
            self._listed.add(id(obj))
            children = obj.items() if isinstance(obj, dict) else enumerate(obj)
            for key, child in children:
                yield from self.leaves(child, location + (key,), scalars=False)
        elif scalars and isinstance(obj, (bool, int, float)):
            yield location, json.dumps(obj)


def _render(location: Location) -> str:
    rendered = ""
    for step in location:
        if isinstance(step, int):
            rendered += f"[{step}]"
        else:
            rendered += f".{step}" if rendered else step
    return rendered
