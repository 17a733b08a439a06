"""Layers (API-AGENT.md "Layers", seed 001): fixed namespace shapes, from the most specific
(agent) to the least (company). Pure: which layers a request may reach, and which layer a
namespace belongs to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memsvc.core.errors import Forbidden, InvalidArgument, InvalidLayer, MissingIdentifier
from memsvc.core.models import Caller

__all__ = ["Layer", "LAYERS", "LAYER_NAMES", "IDENTIFIERS", "resolve_identifiers", "accessible_layers",
           "layer_namespace", "layer_namespaces", "layer_of", "SEMANTIC_SEGMENT", "identifiers_schema",
           "layer_needs_schema"]

# `POST /v1/memory/semantic` keeps a user's upserted memories in ["user", U, "semantic"]: part of
# the user layer (a second root of it), so recall of the user layer finds them.
SEMANTIC_SEGMENT = "semantic"

IDENTIFIERS = ("agent_id", "user_id", "session_id", "project_id", "team_id", "org_id")


@dataclass(frozen=True)
class Layer:
    name: str
    precedence: int  # 1 is the most specific
    needs: tuple[str, ...]  # identifiers, in the order the namespace uses them


LAYERS: tuple[Layer, ...] = (
    Layer("agent", 1, ("user_id", "agent_id")),
    Layer("user", 2, ("user_id",)),
    Layer("session", 3, ("user_id", "session_id")),
    Layer("project", 4, ("project_id",)),
    Layer("team", 5, ("team_id",)),
    Layer("org", 6, ("org_id",)),
    Layer("company", 7, ()),
)
LAYER_NAMES = tuple(layer.name for layer in LAYERS)
_BY_NAME = {layer.name: layer for layer in LAYERS}


def resolve_identifiers(caller: Caller, identifiers: Mapping[str, str | None] | None) -> dict[str, str]:
    """The given identifiers, with `user_id` defaulting to the caller's own. Naming another user
    is for roles admin and service only."""
    given = {k: v for k, v in (identifiers or {}).items() if v is not None}
    unknown = sorted(set(given) - set(IDENTIFIERS))
    if unknown:
        raise InvalidArgument(f"unknown identifiers: {', '.join(unknown)}",
                              details={"field": "identifiers", "allowed": list(IDENTIFIERS)})
    for name, value in given.items():
        if not isinstance(value, str) or not value:
            raise InvalidArgument(f"identifiers.{name} must be a non-empty string",
                                  details={"field": f"identifiers.{name}"})
    user_id = given.setdefault("user_id", caller.user_id)
    if user_id != caller.user_id and not caller.is_admin:
        raise Forbidden("only roles admin and service may name another user's layers")
    return given


def accessible_layers(identifiers: Mapping[str, str], requested: Sequence[str] | None) -> list[Layer]:
    """The requested layers (default: every layer whose identifiers are all given), most specific
    first. Raises `INVALID_LAYER` for an unknown name and `MISSING_IDENTIFIER` for a layer whose
    identifiers are not all given."""
    if requested is None:
        return [layer for layer in LAYERS if all(identifiers.get(n) for n in layer.needs)]
    out: list[Layer] = []
    for name in requested:
        layer = _BY_NAME.get(name)
        if layer is None:
            raise InvalidLayer(f"no layer named {name!r}", details={"layer": name, "allowed": list(LAYER_NAMES)})
        missing = [n for n in layer.needs if not identifiers.get(n)]
        if missing:
            raise MissingIdentifier(name, missing)
        if layer not in out:
            out.append(layer)
    return sorted(out, key=lambda layer: layer.precedence)


def layer_namespace(layer: Layer, identifiers: Mapping[str, str]) -> tuple[str, ...]:
    ids = identifiers
    return {
        "agent": lambda: ("user", ids["user_id"], "agents", ids["agent_id"]),
        "user": lambda: ("user", ids["user_id"], "memories"),
        "session": lambda: ("user", ids["user_id"], "sessions", ids["session_id"]),
        "project": lambda: ("project", ids["project_id"]),
        "team": lambda: ("team", ids["team_id"]),
        "org": lambda: ("org", ids["org_id"]),
        "company": lambda: ("company",),
    }[layer.name]()


def layer_namespaces(layer: Layer, identifiers: Mapping[str, str]) -> list[tuple[str, ...]]:
    """Every namespace root of the layer: `layer_namespace`, and for the user layer also its
    semantic upserts' ["user", U, "semantic"]. Recall searches each."""
    roots = [layer_namespace(layer, identifiers)]
    if layer.name == "user":
        roots.append(("user", identifiers["user_id"], SEMANTIC_SEGMENT))
    return roots


def layer_of(namespace: Sequence[str]) -> Layer | None:
    """The layer a memory's namespace lies in (layers are disjoint), or None for one outside
    every layer."""
    ns = tuple(namespace)
    if len(ns) >= 4 and ns[0] == "user" and ns[2] == "agents":
        return _BY_NAME["agent"]
    if len(ns) >= 3 and ns[0] == "user" and ns[2] in ("memories", SEMANTIC_SEGMENT):
        return _BY_NAME["user"]
    if len(ns) >= 4 and ns[0] == "user" and ns[2] == "sessions":
        return _BY_NAME["session"]
    if len(ns) >= 2 and ns[0] in ("project", "team", "org"):
        return _BY_NAME[ns[0]]
    if ns and ns[0] == "company":
        return _BY_NAME["company"]
    return None


def identifiers_schema(*, nullable: bool) -> dict[str, Any]:
    """The JSON Schema of `identifiers` as `resolve_identifiers` takes it: only these names, each a
    non-empty string (or, where `nullable`, null for "not given")."""
    value: dict[str, Any] = {"type": "string", "minLength": 1}
    if nullable:
        value = {"anyOf": [value, {"type": "null"}]}
    return {"type": "object", "properties": {name: value for name in IDENTIFIERS}, "additionalProperties": False}


def layer_needs_schema(field: str, *, many: bool) -> list[dict[str, Any]]:
    """JSON Schema rules saying what `accessible_layers` checks: a layer named in `field` (a list of
    names when `many`) needs its identifiers, but `user_id`, which defaults to the caller."""
    rules = []
    for layer in LAYERS:
        needs = [name for name in layer.needs if name != "user_id"]
        if needs:
            named = {"contains": {"const": layer.name}} if many else {"const": layer.name}
            rules.append({
                "if": {"properties": {field: named}, "required": [field]},
                "then": {"required": ["identifiers"], "properties": {"identifiers": {
                    "required": needs, "properties": {name: {"type": "string"} for name in needs}}}},
            })
    return rules
