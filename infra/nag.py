"""cdk-nag acknowledgments (suppressions), in one style: each names one finding and says why."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import aws_cdk as cdk
from constructs import IConstruct

__all__ = ["acknowledge", "acknowledge_wildcard_resources", "flatten_cfn_reference"]


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding (`AwsSolutions-L1`, `AwsSolutions-IAM5[Resource::*]`, ...)
    on `scope` and everything under it. The reason is copied into the template's metadata."""
    if len(reason) < 40:
        raise ValueError("a suppression needs a reason a reviewer can check")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=finding, reason=reason))


def acknowledge_wildcard_resources(scope: IConstruct, resources: Iterable[str], reason: str) -> None:
    """Acknowledge `AwsSolutions-IAM5[Resource::...]` for exactly these resources, named the way
    cdk-nag names them (so a new wildcard elsewhere is still reported)."""
    stack = cdk.Stack.of(scope)
    for resource in resources:
        flat = flatten_cfn_reference(stack.resolve(resource))
        if "*" in flat:
            acknowledge(scope, f"AwsSolutions-IAM5[Resource::{flat}]", reason)


def flatten_cfn_reference(node: Any) -> str:
    """cdk-nag's `flattenCfnReference` (utils/flatten-cfn-reference.ts), ported."""
    if node is None:
        return ""
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, dict):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return delimiter.join(flatten_cfn_reference(i) for i in items)
        if "Fn::Sub" in node:
            return flatten_cfn_reference(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{flatten_cfn_reference(resource)}.{flatten_cfn_reference(attribute)}>"
        if "Fn::ImportValue" in node:
            return flatten_cfn_reference(node["Fn::ImportValue"])
        if "Ref" in node:
            return f"<{flatten_cfn_reference(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"))
