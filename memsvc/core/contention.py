"""How every optimistic writer (service or adapter) retries after losing a race: how often, and
how long it waits between attempts."""

from __future__ import annotations

import random
import time

__all__ = ["WRITE_ATTEMPTS", "backoff"]

WRITE_ATTEMPTS = 32


def backoff(attempt: int) -> None:
    """Full jitter before attempt `attempt` (none before the first), so racing writers spread out."""
    if attempt:
        time.sleep(random.uniform(0, min(0.2, 0.002 * 2**attempt)))
