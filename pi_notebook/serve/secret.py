"""The bearer token of a served kernel and its private files.

The token is fresh and random per ``%agent serve`` (and per ``rotate``). It is written to a
file only its owner can read (0600, in a 0700 folder) and never printed into a cell's output:
a notebook saved with the server's entries in it holds the file's path, not the token.
Beside it, the ready ``mcpServers`` and VS Code ``servers`` entries (token included) are
written the same way, so a JSON-configured client is one copy of one file away.

The comparison is constant-time (``hmac.compare_digest``) over bytes.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

__all__ = ["ServeFiles", "bearer_of", "new_token", "remove_stale", "serve_dir", "token_matches"]

_SERVE_DIR_ENV = "PI_NOTEBOOK_SERVE_DIR"


def new_token() -> str:
    """256 random bits, URL-safe (fits a header and a shell word without quoting)."""
    return secrets.token_urlsafe(32)


def token_matches(presented: str | None, token: str) -> bool:
    """Constant-time equality; a missing or non-ASCII value never matches."""
    if not presented:
        return False
    try:
        given = presented.encode("ascii")
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(given, token.encode("ascii"))


def bearer_of(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value (scheme case-insensitive)."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def serve_dir() -> Path:
    """Where the private files go: ``$PI_NOTEBOOK_SERVE_DIR``, else the per-user runtime
    folder (a tmpfs the login session owns), else ``~/.cache/pi_notebook/serve``."""
    explicit = os.environ.get(_SERVE_DIR_ENV)
    if explicit:
        return Path(explicit)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "pi_notebook"
    return Path.home() / ".cache" / "pi_notebook" / "serve"


def _private_folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)  # an older, wider folder is narrowed (mkdir's mode obeys the umask)
    return path


def _write_private(path: Path, text: str) -> None:
    """Create or replace ``path`` with mode 0600 from the first byte (no window where the
    token sits in a world-readable file)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class ServeFiles:
    """The token file and the two entry files of one served kernel (named by its pid)."""

    def __init__(self, folder: Path | None = None, name: str | None = None) -> None:
        self.folder = folder or serve_dir()
        stem = name or f"kernel-{os.getpid()}"
        self.token = self.folder / f"{stem}.token"
        self.mcp_servers = self.folder / f"{stem}.mcp.json"
        self.vscode = self.folder / f"{stem}.vscode.json"

    def write(self, token: str, entries: dict[str, dict[str, Any]]) -> None:
        """``entries``: {"mcpServers": {...}, "servers": {...}} with the token in them."""
        _private_folder(self.folder)
        remove_stale(self.folder)
        _write_private(self.token, token + "\n")
        _write_private(self.mcp_servers, json.dumps({"mcpServers": entries["mcpServers"]}, indent=2) + "\n")
        _write_private(self.vscode, json.dumps({"servers": entries["servers"]}, indent=2) + "\n")

    def remove(self) -> None:
        for path in (self.token, self.mcp_servers, self.vscode):
            path.unlink(missing_ok=True)


_KERNEL_FILE = re.compile(r"kernel-(\d+)\.(token|mcp\.json|vscode\.json)")


def remove_stale(folder: Path) -> None:
    """Remove the files of kernels that are gone: a killed or restarted kernel cannot remove
    its own (its token names a closed port, but it should not lie around)."""
    for path in folder.iterdir():
        found = _KERNEL_FILE.fullmatch(path.name)
        if found is None or _alive(int(found.group(1))):
            continue
        path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: not ours to judge
        return True
    return True
