"""A small outside agent for notebooks/serve.ipynb: what Claude Code or Cursor does, in a script.

``python serve_client.py ENTRY.json``: connects to the ``pi-notebook`` server of an
``mcpServers`` file (the one ``%agent serve`` writes next to its token), lists the tools with
their annotations, and reads the user's recent cells. Uses the official SDK's client.
"""

from __future__ import annotations

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(entry_path: str) -> None:
    with open(entry_path) as handle:
        entry = json.load(handle)["mcpServers"]["pi-notebook"]
    http = httpx2.AsyncClient(headers=entry["headers"], timeout=httpx2.Timeout(30, read=300))
    async with Client(streamable_http_client(entry["url"], http_client=http), mode="legacy",
                      client_info={"name": "serve_client.py", "version": "1"}) as client:
        for tool in (await client.list_tools()).tools:
            kind = "read-only" if tool.annotations and tool.annotations.read_only_hint else "runs code"
            print(f"{tool.name:<17} {kind}")
        cells = await client.call_tool("recent_cells", {"last": 3})
        print()
        print(cells.content[0].text)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
