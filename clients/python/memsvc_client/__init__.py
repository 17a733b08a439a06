"""memsvc-client: LangGraph's `BaseStore` over the memsvc HTTP API (`MemsvcStore`, and
`AsyncMemsvcStore` shaped like LangGraph's async stores), the agent-memory routes
(`MemsvcClient`, `AsyncMemsvcClient`), the agent tools (`memsvc_client.tools`; the MCP server
is `memsvc_client.mcp_server`) and LangGraph's model hooks (`memsvc_client.hooks`)."""

from memsvc_client.client import AsyncMemsvcClient, MemsvcClient
from memsvc_client.hooks import append_turn_hook, recall_hook
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
from memsvc_client.openai_agents import openai_agents_tools

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
    "openai_agents_tools",
    "tool_specs",
    "recall_hook",
    "append_turn_hook",
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
