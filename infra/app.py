"""Build the CDK app: what `app.py` runs and what the tests synthesize."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import CONSOLE_ASSETS_CONTEXT, ENVIRONMENTS, config_for
from infra.stack import MemsvcStack

__all__ = ["build_app", "selected_environments"]


def selected_environments(app: cdk.App) -> list[str]:
    """`-c env=dev` (or `prod`) selects one environment; no `env` means all of them (synth)."""
    chosen = app.node.try_get_context("env")
    if chosen:
        config_for(chosen)  # a clear error for an unknown name
        return [chosen]
    return list(ENVIRONMENTS)


def build_app(app: cdk.App, environments: Iterable[str] | None = None, *, nag: bool = True) -> dict[str, MemsvcStack]:
    """One `MemsvcStack` per environment, with cdk-nag's AWS Solutions checks on the whole app."""
    names = list(environments) if environments is not None else selected_environments(app)
    console_assets = app.node.try_get_context(CONSOLE_ASSETS_CONTEXT)
    configs = {name: replace(config_for(name), console_assets=Path(console_assets)) if console_assets
               else config_for(name) for name in names}
    stacks = {name: MemsvcStack(app, config.stack_name, config=config) for name, config in configs.items()}
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, write_suppressions_to_cloud_formation=True))
    return stacks
