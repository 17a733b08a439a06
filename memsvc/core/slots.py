"""A request's CPU slot, given back while the request only waits (`memsvc serve`'s `FairPool`).

`memsvc serve` runs as many requests at once as it has cores: more only contend for the GIL. A
request that waits on another process (a tenant's policy in its sandbox worker) or spends its time
in the embedding model (a write indexed before it answers) uses no interpreter time meanwhile, yet
held its slot, so two of them held a 2-core server: every tenant's requests, `/health` too, waited
for them. Wrapped in `released()`, such a wait gives the slot to the next request and takes one
back, fairly, before it goes on. Outside a pool's thread (AWS Lambda, the CLI, tests) it does
nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["bind", "released"]

_local = threading.local()


def bind(release: Callable[[], None] | None, reclaim: Callable[[], None] | None) -> None:
    """Set (or, with None, clear) this thread's slot callbacks: the pool's, around each call it runs."""
    _local.hooks = (release, reclaim) if release is not None and reclaim is not None else None
    _local.depth = 0


@contextmanager
def released() -> Iterator[None]:
    """Run the body without this thread's slot (the outermost of nested uses gives it back)."""
    hooks = getattr(_local, "hooks", None)
    if hooks is None or _local.depth:
        yield
        return
    release, reclaim = hooks
    _local.depth = 1
    release()
    try:
        yield
    finally:
        reclaim()
        _local.depth = 0
