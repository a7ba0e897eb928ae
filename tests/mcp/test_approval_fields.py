"""Every field shown for approval reveals invisible and text-direction characters, with a
warning that says which field: tool and server names, the description, the arguments, the
code (one rule: tools/trust/approval.py ``reveal_invisible``)."""

from __future__ import annotations

import asyncio

from helpers.widgets import shown_text

from pi_notebook.agent.types import AgentStartEvent, ToolExecutionStartEvent
from pi_notebook.tools.trust.approval import ApprovalRequest, find_invisible, invisible_fields, reveal_invisible
from pi_notebook.widgets.text_view import TextView
from pi_notebook.widgets.view import AgentView

RLO = "\u202e"


async def test_names_and_description_with_bidi_characters_are_revealed_with_a_warning():
    view = AgentView("faux/test", asyncio.get_running_loop(), on_abort=lambda: None)
    try:
        view.handle_event(AgentStartEvent())
        hints = {"server": f"files{RLO}", "tool": f"read{RLO}txt.exe", "read_only": None, "destructive": None,
                 "always": "tool", "description": f"Reads a file.\u200b{RLO}Deletes nothing."}
        name = "files___read_txt_exe"
        view.handle_event(ToolExecutionStartEvent(tool_call_id="c1", tool_name=name, args={"path": "a"}))
        task = asyncio.ensure_future(view.request_approval(ApprovalRequest(
            tool_call_id="c1", tool_name=name, args={"path": "a"}, extra={"mcp": hints})))
        await asyncio.sleep(0.08)
        view.flush()
        html = shown_text(view.tool_card("c1").widget)
        assert RLO not in html and "\u200b" not in html
        assert "read⟨U+202E⟩txt.exe" in html and "files⟨U+202E⟩" in html
        assert "Reads a file.⟨U+200B⟩⟨U+202E⟩Deletes nothing." in html
        assert "pi-invisible-warning" in html and "tool name: U+202E" in html and "description: U+200B, U+202E" in html
        view.tool_card("c1").approval_buttons["skip"].click()
        assert await asyncio.wait_for(task, 2) == "skip"
    finally:
        view.close()


async def test_a_changed_tool_says_why_it_is_asked_again():
    view = AgentView("faux/test", asyncio.get_running_loop(), on_abort=lambda: None)
    try:
        view.handle_event(AgentStartEvent())
        hints = {"server": "ops", "tool": "deploy", "destructive": True, "always": None,
                 "changed": "The server announced this tool again since you chose Always for it: it is now "
                            "marked destructive. It is asked for again."}
        view.handle_event(ToolExecutionStartEvent(tool_call_id="c1", tool_name="ops__deploy", args={}))
        task = asyncio.ensure_future(view.request_approval(ApprovalRequest(
            tool_call_id="c1", tool_name="ops__deploy", args={}, extra={"mcp": hints})))
        await asyncio.sleep(0.08)
        view.flush()
        assert "it is now marked destructive" in shown_text(view.tool_card("c1").widget)
        view.tool_card("c1").approval_buttons["skip"].click()
        await asyncio.wait_for(task, 2)
    finally:
        view.close()


def test_the_text_view_reveals_the_tool_name():
    asked: list[str] = []
    view = TextView.__new__(TextView)
    view._ask = lambda prompt: asked.append(prompt) or "n"
    view._skipped = set()
    view._write = lambda text: None
    choice = asyncio.run(view.request_approval(ApprovalRequest(tool_call_id="c", tool_name=f"read{RLO}txt", args={})))
    assert choice == "skip" and "read⟨U+202E⟩txt" in asked[0] and RLO not in asked[0]


def test_one_rule_for_every_field():
    assert reveal_invisible(f"a{RLO}b\U000e0041") == "a⟨U+202E⟩b⟨U+E0041⟩"  # a tag character too
    assert find_invisible("plain é ü ❤") == []
    assert invisible_fields({"tool name": f"x{RLO}", "arguments": "ok", "code": None}) == {"tool name": [RLO]}
