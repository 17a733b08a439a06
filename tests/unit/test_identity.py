"""Reading the caller from the authorizer's context: roles, tenants, the default tenant."""

from __future__ import annotations

import pytest

from memsvc.api.identity import Identity, caller_from_event, parse_roles
from memsvc.core.errors import InvalidArgument, Unauthorized
from memsvc.local_server import stringify_claims


def jwt_event(**claims) -> dict:
    return {"requestContext": {"authorizer": {"jwt": {"claims": {"sub": "alice", **claims}}}}}


@pytest.mark.parametrize("raw,roles", [
    (["not admin"], ["not admin"]),                # a list element is one role, whatever it holds
    (["acme admins", "ops"], ["acme admins", "ops"]),
    (["x,admin"], ["x,admin"]),
    (["user", 5, None, ""], ["user"]),             # only non-empty strings are roles
    ("[admin ops]", ["admin", "ops"]),             # API Gateway's array form: split on whitespace
    ("[x,admin]", ["x,admin"]),                    # ... never on commas
    ('["admin"]', ['"admin"']),                    # ... and never read as JSON
    ("user admin", ["user", "admin"]),             # a plain string: spaces or commas
    ("user, admin", ["user", "admin"]),
    (None, []), (7, []), ({"admin": True}, []),
])
def test_parse_roles(raw, roles):
    assert parse_roles(raw) == roles


def test_the_local_server_keeps_list_elements_and_nulls():
    claims = stringify_claims({"roles": ["not admin", 5], "tenant_id": None, "exp": 10, "ok": True, "o": {"a": 1}})
    assert claims == {"roles": ["not admin", "5"], "tenant_id": None, "exp": "10", "ok": "true", "o": '{"a":1}'}
    assert caller_from_event(jwt_event(tenant_id="acme", **{"cognito:groups": ["acme admins"]})).roles == (
        "acme admins",)


def test_no_tenant_claim_takes_the_configured_default_or_is_refused():
    assert Identity(default_tenant="default")(jwt_event()).tenant_id == "default"
    with pytest.raises(Unauthorized, match="ID token"):
        Identity(default_tenant=None)(jwt_event(client_id="app"))
    with pytest.raises(Unauthorized):
        caller_from_event(jwt_event())  # the module-level reader names no default


@pytest.mark.parametrize("claims", [{"tenant_id": None}, {"custom:tenant_id": None}, {"tenant_id": "acme\n"},
                                    {"tenant_id": ""}, {"tenant_id": "null\n"}, {"tenant_id": ["acme"]}])
def test_a_tenant_claim_that_is_not_exactly_a_tenant_id_is_refused_even_with_a_default(claims):
    with pytest.raises(Unauthorized):
        Identity(default_tenant="default")(jwt_event(**claims))


def test_iam_callers_name_their_tenant_in_the_header():
    def event(headers: dict) -> dict:
        return {"headers": headers, "requestContext": {"authorizer": {"iam": {"userArn": "arn:aws:iam::1:role/x"}}}}

    assert Identity()(event({"X-Tenant-Id": "acme"})).tenant_id == "acme"
    assert Identity(default_tenant="default")(event({})).tenant_id == "default"
    for headers in ({}, {"x-tenant-id": "acme\n"}):
        with pytest.raises(InvalidArgument):
            Identity()(event(headers))
