"""The KMS keys exports may be sealed under (issue 26): a per-environment list
(`EnvConfig.export_kms_key_arns`) that the API role is granted exactly, for the export purpose
only, and that the functions are told (`MEMSVC_EXPORT_KMS_KEY_ARNS`, read by `AwsSettings`); no
list, no grant."""

from __future__ import annotations

import dataclasses

import pytest
from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from infra.config import ENVIRONMENTS
from infra.constructs import ApiFunction
from memsvc.settings import AwsSettings
from tests.infra.helpers import as_list, resources_of, statements
from tests.infra.test_functions import service_resources

KEYS = ("arn:aws:kms:eu-west-1:111122223333:key/1111aaaa-2222-3333-4444-555566667777",
        "arn:aws:kms:eu-west-1:111122223333:key/8888bbbb-9999-0000-1111-222233334444")


def api_template(bare_stack, arns: tuple[str, ...]) -> dict:
    stack = bare_stack()
    envelope = kms.Key(stack, "EnvelopeKey", enable_key_rotation=True)
    storage = kms.Key(stack, "StorageKey", enable_key_rotation=True)
    common = service_resources(stack, envelope, storage)
    common["settings"] = dataclasses.replace(common["settings"], export_kms_key_arns=arns)
    bus = events.EventBus(stack, "Bus", event_bus_name="bus", kms_key=storage)
    ApiFunction(stack, "Api", function_name="fn-api", memory_mb=1024, timeout=Duration.seconds(25),
                reserved_concurrency=None, event_bus=bus, **common)
    return Template.from_stack(stack).to_json()


def export_key_statements(template: dict) -> list[dict]:
    return [s for s in statements(template) if any(r in KEYS for r in as_list(s["Resource"]))]


def test_the_api_role_may_use_exactly_the_listed_keys_for_exports_only(bare_stack):
    template = api_template(bare_stack, KEYS)
    [grant] = export_key_statements(template)
    assert grant["Sid"] == "ExportKeys" and grant["Effect"] == "Allow"
    assert sorted(as_list(grant["Action"])) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert sorted(as_list(grant["Resource"])) == sorted(KEYS)
    assert grant["Condition"] == {"StringEquals": {"kms:EncryptionContext:memsvc:purpose": "export"}}
    [function] = resources_of(template, "AWS::Lambda::Function").values()
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["MEMSVC_EXPORT_KMS_KEY_ARNS"] == ",".join(KEYS)
    assert AwsSettings.from_env({**{k: "x" for k in ("MEMSVC_TABLE_NAME", "MEMSVC_KEYWORD_TABLE_NAME",
                                                     "MEMSVC_VECTOR_BUCKET", "MEMSVC_VECTOR_INDEX",
                                                     "MEMSVC_KMS_KEY_ID")},
                                 "MEMSVC_EXPORT_KMS_KEY_ARNS": variables["MEMSVC_EXPORT_KMS_KEY_ARNS"]}
                                ).export_kms_key_arns == KEYS


def test_no_listed_key_no_grant(bare_stack):
    template = api_template(bare_stack, ())
    assert not [s for s in statements(template) if s.get("Sid") == "ExportKeys"]
    [function] = resources_of(template, "AWS::Lambda::Function").values()
    assert function["Properties"]["Environment"]["Variables"]["MEMSVC_EXPORT_KMS_KEY_ARNS"] == ""


def test_the_setting_takes_key_arns_only():
    config = next(iter(ENVIRONMENTS.values()))
    assert dataclasses.replace(config, export_kms_key_arns=KEYS).export_kms_key_arns == KEYS
    for bad in ("alias/exports", "1111aaaa-2222-3333-4444-555566667777", "arn:aws:kms:eu-west-1:1:alias/x"):
        with pytest.raises(ValueError, match="export_kms_key_arns"):
            dataclasses.replace(config, export_kms_key_arns=(bad,))
