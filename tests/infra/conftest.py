"""The CDK app synthesized once per session (both environments, cdk-nag on), and bare stacks
for the construct tests. Synthesis here skips the layer's bundling (the layer build has its own
test) and CDK's built-in template validation (cfn-lint runs instead, in test_cfn_lint.py)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# jsii warns on every start that Node 20 is past its end of life (the machine's Node).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402

from infra.app import build_app  # noqa: E402
from infra.config import ENVIRONMENTS  # noqa: E402
from infra.stack import MemsvcStack  # noqa: E402
from tests.infra.helpers import REGION, new_app  # noqa: E402

@dataclass
class Assembly:
    outdir: Path
    stacks: dict[str, MemsvcStack]
    templates: dict[str, dict[str, Any]]  # env -> CloudFormation template
    synth_error: str | None
    nag_report: dict[str, Any]

    def template(self, env: str) -> Template:
        return Template.from_json(self.templates[env])

    def resources(self, env: str, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.templates[env]["Resources"].items() if v["Type"] == type_}


def pytest_collection_modifyitems(items):
    """Under `make test` (pytest-xdist, `--dist loadgroup`) one worker runs every test here, so the
    session's synthesis and test_layer.py's resolution of the layer (pip, ~10 s each) happen once."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("infra"))


@pytest.fixture(scope="session")
def assembly(tmp_path_factory) -> Assembly:
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = new_app(outdir)
    stacks = build_app(app, list(ENVIRONMENTS))
    error = None
    try:
        app.synth()
    except Exception as exc:  # cdk-nag findings fail synthesis after the templates are written
        error = str(exc)
    templates = {env: json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
                 for env, stack in stacks.items()}
    report_file = outdir / "policy-validation-report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {"pluginReports": []}
    return Assembly(outdir, stacks, templates, error, report)


@pytest.fixture
def bare_stack():
    """A fresh app and an empty stack in the deployment region, for one construct at a time."""

    def make() -> cdk.Stack:
        return cdk.Stack(new_app(), "Bare", env=cdk.Environment(region=REGION))

    return make
