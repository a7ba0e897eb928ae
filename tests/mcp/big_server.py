"""A real MCP server built with the SDK (``MCPServer``) that answers with texts of any size.

``python tests/mcp/big_server.py``                  stdio
``python tests/mcp/big_server.py http PORT``        streamable HTTP (SSE events) on 127.0.0.1:PORT/mcp
``python tests/mcp/big_server.py http-json PORT``   the same, answering with JSON bodies

Tools: ``big`` (a text of ``size`` bytes, not repeated as structured content, so the message is
only a little longer than the text), ``echo``, ``pid`` (the server's process id).
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("pi-big")


@server.tool(structured_output=False)
def big(size: int) -> str:
    """A text of ``size`` bytes."""
    return "x" * size


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(structured_output=False)
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode in ("http", "http-json"):
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), json_response=mode == "http-json")
    else:
        server.run("stdio")
