"""Abort works in every phase: also while the run's MCP servers start. A server that never
answers ``initialize`` held the run for its whole start timeout after Abort."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import pytest
from magics_helpers import FakeView, run_cell, runtime

from pi_notebook.ai.providers.faux import faux_assistant_message

pytestmark = pytest.mark.timeout(120)

SILENT = "import sys\nsys.stdin.read()\n"  # reads initialize, never answers; ends with its stdin


async def test_abort_ends_a_run_whose_server_never_answers_initialize(shell, faux, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PI_NOTEBOOK_CACHE", str(tmp_path / "cache"))
    script = tmp_path / "silent.py"
    script.write_text(SILENT)
    (tmp_path / ".pi_notebook").mkdir()
    (tmp_path / ".pi_notebook" / "mcp.json").write_text(json.dumps(
        {"mcpServers": {"silent": {"command": sys.executable, "args": [str(script)]}}}))
    faux.set_responses([faux_assistant_message("never asked")])
    rt = runtime()
    try:
        await run_cell(shell, "%%agent\ngo\n")
        run = rt.runs.latest
        for _ in range(200):  # until the server is starting
            server = rt.mcp().manager.servers.get("silent")
            if server is not None and server.state == "starting":
                break
            await asyncio.sleep(0.05)
        assert rt.mcp().manager.servers["silent"].state == "starting"
        await asyncio.sleep(0.3)
        clicked = time.monotonic()
        rt.abort()
        await asyncio.wait_for(asyncio.shield(run.task), 20)
        took = time.monotonic() - clicked
        print(f"abort to end of run: {took:.3f} s")
        assert run.status == "aborted", (run.status, run.error)
        # the start timeout is 30 s; an Abort that waits for it is not an Abort
        assert took < 5, took
        assert FakeView.instances[-1].kinds("finish") == [("finish", "aborted")]
        assert not any(m.role == "assistant" for m in rt.get_agent().state.messages)
    finally:
        await rt.mcp().manager.close()
