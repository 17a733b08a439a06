"""The one place that reads the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LocalSettings", "ClientSettings"]


@dataclass(frozen=True)
class LocalSettings:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 8000

    @classmethod
    def from_env(cls) -> "LocalSettings":
        return cls(
            data_dir=Path(os.environ.get("MEMSVC_DATA_DIR", "~/.memsvc")).expanduser(),
            host=os.environ.get("MEMSVC_HOST", "127.0.0.1"),
            port=int(os.environ.get("MEMSVC_PORT", "8000")),
        )


@dataclass(frozen=True)
class ClientSettings:
    """What `memsvc.langgraph.MemsvcStore()` reads when given no arguments."""

    url: str | None
    token: str | None

    @classmethod
    def from_env(cls) -> "ClientSettings":
        return cls(
            url=os.environ.get("MEMORY_SERVICE_URL") or None,
            token=os.environ.get("MEMORY_SERVICE_TOKEN") or None,
        )
