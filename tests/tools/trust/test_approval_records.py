"""Every approval decision is recorded with its tool result (details["approval"]),
so "why did this run without asking?" always has an answer, in the session and the card."""

from __future__ import annotations

import asyncio
from typing import Any

from pi_notebook.agent import Agent
from pi_notebook.agent.types import AgentTool, AgentToolResult
from pi_notebook.ai.providers.faux import faux_assistant_message, faux_tool_call, register_faux_provider
from pi_notebook.ai.stream import stream_simple
from pi_notebook.ai.types import TextContent
from pi_notebook.tools.trust.approval import ApprovalRequest, approval_line, make_approval_hook


def _tools(ran: list[str]) -> list[AgentTool]:
    async def python(tool_call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
        ran.append(tool_call_id)
        return AgentToolResult(content=[TextContent(text="ok")], details={"outputs": []})

    async def listing(tool_call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text="none")], details={"text": "none"})

    schema = {"type": "object", "properties": {"code": {"type": "string"}}}
    return [AgentTool(name="python", label="Python", description="run", parameters=schema, execute=python),
            AgentTool(name="list_variables", label="Vars", description="list",
                      parameters={"type": "object", "properties": {}}, execute=listing)]


async def _run(policy: str, answers: list[str] | None, calls: int, *, interactive: bool = True,
               timeout_s: float | None = None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    faux = register_faux_provider()
    asked: list[str] = []

    async def ask(request: ApprovalRequest) -> str:
        asked.append(request.tool_call_id)
        if answers is None:
            await asyncio.sleep(60)  # nobody answers
        assert answers is not None
        return answers.pop(0)

    try:
        hook = make_approval_hook(lambda: policy, ask, lambda: interactive, timeout_s=timeout_s)
        ran: list[str] = []
        steps = [faux_assistant_message([faux_tool_call("python", {"code": f"x = {i}"}, id=f"c{i}")],
                                        stop_reason="toolUse") for i in range(1, calls + 1)]
        steps.append(faux_assistant_message([faux_tool_call("list_variables", {}, id="lv")], stop_reason="toolUse"))
        faux.set_responses([*steps, faux_assistant_message("done")])
        agent = Agent(initial_state={"model": faux.get_model(), "system_prompt": "t", "tools": _tools(ran)},
                      stream_fn=stream_simple, before_tool_call=hook, after_tool_call=hook.after_tool_call)
        await agent.prompt("go")
    finally:
        faux.unregister()
    results = {m.tool_call_id: m.details for m in agent.state.messages if m.role == "toolResult"}
    assert "approval" not in (results["lv"] or {})  # an ungated tool has no approval record
    assert results["lv"] == {"text": "none"}
    return {k: v["approval"] for k, v in results.items() if k != "lv"}, ran


async def test_clicks_are_recorded_per_call() -> None:
    records, ran = await _run("ask", ["run", "skip", "always"], 4)
    assert [records[f"c{i}"]["decision"] for i in range(1, 5)] == [
        "clicked_run", "skipped", "clicked_always", "always"]
    assert ran == ["c1", "c3", "c4"]
    assert [records[f"c{i}"]["ran"] for i in range(1, 5)] == [True, False, True, True]
    assert records["c4"]["line"] == "approval: Always for this run (given at an earlier call)"
    assert all(r["policy"] == "ask" for r in records.values())


async def test_policy_auto_deny_headless_and_timeout_are_recorded() -> None:
    auto, ran = await _run("auto", [], 1)
    assert auto["c1"]["decision"] == "auto" and ran == ["c1"]
    deny, ran = await _run("deny", [], 1)
    assert deny["c1"]["decision"] == "deny" and ran == []
    headless, ran = await _run("ask", [], 1, interactive=False)
    assert headless["c1"]["decision"] == "headless" and ran == []
    late, ran = await _run("ask", None, 1, timeout_s=0.2)
    assert late["c1"]["decision"] == "timeout" and ran == [] and late["c1"]["waited_s"] >= 0.2


def test_the_card_shows_the_decision_as_one_line() -> None:
    from pi_notebook.widgets.blocks import WidgetSet
    from pi_notebook.widgets.toolcall import ToolItem
    from pi_notebook.widgets.toolcard import ToolCard

    item = ToolItem(tool_call_id="c1", tool_name="python")
    item.end(AgentToolResult(content=[TextContent(text="ok")],
                             details={"outputs": [], "approval": {"decision": "auto", "line": "approval: policy auto, ran without asking"}}),
             False, 0.0)
    widgets = WidgetSet()
    card = ToolCard(item, widgets)
    card.sync()
    assert "approval: policy auto, ran without asking" in card._head_html()
    widgets.close_all()
    assert approval_line({"approval": {"line": "approval: clicked Run"}}) == "approval: clicked Run"
    assert approval_line({"outputs": []}) is None


async def test_the_real_python_tools_typed_details_carry_the_record() -> None:
    """The python tool's details are a PythonCallDetails, not a dict: the record must land there."""
    from helpers.shell import get_shell

    from pi_notebook.tools.python.python_tool import make_python_tool
    from pi_notebook.tools.output.updates import PythonCallDetails

    shell = get_shell()
    faux = register_faux_provider()
    try:
        hook = make_approval_hook(lambda: "auto", None, lambda: True)
        faux.set_responses([faux_assistant_message([faux_tool_call("python", {"code": "1 + 1"}, id="p1")],
                                                   stop_reason="toolUse"), faux_assistant_message("done")])
        agent = Agent(initial_state={"model": faux.get_model(), "system_prompt": "t",
                                     "tools": [make_python_tool(shell)]},
                      stream_fn=stream_simple, before_tool_call=hook, after_tool_call=hook.after_tool_call)
        await agent.prompt("go")
    finally:
        faux.unregister()
    (result,) = [m for m in agent.state.messages if m.role == "toolResult"]
    assert isinstance(result.details, PythonCallDetails)
    assert result.details.approval is not None and result.details.approval["decision"] == "auto"
    assert approval_line(result.details) == "approval: policy auto, ran without asking"
    assert result.details.outputs  # the call's own details are kept


async def test_an_mcp_tool_in_auto_approve_is_recorded_as_such() -> None:
    from pi_notebook.mcp.gate import McpGate
    from pi_notebook.mcp.tools import McpToolMeta

    asked: list[str] = []

    async def ask(request: ApprovalRequest) -> str:
        asked.append(request.tool_call_id)
        return "run"

    faux = register_faux_provider()
    try:
        hook = make_approval_hook(lambda: "ask", ask, lambda: True)
        hook.tools = {"python", "srv__echo"}
        gate = McpGate(hook, lambda: {"srv__echo": McpToolMeta(server="srv", tool="echo", auto_approved=True)},
                       lambda: "ask")

        async def echo(tool_call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
            return AgentToolResult(content=[TextContent(text="hi")], details={"server": "srv"})

        tool = AgentTool(name="srv__echo", label="echo", description="echo",
                         parameters={"type": "object", "properties": {}}, execute=echo)
        faux.set_responses([faux_assistant_message([faux_tool_call("srv__echo", {}, id="m1")],
                                                   stop_reason="toolUse"), faux_assistant_message("done")])
        agent = Agent(initial_state={"model": faux.get_model(), "system_prompt": "t", "tools": [tool]},
                      stream_fn=stream_simple, before_tool_call=gate, after_tool_call=hook.after_tool_call)
        await agent.prompt("go")
    finally:
        faux.unregister()
    (result,) = [m for m in agent.state.messages if m.role == "toolResult"]
    assert asked == []  # no prompt: the server's autoApprove lists it
    assert result.details["approval"]["decision"] == "auto_approved" and result.details["approval"]["ran"]
    assert "autoApprove" in approval_line(result.details)
