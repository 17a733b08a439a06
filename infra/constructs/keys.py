"""The stack's customer-managed KMS keys."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from constructs import Construct

__all__ = ["EncryptionKeys"]


class EncryptionKeys(Construct):
    """Two symmetric keys, rotated yearly, each for one purpose.

    `envelope_key` wraps each tenant's data key (the service's envelope encryption of memory
    values and attributes; used directly by the functions, always with the tenant as
    encryption context). `storage_key` encrypts data at rest in AWS services: the item table
    and its stream, the vector bucket, the event bus and its archive. Keeping them apart means
    a role that can read the table through DynamoDB still cannot unwrap a tenant's data key.
    """

    def __init__(self, scope: Construct, id: str, *, alias_prefix: str, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, id)
        self.envelope_key = kms.Key(
            self, "EnvelopeKey",
            alias=f"alias/{alias_prefix}/envelope",
            description=f"{alias_prefix}: wraps per-tenant data keys (encryption context memsvc:tenant)",
            enable_key_rotation=True,
            pending_window=Duration.days(30),
            removal_policy=removal_policy,
        )
        self.storage_key = kms.Key(
            self, "StorageKey",
            alias=f"alias/{alias_prefix}/storage",
            description=f"{alias_prefix}: at-rest encryption of the item table, vector bucket and event bus",
            enable_key_rotation=True,
            pending_window=Duration.days(30),
            removal_policy=removal_policy,
        )
