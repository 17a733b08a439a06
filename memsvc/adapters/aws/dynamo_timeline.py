"""PLACEHOLDER: being written (DynamoEventLog)."""

from __future__ import annotations

from typing import Any


class DynamoEventLog:
    def __init__(self, client: Any, table_name: str, *, retention_days=lambda tenant: 90) -> None:
        self._db = client
        self._table = table_name
        self._retention_days = retention_days
