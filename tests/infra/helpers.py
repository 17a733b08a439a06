"""Helpers for reading synthesized templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from infra.config import CONSOLE_ASSETS_CONTEXT
from infra.stack import PROJECT_ROOT

__all__ = ["REGION", "CONSOLE_PLACEHOLDER", "app_context", "new_app", "statements", "as_list", "resources_of", "only"]

REGION = "us-east-1"
CONSOLE_PLACEHOLDER = Path(__file__).parent / "console_placeholder"  # deployed as the console, in these tests


def app_context() -> dict[str, Any]:
    """cdk.json's feature flags, no bundling (no pip, no network, in the template tests), and a
    placeholder console (the built one may be mid-rebuild)."""
    context = dict(json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"])
    context["aws:cdk:bundling-stacks"] = []
    context[CONSOLE_ASSETS_CONTEXT] = str(CONSOLE_PLACEHOLDER)
    return context


def new_app(outdir: Path | None = None) -> cdk.App:
    return cdk.App(outdir=str(outdir) if outdir else None, context=app_context(),
                   builtin_cloud_formation_validation=False)


def statements(template: dict[str, Any], role_logical_id_prefix: str = "") -> list[dict[str, Any]]:
    """Every IAM policy statement of the template's AWS::IAM::Policy/ManagedPolicy resources
    (optionally only those attached to roles whose logical id starts with the prefix)."""
    out = []
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] not in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            continue
        roles = [r.get("Ref", "") for r in resource["Properties"].get("Roles", [])]
        if role_logical_id_prefix and not any(r.startswith(role_logical_id_prefix) for r in roles):
            continue
        out.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return out


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def resources_of(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def only(template: dict[str, Any], type_: str) -> dict[str, Any]:
    """The properties of the template's one resource of this type."""
    found = resources_of(template, type_)
    assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
    return next(iter(found.values()))["Properties"]
