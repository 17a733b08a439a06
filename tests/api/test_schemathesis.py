"""Schemathesis against the whole HTTP API (issue 22): every operation of the OpenAPI document, as a
plain user and as an admin, with every check `st run --checks all` runs, in the phases it runs them
(the coverage phase's boundary and invalid cases, then fuzzing; the stateful phase follows links,
which the document does not declare), positive and negative.

What it holds the API to: a request the document says is valid is never refused but for a reason
the document gives (403, 404, 409, or a rule in a field's description, below), a request it says
is invalid is refused, nothing answers 500, and every answer has a declared status and conforms
to its schema. In process (the ASGI app `memsvc serve` runs, on a fake embedder), offline and
derandomized, with a bounded number of examples.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from memsvc.api.openapi import openapi_document
from memsvc.api.routes import ROUTES
from memsvc.core.models import Caller
from memsvc.core.validation import MAX_DEPTH
from memsvc.local_server import LocalServer
from memsvc.service.tenant_config import SettingsPatch
from tests.conftest import local_data_dir
from tests.fakes.embedder import HashEmbedder

# The repository's own Schemathesis settings (what `st run` reads: 413 refuses, 412 answers a stale
# If-Match), with a fixed seed.
CONFIG = schemathesis.Config.from_str("seed = 22\n" + (Path(__file__).parents[2] / "schemathesis.toml").read_text())
schema = schemathesis.openapi.from_dict(openapi_document(ROUTES), config=CONFIG)

# Rules JSON Schema cannot state, each written in its field's description. A schema-valid request
# that breaks one is refused with 400 naming that field: no finding, as long as it is that field.
NOT_IN_SCHEMA: dict[tuple[str, str], set[str]] = {
    ("GET", "/v1/memories/events"): {"after_cursor"},  # a cursor this service gave
    ("GET", "/v1/memories/history"): {"cursor"},  # a cursor this service gave, for this key
    ("GET", "/v1/memory/sessions"): {"cursor"},
    ("GET", "/v1/memory/plans"): {"cursor"},
    ("GET", "/v1/memory/working/{plan_id}"): {"cursor"},
    ("PUT", "/admin/v1/memories/policies"): {"policies"},  # Rego that compiles and keeps the admin in
    # sum to 1; check_low <= auto_update; rerank on needs MEMSVC_RERANK_URL locally
    ("PUT", "/admin/v1/memories/settings"): {"recall_weights", "settings", "rerank"},
    ("POST", "/v1/memory/task-context/{task_id}/sub-tasks"): {"add"},  # no id both added and removed
    # another entity than source, once both are normalised; valid_to after valid_from (or now, without one)
    ("PUT", "/v1/graph/relations"): {"target", "valid_to"},
    ("POST", "/v1/graph/related"): {"from.memory.namespace"},  # a memory under namespace_prefix
    ("POST", "/v1/graph/path"): {"from.memory.namespace", "to.memory.namespace"},
    ("POST", "/v1/graph/neighbours"): {"entity.memory.namespace", "cursor"},  # and a cursor of this query
    ("POST", "/v1/memories/remember"): {"valid_to"},  # after valid_from
    # known_at: not in the future, within the event retention, few enough changes since; not with
    # refresh_ttl (search) or graph_hops (recall)
    ("POST", "/v1/memories/search"): {"known_at", "refresh_ttl"},
    ("POST", "/v1/memories/recall"): {"known_at", "graph_hops"},
    # one key (a passphrase or a KMS key, this on AWS only) unless encrypt is false; a prefix or a user_id
    ("POST", "/admin/v1/exports"): {"body", "kms_key_id", "scope"},
    # a user id of at most 256 bytes of UTF-8 (the schema counts characters)
    ("DELETE", "/admin/v1/users/{user_id}"): {"user_id"},
    ("GET", "/admin/v1/users/{user_id}/erasure"): {"user_id"},
    # LangGraph's filter: an object without operators matches field by field, so its names are
    # non-empty and the operator objects inside it valid
    ("POST", "/store/items/search"): {"filter"},
}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from memsvc.bootstrap import build_local

    app = build_local(local_data_dir(tmp_path_factory.mktemp("schemathesis")), embedder=HashEmbedder(),
                      start_workers=False)
    yield app
    app.close()


class _App:
    """The ASGI app under test, the one `memsvc serve` runs: a new one for each test (Schemathesis ends
    an app's lifespan, which closes its threads, after each), behind one identity that the schema
    holds, so that the checks that send requests of their own send them to it too."""

    server: LocalServer

    async def __call__(self, scope, receive, send) -> None:
        await self.server(scope, receive, send)


APP = _App()
schema.app = APP


@pytest.fixture
def server(app):
    APP.server = LocalServer(app.router, app.issuer, threads=2)


@pytest.fixture(params=["user", "admin"])
def auth(request, app) -> dict[str, str]:
    """A bearer token in a tenant of the test's own, so that a setting one operation's examples
    change never refuses another's. The tenant lets namespaces be as deep as the schema allows
    (max_depth is a tenant setting: MAX_DEPTH is the most any tenant may set)."""
    tenant = "st-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16]
    app.services.admin.put_settings(Caller(tenant_id=tenant, user_id="root", roles=("admin",)),
                                    SettingsPatch(max_depth=MAX_DEPTH))
    roles = ["admin"] if request.param == "admin" else None
    return {"Authorization": f"Bearer {app.issuer.mint(sub='alice', tenant=tenant, roles=roles)}"}


@schema.parametrize()
# Examples share the test's server and tenant on purpose (function_scoped_fixture), and nothing here
# depends on time, on a loaded machine least of all (deadline, too_slow).
@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@pytest.mark.usefixtures("server")
def test_api_conforms_to_its_openapi_document(case, auth):
    response = case.call(headers=auth)
    documented = _documented_refusal(case.method, case.path, response)
    case.validate_response(response, headers=auth, transport_kwargs={"headers": auth},
                           excluded_checks=[positive_data_acceptance] if documented else [])


def _documented_refusal(method: str, path: str, response) -> bool:
    """A 400 naming a field whose rule only its description states (`NOT_IN_SCHEMA`), or a namespace
    (or a session id, a segment of the session's namespaces) longer than its stored form may be
    (bytes of percent-encoded UTF-8, said wherever one is taken)."""
    if response.status_code != 400:
        return False
    details = json.loads(response.text)["error"]["details"]
    field = details.get("field", "policies" if "policy_file" in details else None)
    return (field in NOT_IN_SCHEMA.get((method.upper(), path), set())
            or (field in ("namespace", "session_id") and details.get("reason") == "too_long"))
