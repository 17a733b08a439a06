"""memsvc-client: LangGraph's `BaseStore` over the memsvc HTTP API (`MemsvcStore`, and
`AsyncMemsvcStore` shaped like LangGraph's async stores), the agent-memory routes
(`MemsvcClient`, `AsyncMemsvcClient`) and the agent tools (`memsvc_client.tools`; the MCP server
is `memsvc_client.mcp_server`)."""

from memsvc_client.client import AsyncMemsvcClient, MemsvcClient
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
    PreconditionFailedError,
    TransientError,
)
from memsvc_client.worker import AsyncTaskWorker, SubTaskDone, TaskWorker
from memsvc_client.tools import MemoryTools, langchain_tools, tool_specs

__all__ = [
    "MemsvcStore",
    "AsyncMemsvcStore",
    "MemsvcClient",
    "AsyncMemsvcClient",
    "MemoryTools",
    "TaskWorker",
    "AsyncTaskWorker",
    "SubTaskDone",
    "langchain_tools",
    "tool_specs",
    "ClientSettings",
    "AwsSigV4Auth",
    "MemsvcError",
    "InvalidArgumentError",
    "AuthError",
    "NotFoundError",
    "PreconditionFailedError",
    "TransientError",
    "InvalidNamespaceError",
]
