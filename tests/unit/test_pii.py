"""PII redaction before promotion (seed 001; `memsvc.core.pii`): each pattern, and what must
come through untouched."""

from __future__ import annotations

import pytest

from memsvc.core.pii import redact


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
])
def test_near_misses_are_left_alone(text):
    assert redact(text) == text
