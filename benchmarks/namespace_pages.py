"""`python -m benchmarks.namespace_pages [--namespaces 3000] [--backend local|aws]`: what a page of
`GET /v1/memories/namespaces` costs when the tenant holds many namespaces, in process (the
service and the item store, no HTTP; the AWS backend on moto, whose Query costs milliseconds of
CPU where DynamoDB's costs milliseconds of network).

One user holds `--namespaces` namespaces `user/alice/nNNNNN` of one memory each. Each listing is
timed (the best of three, after one untimed to warm the policy engine) with the authz checks it
made (`CompiledPolicies.allow` calls below `user/alice`); the live-item reads go with the checks.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from memsvc.core.policy import CompiledPolicies
from memsvc.service.memories import PutMemory
from memsvc.service.search import ListNamespaces
from tests.conftest import ManualClock, alice, local_data_dir
from tests.fakes.embedder import HashEmbedder

QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("first page of 10", {"limit": 10}),
    ("page of 10 at the middle", {"limit": 10, "offset": -1}),  # -1: half the namespaces
    ("max_depth=2 (one entry)", {"limit": 10, "max_depth": 2}),
    ("first page of 10, counts", {"limit": 10, "counts": True}),
    ("suffix matching one", {"limit": 10, "suffix": ["n00007"]}),
]


@contextmanager
def _app(backend: str) -> Iterator[Any]:
    embedder = HashEmbedder()
    if backend == "local":
        from memsvc.bootstrap import build_local

        with tempfile.TemporaryDirectory() as tmp:
            app = build_local(local_data_dir(Path(tmp)), embedder=embedder, clock=ManualClock(), start_workers=False)
            try:
                yield app
            finally:
                app.close()
    else:
        from tests.fakes.aws_stack import aws_stack

        with aws_stack(dimension=embedder.dimension, embedder=embedder, clock=ManualClock()) as stack:
            yield stack.app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namespaces", type=int, default=3000)
    parser.add_argument("--backend", choices=("local", "aws"), default="local")
    args = parser.parse_args()
    checks = [0]
    allow = CompiledPolicies.allow

    def counted(self, operation, namespace, key, context):
        checks[0] += len(namespace) > 2
        return allow(self, operation, namespace, key, context)

    CompiledPolicies.allow = counted  # type: ignore[method-assign]
    with _app(args.backend) as app:
        started = time.perf_counter()
        for n in range(args.namespaces):
            app.services.memories.put(alice(), PutMemory(namespace=["user", "alice", f"n{n:05d}"], key="k",
                                                         value={"text": "x"}, index_fields=False))
        print(f"{args.backend}: {args.namespaces} namespaces written in {time.perf_counter() - started:.1f} s")
        print(f"{'listing':<30} {'ms':>9} {'authz checks':>13}")
        for name, query in QUERIES:
            if query.get("offset") == -1:
                query = {**query, "offset": args.namespaces // 2}
            listing = ListNamespaces.parse(query)
            app.services.search.namespace_listing(alice(), listing)
            best = None
            for _ in range(3):
                checks[0] = 0
                started = time.perf_counter()
                app.services.search.namespace_listing(alice(), listing)
                took = (time.perf_counter() - started) * 1000
                best = took if best is None else min(best, took)
            print(f"{name:<30} {best:>9.1f} {checks[0]:>13}")


if __name__ == "__main__":
    main()
