"""StaticView (a headless run's view): republished throttled, never once per delta; figures."""

from __future__ import annotations

import asyncio
import re

from pi_notebook.agent.types import AgentToolResult, MessageStartEvent, MessageUpdateEvent
from pi_notebook.agent.types import ToolExecutionEndEvent, ToolExecutionStartEvent, ToolExecutionUpdateEvent
from pi_notebook.ai.types import AssistantMessage, TextContent, TextDeltaEvent, TextStartEvent
from pi_notebook.tools.output.updates import DisplayOutput, PythonCallDetails
from pi_notebook.widgets.static_view import StaticView

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


async def test_a_streamed_answer_is_republished_a_few_times_not_per_delta():
    view = StaticView("faux/m", asyncio.get_running_loop(), interval=30.0)
    published: list[dict] = []
    view.attach(published.append)
    view.add_user_message("the question")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert len(published) == 1 and "the question" in published[0]["text/markdown"]
    partial = AssistantMessage(api="faux", provider="faux", model="m")
    view.handle_event(MessageStartEvent(message=partial))
    partial.content.append(TextContent(text=""))
    view.handle_event(MessageUpdateEvent(message=partial, assistant_message_event=TextStartEvent(
        content_index=0, partial=partial)))
    for _ in range(500):
        view.handle_event(MessageUpdateEvent(message=partial, assistant_message_event=TextDeltaEvent(
            content_index=0, delta="word ", partial=partial)))
        await asyncio.sleep(0)
    assert len(published) == 1  # 500 deltas inside one interval: not one publish each
    view.flush()  # what an interrupted cell does before it ends
    assert len(published) == 2 and len(re.findall(r"(?<![-\w])word(?![-\w])", published[-1]["text/markdown"])) == 500  # not the CSS's break-word
    assert "widget" not in str(published[-1].keys())
    view.finish("done")
    view.close()


async def test_figures_are_offered_as_image_bundles_in_order():
    view = StaticView("faux/m", None)
    view.handle_event(ToolExecutionStartEvent(tool_call_id="c1", tool_name="python", args={"code": "plot()"}))
    view.handle_event(ToolExecutionUpdateEvent(
        tool_call_id="c1", tool_name="python", args={"code": "plot()"},
        partial_result=AgentToolResult(content=[], details=DisplayOutput(data={"image/png": PNG, "text/plain": "<Figure>"}))))
    view.handle_event(ToolExecutionUpdateEvent(
        tool_call_id="c1", tool_name="python", args={"code": "plot()"},
        partial_result=AgentToolResult(content=[], details=DisplayOutput(data={"image/png": "not base64!"}))))
    view.handle_event(ToolExecutionEndEvent(tool_call_id="c1", tool_name="python", is_error=False,
                                            result=AgentToolResult(content=[], details=PythonCallDetails(code="plot()"))))
    bundles = view.figure_bundles()
    assert [b["image/png"] for b in bundles] == [PNG]  # the invalid payload is not written
    assert "figure 1" in bundles[0]["text/plain"]
