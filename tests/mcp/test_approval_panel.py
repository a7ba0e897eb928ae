"""The approval panel and the card of an MCP tool: the server's annotations as badges
(escaped), and what the third button means (this tool; none for a destructive tool)."""

from __future__ import annotations

import asyncio

from helpers.widgets import shown_text

from pi_notebook.tools.trust.approval import ApprovalRequest
from pi_notebook.agent.types import AgentStartEvent, ToolExecutionEndEvent, ToolExecutionStartEvent
from pi_notebook.agent.types import AgentToolResult
from pi_notebook.ai.types import TextContent
from pi_notebook.widgets.toolcard import hint_badges
from pi_notebook.widgets.view import AgentView


async def _ask(view, call_id, name, hints):
    view.handle_event(ToolExecutionStartEvent(tool_call_id=call_id, tool_name=name, args={"x": 1}))
    task = asyncio.ensure_future(view.request_approval(
        ApprovalRequest(tool_call_id=call_id, tool_name=name, args={"x": 1}, code=None, extra={"mcp": hints})))
    await asyncio.sleep(0.08)
    view.flush()
    return task, view.tool_card(call_id)


async def test_badges_and_the_third_button_of_an_mcp_panel():
    view = AgentView("faux/test", asyncio.get_running_loop(), on_abort=lambda: None)
    try:
        view.handle_event(AgentStartEvent())
        hints = {"server": "wh", "tool": "peek", "read_only": True, "destructive": None, "always": "tool"}
        task, card = await _ask(view, "c1", "wh__peek", hints)
        assert set(card.approval_buttons) == {"run", "skip", "always"}
        assert card.approval_buttons["always"].description == "Always for this tool"
        html = shown_text(card.widget)
        assert "read-only" in html and "destructive" not in html
        card.approval_buttons["always"].click()
        assert await asyncio.wait_for(task, 2) == "always"  # the choice is still "always": the gate scopes it

        hints = {"server": "wh", "tool": "drop", "read_only": False, "destructive": True, "always": None}
        task, card = await _ask(view, "c2", "wh__drop", hints)
        assert set(card.approval_buttons) == {"run", "skip"}  # asked at every call: no "always"
        html = shown_text(card.widget)
        assert "destructive" in html and "asked for at every call" in html
        card.approval_buttons["skip"].click()
        assert await asyncio.wait_for(task, 2) == "skip"

        # python keeps "Always for this run"
        view.handle_event(ToolExecutionStartEvent(tool_call_id="p1", tool_name="python", args={"code": "1"}))
        task = asyncio.ensure_future(view.request_approval(
            ApprovalRequest(tool_call_id="p1", tool_name="python", args={"code": "1"}, code="1")))
        await asyncio.sleep(0.08)
        view.flush()
        assert view.tool_card("p1").approval_buttons["always"].description == "Always for this run"
        view.tool_card("p1").approval_buttons["run"].click()
        assert await asyncio.wait_for(task, 2) == "run"

        # after the call, the badges come from the result's details
        result = AgentToolResult(content=[TextContent(text="ok")],
                                 details={"mcp": {"server": "wh", "tool": "peek", "read_only": True}})
        view.handle_event(ToolExecutionEndEvent(tool_call_id="c1", tool_name="wh__peek", result=result,
                                                is_error=False))
        view.flush()
        assert "read-only" in shown_text(view.tool_card("c1").widget)
    finally:
        view.close()


def test_badges_are_fixed_labels_with_escaped_text():
    assert hint_badges({"read_only": "<script>", "destructive": "yes"}) == ""  # only a real True counts
    html = hint_badges({"read_only": True, "destructive": True})
    assert "read-only" in html and "destructive" in html and "<script" not in html
    assert hint_badges(None) == "" and hint_badges("x") == ""
