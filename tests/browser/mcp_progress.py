"""The official MCP Python SDK calling a tool that a policy holds.

usage: python mcp_progress.py <gateway> <token> <workspace> <command>

Calls `exec` with a progress callback over streamable HTTP and prints one
JSON line: every progress notification that arrived while the call waited
(progress, message, seconds since the call began) and the call's result.
"""

import asyncio
import json
import sys
import time

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main():
    gateway, token, workspace, command = sys.argv[1:5]
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=180)
    began = time.monotonic()
    notes = []

    async def progress(value, total, message):
        notes.append({"progress": value, "message": message, "at": time.monotonic() - began})

    out = {}
    async with Client(streamable_http_client(f"{gateway}/v1/mcp", http_client=http)) as client:
        # Tell the test the call is about to be made.
        print(json.dumps({"calling": True}), flush=True)
        result = await client.call_tool(
            "exec", {"workspace": workspace, "command": command}, progress_callback=progress
        )
        out["error"] = result.is_error
        out["text"] = " ".join(getattr(block, "text", "") for block in result.content)
    out["progress"] = notes
    out["took"] = time.monotonic() - began
    print(json.dumps(out), flush=True)


asyncio.run(main())
