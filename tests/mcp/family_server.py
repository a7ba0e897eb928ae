"""A real MCP server (the SDK's ``MCPServer``) that leaves traces a server should not leave.

At start it prints the value of ``LEAK_VALUE`` to stderr (the server-log secret canary) and
starts a child process of its own (``sleep``), a grandchild of whoever started the server.
Tool ``family``: ``{"server": its pid, "child": the child's pid}``.
"""

from __future__ import annotations

import os
import subprocess
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("pi-family")
child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)


@server.tool()
def family() -> dict[str, int]:
    """The pids of this server and of its own child process."""
    return {"server": os.getpid(), "child": child.pid}


if __name__ == "__main__":
    sys.stderr.write(f"family server: connecting with {os.environ.get('LEAK_VALUE', '')}\n")
    sys.stderr.write("family server: token sk-ant-api03-QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ\n")
    sys.stderr.flush()
    server.run("stdio")
