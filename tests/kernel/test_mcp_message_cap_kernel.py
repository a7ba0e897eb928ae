"""A 50 MB answer from an MCP server over stdio, in a real kernel: while it streams, ``%agent
status`` probes are sent one after another and each is answered (the longest wait is printed);
the call gets the "over 8 MB and was dropped" error as its result, the next call to the same
server in the same run works, and every tool call of the run has its result."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from helpers.kernel import RUNTIME, Kernel, faux_setup

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]

BIG_SERVER = str(Path(__file__).resolve().parents[1] / "mcp" / "big_server.py")


def test_the_kernel_answers_while_a_50_mb_answer_streams_and_the_call_gets_a_clear_error(tmp_path):
    work = tmp_path / "work"
    (work / ".pi_notebook").mkdir(parents=True)
    (work / ".pi_notebook" / "mcp.json").write_text(json.dumps({"mcpServers": {
        "b": {"command": sys.executable, "args": [BIG_SERVER]}}}))
    kernel = Kernel(cwd=work, env={"HOME": str(tmp_path / "home"), "PI_NOTEBOOK_CACHE": str(tmp_path / "cache")})
    try:
        kernel.ok("import ipywidgets")
        kernel.open_widget_control_comm()
        kernel.wait_for("__import__('ipywidgets').widgets.widget.Widget._control_comm is not None")
        kernel.ok(faux_setup(None))
        kernel.ok("%agent model faux/faux-1")
        kernel.ok("%config AgentMagics.approval = 'auto'")
        # the SDK's first import is a fixed cost whatever the server sends: done before
        kernel.ok("import mcp.client.session, mcp.client.stdio, pi_notebook.agent")
        kernel.ok("faux.set_responses([\n"
                  "  faux_assistant_message([faux_tool_call('b__big', {'size': 50_000_000})], stop_reason='toolUse'),\n"
                  "  faux_assistant_message([faux_tool_call('b__echo', {'text': 'after the big one'})],"
                  " stop_reason='toolUse'),\n"
                  "  faux_assistant_message('done'),\n"
                  "])")
        cpu_before = kernel.ev("__import__('time').process_time()")
        kernel.ok("%%agent\ncall the server")
        gaps = []
        started_run = time.monotonic()
        deadline = started_run + 200
        while time.monotonic() < deadline:
            started = time.monotonic()
            probe = kernel.start("%agent status")
            kernel.wait_reply(probe, timeout=120)
            gaps.append(time.monotonic() - started)
            if "run: active" not in kernel.text_of(probe):
                break
        run_s = time.monotonic() - started_run
        assert not kernel.ev(f"{RUNTIME}.is_running()"), "the run did not end"
        cpu_s = kernel.ev("__import__('time').process_time()") - cpu_before
        print(f"run {run_s:.1f} s, kernel CPU {cpu_s:.1f} s, probe replies: {len(gaps)}, longest {max(gaps):.2f} s")
        messages = kernel.ev(f"[(m.role, getattr(m, 'is_error', None), ' '.join(getattr(b, 'text', '') for b in "
                             f"m.content)[:300]) for m in {RUNTIME}.get_agent().state.messages "
                             "if m.role == 'toolResult']")
        assert len(messages) == 2, messages  # each tool call has its result
        (_, big_error, big_text), (_, echo_error, echo_text) = messages
        assert big_error and "the server's reply was over 8 MB and was dropped" in big_text, messages
        assert not echo_error and "after the big one" in echo_text, messages
        assert len(gaps) > 1, gaps  # the probes really ran while the answer streamed
        # before: the SDK's reader took 68-77 s of kernel CPU; generous for a shared machine
        assert max(gaps) < 4.0, gaps
    finally:
        kernel.shutdown()
