"""PLACEHOLDER: being written (EventBridgePublisher)."""

from __future__ import annotations

from typing import Any


class EventBridgePublisher:
    def __init__(self, client: Any, bus_name: str) -> None:
        self._client = client
        self._bus_name = bus_name
