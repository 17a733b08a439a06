"""Key material on disk: created once, readable by the owner only."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_private"]


def write_private(path: Path, data: bytes) -> None:
    """Create `path` with mode 0600 and write `data`; fail if it already exists (never overwrite a key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
