"""One server's lifecycle against real MCP servers built with the SDK (tests/mcp/server.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from helpers.processes import alive
from mcp_helpers import http_server, stdio_config

from pi_notebook.mcp.config import ServerConfig
from pi_notebook.mcp.server import McpCallError, McpServer, McpUnavailable

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_NOTEBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


async def test_stdio_text_image_structured_and_error_results(cache):
    server = McpServer(stdio_config())
    await server.start()
    try:
        assert server.state == "connected", server.reason
        assert {"echo", "image", "table", "sleep", "crash"} <= {t.name for t in server.tools}
        echo = await server.call("echo", {"text": "hi"}, timeout_s=30)
        assert echo.content[0].text == "hi"
        image = await server.call("image", {}, timeout_s=30)
        assert image.content[0].type == "image" and image.content[0].mime_type == "image/png"
        table = await server.call("table", {"n": 2}, timeout_s=30)
        assert table.structured_content["rows"][1] == {"region": "south", "revenue": 200.0}
        fails = await server.call("fails", {}, timeout_s=30)
        assert fails.is_error
    finally:
        await server.stop()
    assert server.state == "idle"


async def test_streamable_http(cache):
    with http_server() as url:
        server = McpServer(ServerConfig(name="web", transport="http", url=url,
                                        headers={"X-Test": "1"}))
        await server.start()
        try:
            assert server.state == "connected", server.reason
            result = await server.call("table", {"n": 1}, timeout_s=30)
            assert result.structured_content == {"rows": [{"region": "north", "revenue": 100.0}]}
        finally:
            await server.stop()


async def test_the_server_gets_only_named_environment_values(cache, monkeypatch):
    monkeypatch.setenv("KERNEL_ONLY_TOKEN", "kernel-secret-value-1234")
    server = McpServer(stdio_config(env={"GIVEN": "passed-on"}))
    await server.start()
    try:
        given = await server.call("env", {"name": "GIVEN"}, timeout_s=30)
        hidden = await server.call("env", {"name": "KERNEL_ONLY_TOKEN"}, timeout_s=30)
        assert given.content[0].text == "passed-on"
        assert hidden.content == [] or hidden.content[0].text == ""
    finally:
        await server.stop()


async def test_timeout_abort_and_crash_then_restart(cache):
    server = McpServer(stdio_config())
    await server.start()
    try:
        started = time.monotonic()
        with pytest.raises(McpCallError, match="no answer within 1 s"):
            await server.call("sleep", {"seconds": 30}, timeout_s=1)
        assert time.monotonic() - started < 20
        loop = asyncio.get_running_loop()
        aborted = loop.create_future()
        loop.call_later(0.5, aborted.set_result, None)
        with pytest.raises(asyncio.CancelledError):
            await server.call("sleep", {"seconds": 30}, timeout_s=None, aborted=aborted)
        # the server still answers after the cancelled calls
        assert (await server.call("echo", {"text": "still"}, timeout_s=30)).content[0].text == "still"
        first_pid = (await server.call("pid", {}, timeout_s=30)).structured_content["result"]
        with pytest.raises(McpCallError, match="stopped during the call") as info:
            await server.call("crash", {}, timeout_s=30)
        assert "crashing on purpose" in str(info.value)  # its stderr tail is in the reason
        assert server.crashed
        again = (await server.call("pid", {}, timeout_s=30)).structured_content["result"]
        assert again != first_pid and not server.crashed
    finally:
        await server.stop()


async def test_a_blocked_loop_does_not_make_a_call_time_out(cache):
    server = McpServer(stdio_config())
    await server.start()
    try:
        call = asyncio.ensure_future(server.call("echo", {"text": "late"}, timeout_s=2))
        await asyncio.sleep(0)  # the request is on its way
        time.sleep(4)  # a user cell blocking the kernel loop for longer than the timeout
        result = await call
        assert result.content[0].text == "late"
    finally:
        await server.stop()


async def test_a_server_that_fails_to_start_says_why_with_its_stderr(cache):
    server = McpServer(stdio_config("bad", "fail"))
    await server.start()
    assert server.state == "failed"
    assert "cannot open the database 'warehouse.db'" in server.reason
    assert "\n" not in server.reason
    with pytest.raises(McpUnavailable, match=r"warehouse\.db"):
        await server.ensure()
    assert (cache / "mcp" / "logs" / "bad.log").is_file()
    missing = McpServer(ServerConfig(name="missing", command="no-such-binary-xyz"))
    await missing.start()
    assert missing.state == "failed" and "no-such-binary-xyz" in missing.reason


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_server_dies_with_a_sigkilled_parent(tmp_path):
    """The parent (standing in for the kernel) starts a server and is SIGKILLed: the server
    process is gone too. (The kernel-level test is in tests/kernel/test_mcp_kernel.py.)"""
    script = textwrap.dedent(f"""
        import asyncio, sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from mcp_helpers import stdio_config
        from pi_notebook.mcp.server import McpServer
        async def main():
            server = McpServer(stdio_config("t", "stubborn"))
            await server.start()
            pid = (await server.call("pid", {{}}, timeout_s=30)).structured_content["result"]
            print(pid, flush=True)
            await asyncio.sleep(600)
        asyncio.run(main())
    """)
    env = {**os.environ, "PI_NOTEBOOK_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
    try:
        line = parent.stdout.readline()
        server_pid = int(line)
        assert alive(server_pid)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
    deadline = time.monotonic() + 30
    while alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(server_pid)


async def test_without_the_sdk_the_reason_names_the_extra(cache, monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp now raises ImportError
    server = McpServer(stdio_config())
    await server.start()
    assert server.state == "failed" and "pi-notebook[mcp]" in server.reason


async def test_a_changed_tool_list_is_fetched_again(cache):
    server = McpServer(stdio_config())
    await server.start()
    try:
        assert "extra" not in {t.name for t in server.tools}
        assert (await server.call("grow", {}, timeout_s=30)).content[0].text == "grown"
        await server.refresh_tools()  # what every run does for a connected server
        assert "extra" in {t.name for t in server.tools}
    finally:
        await server.stop()


async def test_progress_is_reported_and_keeps_a_long_call_alive(cache):
    server = McpServer(stdio_config())
    await server.start()
    lines: list[str] = []
    try:
        # 6 steps of 0.8 s: 4.8 s in all, against a 2 s timeout that each progress restarts
        result = await server.call("work", {"steps": 6, "seconds": 0.8}, timeout_s=2, on_progress=lines.append)
        assert result.content[0].text == "worked 6 steps"
        assert lines[0] == "1/6 step 1" and lines[-1] == "6/6 step 6"
    finally:
        await server.stop()


async def test_turn_boundaries_list_again_only_servers_whose_tools_may_have_changed(cache):
    from pi_notebook.mcp.manager import McpManager, McpSources
    from pi_notebook.tools.python.python_tool import PythonToolSettings

    manager = McpManager(McpSources(start_dir=lambda: cache, explicit=lambda: "", timeout=lambda: 30.0,
                                    tool_settings=PythonToolSettings, user_path=cache / "none.json"))
    manager.session_added["t"] = stdio_config()
    try:
        toolset, _ = await manager.prepare_run(set())
        server = manager.servers["t"]
        # on the handshake connection the SDK server does not say listChanged: only its
        # notification flags a change
        assert server.state == "connected" and not server.tools_may_change
        listed = server.listed_at
        assert not await manager.refresh_between_turns({"t"})  # a tool ran, nothing was flagged
        assert server.listed_at == listed  # ... and no request was sent
        server.tools_may_change = True  # a server that says listChanged
        assert not await manager.refresh_between_turns(set())  # nothing ran, the list is fresh
        assert server.listed_at == listed
        assert not await manager.refresh_between_turns({"t"})  # a tool ran; the list is the same
        server.tools_may_change = False
        await server.call("grow", {}, timeout_s=30)
        for _ in range(50):  # the notification may arrive just after the result
            if server.tools_stale:
                break
            await asyncio.sleep(0.05)
        assert server.tools_stale, "tools/list_changed reached the client's message handler"
        assert await manager.refresh_between_turns(set())
        assert "extra" in {t.name for t in server.tools}
        new_set, _ = manager.rebuild_tools(set())
        assert "t__extra" in new_set.meta and "t__extra" not in toolset.meta
        server.tools_stale = True  # a legacy connection's tools/list_changed
        assert not await manager.refresh_between_turns(set()) and not server.tools_stale
    finally:
        await manager.close()
