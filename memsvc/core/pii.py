"""PII redaction before a session's memories are promoted (seed 001). Pure.

Each pattern replaces what it finds with a fixed marker. The patterns are tight on purpose: a
version number, a date, an order id or a price must come through unchanged, so a pattern that
could match those asks for more (a phone needs a `+` or `00` prefix or a separator layout, a
card number must pass the Luhn check, an IPv4 address needs four octets of at most 255 and no
fifth part).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import replace

from memsvc.core.typed_memory import TypedMemory

__all__ = ["redact", "redact_memory_fields", "PATTERNS"]

# Unicode letters count (`jörg@exämple.de`, an IDN domain); the top-level domain is letters or
# punycode, so `lodash@4.17.21` is a package version, not an address. A match starts only where a
# run of local-part characters does (the look-behind is their class), or every `%` in a long run
# would start a scan to its end.
_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.(?:xn--[\w-]+|[^\W\d_]{2,})\b")
# IBAN: two letters, two check digits, 11 to 30 alphanumerics, optionally grouped by 4 with spaces.
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
# 13 to 19 digits, optionally in groups separated by single spaces or dashes. No card number
# starts with 0 or follows a `+`, so an international phone number is never taken for one.
_CARD = re.compile(r"(?<![\w.+-])[1-9](?:[ -]?\d){12,18}(?![\w.-]\d)")
_SSN = re.compile(r"(?<![\w.-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w-])")
# A phone number: international (`+` and 7 to 15 digits; or `00`, then groups separated by
# spaces, dots or dashes, so a zero-padded order id such as 0012345678 is not one), or a
# national layout with separators: (555) 123-4567, 555-123-4567, 555.123.4567, 555 123 4567,
# each with an optional leading country code 1 (1-800-555-0199). Bare digit runs are not phones.
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}"
    r"|\b00[1-9]\d{0,2}[ .-][1-9]\d{0,7}(?:[ .-]\d{1,8}){1,3}"
    r"|(?:\b1[ .-]?)?\(\d{2,4}\)[ .-]?\d{3,4}[ .-]?\d{3,4}"
    r"|(?:\b1[ .-])?\b\d{3}([-. ])\d{3}\1\d{4})(?![\w-]|[ .-]\d)"
)
# A national number with a trunk 0 (030 1234 5678, 0171 1234567, 030/1234567): the area code,
# a space, dash or slash, then groups; 9 to 12 digits in all, so 01/2024 is not one.
_TRUNK_PHONE = re.compile(r"(?<![\w.+/-])0\d{1,4}[ /-]\d{3,4}(?:[ -]?\d{2,5}){0,2}(?![\w/-]|[ .-]\d)")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
# The compressed form with bounded runs (an address has at most 39 characters): unbounded, a run of
# colons tried each `::` in it against the rest of the run.
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}(?![\w:])"
                   r"|(?<![\w:])[0-9A-Fa-f:]{0,39}::[0-9A-Fa-f:]{1,39}(?![\w:])")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    return "[REDACTED_CARD]" if 13 <= len(digits) <= 19 and _luhn(digits) else match.group()


def _iban(match: re.Match[str]) -> str:
    raw = match.group().replace(" ", "")
    rearranged = raw[4:] + raw[:4]
    number = "".join(str(int(c, 36)) for c in rearranged)
    return "[REDACTED_IBAN]" if 15 <= len(raw) <= 34 and int(number) % 97 == 1 else match.group()


def _trunk_phone(match: re.Match[str]) -> str:
    digits = sum(ch.isdigit() for ch in match.group())
    return "[REDACTED_PHONE]" if 9 <= digits <= 12 else match.group()


def _ip(match: re.Match[str]) -> str:
    try:
        ipaddress.ip_address(match.group())
    except ValueError:
        return match.group()
    return "[REDACTED_IP]"


# In order: the specific, checksummed forms first, so a card number is never half-read as a phone.
PATTERNS: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    ("email", _EMAIL, lambda m: "[REDACTED_EMAIL]"),
    ("iban", _IBAN, _iban),
    ("card", _CARD, _card),
    ("ssn", _SSN, lambda m: "[REDACTED_SSN]"),
    ("ipv4", _IPV4, _ip),
    ("ipv6", _IPV6, _ip),
    ("phone", _PHONE, lambda m: "[REDACTED_PHONE]"),
    ("phone", _TRUNK_PHONE, _trunk_phone),
)


def redact(text: str) -> str:
    """`text` with e-mail addresses, IBANs, payment card numbers (Luhn-valid), US social security
    numbers, IP addresses and phone numbers replaced by `[REDACTED_<KIND>]`. O(len(text)): every
    pattern reads a bounded number of characters from where it starts (at most 80, a compressed
    IPv6 address), except an e-mail address, which starts only where a run of its characters does."""
    for _, pattern, substitute in PATTERNS:
        text = pattern.sub(substitute, text)
    return text


def redact_memory_fields(memory: TypedMemory) -> TypedMemory:
    """`memory` with every free-text field redacted: content, tags, category and source (a tag or
    a source can carry an address as well as the content can). Ids, links and counters stay.
    O(length of those fields)."""
    return replace(memory, content=redact(memory.content), tags=tuple(redact(t) for t in memory.tags),
                   category=redact(memory.category) if memory.category is not None else None,
                   source=redact(memory.source) if memory.source is not None else None)
