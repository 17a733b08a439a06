"""PII redaction before promotion (seed 001; `memsvc.core.pii`): each pattern, and what must
come through untouched."""

from __future__ import annotations

import pytest

from memsvc.core.pii import redact, redact_memory_fields
from memsvc.core.typed_memory import TypedMemory


@pytest.mark.parametrize("text, expected", [
    ("write to bob.smith+trips@example.co.uk today", "write to [REDACTED_EMAIL] today"),
    ("a@b.io", "[REDACTED_EMAIL]"),
    ("call +1 415 555 0100", "call [REDACTED_PHONE]"),
    ("call +49 30 12345678.", "call [REDACTED_PHONE]."),
    ("office (555) 123-4567", "office [REDACTED_PHONE]"),
    ("cell 555-123-4567 or 555.123.4567", "cell [REDACTED_PHONE] or [REDACTED_PHONE]"),
    ("card 4111 1111 1111 1111", "card [REDACTED_CARD]"),
    ("card 5500-0000-0000-0004 exp", "card [REDACTED_CARD] exp"),
    ("card 378282246310005", "card [REDACTED_CARD]"),
    ("iban DE89 3704 0044 0532 0130 00 please", "iban [REDACTED_IBAN] please"),
    ("iban GB82WEST12345698765432", "iban [REDACTED_IBAN]"),
    ("ssn 123-45-6789", "ssn [REDACTED_SSN]"),
    ("from 192.168.1.20 and 2001:db8::8a2e:370:7334", "from [REDACTED_IP] and [REDACTED_IP]"),
    ("write to jörg@exämple.de now", "write to [REDACTED_EMAIL] now"),
    ("ask анна@пример.рф or x@xn--e1afmkfd.xn--p1ai", "ask [REDACTED_EMAIL] or [REDACTED_EMAIL]"),
    ("call 555 123 4567.", "call [REDACTED_PHONE]."),
    ("berlin 030 1234 5678, mobile 0171 1234567 or 030/1234567",
     "berlin [REDACTED_PHONE], mobile [REDACTED_PHONE] or [REDACTED_PHONE]"),
    ("from abroad 0049 30 1234567 or 0044 20 7946 0958", "from abroad [REDACTED_PHONE] or [REDACTED_PHONE]"),
    ("toll free 1-800-555-0199 or 1 (800) 555-0199", "toll free [REDACTED_PHONE] or [REDACTED_PHONE]"),
])
def test_each_pattern_is_redacted(text, expected):
    assert redact(text) == expected


@pytest.mark.parametrize("text", [
    "upgrade to python 3.11.4 and release 2.4.1",
    "nested version 10.0.0.1.5",
    "on 2024-05-01, 05/01/2024 or 2024-05-01T10:00:00Z",
    "meet at 14:00 or 10:30:00",
    "order #12345678 and ORD-2024-000123",
    "costs $1,299.99 or 1299.99 EUR",
    "tracking 1234567890123",  # 13 digits that fail the Luhn check: not a card
    "card-like 4111 1111 1111 1112",  # fails Luhn
    "not an IP 999.1.1.1",
    "ssn-like but invalid 000-12-3456 and 666-12-3456",
    "iban-like DE00 3704 0044 0532 0130 00",  # wrong check digits
    "user@localhost has no domain",
    "room 101, floor 3, 20 guests",
    # What the space-separated, trunk-0, 00-prefixed and country-code-1 phone layouts must not take:
    "between 2019 and 2023 we shipped 3 4 5",
    "scores 100 200 300 and years 2019 2020 2021",
    "pages 10-20, ranges 100-200 and 1-5",
    "dates 01/2024, 05/01/2024, 05.01.2024 and 2024 05 01",
    "order 0012345678 and id 0012 3456",
    "ISBN 978-3-16-148410-0",
    "digits 555 123 4567 8901",  # a run of four groups is no phone layout
    "npm i lodash@4.17.21",  # a package version, not an address
])
def test_near_misses_are_left_alone(text):
    assert redact(text) == text


def test_an_international_number_is_never_taken_for_a_card():
    # 13 digits that pass the Luhn check: still a phone, because of the 00 / + prefix.
    assert redact("0049 30 1234 5670") == "[REDACTED_PHONE]"
    assert redact("+49 301 2345 6784") == "[REDACTED_PHONE]"


def test_a_memorys_free_text_fields_are_redacted():
    memory = TypedMemory(content="mail bob@example.com", tags=("contact:bob@example.com", "work"),
                         category="call 555-123-4567", source="chat with +1 415 555 0100", importance=0.9,
                         promoted_from={"key": "k"}, extra={"note": "kept"})
    redacted = redact_memory_fields(memory)
    assert (redacted.content, redacted.tags, redacted.category, redacted.source) == (
        "mail [REDACTED_EMAIL]", ("contact:[REDACTED_EMAIL]", "work"), "call [REDACTED_PHONE]",
        "chat with [REDACTED_PHONE]")
    assert (redacted.importance, redacted.promoted_from, redacted.extra) == (0.9, {"key": "k"}, {"note": "kept"})
    assert redact_memory_fields(TypedMemory(content="x")).category is None
