"""Buttons: approval, Abort and queue removal hop onto the loop from any thread.

On ipykernel 7.0-7.3 under JupyterLab a button's on_click runs on a subshell thread;
the handler must only schedule work on the kernel loop (call_soon_threadsafe).
The clicks here are invoked from a separate thread, like a subshell would.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from pi_notebook.agent.types import AgentStartEvent, BeforeToolCallContext, ToolExecutionStartEvent
from pi_notebook.ai.types import ToolCall
from pi_notebook.tools.trust.approval import ApprovalRequest

from widget_helpers import AssistantStream, CommLog


def click_on_other_thread(button: Any) -> str:
    """Click ``button`` from a new thread (as a comm handler on a subshell would)."""
    names: list[str] = []

    def target() -> None:
        names.append(threading.current_thread().name)
        button.click()
    thread = threading.Thread(target=target, name="subshell-test")
    thread.start()
    thread.join(5)
    assert not thread.is_alive()
    return names[0]


def _request(call_id: str = "call-1", code: str = "print('hello')") -> ApprovalRequest:
    return ApprovalRequest(tool_call_id=call_id, tool_name="python", args={"code": code}, code=code)


def _hook_for(view):
    """The approval gate asking this view, as the runtime wires it (abort reaches the panel
    through the gate: it cancels the view's wait)."""
    from pi_notebook.tools.trust.approval import make_approval_hook

    return make_approval_hook(lambda: "ask", view.request_approval, lambda: True)


def _ctx(call_id: str) -> BeforeToolCallContext:
    call = ToolCall(id=call_id, name="python", arguments={"code": "1"})
    return BeforeToolCallContext(assistant_message=None, tool_call=call, args={"code": "1"}, context=None)


async def _show_approval(view, call_id: str = "call-1", code: str = "print('hello')"):
    view.handle_event(AgentStartEvent())
    view.handle_event(ToolExecutionStartEvent(tool_call_id=call_id, tool_name="python", args={"code": code}))
    task = asyncio.ensure_future(view.request_approval(_request(call_id, code)))
    await asyncio.sleep(0.08)  # let the panel be flushed to the frontend
    card = view.tool_card(call_id)
    assert card.approval_pending and card.approval_buttons, "the panel should be on screen"
    return task, card


@pytest.mark.parametrize("choice", ["run", "skip", "always"])
async def test_approval_click_on_another_thread_resolves_on_the_loop(view, comms: CommLog, monkeypatch,
                                                                     choice: str):
    task, card = await _show_approval(view)
    assert view.status == "waiting for approval"
    assert card.status == "waiting for approval"
    loop_thread = threading.get_ident()
    resolved_on: list[int] = []
    original = view._resolve_approval

    def spy(*args: Any) -> None:
        resolved_on.append(threading.get_ident())
        original(*args)
    monkeypatch.setattr(view, "_resolve_approval", spy)

    clicker = click_on_other_thread(card.approval_buttons[choice])
    assert clicker == "subshell-test"
    # The click only scheduled work: nothing has been resolved on the clicking thread.
    assert resolved_on == [] and not task.done()
    assert await asyncio.wait_for(task, 2) == choice
    assert resolved_on == [loop_thread]
    view.flush()
    assert not card.approval_pending
    assert card.status == ("skipped" if choice == "skip" else "running")
    assert card._approval not in card.widget.children, "the panel is hidden after the choice"
    assert view.status == ("thinking" if choice == "skip" else "running tool")


async def test_approval_panel_shows_the_code_safely(view, comms: CommLog):
    code = "print('<script>alert(1)</script>')"
    task, card = await _show_approval(view, "x1", code)
    html = "\n".join(v for v in comms.all_html_values())
    assert "&lt;script&gt;" in html and "<script>" not in html
    assert "Run this code?" in html
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_abort_while_waiting_for_approval_returns_skip(view, comms: CommLog):
    task, card = await _show_approval(view)
    click_on_other_thread(view.abort_button)
    assert await asyncio.wait_for(task, 2) == "skip"
    assert view.aborts == [True]
    assert view.status == "aborting"
    view.flush()
    assert not card.approval_pending


async def test_finish_while_waiting_for_approval_returns_skip(view, comms: CommLog):
    task, card = await _show_approval(view)
    view.finish("aborted")
    assert await asyncio.wait_for(task, 2) == "skip"
    assert view.status == "aborted"
    assert card.status == "aborted"
    assert await view.request_approval(_request("late")) == "skip"  # after the end: no panel


async def test_cancelling_the_waiting_task_hides_the_panel_and_propagates(view, comms: CommLog):
    task, card = await _show_approval(view)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    view.flush()
    assert not card.approval_pending
    assert card._approval not in card.widget.children


async def test_abort_click_on_another_thread_hops_to_the_loop(comms: CommLog):
    from pi_notebook.widgets.view import AgentView

    loop = asyncio.get_running_loop()
    calls: list[int] = []
    view = AgentView("m", loop, on_abort=lambda: calls.append(threading.get_ident()))
    try:
        view.handle_event(AgentStartEvent())
        stream = AssistantStream(view).start()
        stream.text_delta(stream.text_start(), "streaming…")
        view.flush()
        click_on_other_thread(view.abort_button)
        assert calls == [], "on_abort must not run on the clicking thread"
        await asyncio.sleep(0.01)
        assert calls == [threading.get_ident()]
        assert view.status == "aborting"
        view.flush()
        assert view.abort_button.disabled
        assert "aborting" in comms.last_value(view._header)
        click_on_other_thread(view.abort_button)  # a second click does nothing more
        await asyncio.sleep(0.01)
        assert len(calls) == 1
    finally:
        view.close()


async def test_queued_messages_show_and_remove_from_another_thread(view, comms: CommLog):
    view.handle_event(AgentStartEvent())
    view.show_queued("steer", "use a <log> scale", "tok-1")
    view.show_queued("followup", "now fit a model", "tok-2")
    view.flush()
    row1, row2 = view.queued_row("tok-1"), view.queued_row("tok-2")
    assert row1 is not None and row2 is not None
    assert tuple(view._queue_box.children) == (row1, row2)
    text = comms.last_value(row1.children[0])
    assert "queued steer" in text and "use a &lt;log&gt; scale" in text

    click_on_other_thread(row1.children[1])
    assert view.removed == []  # only scheduled
    await asyncio.sleep(0.01)
    assert view.removed == ["tok-1"]
    view.flush()
    assert tuple(view._queue_box.children) == (row2,)

    view.remove_queued("tok-2")  # the runtime delivered it
    view.flush()
    assert view._queue_box.children == ()


async def test_delivered_queued_message_is_labelled_and_not_duplicated(view, comms: CommLog):
    from pi_notebook.agent.types import MessageEndEvent, MessageStartEvent
    from pi_notebook.ai.types import UserMessage
    from pi_notebook.widgets.blocks import UserBlock

    view.add_user_message("plot it", "prompt")
    view.handle_event(AgentStartEvent())
    prompt = UserMessage(content="plot it")
    view.handle_event(MessageStartEvent(message=prompt))   # already shown: not again
    view.handle_event(MessageEndEvent(message=prompt))
    view.show_queued("steer", "use a log scale", "t1")
    steer = UserMessage(content="use a log scale")
    view.deliver_queued("t1", "use a log scale", "steer")  # the queue says which row went out
    view.handle_event(MessageStartEvent(message=steer))    # delivered: labelled Steer, shown once
    view.handle_event(MessageEndEvent(message=steer))
    view.add_user_message("and label the axes", "followup")
    view.flush()
    users = [b for b in view.blocks if isinstance(b, UserBlock)]
    assert [(b.item.kind, b.text) for b in users] == [
        ("prompt", "plot it"), ("steer", "use a log scale"), ("followup", "and label the axes")]
    assert view.queued_row("t1") is None and view._queue_box.children == ()
    html = "\n".join(comms.all_html_values())
    assert '<span class="pi-label">Steer</span>' in html
    assert '<span class="pi-label">Follow-up</span>' in html


async def test_clicks_after_the_loop_closed_are_ignored(comms: CommLog):
    from pi_notebook.widgets.view import AgentView

    other = asyncio.new_event_loop()
    view = AgentView("m", other, on_abort=lambda: None)
    view._scheduler.close()
    view._cancel_tick()
    other.close()
    view.abort_button.click()  # must not raise although the loop is gone


async def test_runtime_abort_status_answers_pending_approval(view, comms: CommLog):
    task, card = await _show_approval(view)
    view.set_status("aborting")  # what %agent abort does through the runtime
    assert await asyncio.wait_for(task, 2) == "skip"
    view.flush()
    assert not card.approval_pending


async def test_abort_signal_answers_pending_approval_from_another_thread(view, comms: CommLog):
    from pi_notebook.ai.abort import AbortController

    controller = AbortController()
    view.handle_event(AgentStartEvent())
    hook = _hook_for(view)
    task = asyncio.ensure_future(hook(_ctx("sig-1"), controller.signal))
    await asyncio.sleep(0.08)
    card = view.tool_card("sig-1")
    assert not task.done() and card.approval_pending
    thread = threading.Thread(target=controller.abort)
    thread.start()
    thread.join()
    assert await asyncio.wait_for(task, 2) is None  # aborted: the loop reports it
    view.flush()
    assert not card.approval_pending and hook.records["sig-1"].decision == "aborted"
    # an already-aborted signal: no panel at all
    assert await hook(_ctx("sig-2"), controller.signal) is None
    assert view.tool_card("sig-2") is None


async def test_cancel_approvals_and_repeated_request(view, comms: CommLog):
    task, card = await _show_approval(view, "r1")
    second = asyncio.ensure_future(view.request_approval(_request("r1")))
    assert await asyncio.wait_for(task, 2) == "skip"  # superseded by the new request
    await asyncio.sleep(0.01)
    assert not second.done()
    view.cancel_approvals()
    assert await asyncio.wait_for(second, 2) == "skip"


async def test_signal_listener_is_removed_after_a_click(view, comms: CommLog):
    from pi_notebook.ai.abort import AbortController

    controller = AbortController()
    view.handle_event(AgentStartEvent())
    hook = _hook_for(view)
    task = asyncio.ensure_future(hook(_ctx("L1"), controller.signal))
    await asyncio.sleep(0.08)
    assert len(controller.signal._listeners) == 1
    click_on_other_thread(view.tool_card("L1").approval_buttons["run"])
    assert await asyncio.wait_for(task, 2) is None  # ran
    assert hook.records["L1"].decision == "clicked_run"
    assert controller.signal._listeners == []


async def test_identical_steers_bind_to_their_own_rows(view, comms: CommLog):
    """Two %steer with the same text: each delivery removes its own row (by token), and
    the agent's message_start for each is absorbed by the row it delivered."""
    from pi_notebook.agent.types import MessageStartEvent
    from pi_notebook.ai.types import UserMessage
    from pi_notebook.widgets.blocks import UserBlock

    view.add_user_message("go", "prompt")
    view.handle_event(AgentStartEvent())
    view.handle_event(MessageStartEvent(message=UserMessage(content="go")))
    view.show_queued("steer", "again", "a")
    view.show_queued("followup", "again", "b")
    view.flush()
    view.deliver_queued("b", "again", "followup")  # the second row goes first
    view.flush()
    assert view.queued_row("a") is not None and [q.token for q in view.transcript.queued] == ["a"]
    view.handle_event(MessageStartEvent(message=UserMessage(content="again")))
    view.deliver_queued("a", "again", "steer")
    view.handle_event(MessageStartEvent(message=UserMessage(content="again")))
    view.flush()
    users = [(b.item.kind, b.text) for b in view.blocks if isinstance(b, UserBlock)]
    assert users == [("prompt", "go"), ("followup", "again"), ("steer", "again")]
    assert view.transcript.queued == []


async def test_user_message_nobody_announced_is_shown(view, comms: CommLog):
    from pi_notebook.agent.types import AgentEndEvent, MessageStartEvent
    from pi_notebook.ai.types import UserMessage
    from pi_notebook.widgets.blocks import UserBlock

    view.add_user_message("never sent", "prompt")  # the run failed before the model
    view.handle_event(AgentStartEvent())
    view.handle_event(AgentEndEvent(messages=[]))
    view.handle_event(AgentStartEvent())
    view.handle_event(MessageStartEvent(message=UserMessage(content="from elsewhere")))
    texts = [b.text for b in view.blocks if isinstance(b, UserBlock)]
    assert texts == ["never sent", "from elsewhere"]


async def test_approval_of_an_mcp_call_names_server_and_tool_and_shows_the_arguments(view, comms: CommLog):
    args = {"sql": "select * from orders where region = '<north>'", "limit": 5}
    view.handle_event(AgentStartEvent())
    view.handle_event(ToolExecutionStartEvent(tool_call_id="m1", tool_name="warehouse__query", args=args))
    task = asyncio.ensure_future(view.request_approval(
        ApprovalRequest(tool_call_id="m1", tool_name="warehouse__query", args=args, code=None)))
    await asyncio.sleep(0.08)
    card = view.tool_card("m1")
    assert card.approval_pending and set(card.approval_buttons) == {"run", "skip", "always"}
    html = "\n".join(comms.all_html_values())
    assert "Call this tool?" in html and "Run this code?" not in html
    assert "<code>query</code> of the MCP server <code>warehouse</code>" in html
    # the arguments as pretty JSON above the question, escaped (highlighted by pygments)
    assert "where region = '&lt;north&gt;'" in html and '<span class="nt">"limit"</span>' in html
    assert html.index('"limit"') < html.index("Call this tool?")
    click_on_other_thread(card.approval_buttons["run"])
    assert await asyncio.wait_for(task, 2) == "run"


async def test_a_late_click_from_an_earlier_panel_answers_nothing(view):
    """The failure checked for (once in four browser tries): after Run on one call and Skip on
    the next, later calls run without a prompt. A click still in flight from an earlier panel (a double click;
    a server that reuses the id "call_0" in every turn) must not answer a later request."""
    first, card = await _show_approval(view, "call_0", "x = 1")
    old_run = card.approval_buttons["run"]
    click_on_other_thread(old_run)
    assert await asyncio.wait_for(first, 2) == "run"
    # the next turn's call has the same id: the same card, a new request
    second = asyncio.ensure_future(view.request_approval(_request("call_0", "x = 2")))
    await asyncio.sleep(0.08)
    click_on_other_thread(old_run)  # the second click of a double click on the first panel
    await asyncio.sleep(0.2)
    assert not second.done(), "a click on the earlier panel answered the new request"
    new_buttons = view.tool_card("call_0").approval_buttons
    assert new_buttons["run"] is not old_run and old_run.disabled
    click_on_other_thread(new_buttons["skip"])
    assert await asyncio.wait_for(second, 2) == "skip"
