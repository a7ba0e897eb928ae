"""Finding OpenAI-compatible model servers already running on this machine.

Both functions block (sockets, one small HTTP request) and have hard, small time
limits. They are never called on the kernel's event-loop thread: the magics run model
resolution in a worker thread (``asyncio.to_thread``), so a server that accepts a
connection and never answers cannot freeze the notebook.

Only the standard library is used here: this is a localhost probe, not a provider
request (those go through ``ai/_http.py``).
"""

from __future__ import annotations

import errno
import http.client
import json
import select
import socket
import time

__all__ = ["LOCAL_SERVERS", "probe_local_servers", "served_model_id"]

# provider name -> default port of its OpenAI-compatible server, in preference order
LOCAL_SERVERS: list[tuple[str, int]] = [("ollama", 11434), ("llamacpp", 8080), ("vllm", 8000),
                                        ("lmstudio", 1234)]


def probe_local_servers(timeout: float = 0.15, host: str = "127.0.0.1",
                        servers: list[tuple[str, int]] | None = None) -> list[tuple[str, int]]:
    """The servers of ``servers`` (default :data:`LOCAL_SERVERS`) accepting TCP connections,
    in preference order.

    All ports are tried at once with non-blocking connects, so the whole probe takes at
    most ``timeout`` seconds (a refused port answers at once).
    """
    servers = LOCAL_SERVERS if servers is None else servers
    pending: dict[socket.socket, tuple[str, int]] = {}
    open_ports: set[tuple[str, int]] = set()
    for name, port in servers:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex((host, port))
        if code == 0:
            open_ports.add((name, port))
            sock.close()
        elif code in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            pending[sock] = (name, port)
        else:
            sock.close()
    deadline = time.monotonic() + timeout
    try:
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            _, writable, _ = select.select([], list(pending), [], remaining)
            for sock in writable:
                entry = pending.pop(sock)
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    open_ports.add(entry)
                sock.close()
    finally:
        for sock in pending:
            sock.close()
    return [s for s in servers if s in open_ports]


def served_model_id(host: str, port: int, timeout: float = 1.0) -> str | None:
    """The first model id the server lists at ``/v1/models``, or None when it does not
    answer within ``timeout`` seconds (per socket operation) or answers something else."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/v1/models")
        response = conn.getresponse()
        if response.status != 200:
            return None
        data = json.loads(response.read(1_000_000) or b"{}")
        items = data.get("data") or data.get("models") or [] if isinstance(data, dict) else []
        for item in items:
            ident = (item.get("id") or item.get("name")) if isinstance(item, dict) else None
            if ident:
                return str(ident)
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        conn.close()
    return None
