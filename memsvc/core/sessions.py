"""Sessions (API-AGENT.md "Agent workflow state"): a user's conversation, its messages and its
layer. Pure: the record the session store keeps, and where a session's data lives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memsvc.core.errors import Taken

__all__ = ["SessionRecord", "session_namespace", "messages_namespace", "message_key", "MESSAGE_KEY_DIGITS",
           "session_closed", "is_messages_namespace"]

MESSAGE_KEY_DIGITS = 12  # keys sort as the seqs do, for the first trillion messages of a session


@dataclass(frozen=True)
class SessionRecord:
    """What the session store keeps. `sealed` holds the title and metadata, sealed under the
    tenant's key; ids, the agent id, times and counters are plaintext (the store sorts and
    filters on them). `version` counts changes through the API (create, PUT, close); `seq` is
    the last message's, moved by appends alone, so a chatty session never fails an If-Match."""

    tenant: str
    user_id: str
    session_id: str
    agent_id: str | None
    sealed: bytes
    created_at: datetime
    updated_at: datetime
    last_interaction: datetime
    version: int = 1
    seq: int = 0
    closed_at: datetime | None = None
    delete_after: datetime | None = None  # session_auto_delete: when the sweeper removes it all
    extract: str = "off"  # off | on_close | continuous: learning from its messages (issue 24)
    extracted_seq: int = 0  # messages up to this seq have been extracted; moved by extraction alone
    extract_lease_until: datetime | None = None  # an extraction run holds the next batch until then


def session_namespace(user_id: str, session_id: str) -> tuple[str, ...]:
    """The session layer (`core.layers`): its typed memories, and its messages below."""
    return ("user", user_id, "sessions", session_id)


def messages_namespace(user_id: str, session_id: str) -> tuple[str, ...]:
    return (*session_namespace(user_id, session_id), "messages")


def is_messages_namespace(namespace: Sequence[str]) -> bool:
    """`["user", U, "sessions", S, "messages"]`: where a session's messages are kept."""
    return len(namespace) == 5 and namespace[0] == "user" and namespace[2] == "sessions" and namespace[4] == "messages"


def message_key(seq: int) -> str:
    return f"{seq:0{MESSAGE_KEY_DIGITS}d}"


def session_closed(session_id: str) -> Taken:
    return Taken("the session is closed", details={"session_id": session_id})
