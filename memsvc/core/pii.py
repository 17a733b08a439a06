"""PII redaction before a session's memories are promoted (seed 001). Pure.

Each pattern replaces what it finds with a fixed marker. The patterns are tight on purpose: a
version number, a date, an order id or a price must come through unchanged, so a pattern that
could match those asks for more (a phone needs a `+` or a separator layout, a card number must
pass the Luhn check, an IPv4 address needs four octets of at most 255 and no fifth part).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

__all__ = ["redact", "PATTERNS"]

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
# IBAN: two letters, two check digits, 11 to 30 alphanumerics, optionally grouped by 4 with spaces.
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
# 13 to 19 digits, optionally in groups separated by single spaces or dashes.
_CARD = re.compile(r"(?<![\w.-])\d(?:[ -]?\d){12,18}(?![\w.-]\d)")
_SSN = re.compile(r"(?<![\w.-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w-])")
# A phone number: international (+ and 7 to 15 digits), or a national layout with separators
# such as (555) 123-4567, 555-123-4567, 555.123.4567, 030 1234 5678. Bare digit runs are not phones.
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}"
    r"|\(\d{2,4}\)[ .-]?\d{3,4}[ .-]?\d{3,4}"
    r"|\b\d{3}[-.]\d{3}[-.]\d{4})(?![\w-])"
)
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}(?![\w:])|(?<![\w:])[0-9A-Fa-f:]*::[0-9A-Fa-f:]+(?![\w:])")


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
)


def redact(text: str) -> str:
    """`text` with e-mail addresses, IBANs, payment card numbers (Luhn-valid), US social security
    numbers, IP addresses and phone numbers replaced by `[REDACTED_<KIND>]`."""
    for _, pattern, replace in PATTERNS:
        text = pattern.sub(replace, text)
    return text
