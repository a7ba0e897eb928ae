"""What a user pastes into an outside agent to reach this kernel.

Two forms of the same entry:

- :func:`client_entries` with the token, written to the private files (secret.py);
- :func:`setup_text`, printed in the cell, with no token in it: Claude Code's command reads the
  token file through ``$(cat …)`` at paste time, and the JSON-configured clients (Cursor, VS
  Code, any ``mcpServers`` file) are pointed at their ready file. A saved notebook therefore
  never holds the token, whenever the user saves it.
"""

from __future__ import annotations

import shlex
from typing import Any

from .secret import ServeFiles

__all__ = ["SERVER_NAME", "client_entries", "setup_text"]

SERVER_NAME = "pi-notebook"


def client_entries(url: str, token: str) -> dict[str, dict[str, Any]]:
    """``mcpServers`` (Cursor, Claude Desktop-style files, generic) and VS Code ``servers``."""
    headers = {"Authorization": f"Bearer {token}"}
    return {
        "mcpServers": {SERVER_NAME: {"type": "http", "url": url, "headers": headers}},
        "servers": {SERVER_NAME: {"type": "http", "url": url, "headers": headers}},
    }


def setup_text(url: str, files: ServeFiles) -> str:
    token_path = shlex.quote(str(files.token))
    claude = (f"claude mcp add --transport http {SERVER_NAME} {url} "
              f"--header \"Authorization: Bearer $(cat {token_path})\"")
    return "\n".join([
        f"Serving this kernel over MCP at {url}",
        f"The bearer token is in {files.token} (mode 0600); it is not printed here, so saving",
        "the notebook does not save it. %agent serve rotate makes a new one.",
        "",
        "Claude Code (paste in a terminal):",
        f"  {claude}",
        "Cursor (.cursor/mcp.json), Claude Desktop or any mcpServers file: the entry, token included:",
        f"  cat {shlex.quote(str(files.mcp_servers))}",
        "VS Code (.vscode/mcp.json):",
        f"  cat {shlex.quote(str(files.vscode))}",
        "",
        "%agent serve: status   %agent serve stop   %agent serve rotate",
    ])
