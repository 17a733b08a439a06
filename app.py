#!/usr/bin/env python3
"""The CDK app. `cdk synth` builds every environment; `cdk deploy -c env=dev` (or prod) one.
Environments are defined in infra/config.py."""

import aws_cdk as cdk

from infra.app import build_app

app = cdk.App()
build_app(app)
app.synth()
