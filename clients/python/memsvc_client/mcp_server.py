"""`memsvc mcp` (and `memsvc-mcp`): the memory tools over the Model Context Protocol, on stdio.

    MEMORY_SERVICE_URL=https://memory.example.com MEMORY_SERVICE_TOKEN=<jwt> memsvc-mcp --agent-id travel

Tools: `query_memory` and `remember` (as `memsvc_client.tools` has them), `get_memory` and
`forget` (one item by namespace and key, through the store routes), `learn_from_conversation`
(`POST /v1/memories/extract`) and `memory_feedback` (`POST /v1/memories/feedback`, by the id
`query_memory` shows). Without a token the requests
are signed with SigV4 (botocore's credential chain; the region from an execute-api URL,
`--aws-region`, or botocore's configuration).

It lives in the client package, with the official `mcp` SDK as the `mcp` extra, so an agent host
needs `pip install 'memsvc-client[mcp]'` and nothing of the service; `memsvc mcp` runs this same
`main`. `query_memory` fails closed (an empty answer naming the error); the other tools answer a
failure as an MCP tool error (`isError: true`, "<CODE>: <message>"), which hosts show the model.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, Field

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError as exc:  # pragma: no cover - the extra is installed wherever the tests run
    raise ImportError(f"the MCP server needs the official SDK: pip install 'memsvc-client[mcp]' ({exc})") from exc

from memsvc_client.client import AsyncMemsvcClient, FeedbackSignal, MemoryType, MessageRole
from memsvc_client.settings import ClientSettings
from memsvc_client.store import MemsvcError, aws_region_from_url
from memsvc_client.tools import (QUERY_MEMORY_DESCRIPTION, REMEMBER_DESCRIPTION, MemoryTools, QueryMemoryArgs,
                                 error_code)

__all__ = ["build_server", "client_from_settings", "main"]

INSTRUCTIONS = """\
These tools read and write long-term memory about the user, kept across conversations.

When to use memory:
- The user references something discussed previously ("like I mentioned", "remember when")
- The user asks about their preferences or past decisions
- Personalization would improve the response quality
- The user states a lasting fact, preference or decision: save it with `remember`

When using retrieved memories:
- Treat memories as advisory context, not authoritative fact
- Cite memory sources naturally (e.g., "Based on what you mentioned before...")
- If memory seems outdated or contradicts current context, acknowledge the discrepancy
- Never fabricate memories that weren't retrieved
"""
IDENTIFIERS = ("user_id", "agent_id", "session_id", "project_id", "team_id", "org_id")

Namespace = Annotated[
    list[str], Field(min_length=1, description='The memory\'s namespace, e.g. ["user", "alice", "memories"]')
]
Key = Annotated[str, Field(min_length=1, description="The memory's key within its namespace")]


class ConversationMessage(BaseModel):
    role: MessageRole
    content: str = Field(min_length=1)
    name: str | None = Field(default=None, description="who spoke, e.g. Maria")


def build_server(client: AsyncMemsvcClient, **scope: Any) -> MCPServer:
    """An `MCPServer` with the six tools over `client`; `scope` as `MemoryTools` takes it."""
    tools = MemoryTools(client, **scope)
    # WARNING: the SDK's and httpx's INFO lines name every request (namespaces hold user ids).
    server = MCPServer("memsvc", instructions=INSTRUCTIONS, log_level="WARNING")

    def tool_error(exc: Exception) -> ToolError:
        message = exc.message if isinstance(exc, MemsvcError) else "the memory service gave no usable answer"
        return ToolError(f"{error_code(exc)}: {message}")

    @server.tool(description=QUERY_MEMORY_DESCRIPTION)
    async def query_memory(
        query: Annotated[str, Field(description="Search query to find relevant memories. Should capture the "
                                                "semantic intent of what context would be helpful.")],
        types: Annotated[list[MemoryType] | None, Field(description="Filter to specific memory types")] = None,
        as_of: Annotated[str | None, Field(description=QueryMemoryArgs.model_fields["as_of"].description)] = None,
        known_at: Annotated[str | None,
                            Field(description=QueryMemoryArgs.model_fields["known_at"].description)] = None,
    ) -> dict[str, Any]:
        return await tools.aquery_memory(query, types, as_of, known_at)

    @server.tool(description=REMEMBER_DESCRIPTION)
    async def remember(
        content: Annotated[str, Field(description="The statement to remember, self-contained.")],
        type: Annotated[MemoryType, Field(description="What kind of statement this is")] = "fact",
        category: Annotated[str | None, Field(description="A short topic, e.g. 'travel' or 'food'")] = None,
        tags: Annotated[list[str] | None, Field(description="Keywords to file it under")] = None,
        importance: Annotated[float, Field(ge=0, le=1, description="0..1: how much this matters later")] = 0.5,
    ) -> dict[str, Any]:
        result = await tools.aremember(content, type, category, tags, importance)
        if result["action"] == "failed":
            raise ToolError(f"{result['error']}: {result['message']}")
        return result

    @server.tool(description="Learn lasting memories from a conversation: the facts, preferences, decisions and "
                             "plans the user stated about themselves. Each is consolidated with what is already "
                             "known (a repeat changes nothing, a correction replaces the old memory).")
    async def learn_from_conversation(
        messages: Annotated[list[ConversationMessage], Field(min_length=1, max_length=100,
                                                             description="The conversation, oldest first")],
    ) -> dict[str, Any]:
        try:
            return await tools.aextract([m.model_dump(exclude_none=True) for m in messages])
        except Exception as exc:
            raise tool_error(exc) from exc

    @server.tool(description="Tell the memory service how a recalled memory served: useful raises its importance; "
                             "wrong or outdated retire it, so it is not recalled again. `id` is the memory's id "
                             "as query_memory returned it.")
    async def memory_feedback(
        id: Annotated[str, Field(min_length=1, description="The memory's id, from query_memory")],
        signal: Annotated[FeedbackSignal, Field(description="useful, wrong or outdated")],
    ) -> dict[str, Any]:
        try:
            answer = await tools.aclient.feedback(id, signal)
        except Exception as exc:
            raise tool_error(exc) from exc
        memory = answer.get("memory") if isinstance(answer, dict) and isinstance(answer.get("memory"), dict) else {}
        return {"signal": signal, "id": memory.get("id")}

    @server.tool(description="Read one memory by its namespace and key (as query_memory returns them).")
    async def get_memory(namespace: Namespace, key: Key) -> dict[str, Any]:
        try:
            return await tools.aclient.get(namespace, key)
        except Exception as exc:
            raise tool_error(exc) from exc

    @server.tool(description="Delete one memory by its namespace and key, when the user asks to forget it. "
                             "Deleting a memory that does not exist succeeds too.")
    async def forget(namespace: Namespace, key: Key) -> dict[str, Any]:
        try:
            await tools.aclient.delete(namespace, key)
        except Exception as exc:
            raise tool_error(exc) from exc
        return {"deleted": True, "namespace": namespace, "key": key}

    return server


def client_from_settings(settings: ClientSettings, *, aws_region: str | None = None,
                         tenant_id: str | None = None, timeout: float = 10.0) -> AsyncMemsvcClient:
    """A client from `MEMORY_SERVICE_URL` and `MEMORY_SERVICE_TOKEN`; without a token, SigV4."""
    if not settings.url:
        raise ValueError("set MEMORY_SERVICE_URL to the memory service's base URL")
    # An agent waits on every call: a short timeout and one retry, not the store's 30 s and three.
    options: dict[str, Any] = {"tenant_id": tenant_id, "timeout": timeout, "max_retries": 1}
    if settings.token:
        return AsyncMemsvcClient(settings.url, settings.token, **options)
    region = aws_region or aws_region_from_url(settings.url) or _botocore_region()
    if not region:
        raise ValueError("no MEMORY_SERVICE_TOKEN, so requests are signed with SigV4, which needs a region: "
                         "pass --aws-region or configure botocore's region (AWS_DEFAULT_REGION, or the profile's)")
    return AsyncMemsvcClient(settings.url, aws_region=region, **options)


def _botocore_region() -> str | None:
    import botocore.session

    return botocore.session.Session().get_config_variable("region")


def parser(prog: str = "memsvc-mcp") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Serve query_memory, remember, get_memory, forget, learn_from_conversation and "
        "memory_feedback over MCP (stdio). Configured by "
        "MEMORY_SERVICE_URL and MEMORY_SERVICE_TOKEN (a bearer JWT); without a token, SigV4.",
    )
    for name in IDENTIFIERS:
        flag = "--" + name.replace("_", "-")
        p.add_argument(flag, dest=name, default=None, help=f"the layers' {name} (default: none"
                       + (", i.e. the token's own user)" if name == "user_id" else ")"))
    p.add_argument("--layers", default=None, help="comma-separated layers query_memory searches "
                   "(default: every accessible one)")
    p.add_argument("--layer", default=None, help="the layer remember writes to (default: user)")
    p.add_argument("--token-budget", type=int, default=1000, help="query_memory's token budget")
    p.add_argument("--limit", type=int, default=10, help="query_memory's most results")
    p.add_argument("--min-score", type=float, default=0.3, help="query_memory's least relevance")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per request to the service")
    p.add_argument("--aws-region", default=None, help="SigV4's region when the URL does not name one")
    p.add_argument("--tenant-id", default=None, help="sent as X-Tenant-Id (IAM callers choose their tenant)")
    return p


def main(argv: Sequence[str] | None = None, prog: str = "memsvc-mcp") -> int:
    args = parser(prog).parse_args(argv)
    try:
        client = client_from_settings(ClientSettings.from_env(), aws_region=args.aws_region,
                                      tenant_id=args.tenant_id, timeout=args.timeout)
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    identifiers = {name: getattr(args, name) for name in IDENTIFIERS if getattr(args, name)}
    server = build_server(
        client,
        identifiers=identifiers or None,
        layers=args.layers.split(",") if args.layers else None,
        layer=args.layer,
        limit=args.limit,
        min_score=args.min_score,
        token_budget=args.token_budget,
    )
    server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
