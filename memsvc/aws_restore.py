"""`memsvc aws-restore`: a deployment's data as it was at a point in time, in new tables, with its
derived indexes rebuilt from the restored items.

1. Both DynamoDB tables are restored to the same second with point-in-time recovery into
   `<table>-<suffix>`, then given the stream, TTL, recovery and deletion protection the stack's
   tables have. The item table is the source of truth: items and their versions, the timeline,
   sessions and messages, workflow state, tenant settings, policies and data keys. The keyword
   table holds the explicitly written graph (source data) beside derived rows.
2. A new, empty S3 Vectors index `<index>-<suffix>` is made beside the stack's (S3 Vectors has no
   point-in-time recovery, and the stack's index holds today's vectors, not those of then).
3. The restored keyword table's derived rows are deleted (they are those of that second's
   indexer, which may still hold versions superseded or deleted before it), its explicit graph
   kept; every live item of the restored table is indexed again by the indexer the stream's
   Lambda runs (`Indexer.rebuild`): its vectors into the new index, its keyword document and
   field tokens, and its derived graph, then its marks. Quarantined items stay quarantined.

The stack keeps serving its own tables throughout; pointing it at the restored ones is the
cut-over, in docs/backup-and-restore.md. Every step looks at what is there before it acts, and
`resume` runs them all again: a run cut short anywhere (while a table was restoring, before the
index was made, mid-rebuild) is finished by it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from memsvc.adapters.aws.clients import AwsClients
from memsvc.adapters.aws.dynamo_graph import DynamoGraphStore
from memsvc.adapters.aws.point_in_time import PointInTimeError, PointInTimeRestore, deployed_environment, stack_clients
from memsvc.core.models import StoredItem
from memsvc.ports import Embedder, SystemClock
from memsvc.service.indexer import Settled
from memsvc.settings import AwsSettings

__all__ = ["RecoveryReport", "default_suffix", "recover", "recover_stack", "recovered_settings"]

BATCH = 100  # items indexed together: one BatchGetItem, a few embedding chunks, one PutVectors each


@dataclass(frozen=True)
class RecoveryReport:
    settings: AwsSettings  # the restored tables and the new index, as a function's environment names them
    items: int  # live items in the restored table
    indexed: int
    quarantined: int  # set aside, then or now, as poison (`/admin/v1/memories/index/status` lists them)
    failed: int  # not indexed (a dependency failed): run again with `resume`


def default_suffix(at: datetime) -> str:
    return f"pitr-{at.astimezone(timezone.utc):%Y%m%d%H%M%S}"


def recovered_settings(settings: AwsSettings, suffix: str) -> AwsSettings:
    return dataclasses.replace(settings, table_name=f"{settings.table_name}-{suffix}",
                               keyword_table_name=f"{settings.keyword_table_name}-{suffix}",
                               vector_index=f"{settings.vector_index}-{suffix}")


def recover_stack(stack: str, region: str, at: datetime, *, suffix: str, resume: bool = False,
                  progress: Callable[[str], None] = lambda line: None) -> RecoveryReport:
    """`recover` for the deployed stack named `stack`, whose resources its indexer function's
    environment names, with clients from the default credentials chain."""
    try:
        settings = AwsSettings.from_env(deployed_environment(stack, **stack_clients(region)), region=region)
    except KeyError as missing:
        raise PointInTimeError(f"the indexer function of {stack} has no {missing} in its environment") from None
    clients = AwsClients.create(region, embedding_concurrency=settings.embedding_concurrency)
    return recover(settings, at, suffix=suffix, clients=clients, resume=resume, progress=progress)


def recover(settings: AwsSettings, at: datetime, *, suffix: str, clients: AwsClients, resume: bool = False,
            embedder: Embedder | None = None, progress: Callable[[str], None] = lambda line: None) -> RecoveryReport:
    """Restore the tables `settings` names as they were at `at`, and index them into a new vector
    index. `resume`: an earlier run with this suffix was cut short; each step does what it left."""
    from memsvc.bootstrap import build_aws

    pitr = PointInTimeRestore(clients.dynamodb, clients.s3vectors)
    target = recovered_settings(settings, suffix)
    tables = ((settings.table_name, target.table_name), (settings.keyword_table_name, target.keyword_table_name))
    existing = [restored for _, restored in tables if pitr.table_exists(restored)]
    if resume and not existing:
        raise PointInTimeError(f"{target.table_name} does not exist: there is nothing to resume with this suffix")
    if not resume and existing:
        raise PointInTimeError(f"{existing[0]} already exists: name another suffix, or resume to finish it")
    if not resume:
        for source, _ in tables:
            pitr.check_restorable(source, at)  # both, before either restore starts
    for source, restored in tables:
        if pitr.restore_or_check(source, restored, at):
            progress(f"restoring {source} as of {at.isoformat()} into {restored}")
    for source, restored in tables:
        pitr.wait_active(restored)
        pitr.configure_like(source, restored)
        progress(f"{restored} is active, with the stream, TTL and recovery of {source}")
    if pitr.index_exists(settings.vector_bucket, target.vector_index):
        progress(f"the vector index {target.vector_index} exists")
    else:
        pitr.create_index_like(settings.vector_bucket, settings.vector_index, target.vector_index)
        progress(f"created the vector index {target.vector_index} in {settings.vector_bucket}")
    cleared = pitr.clear_derived_rows(target.keyword_table_name)
    progress(f"deleted {cleared.deleted} derived rows of {target.keyword_table_name}, kept its explicit graph")
    app = build_aws(target, clients=clients, embedder=embedder)
    items = indexed = quarantined = failed = 0
    batch = []
    for item in pitr.live_items(target.table_name, SystemClock().now()):
        items += 1
        if item.index_error is not None:
            quarantined += 1
            continue
        batch.append(item)
        if len(batch) == BATCH:
            indexed, quarantined, failed = _rebuilt(app.indexer.rebuild(batch), batch, indexed, quarantined, failed)
            progress(f"indexed {indexed} items")
            batch = []
    if batch:
        indexed, quarantined, failed = _rebuilt(app.indexer.rebuild(batch), batch, indexed, quarantined, failed)
    graph = DynamoGraphStore(clients.dynamodb, target.keyword_table_name)
    for tenant in sorted(cleared.tenants):  # a node the rebuild did not mention again, and nobody wrote, goes
        graph.integrity_scan(tenant)
    return RecoveryReport(target, items, indexed, quarantined, failed)


def _rebuilt(settled: Settled, batch: list[StoredItem], indexed: int, quarantined: int,
             failed: int) -> tuple[int, int, int]:
    set_aside, left = len(settled.quarantined), len(settled.failed)
    return indexed + len(batch) - set_aside - left, quarantined + set_aside, failed + left
