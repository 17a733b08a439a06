"""The caller's identity, read from what the authorizer put in the request context.

JWT (`requestContext.authorizer.jwt.claims`): API Gateway hands claims over as strings, an
array claim arriving as "[a b]"; the local server builds the same shape. IAM
(`requestContext.authorizer.iam`): a trusted backend; tenant from `X-Tenant-Id`, role `service`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memsvc.core.errors import InvalidArgument, Unauthorized
from memsvc.core.models import Caller

__all__ = ["caller_from_event", "parse_roles", "DEFAULT_TENANT"]

DEFAULT_TENANT = "default"
_TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")


def caller_from_event(event: dict[str, Any]) -> Caller:
    authorizer = ((event.get("requestContext") or {}).get("authorizer")) or {}
    if isinstance(authorizer.get("jwt"), dict):
        return _from_jwt(authorizer["jwt"].get("claims") or {})
    if isinstance(authorizer.get("iam"), dict):
        headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
        return _from_iam(authorizer["iam"], headers.get("x-tenant-id"))
    raise Unauthorized("a bearer token or a SigV4 signature is required")


def _from_jwt(claims: dict[str, Any]) -> Caller:
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub:
        raise Unauthorized("the token has no subject")
    tenant = claims.get("tenant_id") or claims.get("custom:tenant_id") or DEFAULT_TENANT
    if not isinstance(tenant, str) or not _TENANT_RE.match(tenant):
        raise Unauthorized("the token's tenant_id claim is not a valid tenant id")
    roles = parse_roles(claims.get("roles")) + parse_roles(claims.get("cognito:groups"))
    parsed = {**claims, "roles": list(dict.fromkeys(roles))}
    return Caller(
        tenant_id=tenant,
        user_id=sub,
        roles=tuple(dict.fromkeys(roles)),
        client_id=str(claims.get("client_id") or claims.get("azp") or ""),
        principal_type="user",
        jwt_claims=parsed,
    )


def _from_iam(iam: dict[str, Any], tenant_header: str | None) -> Caller:
    arn = iam.get("userArn") or iam.get("callerId") or iam.get("userId")
    if not arn:
        raise Unauthorized("the IAM identity has no ARN")
    tenant = tenant_header or DEFAULT_TENANT
    if not _TENANT_RE.match(tenant):
        raise InvalidArgument("X-Tenant-Id is not a valid tenant id", details={"field": "X-Tenant-Id"})
    return Caller(
        tenant_id=tenant,
        user_id=str(arn),
        roles=("service",),
        client_id=str(iam.get("accessKey") or ""),
        principal_type="iam",
        jwt_claims={},
    )


def parse_roles(raw: Any) -> list[str]:
    """Roles from a list, a JSON array string, API Gateway's "[a b]" form, or "a, b" / "a b"."""
    if raw is None:
        return []
    if isinstance(raw, list):
        return [str(r) for r in raw if str(r)]
    if not isinstance(raw, str):
        return [str(raw)]
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            parsed = json.loads(text)
            if isinstance(parsed, list):
                return [str(r) for r in parsed if str(r)]
        except json.JSONDecodeError:
            text = text[1:-1]
    return [r for r in re.split(r"[\s,]+", text) if r]
