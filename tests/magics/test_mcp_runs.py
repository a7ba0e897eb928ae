"""MCP tools in %%agent runs (a real stdio server, the faux model, no kernel): approval
policies and autoApprove, a failing server, secrets from ${VAR}, %agent mcp, the namespace
call, project instructions."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from magics_helpers import FakeView, run_cell, runtime, settle

from pi_notebook.ai.providers.faux import faux_assistant_message, faux_tool_call

SERVER = str(Path(__file__).resolve().parents[1] / "mcp" / "server.py")
pytestmark = pytest.mark.timeout(240)


@pytest.fixture(autouse=True)
def _forget_registered_secrets(monkeypatch):
    """${VAR} values are registered for redaction for the kernel's life; not across tests."""
    import importlib

    redact = importlib.import_module("pi_notebook.tools.trust.redact")  # (the package exports a function of that name)
    monkeypatch.setattr(redact, "_explicit", set(redact._explicit))


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder (the shell's working directory) with an MCP config in it."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user config of this machine
    monkeypatch.setenv("PI_NOTEBOOK_CACHE", str(tmp_path / "cache"))

    def write(servers: dict) -> None:
        path = tmp_path / ".pi_notebook" / "mcp.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps({"mcpServers": servers}))

    return write


def _server(**extra):
    return {"command": sys.executable, "args": [SERVER], **extra}


async def _close(rt):
    await rt.mcp().manager.close()


def _tool_results(rt):
    return [m for m in rt.agent.state.messages if m.role == "toolResult"]


async def _run(shell, faux, line, calls, answer="done"):
    faux.set_responses([faux_assistant_message(calls, stop_reason="toolUse"), faux_assistant_message(answer)])
    await run_cell(shell, f"%%agent {line}\ngo\n")
    await settle(120)


async def test_mcp_tool_runs_under_auto_and_is_refused_under_deny(shell, faux, project):
    project({"t": _server()})
    rt = runtime()
    try:
        await _run(shell, faux, "--approve auto", [faux_tool_call("t__echo", {"text": "from mcp"})])
        result = _tool_results(rt)[-1]
        assert result.tool_name == "t__echo" and not result.is_error
        assert result.content[0].text == "from mcp"
        assert {"t__echo", "t__table", "t__crash"} <= {t.name for t in rt.agent.state.tools}
        await _run(shell, faux, "--approve deny", [faux_tool_call("t__echo", {"text": "no"})])
        denied = _tool_results(rt)[-1]
        assert denied.is_error and "policy is 'deny'" in denied.content[0].text
        await _run(shell, faux, "--approve ask", [faux_tool_call("t__echo", {"text": "no one"})])
        headless = _tool_results(rt)[-1]  # nobody to click: refused, as for python
        assert headless.is_error and "not interactive" in headless.content[0].text
    finally:
        await _close(rt)


async def test_ask_shows_the_call_and_auto_approve_skips_the_prompt(shell, faux, project):
    project({"t": _server(autoApprove=["table"])})
    rt = runtime()
    _interactive(rt)
    try:
        await _run(shell, faux, "--approve ask", [faux_tool_call("t__echo", {"text": "asked"}),
                                                  faux_tool_call("t__table", {"n": 1})])
        view = FakeView.instances[-1]
        asked = [c[1] for c in view.kinds("approval")]
        assert [r.tool_name for r in asked] == ["t__echo"]  # t__table is auto-approved
        assert asked[0].args == {"text": "asked"}
        echo, table = _tool_results(rt)[-2:]
        assert echo.content[0].text == "asked" and "north" in table.content[0].text

        def skipping(*args):
            view = FakeView(*args)
            view.approval_answer = "skip"
            return view

        rt.view_factory = skipping
        await _run(shell, faux, "--approve ask", [faux_tool_call("t__echo", {"text": "skipped"})])
        skipped = _tool_results(rt)[-1]
        assert skipped.is_error and "declined" in skipped.content[0].text
    finally:
        await _close(rt)


async def test_a_failing_server_is_one_notice_with_its_stderr_and_the_run_goes_on(shell, faux, project):
    project({"t": _server(), "bad": {"command": sys.executable, "args": [SERVER, "fail"]}})
    rt = runtime()
    try:
        await _run(shell, faux, "--approve auto", [faux_tool_call("t__echo", {"text": "ok"})])
        notices = [c for c in FakeView.instances[-1].kinds("notice") if "'bad'" in c[2]]
        assert len(notices) == 1 and "warehouse.db" in notices[0][2] and "\n" not in notices[0][2]
        assert _tool_results(rt)[-1].content[0].text == "ok"
        assert not any(t.name.startswith("bad__") for t in rt.agent.state.tools)
        await _run(shell, faux, "--approve auto", [faux_tool_call("t__echo", {"text": "again"})])
        assert not [c for c in FakeView.instances[-1].kinds("notice") if "'bad'" in c[2]]  # once
        status = rt.mcp().status_lines()
        assert any("bad: failed" in line and "warehouse.db" in line for line in status)
        assert any(re.search(r"t: connected, \d+ tools", line) for line in status)
    finally:
        await _close(rt)


async def test_a_var_secret_echoed_by_a_tool_never_reaches_the_model(shell, faux, project, monkeypatch):
    secret = "canary-" + "5e3a9c1d7b2f4e6a"
    monkeypatch.setenv("MY_WAREHOUSE_PASS", secret)  # a name redaction does not catch by itself
    project({"t": _server(env={"WAREHOUSE": "${MY_WAREHOUSE_PASS}"})})
    rt = runtime()
    seen: list[str] = []

    def second(context, options, state, model):
        seen.append(json.dumps([m.model_dump(mode="json") for m in context.messages]))
        return faux_assistant_message("done")

    try:
        faux.set_responses([faux_assistant_message([faux_tool_call("t__env", {"name": "WAREHOUSE"})],
                                                   stop_reason="toolUse"), second])
        await run_cell(shell, "%%agent --approve auto\ngo\n")
        await settle(120)
        assert seen and "[redacted]" in seen[0]
        assert secret not in seen[0] and secret[:12] not in seen[0]
        assert secret not in json.dumps([m.model_dump(mode="json") for m in rt.agent.state.messages])
    finally:
        await _close(rt)


async def test_agent_mcp_commands(shell, faux, project, capsys, tmp_path):
    project({"t": _server(tools=["echo", "table"])})
    rt = runtime()
    try:
        shell.run_line_magic("agent", "mcp")
        assert "t: idle" in capsys.readouterr().out
        await rt.mcp().manager.prepare_run(set())
        shell.run_line_magic("agent", "mcp tools t")
        out = capsys.readouterr().out
        assert "t__echo" in out and "t__crash [not offered: not in 'tools']" in out
        shell.run_line_magic("agent", f"mcp add extra -- {sys.executable} {SERVER}")
        assert "for this session" in capsys.readouterr().out
        assert "extra" in rt.mcp().manager.servers
        assert not (tmp_path / ".pi_notebook" / "mcp.json").read_text().count("extra")
        shell.run_line_magic("agent", "mcp add web http://127.0.0.1:1/mcp --save")
        assert "saved in" in capsys.readouterr().out
        assert "web" in json.loads((tmp_path / ".pi_notebook" / "mcp.json").read_text())["mcpServers"]
        shell.run_line_magic("agent", "mcp off t")
        await asyncio.sleep(0.5)
        for _ in range(100):
            if rt.mcp().manager.servers["t"].state == "off":
                break
            await asyncio.sleep(0.1)
        assert rt.mcp().manager.servers["t"].state == "off"
        with pytest.raises(UsageError, match="no MCP server named 'nope'"):
            shell.run_line_magic("agent", "mcp restart nope")
        shell.run_line_magic("agent", "")
        assert "MCP servers:" in capsys.readouterr().out
    finally:
        await _close(rt)


async def test_mcp_commands_wait_for_their_server_then_answer(shell, faux, project, capsys):
    project({"slow": {"command": sys.executable, "args": [SERVER, "slow", "1.5"]}})
    rt = runtime()
    try:
        await run_cell(shell, "%agent mcp tools slow")  # a cold server: the cell waits for it
        out = capsys.readouterr().out
        assert "slow: 14 tools" in out and "slow__order" in out, out
        assert "again in a moment" not in out and "still starting" not in out
        await run_cell(shell, "%agent mcp restart slow")
        out = capsys.readouterr().out
        assert "Restarted slow: connected, 14 tools" in out, out
        # a start already under way (a run began it, as under Run All) is waited for too
        await rt.mcp().manager.servers["slow"].stop()
        starting = asyncio.ensure_future(rt.mcp().manager.servers["slow"].start())
        await asyncio.sleep(0.1)
        assert rt.mcp().manager.servers["slow"].state == "starting"
        await run_cell(shell, "%agent mcp")
        assert "slow: connected, 14 tools" in capsys.readouterr().out
        await starting
        await run_cell(shell, "%agent mcp off slow")
        assert "turned off" in capsys.readouterr().out
        assert rt.mcp().manager.servers["slow"].state == "off"
    finally:
        await _close(rt)


async def test_a_command_waits_bounded_and_stop_ends_only_the_wait(shell, faux, project, capsys):
    from pi_notebook.magics.mcp_command import McpCommandStep
    from pi_notebook.magics.wait import WaitInterrupted, set_command_step

    project({"slow": {"command": sys.executable, "args": [SERVER, "slow", "3"]}})
    rt = runtime()
    set_command_step(McpCommandStep(rt, wait_s=0.7))
    try:
        await run_cell(shell, "%agent mcp tools slow")
        out = capsys.readouterr().out
        assert "'slow' is still starting; %agent mcp shows when it is connected" in out, out
        server = rt.mcp().manager.servers["slow"]
        await server.stop()
        set_command_step(McpCommandStep(rt))
        step = asyncio.ensure_future(McpCommandStep(rt).run("%agent mcp tools slow"))
        await asyncio.sleep(0.3)
        step.cancel()  # what a kernel interrupt does to the awaiting cell
        with pytest.raises(WaitInterrupted, match="stopped waiting for MCP server 'slow' to start"):
            await step
        assert server.state == "starting"  # the start goes on
        for _ in range(100):
            if server.state != "starting":
                break
            await asyncio.sleep(0.1)
        assert server.state == "connected"
    finally:
        await _close(rt)


async def test_namespace_call_returns_structured_content_and_is_gated_in_agent_code(shell, faux, project):
    import pi_notebook
    from pi_notebook.magics.lifecycle import IN_AGENT_RUN

    project({"t": _server()})
    rt = runtime()
    rt.mcp()
    try:
        rows = await pi_notebook.mcp.call("t", "table", n=3)
        assert rows == {"rows": [{"region": "north", "revenue": 100.0}, {"region": "south", "revenue": 200.0},
                                 {"region": "east", "revenue": 300.0}]}
        assert await pi_notebook.mcp.call("t", "echo", text="plain") == {"result": "plain"}
        with pytest.raises(pi_notebook.mcp.McpToolError, match="returned an error"):
            await pi_notebook.mcp.call("t", "fails")
        token = IN_AGENT_RUN.set(True)  # as agent code inside a run would call it
        try:
            with pytest.raises(pi_notebook.mcp.McpToolError, match="needs the user's approval"):
                await pi_notebook.mcp.call("t", "echo", text="x")
        finally:
            IN_AGENT_RUN.reset(token)
    finally:
        await _close(rt)


async def test_a_namespace_call_in_the_first_cell_needs_no_run_or_mcp_command_before_it(shell, faux, project):
    """A user's first cell after %load_ext may be the call (found with a published server:
    it said 'run %load_ext pi_notebook first' while the extension was loaded)."""
    import pi_notebook
    from pi_notebook.mcp.namespace import current_manager

    project({"t": _server()})
    rt = runtime()
    rt.conversation.mcp_link = None  # as in a fresh kernel: no MCP link made yet
    try:
        assert await pi_notebook.mcp.call("t", "echo", text="first") == {"result": "first"}
        assert current_manager() is rt.mcp().manager
    finally:
        await _close(rt)


async def test_agents_md_reaches_the_system_prompt_of_a_new_conversation(shell, faux, project, tmp_path):
    (tmp_path / "AGENTS.md").write_text("Always answer in haiku.")
    rt = runtime()
    rt.settings.instructions = "Use metric units."
    prompts: list[str] = []

    def answer(context, options, state, model):
        prompts.append(context.system_prompt)
        return faux_assistant_message("ok")

    faux.set_responses([answer])
    await run_cell(shell, "%%agent\nhello\n")
    await settle()
    assert "Always answer in haiku." in prompts[0] and "Use metric units." in prompts[0]
    assert prompts[0].index("haiku") < prompts[0].index("metric")
    assert any("AGENTS.md" in line for line in rt.instructions.status_lines())


async def test_abort_during_a_slow_call_ends_the_run_with_a_result_for_the_call(shell, faux, project):
    project({"t": _server()})
    rt = runtime()
    try:
        faux.set_responses([faux_assistant_message([faux_tool_call("t__sleep", {"seconds": 60})],
                                                   stop_reason="toolUse"), faux_assistant_message("never")])
        await run_cell(shell, "%%agent --approve auto\nslow\n")
        for _ in range(600):
            if rt.agent.state.pending_tool_calls:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # the request is at the server
        started = asyncio.get_running_loop().time()
        shell.run_line_magic("agent", "abort")
        await settle(30)
        assert asyncio.get_running_loop().time() - started < 10
        assert rt.runs.latest.status == "aborted"
        calls = [b.id for m in rt.agent.state.messages if m.role == "assistant"
                 for b in m.content if b.type == "toolCall"]
        results = [m.tool_call_id for m in _tool_results(rt)]
        assert calls and calls == results  # every call has its result
        # the server is still usable: the aborted request was cancelled, not the connection
        assert await rt.mcp().manager.call("t", "echo", {"text": "alive"}) == {"result": "alive"}
    finally:
        await _close(rt)


async def test_a_small_model_gets_only_allow_listed_servers_tools(shell, faux, project, monkeypatch):
    monkeypatch.setenv("PI_NOTEBOOK_SMALL_PROFILE", "1")  # the embedded model's profile
    project({"listed": _server(tools=["echo"]), "open": _server()})
    rt = runtime()
    try:
        faux.set_responses([faux_assistant_message("ok")])
        await run_cell(shell, "%%agent --approve auto\nhi\n")
        await settle(120)
        names = {t.name for t in rt.agent.state.tools}
        assert "listed__echo" in names and not any(n.startswith("open__") for n in names)
        notices = [c[2] for c in FakeView.instances[-1].kinds("notice") if "small model" in c[2]]
        assert len(notices) == 1 and "open" in notices[0] and "allow-list" in notices[0]
    finally:
        await _close(rt)


async def test_progress_reaches_the_card_as_partial_results(shell, faux, project):
    project({"t": _server()})
    rt = runtime()
    try:
        await _run(shell, faux, "--approve auto", [faux_tool_call("t__work", {"steps": 3, "seconds": 0.2})])
        updates = [e for e in FakeView.instances[-1].events if e.type == "tool_execution_update"]
        texts = [e.partial_result.content[0].text for e in updates]
        assert texts[:1] == ["progress: 1/3 step 1"] and texts[-1] == "progress: 3/3 step 3"
        assert _tool_results(rt)[-1].content[0].text == "worked 3 steps"
    finally:
        await _close(rt)


def _decision(result):
    return result.details["approval"]["decision"]


def _interactive(rt):
    rt.kernel.is_interactive = lambda run: True  # someone is there to click (a FakeView answers)


async def test_annotations_are_shown_and_trusted_only_when_the_user_opted_in(shell, faux, project):
    project({"t": _server(), "u": _server(autoApprove=["drop"])})
    rt = runtime()
    _interactive(rt)
    try:
        await _run(shell, faux, "--approve ask", [faux_tool_call("t__peek", {"key": "k"}),
                                                  faux_tool_call("t__drop", {"table": "orders"})])
        asked = [c[1] for c in FakeView.instances[-1].kinds("approval")]
        assert [r.tool_name for r in asked] == ["t__peek", "t__drop"]  # not trusted by default
        peek, drop = (r.extra["mcp"] for r in asked)
        assert peek["read_only"] is True and peek["always"] == "tool"
        assert drop["destructive"] is True and drop["always"] is None  # asked at every call
        results = _tool_results(rt)[-2:]
        assert [_decision(r) for r in results] == ["clicked_run", "clicked_run"]
        assert results[0].details["mcp"]["read_only"] is True  # the card's badge comes from here

        rt.settings.mcp_trust_annotations = True
        await _run(shell, faux, "--approve ask", [faux_tool_call("t__peek", {"key": "k"}),
                                                  faux_tool_call("t__drop", {"table": "orders"}),
                                                  faux_tool_call("u__drop", {"table": "tmp"})])
        asked = [c[1].tool_name for c in FakeView.instances[-1].kinds("approval")]
        assert asked == ["t__drop"]  # destructive still asks; autoApprove (the user's word) wins
        peek, drop, auto = _tool_results(rt)[-3:]
        assert _decision(peek) == "read_only_trusted" and "mcp_trust_annotations" in peek.details["approval"]["line"]
        assert peek.content[0].text == "value of k"
        assert _decision(drop) == "clicked_run" and _decision(auto) == "auto_approved"

        await _run(shell, faux, "--approve deny", [faux_tool_call("t__peek", {"key": "k"})])
        assert "policy is 'deny'" in _tool_results(rt)[-1].content[0].text  # trust never lifts deny
    finally:
        await _close(rt)


async def test_always_for_this_tool_covers_that_tool_only_and_not_a_destructive_one(shell, faux, project):
    project({"t": _server()})
    rt = runtime()
    _interactive(rt)

    def always(*args):
        view = FakeView(*args)
        view.approval_answer = "always"
        return view

    rt.view_factory = always
    try:
        await _run(shell, faux, "--approve ask", [faux_tool_call("t__echo", {"text": "1"}),
                                                  faux_tool_call("t__echo", {"text": "2"}),
                                                  faux_tool_call("t__table", {"n": 1}),
                                                  faux_tool_call("t__drop", {"table": "a"}),
                                                  faux_tool_call("t__drop", {"table": "b"})])
        asked = [c[1].tool_name for c in FakeView.instances[-1].kinds("approval")]
        assert asked == ["t__echo", "t__table", "t__drop", "t__drop"]
        results = _tool_results(rt)[-5:]
        assert [_decision(r) for r in results] == ["clicked_always_tool", "always_tool", "clicked_always_tool",
                                                   "clicked_run", "clicked_run"]
        assert not rt.conversation.approval.always  # python's run-wide "always" was not set by an MCP answer
        assert [r.content[0].text for r in results[:2]] == ["1", "2"]

        await _run(shell, faux, "--approve ask", [faux_tool_call("t__echo", {"text": "3"})])
        assert [c[1].tool_name for c in FakeView.instances[-1].kinds("approval")] == ["t__echo"]  # a new run asks
    finally:
        await _close(rt)


async def test_a_server_approval_override_applies_to_its_tools(shell, faux, project, capsys):
    project({"a": _server(approval="auto"), "d": _server(approval="deny"), "k": _server(approval="ask")})
    rt = runtime()  # nobody to click: headless
    try:
        calls = [faux_tool_call("a__echo", {"text": "auto"}), faux_tool_call("d__echo", {"text": "deny"}),
                 faux_tool_call("k__echo", {"text": "ask"})]
        await _run(shell, faux, "--approve ask", calls)
        auto, deny, ask = _tool_results(rt)[-3:]
        assert auto.content[0].text == "auto" and _decision(auto) == "server_auto"
        assert deny.is_error and "approval 'deny'" in deny.content[0].text and _decision(deny) == "server_deny"
        assert ask.is_error and "not interactive" in ask.content[0].text and _decision(ask) == "headless"

        await _run(shell, faux, "--approve auto", calls)
        auto, deny, ask = _tool_results(rt)[-3:]
        assert _decision(auto) == "auto" and not auto.is_error
        assert deny.is_error and _decision(deny) == "server_deny"
        assert ask.is_error and _decision(ask) == "headless"  # the server asks for approval even so

        await _run(shell, faux, "--approve deny", calls[:1])
        assert _decision(_tool_results(rt)[-1]) == "deny"  # a config file does not lift the run's deny
        capsys.readouterr()
        shell.run_line_magic("agent", "mcp tools a")
        header = capsys.readouterr().out.splitlines()[0]
        assert header.startswith("a: ") and "(approval: auto, from its config)" in header
    finally:
        await _close(rt)


async def test_a_tool_added_during_a_run_is_offered_at_the_next_turn(shell, faux, project):
    project({"t": _server()})
    rt = runtime()
    offered: list[list[str]] = []

    def turn(message):
        def step(context, options, state, model):
            offered.append([t.name for t in context.tools or []])
            return message
        return step

    try:
        faux.set_responses([
            turn(faux_assistant_message([faux_tool_call("t__grow", {})], stop_reason="toolUse")),
            turn(faux_assistant_message([faux_tool_call("t__extra", {})], stop_reason="toolUse")),
            turn(faux_assistant_message("done"))])
        await run_cell(shell, "%%agent --approve auto\ngrow\n")
        await settle(120)
        assert "t__extra" not in offered[0] and "t__extra" in offered[1]
        grow, extra = _tool_results(rt)[-2:]
        assert grow.content[0].text == "grown"
        assert not extra.is_error and extra.content[0].text == "extra tool"
        assert _decision(extra) == "auto"  # the new tool passed the gate like the others
        notices = [c[2] for c in FakeView.instances[-1].kinds("notice") if "changed during the run" in c[2]]
        assert notices == ["MCP tools changed during the run: added t__extra."]
    finally:
        await _close(rt)


async def test_elicitation_in_a_run_asks_the_view_and_headless_declines_with_a_notice(shell, faux, project):
    project({"t": _server()})
    rt = runtime()
    try:
        await _run(shell, faux, "--approve auto", [faux_tool_call("t__ask", {})])
        assert _tool_results(rt)[-1].content[0].text == "decline"  # no frontend: declined
        notices = [c[2] for c in FakeView.instances[-1].kinds("notice") if "asked for input" in c[2]]
        assert len(notices) == 1 and "'t'" in notices[0] and "no notebook frontend" in notices[0]

        forms = []

        class FormView(FakeView):
            async def request_input(self, request):
                forms.append(request)
                return "accept", {"name": "Bea", "quantity": 5}

        rt.view_factory = FormView
        rt.mcp()._form_view = lambda: FakeView.instances[-1]  # a frontend that shows forms
        await _run(shell, faux, "--approve auto", [faux_tool_call("t__ask", {})])
        text = _tool_results(rt)[-1].content[0].text
        assert text.startswith("accepted ") and json.loads(text.split(" ", 1)[1])["name"] == "Bea"
        assert [f.name for f in forms[0].fields] == ["name", "quantity", "price", "size", "express"]
    finally:
        await _close(rt)


async def test_pythons_always_for_this_run_is_unchanged_but_does_not_cover_a_destructive_tool(shell, faux, project):
    project({"t": _server()})
    rt = runtime()
    _interactive(rt)

    def always(*args):
        view = FakeView(*args)
        view.approval_answer = "always"
        return view

    rt.view_factory = always
    from pi_notebook.agent.types import AgentTool, AgentToolResult
    from pi_notebook.ai.types import TextContent

    async def fake_python(tool_call_id, params, signal=None, on_update=None):
        return AgentToolResult(content=[TextContent(text="ran")], details={})

    rt.conversation.all_tools = [AgentTool(name="python", label="python", description="runs code", execute=fake_python,
                               parameters={"type": "object", "properties": {"code": {"type": "string"}}})]
    try:
        await _run(shell, faux, "--approve ask", [faux_tool_call("python", {"code": "mcp_always_probe = 1"}),
                                                  faux_tool_call("t__echo", {"text": "covered"}),
                                                  faux_tool_call("t__drop", {"table": "t"})])
        asked = [c[1].tool_name for c in FakeView.instances[-1].kinds("approval")]
        assert asked == ["python", "t__drop"]
        results = _tool_results(rt)[-3:]
        assert [_decision(r) for r in results] == ["clicked_always", "always", "clicked_run"]
        assert rt.conversation.approval.always  # python's answer still means the rest of the run
    finally:
        await _close(rt)
