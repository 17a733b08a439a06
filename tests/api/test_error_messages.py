"""Over HTTP, on both live backends: a refused request is told what failed in our words, never a
library's text, a stack or policy source (issue 22). tests/unit/test_error_text.py covers each
path in-process; these check that nothing on the way out (server, transport) adds any."""

from __future__ import annotations

import httpx
import pytest

from tests.api.helpers import assert_error, put
from tests.conftest import shared_ssl_context
from tests.unit.test_error_text import assert_no_internal_text

pytestmark = pytest.mark.slow


def test_a_body_that_is_not_json(me):
    r = me.put("/v1/memories", content=b'{"namespace": [', headers={"content-type": "application/json"})
    err = assert_error(r, 400, "INVALID_ARGUMENT")
    assert err["details"] == {"field": "body", "line": 1, "column": 16}
    assert_no_internal_text(r.json())


def test_a_body_of_the_wrong_shape(me, home):
    r = put(me, home, "k", "SECRET-VALUE-1", index_fields=7, bogus=1)
    err = assert_error(r, 400, "INVALID_ARGUMENT")
    assert err["message"] == "value: must be an object"
    assert {e["field"] for e in err["details"]["errors"]} == {"value", "index_fields", "bogus"}
    assert_no_internal_text(r.json(), "SECRET-VALUE-1")


def test_policy_failures_at_upload_and_on_a_write(admin, me, home):
    policies = admin.get("/admin/v1/memories/policies").json()["policies"]
    broken = {**policies, "attributes.rego": "package memories.attributes\n\nattributes := {\n"}
    r = admin.put("/admin/v1/memories/policies", json={"policies": broken})
    err = assert_error(r, 400, "INVALID_ARGUMENT")
    assert err["details"] == {"policy_file": "attributes.rego", "line": 4, "column": 1}
    assert_no_internal_text(r.json(), "attributes := {")

    failing = {**policies, "attributes.rego": ('package memories.attributes\n\n'
                                               'attributes := {"n": input.value.n * 2}\n')}
    assert admin.put("/admin/v1/memories/policies", json={"policies": failing}).status_code == 200
    r = put(me, home, "k", {"n": "SECRET-VALUE-1"})
    err = assert_error(r, 400, "INVALID_ARGUMENT")
    assert err["details"] == {"policy_file": "attributes.rego", "line": 3, "column": 32}
    assert_no_internal_text(r.json(), "SECRET-VALUE-1", "input.value")


@pytest.mark.parametrize("live_server", ["local"], indirect=True)
@pytest.mark.parametrize("token", ["not-a-jwt", "a.b.c", "eyJhbGciOiJub25lIn0.e30."])
def test_a_refused_token(live_server, token):
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30,
                      verify=shared_ssl_context()) as client:
        r = client.get("/v1/memories", params=[("ns", "user"), ("key", "k")])
    err = assert_error(r, 401, "UNAUTHORIZED")
    assert err["message"].startswith("invalid token: the token ")
    assert_no_internal_text(r.json())
