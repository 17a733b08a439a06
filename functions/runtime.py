"""Adapters built once per cold start, from the environment (see docs/aws-deployment.md, "Lambda environment")."""

from __future__ import annotations

from functions.gc_pause import collector_paused
from memsvc.bootstrap import AwsApp, build_aws
from memsvc.settings import AwsSettings

_app: AwsApp | None = None


def aws_app() -> AwsApp:
    global _app
    if _app is None:
        with collector_paused():
            _app = build_aws(AwsSettings.from_env())
        # Recall's access counts are written by this thread, off the requests (see AccessRecorder
        # for what Lambda's freezing between invocations means for them).
        _app.accesses.start()
    return _app


def set_app(app: AwsApp | None) -> None:
    """Tests install an app built on moto and fakes; None resets to a fresh cold start."""
    global _app
    _app = app
