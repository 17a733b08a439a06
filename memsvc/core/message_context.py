"""A session message as the indexes see it: a turn of a conversation (issue 23). Pure.

A message's own words rarely say who spoke, when, or what they answer ("Yes! A beagle named
Rufus."), and those are what a question about it asks ("what dog did Maria adopt in May?"). So a
message is indexed as two texts, each embedded: its content quoted after its speaker and the day
(`(8 May 2023) Maria said, "..."`), and the same with the full date and a bounded part of the turn
before it. Search ranks a message by the better of its two vectors, so the context helps a reply
that needs it and costs little to one that does not. The keyword document holds both texts'
terms: the content's, the speaker's and the day's twice, the ISO date's and the turn before's
once. The value itself is unchanged: search and recall show the message's content.

Measured with MiniLM on the dev half of eval/conversations.json, where the turn before is chit-chat
that never helps (`python -m benchmarks.message_context`, R@5 semantic / keyword): these two texts
0.553 / 0.303; unquoted (`Maria said: ...`) and the first undated, 0.362 / 0.294; one text holding
date, turn before and content 0.219 / 0.254; the content alone 0.092 / 0.272.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memsvc.core.sessions import MESSAGE_KEY_DIGITS, is_messages_namespace

__all__ = ["Turn", "MESSAGE_FIELD", "TURN_FIELD", "PREVIOUS_TURN_CHARS", "MAX_NAME_CHARS", "is_session_message",
           "turn_of", "spoken_on", "turn_texts"]

MESSAGE_FIELD = "content"  # the message's field that is indexed, and shown
TURN_FIELD = "content~turn"  # the name of its vector in its turn: no message value has such a path
PREVIOUS_TURN_CHARS = 300  # of the turn before, at most: context, not a second message
MAX_NAME_CHARS = 64
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # spelled out here: strftime's %B follows the process's locale


@dataclass(frozen=True)
class Turn:
    speaker: str  # the message's name, or its role when it has none
    content: str


def is_session_message(namespace: tuple[str, ...], key: str) -> bool:
    """Where `service.sessions` appends a message: `["user", U, "sessions", S, "messages"]`, under a
    seq (an item put there through `/v1/memories` under another key is no message)."""
    return is_messages_namespace(namespace) and len(key) == MESSAGE_KEY_DIGITS and key.isascii() and key.isdigit()


def turn_of(value: Any) -> Turn | None:
    """The turn a message's value holds; None for a value that is no message (a PUT can put any
    value under a message's key)."""
    if not isinstance(value, dict):
        return None
    content, role, name = value.get(MESSAGE_FIELD), value.get("role"), value.get("name")
    if not isinstance(content, str) or not isinstance(role, str):
        return None
    return Turn(name if isinstance(name, str) and name.strip() else role, content)


def spoken_on(at: datetime) -> str:
    """A date in words and in ISO form, e.g. `8 May 2023 (2023-05-08)`: a question names the
    month, a keyword search may give the ISO date."""
    return f"{at.day} {_MONTHS[at.month - 1]} {at.year} ({at.date().isoformat()})"


def turn_texts(turn: Turn, at: datetime, previous: Turn | None) -> list[tuple[str, str]]:
    """The (field, text) pairs a message is indexed as: `(8 May 2023) Maria said, "Yes! A beagle
    named Rufus."` and `On 8 May 2023 (2023-05-08), in reply to "Did you end up adopting?", Maria
    said, "Yes! A beagle named Rufus."` (no reply in a session's first message). MiniLM reads a
    quoted utterance after its speaker far better than `Maria said: ...` (semantic R@5 on the dev
    set's messages 0.36 without the quotes and the short date, 0.55 with them,
    `benchmarks/message_context.py`). The turn before comes before the content, so that a model
    that reads only a text's beginning cuts a long content, never it. Its speaker is left out:
    named, a reply is taken for what that speaker said (MiniLM put Dev's "Did you end up
    adopting?", after a turn of Maria's, above Maria's answer for "what dog did Maria adopt")."""
    said = f'{turn.speaker} said, "{turn.content}"'
    replying = "" if previous is None else f'in reply to "{_cut(previous.content, PREVIOUS_TURN_CHARS)}", '
    return [(MESSAGE_FIELD, f"({at.day} {_MONTHS[at.month - 1]} {at.year}) {said}"),
            (TURN_FIELD, f"On {spoken_on(at)}, {replying}{said}")]


def _cut(text: str, limit: int) -> str:
    """At most `limit` characters, ended at a word when one ends in its last fifth."""
    head = " ".join(text[: limit + 1].split())  # newlines and runs of blanks say nothing here
    if len(text) <= limit:
        return head
    cut = head[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space >= limit * 4 // 5 else cut) + "…"
