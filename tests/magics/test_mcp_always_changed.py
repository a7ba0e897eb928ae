"""In a run: an "Always for this tool" answer does not cover the tool once its server announces
it again changed (here: now destructive); it is asked again and the request says why."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from magics_helpers import FakeView, run_cell, runtime, settle

from pi_notebook.ai.providers.faux import faux_assistant_message, faux_tool_call

pytestmark = pytest.mark.timeout(240)

FAMILY = str(Path(__file__).resolve().parents[1] / "mcp" / "family_server.py")


@pytest.fixture(autouse=True)
def _forget_registered_secrets(monkeypatch):
    import importlib

    redact = importlib.import_module("pi_notebook.tools.trust.redact")  # (the package exports a function of that name)
    monkeypatch.setattr(redact, "_explicit", set(redact._explicit))


async def test_always_for_a_tool_announced_again_as_destructive_asks_again(shell, faux, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PI_NOTEBOOK_CACHE", str(tmp_path / "cache"))
    (tmp_path / ".pi_notebook").mkdir()
    (tmp_path / ".pi_notebook" / "mcp.json").write_text(json.dumps(
        {"mcpServers": {"ops": {"command": sys.executable, "args": [FAMILY]}}}))
    rt = runtime()
    rt.kernel.is_interactive = lambda run: True  # someone is there to click (a FakeView answers)

    def always(*args):
        view = FakeView(*args)
        view.approval_answer = "always"
        return view

    rt.view_factory = always
    try:
        faux.set_responses([
            faux_assistant_message([faux_tool_call("ops__deploy", {"target": "staging"})], stop_reason="toolUse"),
            faux_assistant_message([faux_tool_call("ops__arm", {})], stop_reason="toolUse"),
            faux_assistant_message([faux_tool_call("ops__deploy", {"target": "production"})], stop_reason="toolUse"),
            faux_assistant_message("done")])
        await run_cell(shell, "%%agent --approve ask\ngo\n")
        await settle(120)
        requests = [c[1] for c in FakeView.instances[-1].kinds("approval")]
        assert [r.tool_name for r in requests] == ["ops__deploy", "ops__arm", "ops__deploy"]
        assert "now marked destructive" in requests[-1].extra["mcp"]["changed"]
        results = [m for m in rt.agent.state.messages if m.role == "toolResult"]
        assert results[-1].details["approval"]["decision"] == "clicked_run"  # asked, not always_tool
    finally:
        await rt.mcp().manager.close()
