"""A stand-in for llama-server, for tests of the shared-server machinery (no model needed).

Started as ``fake_llama_server.py -m X --port P -np N --api-key-file F ...`` (the flags
local/server.py passes; the rest are ignored). It serves ``/health``, ``/v1/models``,
``/metrics`` (``llamacpp:requests_deferred``) and a streaming ``/v1/chat/completions``
with at most N requests at work, the others waiting, as llama-server does.

Behaviour from the environment:
  FAKE_LLAMA_HEALTH_DELAY  seconds before /health says ok (default 0)
  FAKE_LLAMA_FIRST_BYTE    seconds a request is "read" before its first chunk (default 0)
  FAKE_LLAMA_STREAM_S      seconds the answer then takes, spread over its chunks (default 0)
  FAKE_LLAMA_CHUNKS        the answer's text chunks, as a JSON list (default: 5 words)
  FAKE_LLAMA_DIE_AFTER     the server process exits after sending this many chunks of an
                           answer sent chunked (the client sees an incomplete chunked read)
  FAKE_LLAMA_CHUNKS_FILE   a file read at each request: its chunks, as a JSON list (a script
                           of replies for one server; FAKE_LLAMA_CHUNKS when it is missing)
  FAKE_LLAMA_RECORD        a file: one JSON line per request (path, auth header, body), and one
                           per answer the client stopped reading ({"dropped_after": chunks sent})
  FAKE_LLAMA_PROMPT        "[total, cache]": a request with ``return_progress`` first gets
                           ``prompt_progress`` chunks (no choices) reading total - cache tokens
  FAKE_LLAMA_ARGV          a file: the command line, as JSON
  FAKE_LLAMA_PID           a file: the process id
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def _arg(argv: list[str], name: str, default: str | None = None) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else default


def _chunks() -> list[str]:
    path = os.environ.get("FAKE_LLAMA_CHUNKS_FILE")
    if path and Path(path).is_file():
        return list(json.loads(Path(path).read_text()))
    return CHUNKS


ARGV = sys.argv[1:]
PORT = int(_arg(ARGV, "--port", "0") or 0)
SLOTS = int(_arg(ARGV, "-np", "1") or 1)
KEY_FILE = _arg(ARGV, "--api-key-file")
KEY = Path(KEY_FILE).read_text().strip() if KEY_FILE else None
STARTED = time.monotonic()
HEALTH_DELAY = float(os.environ.get("FAKE_LLAMA_HEALTH_DELAY", "0"))
FIRST_BYTE = float(os.environ.get("FAKE_LLAMA_FIRST_BYTE", "0"))
STREAM_S = float(os.environ.get("FAKE_LLAMA_STREAM_S", "0"))
RECORD = os.environ.get("FAKE_LLAMA_RECORD")
CHUNKS = json.loads(os.environ.get("FAKE_LLAMA_CHUNKS") or "null") or ["Hello", " from", " the", " fake", " server."]
DIE_AFTER = int(os.environ.get("FAKE_LLAMA_DIE_AFTER") or -1)
PROMPT = json.loads(os.environ.get("FAKE_LLAMA_PROMPT") or "null")
if os.environ.get("FAKE_LLAMA_PID"):
    Path(os.environ["FAKE_LLAMA_PID"]).write_text(str(os.getpid()))
if os.environ.get("FAKE_LLAMA_ARGV"):
    with open(os.environ["FAKE_LLAMA_ARGV"], "w") as f:
        json.dump(sys.argv, f)

slots = threading.Semaphore(SLOTS)
state = threading.Lock()
waiting = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, status: int, data: object) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self) -> bool:
        if KEY is None or self.headers.get("Authorization") == f"Bearer {KEY}":
            return True
        self._json(401, {"error": {"message": "Invalid API Key", "type": "authentication_error", "code": 401}})
        return False

    def do_GET(self) -> None:
        if self.path == "/health":
            if time.monotonic() - STARTED < HEALTH_DELAY:
                self._json(503, {"error": {"message": "Loading model", "code": 503}})
            else:
                self._json(200, {"status": "ok"})
        elif not self._authorized():
            return
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        elif self.path == "/metrics":
            text = f"# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred {waiting}\n".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        global waiting
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if RECORD:
            with state, open(RECORD, "a") as f:
                f.write(json.dumps({"path": self.path, "auth": self.headers.get("Authorization"),
                                    "body": body, "port": PORT}) + "\n")
        if not self._authorized():
            return
        with state:
            waiting += 1
        slots.acquire()
        with state:
            waiting -= 1
        try:
            time.sleep(FIRST_BYTE)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            if DIE_AFTER >= 0:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if PROMPT and body.get("return_progress"):
                total, cache = PROMPT
                for step in (1, 2, 3):  # as llama-server: one chunk per batch of the prompt read
                    progress = {"total": total, "cache": cache,
                                "processed": cache + (total - cache) * step // 3, "time_ms": 40 * step}
                    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "fake",
                             "choices": [], "prompt_progress": progress}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
            chunks = _chunks()
            for i, word in enumerate(chunks):
                if i:
                    time.sleep(STREAM_S / len(chunks))
                if i == DIE_AFTER:
                    os._exit(1)  # mid-answer, as a crashed llama-server
                chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "fake",
                         "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
                data = f"data: {json.dumps(chunk)}\n\n".encode()
                if DIE_AFTER >= 0:
                    data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
                try:
                    self.wfile.write(data)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    if RECORD:
                        with state, open(RECORD, "a") as f:
                            f.write(json.dumps({"dropped_after": i}) + "\n")
                    self.close_connection = True
                    return
            end = {"id": "c1", "object": "chat.completion.chunk", "model": "fake",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
            self.close_connection = True
        finally:
            slots.release()


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    server.daemon_threads = True
    server.serve_forever()
