"""The environment's EventBridge bus (lifecycle events, published by the timeline) and its archive."""

from __future__ import annotations

from aws_cdk import Aws, ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

__all__ = ["LifecycleEvents"]


class LifecycleEvents(Construct):
    """A custom bus encrypted with `encryption_key`, and an archive of every event on it (for
    replay) kept `archive_retention_days`.

    Two publishers: the timeline function (memory events) and the API function (workflow events
    such as `memsvc.session.closed`), whose roles have `events:PutEvents` on `bus` and nothing
    else here (the schemas are docs/events.md). A publisher needs no grant on the key:
    EventBridge encrypts with it under the key policy below, which lets the EventBridge service
    use it only with this bus's ARN as encryption context (the bus and its archive). There is no
    resource policy on the bus, so no other account can put events on it. Consumers add rules
    (and their targets) to `bus`."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        bus_name: str,
        archive_retention_days: int,
        encryption_key: kms.IKey,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, id)
        self.bus = events.EventBus(self, "Bus", event_bus_name=bus_name, kms_key=encryption_key)
        self.bus.apply_removal_policy(removal_policy)
        self.archive = events.Archive(
            self, "Archive",
            source_event_bus=self.bus,
            archive_name=f"{bus_name}-archive",
            description=f"every event on {bus_name}, for replay",
            event_pattern=events.EventPattern(account=[Aws.ACCOUNT_ID]),
            retention=Duration.days(archive_retention_days),
        )
        self.archive.apply_removal_policy(removal_policy)
        # `Archive(kms_key=...)` would add a key-policy statement naming the bus by `GetAtt`,
        # while the bus names the key: a dependency cycle. Same grant, with the bus ARN built
        # from its name. It covers the bus's own encryption of the events put on it too: the bus
        # uses the same encryption context.
        archive_resource = self.archive.node.default_child
        assert isinstance(archive_resource, events.CfnArchive)
        archive_resource.kms_key_identifier = encryption_key.key_arn
        bus_arn = Stack.of(self).format_arn(service="events", resource="event-bus", resource_name=bus_name,
                                            arn_format=ArnFormat.SLASH_RESOURCE_NAME)
        encryption_key.add_to_resource_policy(iam.PolicyStatement(
            sid="EventBridgeArchive",
            principals=[iam.ServicePrincipal("events.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey", "kms:ReEncrypt*"],
            resources=["*"],  # in a key policy, "*" is this key
            conditions={"StringEquals": {"kms:EncryptionContext:aws:events:event-bus:arn": bus_arn}},
        ))
        encryption_key.add_to_resource_policy(iam.PolicyStatement(
            sid="EventBridgeDescribeKey",
            principals=[iam.ServicePrincipal("events.amazonaws.com")],
            actions=["kms:DescribeKey"],
            resources=["*"],
        ))
