"""Real MCP test servers (tests/mcp/server.py) over stdio and streamable HTTP."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from pi_notebook.mcp.config import ServerConfig

SERVER = Path(__file__).with_name("server.py")
BIG_SERVER = Path(__file__).with_name("big_server.py")  # texts of any size


def stdio_config(name: str = "t", *args: str, **kw: object) -> ServerConfig:
    return ServerConfig(name=name, command=sys.executable, args=[str(SERVER), *args], **kw)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_server(mode: str = "http", script: Path = SERVER) -> Iterator[str]:
    """A test server on streamable HTTP (``http-json``: one that answers with JSON bodies,
    where the server supports it); yields its URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(script), mode, str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the HTTP test server exited: {proc.stderr.read().decode()[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError("the HTTP test server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


