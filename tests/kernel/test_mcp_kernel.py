"""MCP servers in a real kernel: a scripted %%agent run calls an MCP tool under auto and
deny; a server that fails to start is one notice with its stderr and the run goes on; a
${VAR} secret echoed by a tool reaches neither the model nor anything a frontend or a file
gets; the namespace call; the kernel SIGKILLed leaves no server process."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from helpers.processes import alive

from helpers.kernel import RECORDING_MODEL, Kernel, faux_setup

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]

SERVER = str(Path(__file__).resolve().parents[1] / "mcp" / "server.py")
CANARY = "wh-canary-" + "Tq8Yp3Ls6Nd1Vf4Kc9Xb2Mz7"

SCRIPT = RECORDING_MODEL + r'''
def tool_turn(*calls):
    return answer(faux_assistant_message([faux_tool_call(n, a) for n, a in calls], stop_reason='toolUse'))
'''


@pytest.fixture
def kernel(tmp_path):
    work = tmp_path / "work"
    (work / ".pi_notebook").mkdir(parents=True)
    (work / ".pi_notebook" / "mcp.json").write_text(json.dumps({"mcpServers": {
        "t": {"command": sys.executable, "args": [SERVER], "env": {"WAREHOUSE": "${MY_WAREHOUSE_PASS}"}},
        "bad": {"command": sys.executable, "args": [SERVER, "fail"]},
        "stubborn": {"command": sys.executable, "args": [SERVER, "stubborn"], "autoApprove": ["pid"]},
    }}))
    k = Kernel(cwd=work, env={"MY_WAREHOUSE_PASS": CANARY, "HOME": str(tmp_path / "home"),
                              "PI_NOTEBOOK_CACHE": str(tmp_path / "cache")},
               log_path=tmp_path / "kernel.log")
    yield k
    k.shutdown()


def test_mcp_tools_in_a_kernel_run(kernel, tmp_path):
    kernel.ok(faux_setup(2000) + SCRIPT)
    kernel.ok("%agent model faux/faux-1")
    kernel.ok("import sys")
    # %load_ext started nothing and imported no SDK: servers start with the first run
    assert kernel.ev("[m for m in ('mcp', 'mcp_types', 'httpx2') if m in sys.modules]") == []
    kernel.ok("faux.set_responses([tool_turn(('t__echo', {'text': 'hello from mcp'}), "
              "('t__env', {'name': 'WAREHOUSE'})), answer(faux_assistant_message('done'))])")
    reply = kernel.ok("%%agent --approve auto --wait\nuse the server", timeout=180)
    assert kernel.ev("faux.get_pending_response_count()") == 0
    received = kernel.ev("RECEIVED")
    assert "hello from mcp" in received[1]
    assert "[redacted]" in received[1] and CANARY not in received[1] and CANARY[:12] not in received[1]
    shown = json.dumps([m["content"] for m in kernel.messages()])
    assert "warehouse.db" in shown  # the failing server's one notice, with its stderr
    assert CANARY not in shown and CANARY[-12:] not in shown
    assert reply["status"] == "ok"

    kernel.ok("faux.set_responses([tool_turn(('t__echo', {'text': 'x'})), answer(faux_assistant_message('ok'))])")
    kernel.ok("%%agent --approve deny --wait\nagain", timeout=120)
    assert "policy is 'deny'" in kernel.ev("RECEIVED[-1]")

    kernel.ok("import pi_notebook\nrows = await pi_notebook.mcp.call('t', 'table', n=2)")
    assert kernel.ev("rows") == {"rows": [{"region": "north", "revenue": 100.0},
                                          {"region": "south", "revenue": 200.0}]}
    status = kernel.execute("%agent mcp")
    text = "".join(m["content"].get("text", "") for m in status["outputs"])
    assert "t: connected" in text and "bad: failed" in text
    # a command waits for the server it needs (a cold start here), then answers
    kernel.ok(f"%agent mcp add slow -- {sys.executable} {SERVER} slow 1")
    listed = kernel.execute("%agent mcp tools slow", timeout=120)
    text = "".join(m["content"].get("text", "") for m in listed["outputs"])
    assert "slow: 14 tools" in text and "slow__order" in text, text
    # ... also next to a cell that waits for a run (as under Run All): the command is
    # dispatched beside it and still waits for its server
    kernel.ok("faux.set_responses([tool_turn(('t__sleep', {'seconds': 10})), answer(faux_assistant_message('ok'))])")
    waiting = kernel.start("%%agent --approve auto --wait\nsleep")
    time.sleep(1.5)
    restarted = kernel.execute("%agent mcp restart slow", timeout=120)
    assert not kernel._idle_seen(waiting), "the restart was answered beside the waiting cell"
    text = "".join(m["content"].get("text", "") for m in restarted["outputs"])
    assert "Restarted slow: connected, 14 tools" in text, text
    deadline = time.monotonic() + 120
    while not kernel._idle_seen(waiting) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert kernel.ev("RECEIVED[-1]").count("slept 10") == 1  # the run went on to its end

    sessions = list((tmp_path / "work" / ".pi_notebook" / "sessions").glob("*.jsonl"))
    assert sessions and not any(CANARY in p.read_text() or CANARY[:12] in p.read_text() for p in sessions)
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "cache" / "mcp" / "logs").glob("*.log"))
    assert "cannot open the database" in logs and CANARY not in logs


def test_a_sigkilled_kernel_leaves_no_server(kernel):
    kernel.ok("%load_ext pi_notebook\nimport pi_notebook, os\n"
              "pi_notebook.get_agent()\n"
              "server_pid = (await pi_notebook.mcp.call('stubborn', 'pid'))['result']", timeout=120)
    server_pid = kernel.ev("server_pid")
    kernel_pid = kernel.ev("os.getpid()")
    assert alive(server_pid) and server_pid != kernel_pid
    os.kill(kernel_pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(server_pid), "the MCP server outlived its SIGKILLed kernel"


def _buttons(kernel: Kernel, description: str, count: int, timeout: float = 90) -> list[str]:
    deadline = time.monotonic() + timeout
    while len(kernel.buttons(description)) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    found = kernel.buttons(description)
    assert len(found) >= count, f"{count} {description!r} buttons expected, saw {len(found)}"
    return found


def test_always_for_this_tool_and_input_forms_of_both_styles_through_the_widget_protocol(tmp_path):
    work = tmp_path / "work"
    (work / ".pi_notebook").mkdir(parents=True)
    (work / ".pi_notebook" / "mcp.json").write_text(json.dumps({"mcpServers": {
        "t": {"command": sys.executable, "args": [SERVER]}}}))
    k = Kernel(cwd=work, env={"HOME": str(tmp_path / "home"), "PI_NOTEBOOK_CACHE": str(tmp_path / "cache")},
               log_path=tmp_path / "kernel.log")
    try:
        k.connect_frontend()  # a frontend is there to click
        k.ok(faux_setup(2000) + SCRIPT)
        k.ok("%agent model faux/faux-1")
        k.ok("faux.set_responses([tool_turn(('t__echo', {'text': 'a'}), ('t__echo', {'text': 'b'}), "
             "('t__drop', {'table': 'x'}), ('t__ask', {})), answer(faux_assistant_message('done'))])")
        k.ok("%%agent --approve ask\ngo")
        k.click(_buttons(k, "Always for this tool", 1)[-1])  # the first echo: this tool, this run
        run = _buttons(k, "Run", 2)  # the second echo was not asked; the destructive drop is
        assert len(k.buttons("Always for this tool")) == 1, "a destructive tool offered Always"
        k.click(run[-1])
        k.click(_buttons(k, "Run", 3)[-1])  # t__ask is asked for too (no annotations)
        submit = _buttons(k, "Submit", 1)[-1]
        states = k.widget_states()
        name = [cid for cid, s in states.items() if s.get("_model_name") == "TextModel"
                and s.get("value") == "" and s.get("placeholder") == ""]
        assert len(name) == 1, "the form's name field"
        k.send_comm_msg(name[0], {"method": "update", "state": {"value": "Ann"}, "buffer_paths": []})
        k.click(submit)
        k.wait_for("not __import__('pi_notebook.magics', fromlist=['_']).current_runtime().is_running()",
                   timeout=120)
        results = k.ev("[(m.details['approval']['decision'], m.content[0].text) for m in "
                       "__import__('pi_notebook').get_agent().state.messages if m.role == 'toolResult']")
        assert [d for d, _ in results] == ["clicked_always_tool", "always_tool", "clicked_run", "clicked_run"]
        assert results[0][1] == "a" and results[1][1] == "b" and results[2][1] == "dropped x"
        assert results[3][1].startswith("accepted ") and json.loads(results[3][1].split(" ", 1)[1])["name"] == "Ann"

        # the same form asked the SDK's other way: ``await ctx.elicit(...)`` in the middle of the call
        before = set(k.widget_states())
        k.ok("faux.set_responses([tool_turn(('t__order', {})), answer(faux_assistant_message('done'))])")
        k.ok("%%agent --approve auto\nagain")
        submit = _buttons(k, "Submit", 2)[-1]
        states = k.widget_states()
        name = [cid for cid, s in states.items() if s.get("_model_name") == "TextModel"
                and s.get("value") == "" and s.get("placeholder") == "" and cid not in before]
        assert len(name) == 1, "the second form's name field"
        k.send_comm_msg(name[0], {"method": "update", "state": {"value": "Bo"}, "buffer_paths": []})
        k.click(submit)
        k.wait_for("not __import__('pi_notebook.magics', fromlist=['_']).current_runtime().is_running()",
                   timeout=120)
        text = k.ev("[m for m in __import__('pi_notebook').get_agent().state.messages "
                    "if m.role == 'toolResult'][-1].content[0].text")
        assert text.startswith("accepted ") and json.loads(text.split(" ", 1)[1])["name"] == "Bo", text
    finally:
        k.shutdown()
