"""The official MCP Python SDK (PyPI `mcp`) as a real client of Cubicle.

usage: python mcp_client.py stdio <gateway> <token> <workspace> <cubicle binary>
       python mcp_client.py http  <gateway> <token> <workspace>

Connects the way the SDK does by default (it probes the newest protocol
version, then falls back), lists the tools, runs `echo py-ok` with `exec`,
and prints one JSON line: the negotiated version, the tool names, the exec
result's text, and the error text of a call with a bad token (http mode).
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client._transport import Transport  # noqa: F401  (documents the transport type)


def http_transport(gateway, token):
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    return streamable_http_client(f"{gateway}/v1/mcp", http_client=client)


async def session(mode, gateway, token, extra):
    if mode == "stdio":
        params = StdioServerParameters(command=extra, args=["mcp", "--url", gateway, "--token", token])
        return Client(params)
    return Client(http_transport(gateway, token))


async def main():
    mode, gateway, token, workspace = sys.argv[1:5]
    extra = sys.argv[5] if len(sys.argv) > 5 else None
    out = {}
    async with await session(mode, gateway, token, extra) as client:
        out["version"] = client.protocol_version
        tools = await client.list_tools()
        out["tools"] = [tool.name for tool in tools.tools]
        result = await client.call_tool("exec", {"workspace": workspace, "command": "echo py-ok"})
        out["exec_error"] = result.is_error
        out["exec_text"] = " ".join(getattr(block, "text", "") for block in result.content)
    if mode == "http":
        try:
            async with Client(http_transport(gateway, "cubicle_not_a_token")) as client:
                await client.list_tools()
            out["refused"] = None
        except BaseException as err:  # the SDK raises an exception group from its task group
            out["refused"] = describe(err)
    print(json.dumps(out))


def describe(err):
    """The messages of an exception and, for a group, of everything inside."""
    parts = [f"{type(err).__name__}: {err}"]
    for inner in getattr(err, "exceptions", ()):
        parts.append(describe(inner))
    if err.__cause__ is not None:
        parts.append(describe(err.__cause__))
    return " | ".join(parts)


asyncio.run(main())
