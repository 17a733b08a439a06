"""memsvc-client: LangGraph's `BaseStore` over the memsvc HTTP API (`MemsvcStore`, and
`AsyncMemsvcStore` shaped like LangGraph's async stores)."""

from memsvc_client.settings import ClientSettings
from memsvc_client.store import (
    AsyncMemsvcStore,
    AuthError,
    AwsSigV4Auth,
    InvalidArgumentError,
    InvalidNamespaceError,
    MemsvcError,
    MemsvcStore,
    NotFoundError,
    TransientError,
)

__all__ = [
    "MemsvcStore",
    "AsyncMemsvcStore",
    "ClientSettings",
    "AwsSigV4Auth",
    "MemsvcError",
    "InvalidArgumentError",
    "AuthError",
    "NotFoundError",
    "TransientError",
    "InvalidNamespaceError",
]
