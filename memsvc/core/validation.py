"""Typed commands: the one place where input shapes are declared and checked.

A command is a pydantic model whose construction either succeeds with well-typed fields or
raises `InvalidArgument` naming the field. The HTTP API parses request bodies and query
strings straight into these models (and derives its OpenAPI document from them), so the
schema a client reads is exactly what the server enforces. Services receive them already
typed and check only domain rules (a tenant's `max_depth`, byte sizes, nesting).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, GetJsonSchemaHandler, StrictInt,
                      StrictStr, StringConstraints, ValidationError)
from pydantic.json_schema import JsonSchemaValue

from memsvc.core.errors import InvalidArgument
from memsvc.core.models import utc
from memsvc.core.namespaces import MAX_NAMESPACE_BYTES
from memsvc.core.timestamps import parse_rfc3339

__all__ = ["Command", "Cursor", "Integer", "NonBlank", "non_blank", "WHITESPACE", "Segment", "Namespace", "NamespacePrefix",
           "NoIndexing", "Timestamp", "invalid_argument",
           "error_message", "MAX_DEPTH", "if_match_tag", "if_match_pattern"]

MAX_DEPTH = 32  # the highest max_depth a tenant may set, so the most segments any namespace has
# Unicode's White_Space characters, spelled out (as the body of a regex class): `\s` means another set
# in each regex engine (JSON Schema's, ECMA-262, takes U+FEFF and leaves out U+0085).
WHITESPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


class Command(BaseModel):
    """Unknown fields are refused; scalars are never coerced (declare them `Strict*`).

    Validators are built when a model is first used (`defer_build`), not at import: a Lambda cold
    start imports every command of the API, and one request uses one or two of them."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise invalid_argument(exc) from exc  # kept: `parse` names the request's part again

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """Two fixes to pydantic's schema. A field that may be left out but not be null (`Field(None)`
        on a non-optional type: absent means "keep") shows no `default: null`, which its type refuses.
        And bounds that pydantic cannot place on a validated type (`Integer | None`) and writes as
        `ge`/`le`, which JSON Schema ignores, get their JSON Schema names."""
        json_schema = handler(core_schema)
        for prop in handler.resolve_ref_schema(json_schema).get("properties", {}).values():
            if "default" in prop and prop["default"] is None and not _allows_null(prop):
                del prop["default"]
            for schema in (prop, *prop.get("anyOf", ())):
                for name, json_name in _BOUNDS.items():
                    if name in schema:
                        schema[json_name] = schema.pop(name)
        return json_schema

    @classmethod
    def parse(cls, raw: Any, *, whole: str = "body") -> Self:
        """Validate decoded JSON (or query parameters gathered into a dict: `whole` "query", the
        field an error of the whole request, not of one field, names)."""
        try:
            return cls.model_validate(raw)  # through `__init__` (an object), which names the whole request "body"
        except ValidationError as exc:  # not an object at all
            raise invalid_argument(exc, whole) from None
        except InvalidArgument as exc:
            if whole == "body" or not isinstance(exc.__cause__, ValidationError):
                raise
            raise invalid_argument(exc.__cause__, whole) from None


_BOUNDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def _allows_null(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "null" or any(_allows_null(s) for s in schema.get("anyOf", ()))


def invalid_argument(exc: ValidationError, whole: str = "body") -> InvalidArgument:
    """pydantic's errors in our words, each naming its field (`details.errors`); the message is the
    first field's. Never pydantic's own text or the input: both are its, not the API's."""
    raw = exc.errors(include_url=False, include_input=False)
    paths = [[p for p in e["loc"] if not _is_union_member(p)] for e in raw]
    errors = [{"field": ".".join(map(str, path)) or whole, "message": error_message(e)} for path, e in zip(paths, raw)]
    field = errors[0]["field"]
    # A union's members fail one by one (`str | list[str]`: two errors for one field). Our own
    # validator's message says what the field takes; otherwise each member's is named.
    ours = [e["message"] for e, r in zip(errors, raw) if e["field"] == field and r["type"] in _OURS]
    said = ours[0] if ours else " or ".join(dict.fromkeys(e["message"] for e in errors if e["field"] == field))
    unique = list({(e["field"], e["message"]): e for e in errors}.values())
    return InvalidArgument(f"{field}: {said}",
                           details={"field": str(paths[0][0]) if paths[0] else whole, "errors": unique})


def error_message(error: Any) -> str:
    """One pydantic error (an item of `ValidationError.errors()`) in our words."""
    ctx = error.get("ctx", {})
    if error["type"] in _OURS:  # a validator of ours raised it: its message is ours
        return str(ctx.get("error", "is not valid"))
    if error["type"] in ("string_too_short", "too_short") and ctx.get("min_length") == 1:
        return "must not be empty"
    if error["type"] == "literal_error":  # pydantic lists the values as Python writes them
        ctx = {**ctx, "expected": _PYTHON_LITERALS.sub(lambda m: _JSON_LITERALS[m.group()], str(ctx.get("expected")))}
    try:
        return _MESSAGES[error["type"]].format(**ctx)
    except (KeyError, IndexError):
        return "is not valid"


_JSON_LITERALS = {"True": "true", "False": "false", "None": "null"}
_PYTHON_LITERALS = re.compile(r"\b(?:True|False|None)\b")


def _is_union_member(part: Any) -> bool:
    # pydantic names the member of a union that failed by its schema (`list[str]`, `str`,
    # `function-before[...]`, a model's class name); that is no field of the request.
    return isinstance(part, str) and ("[" in part or part in _SCHEMA_NAMES or part[:1].isupper())


_OURS = frozenset({"value_error", "assertion_error"})
_SCHEMA_NAMES = frozenset({"str", "int", "float", "bool", "none", "bytes", "datetime", "date", "time", "uuid",
                           "decimal", "any", "list", "dict"})
# pydantic's error types as our messages, filled from the error's context; any other "is not valid".
_MESSAGES = {
    "missing": "is required",
    "extra_forbidden": "is not a field of this request",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "list_type": "must be an array",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "none_required": "must be null",
    "literal_error": "must be {expected}",
    "enum": "must be {expected}",
    "string_too_short": "must have at least {min_length} characters",
    "string_too_long": "must have at most {max_length} characters",
    "too_short": "must have at least {min_length} items",
    "too_long": "must have at most {max_length} items",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
    "multiple_of": "must be a multiple of {multiple_of}",
    "finite_number": "must be a finite number",
    "string_pattern_mismatch": "must match the pattern {pattern}",
}


def non_blank(whitespace: str = WHITESPACE, *, max_length: int | None = None) -> Any:
    """A string with a character not in `whitespace` (the body of a regex class), which its schema
    states as a pattern; at most `max_length` characters when given."""
    pattern = f"[^{whitespace}]"
    found = re.compile(pattern).search  # one class, so linear in the string

    def check(value: str) -> str:
        if not found(value):
            raise ValueError("must not be blank")
        return value

    return Annotated[StrictStr, StringConstraints(max_length=max_length), AfterValidator(check),
                     Field(json_schema_extra={"pattern": pattern})]


def _reject_non_bool(value: Any) -> Any:
    # `Literal[False]` alone takes 0 (0 == False); only the JSON literal `false` means "not indexed".
    if value is not False:
        raise ValueError("must be false or a list of paths")
    return value


def _integral(value: Any) -> Any:
    # JSON has one number type: 5.0 is the integer 5, as JSON Schema's "integer" says.
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _rfc3339(value: Any) -> Any:
    if isinstance(value, datetime):
        return utc(value)
    try:
        if not isinstance(value, str):
            raise ValueError
        return parse_rfc3339(value)
    except (ValueError, OverflowError):  # OverflowError: an offset that moves it past year 1 or 9999
        raise ValueError("must be an RFC 3339 timestamp, e.g. 2026-01-01T00:00:00Z") from None


Integer = Annotated[StrictInt, BeforeValidator(_integral)]  # never a bool or a string, but 5.0
NonBlank = non_blank()
Segment = Annotated[StrictStr, StringConstraints(min_length=1)]
# A page's cursor as the service writes them (`service.sealing.CursorCodec`: base64url, no padding).
Cursor = Annotated[StrictStr, StringConstraints(min_length=1, pattern=r"^[A-Za-z0-9_-]+$")]
_DEPTH = (f"max_depth is the tenant's setting (default 10, at most {MAX_DEPTH}); the segments take at most "
          f"{MAX_NAMESPACE_BYTES} bytes in their stored form (each percent-encoded, joined by one byte)")
Namespace = Annotated[list[Segment], Field(min_length=1, max_length=MAX_DEPTH,
                                           description=f"1..max_depth non-empty segments; {_DEPTH}")]
NamespacePrefix = Annotated[list[Segment], Field(max_length=MAX_DEPTH,
                                                 description=f"0..max_depth non-empty segments; {_DEPTH}")]
NoIndexing = Annotated[Literal[False], BeforeValidator(_reject_non_bool)]
Timestamp = Annotated[datetime, BeforeValidator(_rfc3339), Field(description="RFC 3339")]


def if_match_pattern(token: str) -> str:
    """The JSON Schema pattern of an `If-Match` header whose versions are `token` (a regex without
    groups): `v`, `"v"`, `W/"v"` or `*`."""
    return f'^(\\*|(W/)?"{token}"|{token})$'


def if_match_tag(header: str | None, token: str, hint: str) -> str | None:
    """The version an `If-Match` header names (`v`, `"v"` or `W/"v"`, each `token`); None without one,
    or for `*` (any). `hint` says what a version looks like, for the 400."""
    if header is None or header.strip() == "*":
        return None
    match = re.fullmatch(f'(?:W/)?"({token})"|({token})', header.strip())
    if match is None:
        raise InvalidArgument(f"If-Match must be {hint}", details={"field": "If-Match"})
    return match.group(1) or match.group(2)
