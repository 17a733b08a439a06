"""The garbage collector, paused while a cold start builds what lives as long as the process.

A cold start creates a few hundred thousand objects (modules, classes, pydantic models, boto3's
service models) and frees almost none of them, yet the collector's passes keep walking them all:
about 30 ms of the API function's cold start on this machine (`python -m benchmarks.cold_start`).
After the pause they are frozen (`gc.freeze`): moved where no later pass walks them, so the
first request does not pay for them instead. The price: a cycle that became garbage during the
pause is never freed (a cold start makes few, once). Nothing here imports more than the standard
library, so the handler modules can pause the collector before their first heavy import.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """No collection inside the block; then what exists is frozen, and the collector is as it was
    (paused blocks nest)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
