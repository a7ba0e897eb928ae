"""AgentView in a real ipykernel, driven through jupyter_client like a frontend.

No magics involved: a cell builds a view and streams events into it from a task on
the kernel loop, as the runtime does. What the frontend would receive is read from
iopub; a click is the comm message @jupyter-widgets sends.
"""

from __future__ import annotations

import time

import pytest

from helpers.kernel import Kernel

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]

SETUP = """
import asyncio, ipywidgets
from IPython.display import display
from pi_notebook.widgets.view import AgentView
from pi_notebook.widgets.blocks import MarkdownBlock, _render_md
from pi_notebook.agent.types import AgentStartEvent, AgentEndEvent, MessageStartEvent, MessageUpdateEvent, MessageEndEvent
from pi_notebook.ai.types import AssistantMessage, TextContent, TextStartEvent, TextDeltaEvent, TextEndEvent

async def stream_into(view, deltas, per_tick=10, tick=0.01):
    view.handle_event(AgentStartEvent())
    partial = AssistantMessage(content=[TextContent(text="")])
    view.handle_event(MessageStartEvent(message=partial))
    view.handle_event(MessageUpdateEvent(message=partial, assistant_message_event=TextStartEvent(content_index=0, partial=partial)))
    t0 = asyncio.get_running_loop().time()
    try:
        for i, d in enumerate(deltas):
            partial.content[0].text += d
            view.handle_event(MessageUpdateEvent(message=partial, assistant_message_event=TextDeltaEvent(content_index=0, delta=d, partial=partial)))
            if i % per_tick == per_tick - 1:
                await asyncio.sleep(tick)
        view.handle_event(MessageUpdateEvent(message=partial, assistant_message_event=TextEndEvent(content_index=0, content=partial.content[0].text, partial=partial)))
        partial.stop_reason = "stop"
    except asyncio.CancelledError:
        partial.stop_reason = "aborted"
    view.handle_event(MessageEndEvent(message=partial))
    view.handle_event(AgentEndEvent(messages=[partial]))
    view.finish()
    return asyncio.get_running_loop().time() - t0
"""

STREAM = """
deltas = [f"tok{i} " + ("\\n\\n" if i % 60 == 59 else "") for i in range(2000)]
view = AgentView("faux/kernel", asyncio.get_running_loop(), on_abort=lambda: None)
display(view)
task = asyncio.get_running_loop().create_task(stream_into(view, deltas))
"""

ABORT = """
aborted_on = []
def on_abort():
    import threading
    aborted_on.append(threading.current_thread().name)
    task2.cancel()
view2 = AgentView("faux/kernel", asyncio.get_running_loop(), on_abort=on_abort)
display(view2)
task2 = asyncio.get_running_loop().create_task(stream_into(view2, ["x "] * 100000, per_tick=5, tick=0.01))
"""


@pytest.fixture(scope="module")
def kernel():
    with Kernel() as k:
        k.ok(SETUP)
        yield k


def _view_model_ids(kernel: Kernel, name: str) -> set[str]:
    """Model ids of every widget under ``name`` (recursively through children)."""
    expr = (f"(lambda walk: sorted(walk(walk, {name})))(lambda f, w: {{w.model_id}}.union(*[f(f, c) "
            "for c in getattr(w, 'children', ()) or ()], *[f(f, c) for c in [getattr(w, 'layout', None)] "
            "if c is not None]))")
    return set(kernel.ev(expr))


def test_streaming_is_coalesced_and_exact_in_a_real_kernel(kernel: Kernel):
    t0 = time.monotonic()
    kernel.ok(STREAM)
    kernel.wait_for("task.done()", timeout=30)
    elapsed = kernel.ev("task.result()")
    ids = _view_model_ids(kernel, "view")
    updates = kernel.comm_updates(ids, since=t0)
    # every state update of every widget of the view, including the final flush
    assert len(updates) <= 25 * elapsed + 6, (len(updates), elapsed)
    assert len(updates) >= 10 * elapsed, "the view should have streamed"
    # the frontend's final state of each text widget is the exact final rendering
    pieces = kernel.ev("[(w.model_id, _render_md(p, False)) for b in view.blocks "
                       "if isinstance(b, MarkdownBlock) for w, p in zip(b.chunks.widgets, b.chunks.pieces)]")
    assert kernel.ev("''.join(p for b in view.blocks if isinstance(b, MarkdownBlock) "
                     "for p in b.chunks.pieces) == ''.join(deltas)")
    states = kernel.widget_states()
    assert len(pieces) >= 2
    for model_id, html in pieces:
        assert states[model_id]["value"] == html
    assert kernel.ev("view.status") == "done"


def test_abort_click_reaches_the_loop_at_once(kernel: Kernel):
    kernel.ok(ABORT)
    time.sleep(0.5)
    assert not kernel.ev("task2.done()")  # 100,000 deltas: still streaming
    kernel.click(kernel.ev("view2.abort_button.model_id"))
    # The click is handled while the kernel is idle; the task ends soon after
    # (speed is measured in bench/, not asserted here).
    kernel.wait_for("task2.done()", timeout=10)
    assert kernel.ev("view2.status") == "aborted"
    assert kernel.ev("aborted_on") == ["MainThread"]
    header_id = kernel.ev("view2._header.model_id")
    assert "aborted" in kernel.widget_states()[header_id]["value"]
