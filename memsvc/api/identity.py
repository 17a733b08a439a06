"""The caller's identity, read from what the authorizer put in the request context.

JWT (`requestContext.authorizer.jwt.claims`). On AWS, the HTTP API's JWT authorizer hands every
claim over as a string, and an array as its elements joined by spaces in brackets: `["a", "b"]`
arrives as "[a b]", and so does `["a b"]`. That form cannot say where an element containing
whitespace ends, so it is read the only way that keeps separate roles separate: split on
whitespace (never on commas). Role and group names must therefore not contain whitespace on AWS
(Cognito group names cannot). `memsvc serve` passes claims as the token has them, so there a list
element is exactly one role. A plain string claim is a space- or comma-separated list.

The shared layers' memberships come from `projects`, `teams` and `orgs` (API-AGENT.md "Layers"): each
becomes a list of ids in `jwt_claims`, so policies see one form. A list element is one id; API
Gateway's "[a b]" is split on whitespace, as roles are; any other string is one id.

The tenant comes from `tenant_id` (or Cognito's `custom:tenant_id`). A token without one gets the
deployment's default tenant, if it names one (`memsvc serve`: `default`; on AWS none unless
configured); otherwise it is refused.

IAM (`requestContext.authorizer.iam`): a trusted backend; tenant from `X-Tenant-Id` (or the
default tenant), role `service`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from memsvc.core.errors import InvalidArgument, Unauthorized
from memsvc.core.models import Caller

__all__ = ["Identity", "caller_from_event", "parse_roles", "parse_ids", "is_tenant_id", "MEMBERSHIP_CLAIMS",
           "LOCAL_DEFAULT_TENANT", "presented_claims", "IAM_PRINCIPAL_FIELDS", "claimed_tenant"]

LOCAL_DEFAULT_TENANT = "default"  # `memsvc serve`: a `memsvc token` without --tenant lands here
_TENANT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
_TENANT_CLAIMS = ("tenant_id", "custom:tenant_id")
MEMBERSHIP_CLAIMS = ("projects", "teams", "orgs")  # the ids of the project, team and org layers a user is in
# What `GET /v1/identity` shows of a SigV4 caller: who the principal is, never its access key.
IAM_PRINCIPAL_FIELDS = ("accountId", "userArn", "userId", "callerId", "principalOrgId")


@dataclass(frozen=True)
class Identity:
    """`Identity(default_tenant)(event)` -> the Caller; `default_tenant` None: a tenant is required."""

    default_tenant: str | None = None

    def __call__(self, event: dict[str, Any]) -> Caller:
        authorizer = ((event.get("requestContext") or {}).get("authorizer")) or {}
        if isinstance(authorizer.get("jwt"), dict):
            return self._from_jwt(authorizer["jwt"].get("claims") or {})
        if isinstance(authorizer.get("iam"), dict):
            headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
            return self._from_iam(authorizer["iam"], headers.get("x-tenant-id"))
        raise Unauthorized("a bearer token or a SigV4 signature is required")

    def _from_jwt(self, claims: dict[str, Any]) -> Caller:
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise Unauthorized("the token has no subject")
        tenant = claimed_tenant(claims, self.default_tenant)
        if tenant is _NO_TENANT:
            raise Unauthorized(
                "the token has no tenant_id (or custom:tenant_id) claim; with Cognito, send the ID token")
        if not isinstance(tenant, str) or not _TENANT_RE.fullmatch(tenant):
            raise Unauthorized("the token's tenant_id claim is not a valid tenant id")
        roles = list(dict.fromkeys(parse_roles(claims.get("roles")) + parse_roles(claims.get("cognito:groups"))))
        return Caller(
            tenant_id=tenant,
            user_id=sub,
            roles=tuple(roles),
            client_id=str(claims.get("client_id") or claims.get("azp") or ""),
            principal_type="user",
            jwt_claims={**claims, "roles": roles,
                        **{name: parse_ids(claims[name]) for name in MEMBERSHIP_CLAIMS if name in claims}},
        )

    def _from_iam(self, iam: dict[str, Any], tenant_header: str | None) -> Caller:
        arn = iam.get("userArn") or iam.get("callerId") or iam.get("userId")
        if not arn:
            raise Unauthorized("the IAM identity has no ARN")
        tenant = tenant_header if tenant_header is not None else self.default_tenant
        if tenant is None:
            raise InvalidArgument("X-Tenant-Id is required", details={"field": "X-Tenant-Id"})
        if not _TENANT_RE.fullmatch(tenant):
            raise InvalidArgument("X-Tenant-Id is not a valid tenant id", details={"field": "X-Tenant-Id"})
        return Caller(
            tenant_id=tenant,
            user_id=str(arn),
            roles=("service",),
            client_id=str(iam.get("accessKey") or ""),
            principal_type="iam",
            jwt_claims={},
        )


_NO_TENANT = object()  # `claimed_tenant` of a token without a tenant claim, where no default tenant stands in


def claimed_tenant(claims: Mapping[str, Any], default_tenant: str | None) -> Any:
    """The token's tenant, not yet checked: its `tenant_id` claim, else its `custom:tenant_id`,
    else `default_tenant` (`_NO_TENANT` when that is None). `memsvc serve` shares its request
    threads by this, so they go by the tenant the request will act in."""
    present = [name for name in _TENANT_CLAIMS if name in claims]
    if present:
        return claims[present[0]]
    return default_tenant if default_tenant is not None else _NO_TENANT


def presented_claims(event: dict[str, Any]) -> dict[str, Any]:
    """What the caller presented, as the authorizer passed it on (for `GET /v1/identity`): a JWT's
    claims as they are, or the IAM principal's `IAM_PRINCIPAL_FIELDS` that API Gateway gave."""
    authorizer = ((event.get("requestContext") or {}).get("authorizer")) or {}
    if isinstance(authorizer.get("jwt"), dict):
        return dict(authorizer["jwt"].get("claims") or {})
    iam = authorizer.get("iam") or {}
    return {name: iam[name] for name in IAM_PRINCIPAL_FIELDS if isinstance(iam.get(name), str) and iam[name]}


caller_from_event = Identity()  # no default tenant: what a deployment gets unless it names one


def is_tenant_id(text: str) -> bool:
    """Whether `text` is a tenant id a token may carry."""
    return bool(_TENANT_RE.fullmatch(text))


def parse_roles(raw: Any) -> list[str]:
    """Roles from a list (one role per string element), API Gateway's "[a b]" form (split on
    whitespace), or a plain "a b" / "a, b" string."""
    if isinstance(raw, list):
        return [r for r in raw if isinstance(r, str) and r]
    if not isinstance(raw, str):
        return []
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        return text[1:-1].split()
    return [r for r in re.split(r"[\s,]+", text) if r]


def parse_ids(raw: Any) -> list[str]:
    """Ids from a list (one id per string element), API Gateway's "[a b]" form (split on
    whitespace), or one plain string id. Unlike roles, a plain string is never split: "p1" is
    the one id that a single-valued claim holds."""
    if isinstance(raw, list):
        return [i for i in raw if isinstance(i, str) and i]
    if not isinstance(raw, str):
        return []
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        return text[1:-1].split()
    return [text] if text else []
