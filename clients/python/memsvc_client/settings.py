"""The one place the client reads the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["ClientSettings"]


@dataclass(frozen=True)
class ClientSettings:
    """What `MemsvcStore()` reads when given no arguments."""

    url: str | None
    token: str | None

    @classmethod
    def from_env(cls) -> "ClientSettings":
        return cls(
            url=os.environ.get("MEMORY_SERVICE_URL") or None,
            token=os.environ.get("MEMORY_SERVICE_TOKEN") or None,
        )
