"""What a stdio server leaves on disk and in the process table: its stderr log is redacted
before it is written and private (0700 folders, 0600 file); its own children die with the
kernel (mcp/server.py, mcp/_die_with_kernel.py)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from helpers.processes import alive

from pi_notebook.mcp.config import ServerConfig
from pi_notebook.mcp.server import McpServer

pytestmark = pytest.mark.timeout(180)

FAMILY = Path(__file__).with_name("family_server.py")
SECRET = "canary-" + "0ddba11c0ffee77"


def family_config(name: str = "fam", **env: str) -> ServerConfig:
    return ServerConfig(name=name, command=sys.executable, args=[str(FAMILY)], env=env)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_NOTEBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


async def test_the_server_log_is_redacted_before_it_is_written_and_private(cache, monkeypatch):
    monkeypatch.setenv("WAREHOUSE_API_KEY", SECRET)  # a secret of the kernel's environment
    server = McpServer(family_config(LEAK_VALUE=SECRET))
    await server.start()
    try:
        assert server.state == "connected", server.reason
    finally:
        await server.stop()
    log = cache / "mcp" / "logs" / "fam.log"
    text = log.read_text()
    assert "family server: connecting with" in text  # the log is still written
    assert SECRET not in text and "sk-ant-api03" not in text, text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE((cache / "mcp" / "logs").stat().st_mode) == 0o700
    assert stat.S_IMODE((cache / "mcp").stat().st_mode) == 0o700


async def test_an_old_readable_log_is_made_private(cache):
    logs = cache / "mcp" / "logs"
    logs.mkdir(parents=True, mode=0o755)
    os.chmod(logs, 0o755)
    (logs / "fam.log").write_text("old\n")
    os.chmod(logs / "fam.log", 0o644)
    server = McpServer(family_config())
    await server.start()
    await server.stop()
    assert stat.S_IMODE((logs / "fam.log").stat().st_mode) == 0o600
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700


def test_session_files_are_private(tmp_path):
    from pi_notebook.ai.types import UserMessage
    from pi_notebook.session.store import SessionWriter, write_session

    folder = tmp_path / "project" / ".pi_notebook" / "sessions"
    writer = SessionWriter(folder / "a.jsonl", model="m")
    writer.close()
    write_session(folder / "b.jsonl", [UserMessage(content="hi")], model="m")
    old = folder / "c.jsonl"
    old.write_bytes((folder / "a.jsonl").read_bytes())
    os.chmod(old, 0o644)  # a file of an earlier version
    SessionWriter(old).close()
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_what_a_server_starts_dies_with_a_sigkilled_parent(tmp_path):
    """The parent (standing in for the kernel) starts a server that starts a child of its own,
    then is SIGKILLed: the server and its child are gone within seconds. (In a real kernel:
    tests/kernel/test_project_files_kernel.py.)"""
    import signal
    import subprocess
    import textwrap
    import time

    script = textwrap.dedent(f"""
        import asyncio, json, sys
        sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[1])!r}]  # and helpers
        from test_server_files import family_config
        from pi_notebook.mcp.server import McpServer
        async def main():
            server = McpServer(family_config())
            await server.start()
            print(json.dumps((await server.call("family", {{}}, timeout_s=30)).structured_content), flush=True)
            await asyncio.sleep(600)
        asyncio.run(main())
    """)
    env = {**os.environ, "PI_NOTEBOOK_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
    try:
        import json

        family = json.loads(parent.stdout.readline())
        assert alive(family["server"]) and alive(family["child"])
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
    deadline = time.monotonic() + 10
    while (alive(family["server"]) or alive(family["child"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(family["server"]) and not alive(family["child"])


async def test_a_server_that_exits_takes_its_children_along(cache):
    import time

    server = McpServer(family_config())
    await server.start()
    family = (await server.call("family", {}, timeout_s=30)).structured_content
    await server.stop()
    deadline = time.monotonic() + 10
    while alive(family["child"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(family["server"]) and not alive(family["child"])
