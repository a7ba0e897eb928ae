"""A scripted HTTP server on 127.0.0.1 for wire-API tests (real sockets, real framing).

Usage (``helpers.sse_server``: see tests/helpers/__init__.py)::

    from helpers.sse_server import ScriptedServer, Reply, sse_body, chunked, DELAY, RESET, HANG

    with ScriptedServer() as server:   # or: from helpers.sse_server import scripted_server (a pytest fixture)
        server.push(Reply(status=200, chunks=chunked(sse_body([{"a": 1}], done=True), 7)))
        model = Model(..., base_url=server.url + "/v1")
        ... run the adapter ...
        request = server.requests[0]                    # RecordedRequest
        assert request.path == "/v1/chat/completions" and request.json["stream"] is True

Replies are served in the order pushed (any path); when the queue is empty the server answers
``500 {"error": "no scripted reply"}`` so a missing script shows up as a clear failure.

``Reply(status=200, headers=None, chunks=[...], content_type="text/event-stream", chunked=True)``.
Each chunk item is one of:

* ``bytes`` / ``str``: written and flushed on its own (one HTTP chunk with chunked encoding), so
  chunk boundaries land exactly where you put them (inside UTF-8 sequences, inside ``\\r\\n``...);
* ``(DELAY, seconds)``: sleep before the next write (slow streams);
* ``RESET``: drop the connection at once with a TCP reset (no terminating chunk: the client sees a
  broken stream mid-body);
* ``HANG``: keep the connection open without writing until the server closes (abort tests).

``header_delay=seconds`` waits before the status line (abort/timeout before headers).
``chunked=False`` sends a close-delimited HTTP/1.0-style body instead. ``Reply.json(status, obj)``
builds a plain JSON reply (e.g. error bodies). Every request is recorded as ``RecordedRequest``
(``method``, ``path``, ``headers`` with lower-cased names, ``body`` bytes, ``json`` or None).
``server.connections`` counts accepted TCP connections (keep-alive reuse checks).
``server.on_request = callback`` calls ``callback(request)`` on the server's thread as soon as
a request is recorded, before any reply byte (abort tests: the client is then waiting for the
headers, whatever the machine's load).

Run ``python sse_server.py FILE0 FILE1 ...`` to serve file *i* at every path under ``/<i>/``
until killed (``paced:FILE``: one SSE event per write, 0.5 ms apart); the first stdout line
is the base URL (the benchmark uses this so that the
server's CPU time is not counted in the client's process).
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ScriptedServer", "Reply", "RecordedRequest", "sse_body", "sse_event", "chunked",
           "DELAY", "RESET", "HANG", "scripted_server"]

DELAY = "delay"
RESET = object()
HANG = object()


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] | None = None
    chunks: list[Any] = field(default_factory=list)
    content_type: str = "text/event-stream"
    chunked: bool = True
    header_delay: float = 0.0   # seconds to wait before sending the status line (slow servers)

    @classmethod
    def json(cls, status: int, payload: Any, headers: dict[str, str] | None = None) -> Reply:
        body = payload if isinstance(payload, (bytes, str)) else json.dumps(payload)
        return cls(status=status, headers=headers, chunks=[body], content_type="application/json")


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def sse_event(data: Any, event: str | None = None) -> str:
    """One SSE event; dicts and lists are JSON-encoded."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return head + "".join(f"data: {line}\n" for line in text.split("\n")) + "\n"


def sse_body(payloads: list[Any], done: bool = True) -> bytes:
    """``data: <json>\\n\\n`` per payload, then ``data: [DONE]`` (as OpenAI-compatible servers)."""
    text = "".join(sse_event(p) for p in payloads)
    if done:
        text += "data: [DONE]\n\n"
    return text.encode("utf-8")


def chunked(body: bytes | str, size: int) -> list[bytes]:
    """Split ``body`` into pieces of ``size`` bytes (boundaries fall anywhere, UTF-8 included)."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    return [data[i:i + size] for i in range(0, len(data), size)] or [b""]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def setup(self) -> None:
        super().setup()
        # Send every scripted write at once: without this, Nagle's algorithm holds a small write
        # until the client's delayed ACK (~40 ms), merging chunks and slowing every test.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.owner.lock:
            self.server.owner.connections += 1

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        owner = self.server.owner
        owner._record(RecordedRequest(self.command, self.path,
                                      {k.lower(): v for k, v in self.headers.items()}, body))
        reply = owner._next_reply(self.path)
        if reply.header_delay and owner.stopping.wait(reply.header_delay):
            self.close_connection = True
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        for name, value in (reply.headers or {}).items():
            self.send_header(name, value)
        if reply.chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.flush()
        for item in reply.chunks:
            if item is RESET:
                self._reset()
                return
            if item is HANG:
                owner.stopping.wait()
                self.close_connection = True
                return
            if isinstance(item, tuple) and item and item[0] == DELAY:
                if owner.stopping.wait(item[1]):
                    self.close_connection = True
                    return
                continue
            data = item.encode("utf-8") if isinstance(item, str) else item
            if not data:
                continue
            if reply.chunked:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            else:
                self.wfile.write(data)
            self.wfile.flush()
        if reply.chunked:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _reset(self) -> None:
        self.wfile.flush()
        # SO_LINGER with a zero timeout makes close() send RST instead of FIN.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: ScriptedServer


class ScriptedServer:
    """A threaded HTTP server on 127.0.0.1 with a queue of scripted replies."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.lock = threading.Lock()
        self.replies: deque[Reply] = deque()
        self.default: Reply | None = None
        self.routes: dict[str, Reply] = {}   # path prefix -> reply served every time (benchmarks)
        self.requests: list[RecordedRequest] = []
        self.connections = 0
        self.on_request: Any = None  # callback(RecordedRequest), on the server thread
        self.stopping = threading.Event()
        self._httpd = _Server((host, port), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="ScriptedServer", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def push(self, *replies: Reply) -> ScriptedServer:
        with self.lock:
            self.replies.extend(replies)
        return self

    def _next_reply(self, path: str = "/") -> Reply:
        with self.lock:
            for prefix, reply in self.routes.items():
                if path.startswith(prefix):
                    return reply
            if self.replies:
                return self.replies.popleft()
            if self.default is not None:
                return self.default
        return Reply.json(500, {"error": "no scripted reply"})

    def _record(self, request: RecordedRequest) -> None:
        with self.lock:
            self.requests.append(request)
        if self.on_request is not None:
            self.on_request(request)

    def close(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


try:
    import pytest

    @pytest.fixture
    def scripted_server():
        """A fresh ScriptedServer per test; import this name into a test module to use it."""
        with ScriptedServer() as server:
            yield server
except ImportError:  # the benchmark runs this file without pytest
    pass


PACED = "paced:"


def _serve_files_forever(paths: list[str]) -> None:
    """Serve file i at every path starting with ``/<i>/`` (for the benchmark); a path given
    as ``paced:FILE`` is served one SSE event per write, 0.5 ms apart."""
    server = ScriptedServer()
    for i, path in enumerate(paths):
        paced = path.startswith(PACED)
        with open(path[len(PACED):] if paced else path, "rb") as f:
            body = f.read()
        if paced:
            # One write per SSE event, 0.5 ms apart: a model server producing tokens, where
            # every event is its own network read on the client (per-read costs show).
            chunks: list[Any] = []
            for event in body.split(b"\n\n")[:-1]:
                chunks += [event + b"\n\n", (DELAY, 0.0005)]
            server.routes[f"/{i}/"] = Reply(chunks=chunks)
        else:
            # Large writes: the network, not the script, decides how the client's reads are chunked.
            server.routes[f"/{i}/"] = Reply(chunks=chunked(body, 1 << 16))
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    _serve_files_forever(sys.argv[1:])
