"""Threads for background work that must yield the CPU to requests: the indexer's embedding.

A backlog of thousands of changes keeps every core busy embedding for minutes. Requests must
still answer promptly meanwhile, so each pool thread lowers its own scheduling priority (Linux
`nice`, per thread). The request threads keep theirs, and the kernel gives them about nine
tenths of a core whenever both want one. onnxruntime runs an inference with one intra-op thread
on the calling thread (`MiniLMEmbedder`'s default), so the model's work is done at the pool's
priority too.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["low_priority_pool", "lower_this_threads_priority", "at_low_priority", "NICENESS"]

log = logging.getLogger(__name__)

NICENESS = 10  # CFS weight 110 against a normal thread's 1024


def low_priority_pool(threads: int, *, name: str) -> ThreadPoolExecutor:
    """A pool of `threads` threads, each running `NICENESS` steps below the process's priority."""
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name, initializer=lower_this_threads_priority)


_background = threading.local()


def at_low_priority() -> bool:
    """Whether the calling thread is background work (`lower_this_threads_priority` ran on it)."""
    return getattr(_background, "lowered", False)


def lower_this_threads_priority() -> None:
    """`NICENESS` steps below the process's priority, for the calling thread only (on Linux)."""
    _background.lowered = True
    # Only Linux schedules threads by their own nice value: elsewhere this call would lower the
    # whole process, requests included, so the pool runs at normal priority there.
    if not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(os.getpriority(os.PRIO_PROCESS, tid) + NICENESS, 19))
    except OSError as exc:  # e.g. a sandbox that forbids it: slower requests during a backlog, nothing worse
        log.warning("could not lower a background thread's priority: %s", exc)
