"""The CDK app: one `MemsvcStack` per environment, composed of the constructs in `infra.constructs`.

`infra.config` is the only place environments differ; `infra.app.build_app` is what `app.py`
and the tests call.
"""
