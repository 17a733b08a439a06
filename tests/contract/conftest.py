"""One contract suite, two backends: every test here runs on `local` (SQLite, numpy index, key
file) and on `aws` (DynamoDB + Streams, S3 Vectors, KMS on moto, with the fakes of tests/fakes).
The embedder is the same deterministic fake on both, so the backend is what is under test."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from memsvc.adapters.aws.dynamo_store import change_from_stream_record
from tests.fakes.aws_stack import BUCKET, INDEX, KEYWORD_TABLE, aws_stack, epoch
from tests.conftest import local_data_dir
from tests.fakes.embedder import HashEmbedder


@dataclass
class Backend:
    name: str
    app: Any  # LocalApp or AwsApp
    store: Any
    vectors: Any
    embedder: HashEmbedder
    clock: Any
    data_dir: Any = None
    local: Any = None  # LocalApp
    aws: Any = None  # AwsStack

    @property
    def memories(self):
        return self.app.services.memories

    @property
    def search(self):
        return self.app.services.search

    @property
    def timeline(self):
        return self.app.services.timeline

    @property
    def admin(self):
        return self.app.services.admin

    @property
    def indexer(self):
        return self.app.indexer

    @property
    def settings(self):
        return self.app.settings

    @property
    def event_log(self):
        return self.local.events if self.local is not None else self.app.timeline.log

    @property
    def sealer(self):
        return self.app.sealer

    def drain(self) -> None:
        """Deliver every pending change to both consumers, the indexer and the timeline (the feed
        workers / the stream Lambdas)."""
        if self.local is not None:
            self.local.workers.run_cycle("indexer")
            self.local.workers.run_cycle("timeline")
        else:
            self.aws.drain()

    def sweep(self) -> None:
        """Expire what is due (the sweeper / DynamoDB TTL)."""
        if self.local is not None:
            self.local.sweeper.sweep()
        else:
            self.aws.expire(epoch(self.clock.now()))

    def changes(self) -> list:
        """The changes not yet delivered, without consuming them."""
        if self.local is not None:
            return self.store.read("indexer", 10_000)
        self.aws.pending["indexer"].extend(self.aws.read_stream())
        return [c for c in (change_from_stream_record(r) for r in self.aws.pending["indexer"]) if c is not None]

    def keyword_dump(self) -> str:
        """Everything the keyword index holds at rest, as text (to look for plaintext in it)."""
        if self.local is not None:
            files = sorted(self.data_dir.glob("keywords.db*"))
            return "".join(f.read_bytes().decode("latin-1") for f in files)
        client = self.aws.clients.dynamodb
        pages = client.get_paginator("scan").paginate(TableName=KEYWORD_TABLE)
        return json.dumps([item for page in pages for item in page["Items"]])

    def field_tokens(self, tenant: str) -> set[str]:
        """Every field token the keyword index holds for the tenant (from its records)."""
        if self.local is not None:
            rows = self.local.keywords._fields._db.conn().execute(
                "SELECT tokens FROM field_docs WHERE tenant = ?", (tenant,)).fetchall()
            return {t for (tokens,) in rows for t in json.loads(tokens)}
        client = self.aws.clients.dynamodb
        pages = client.get_paginator("scan").paginate(TableName=KEYWORD_TABLE)
        return {t["S"] for page in pages for item in page["Items"]
                if item["pk"]["S"].startswith(f"T#{tenant}#FD#") for t in item["tokens"]["L"]}

    def memory_ids(self, tenant: str) -> set[str]:
        """Memory ids that have vectors in the index."""
        if self.local is not None:
            return self.vectors.memory_ids(tenant)
        client, ids, token = self.aws.clients.s3vectors, set(), None
        while True:
            page = client.list_vectors(vectorBucketName=BUCKET, indexName=INDEX, returnMetadata=True,
                                       **({"nextToken": token} if token else {}))
            ids |= {v["metadata"]["memory_id"] for v in page["vectors"] if v["metadata"]["tenant"] == tenant}
            token = page.get("nextToken")
            if not token:
                return ids


@pytest.fixture(params=["local", "aws"])
def backend(request, tmp_path, clock):
    embedder = HashEmbedder()
    if request.param == "local":
        from memsvc.bootstrap import build_local

        app = build_local(local_data_dir(tmp_path), embedder=embedder, clock=clock, start_workers=False)
        yield Backend("local", app, app.store, app.vectors, embedder, clock, data_dir=app.data_dir, local=app)
        app.close()
    else:
        with aws_stack(dimension=embedder.dimension, embedder=embedder, clock=clock) as stack:
            app = stack.app
            yield Backend("aws", app, app.store, app.vectors, embedder, clock, aws=stack)


@pytest.fixture
def local_only(backend):
    if backend.name != "local":
        pytest.skip("exercises the local change-feed consumer (on AWS: Lambda's event source mapping)")
    return backend


@pytest.fixture
def plans(backend):
    return backend.app.services.plans


@pytest.fixture
def working(backend):
    return backend.app.services.working
