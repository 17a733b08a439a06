"""The boto3 clients a function needs, built once per cold start."""

from __future__ import annotations

from typing import Any

import boto3

from memsvc.adapters.aws.titan import titan_client_config

__all__ = ["make_clients"]


def make_clients(region: str, *, embedding_concurrency: int) -> dict[str, Any]:
    session = boto3.session.Session(region_name=region)
    return {
        "dynamodb": session.client("dynamodb"),
        "s3vectors": session.client("s3vectors"),
        "kms": session.client("kms"),
        "events": session.client("events"),
        "bedrock-runtime": session.client(
            "bedrock-runtime", config=titan_client_config(max_concurrency=embedding_concurrency)
        ),
    }
