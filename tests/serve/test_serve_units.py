"""The served kernel's parts without a kernel: guard, token files, entries, bind, turns."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time

import pytest

from pi_notebook.serve import secret
from pi_notebook.serve.entries import client_entries, setup_text
from pi_notebook.serve.guard import RequestGuard
from pi_notebook.serve.secret import ServeFiles, bearer_of, token_matches
from pi_notebook.serve.server import check_bind
from pi_notebook.serve.turns import Turns

PORT = 41234


def _request(guard: RequestGuard, headers: dict[str, str]) -> tuple[int, bytes, bool]:
    sent: list[dict] = []
    reached: list[bool] = []

    async def app(scope, receive, send):
        reached.append(True)

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        sent.append(message)

    guard.app = app
    scope = {"type": "http", "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(guard(scope, receive, send))
    if reached:
        return 200, b"", True
    return sent[0]["status"], sent[1]["body"], False


def test_the_guard_checks_host_then_origin_then_the_token():
    token = "t0ken-value"
    guard = RequestGuard(None, PORT, lambda: token)  # type: ignore[arg-type]  # app set per request
    host = f"127.0.0.1:{PORT}"
    cases = [
        ({"Host": f"evil.example:{PORT}", "Authorization": f"Bearer {token}"}, 421),
        ({"Host": f"127.0.0.1:{PORT + 1}", "Authorization": f"Bearer {token}"}, 421),
        ({"Host": host, "Origin": "http://evil.example", "Authorization": f"Bearer {token}"}, 403),
        ({"Host": host, "Origin": f"http://localhost:{PORT + 1}", "Authorization": f"Bearer {token}"}, 403),
        ({"Host": host}, 401),
        ({"Host": host, "Authorization": "Bearer wrong"}, 401),
        ({"Host": host, "Authorization": token}, 401),  # no scheme
        ({"Host": host, "Authorization": f"Bearer {token}"}, 200),
        ({"Host": f"localhost:{PORT}", "Origin": f"http://localhost:{PORT}", "Authorization": f"bearer {token}"}, 200),
    ]
    for headers, status in cases:
        got, body, _ = _request(guard, headers)
        assert got == status, (headers, got)
        assert b"wrong" not in body and token.encode() not in body


def test_the_token_is_read_at_each_request_so_rotation_is_immediate():
    tokens = ["first"]
    guard = RequestGuard(None, PORT, lambda: tokens[0])  # type: ignore[arg-type]  # app set per request
    headers = {"Host": f"127.0.0.1:{PORT}", "Authorization": "Bearer first"}
    assert _request(guard, headers)[0] == 200
    tokens[0] = "second"
    assert _request(guard, headers)[0] == 401


def test_tokens_are_compared_in_constant_time(monkeypatch):
    seen = []
    real = secret.hmac.compare_digest

    def recording(a, b):
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(secret.hmac, "compare_digest", recording)
    assert token_matches("abc", "abc") and not token_matches("abd", "abc")
    assert not token_matches("ü", "abc") and not token_matches(None, "abc")
    assert len(seen) == 2
    assert bearer_of("Bearer  x ") == "x" and bearer_of("Basic x") is None and bearer_of("Bearer") is None


def test_the_token_files_are_private_from_the_first_byte(tmp_path):
    folder = tmp_path / "serve"
    folder.mkdir(mode=0o755)
    old = os.umask(0)
    try:
        files = ServeFiles(folder, "kernel-1")
        files.write("tok", client_entries("http://127.0.0.1:1/mcp", "tok"))
    finally:
        os.umask(old)
    assert (folder.stat().st_mode & 0o777) == 0o700
    for path in (files.token, files.mcp_servers, files.vscode):
        assert (path.stat().st_mode & 0o777) == 0o600
    assert files.token.read_text() == "tok\n"
    assert json.loads(files.vscode.read_text())["servers"]["pi-notebook"]["headers"] == {"Authorization": "Bearer tok"}
    files.remove()
    assert list(folder.iterdir()) == []


def test_files_of_kernels_that_are_gone_are_removed(tmp_path):
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = [tmp_path / f"kernel-{gone.pid}.token", tmp_path / f"kernel-{gone.pid}.mcp.json"]
    alive = tmp_path / f"kernel-{os.getppid()}.token"
    other = tmp_path / "notes.txt"
    for path in (*stale, alive, other):
        path.write_text("x")
    ServeFiles(tmp_path, f"kernel-{os.getpid()}").write("tok", client_entries("http://127.0.0.1:1/mcp", "tok"))
    assert not any(p.exists() for p in stale)
    assert alive.exists() and other.exists()


def test_the_printed_text_names_the_files_not_the_token(tmp_path):
    files = ServeFiles(tmp_path, "kernel-2")
    token = secret.new_token()
    files.write(token, client_entries("http://127.0.0.1:5/mcp", token))
    text = setup_text("http://127.0.0.1:5/mcp", files)
    assert token not in text
    assert f'--header "Authorization: Bearer $(cat {files.token})"' in text
    assert str(files.mcp_servers) in text and str(files.vscode) in text


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.7", "example.com", ""])
def test_only_loopback_may_be_bound(host):
    with pytest.raises(ValueError, match=r"only 127\.0\.0\.1"):
        check_bind(host)
    assert check_bind("localhost") == check_bind("127.0.0.1") == "127.0.0.1"


@pytest.fixture
def kernel_loop():
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_turns_wait_while_busy_then_run_in_order(kernel_loop):
    busy = {"why": "a cell is running"}
    ran: list[int] = []
    turns = Turns(kernel_loop, lambda: busy["why"])

    def work(i: int):
        async def run() -> int:
            ran.append(i)
            await asyncio.sleep(0.01)  # a yield inside a call does not let the next one in
            ran.append(-i)
            return i
        return run

    futures = [turns.submit(work(i)) for i in range(1, 6)]
    time.sleep(0.3)
    assert ran == [] and turns.queued == 5 and turns.waiting == "a cell is running"
    busy["why"] = None
    assert [f.result(5) for f in futures] == [1, 2, 3, 4, 5]
    assert ran == [1, -1, 2, -2, 3, -3, 4, -4, 5, -5]
    assert turns.queued == 0


def test_a_call_given_up_while_waiting_never_runs(kernel_loop):
    busy = {"why": "busy"}
    ran: list[str] = []
    turns = Turns(kernel_loop, lambda: busy["why"])

    async def work() -> None:
        ran.append("ran")

    future = turns.submit(work)
    time.sleep(0.1)
    future.cancel()
    busy["why"] = None
    time.sleep(0.2)
    assert ran == [] and turns.queued == 0
