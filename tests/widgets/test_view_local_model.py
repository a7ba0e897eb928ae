"""The view while a small local model works: how far the prompt was read, and the code of a
python call while the model writes it."""

from __future__ import annotations

import asyncio

from pi_notebook.agent.types import AgentStartEvent, MessageStartEvent, MessageUpdateEvent
from pi_notebook.ai.types import AssistantMessage, DoneEvent, PromptProgress, StartEvent, TextDeltaEvent
from pi_notebook.agent import AgentTool
from pi_notebook.local.tool_calls import TextToolCallStream
from pi_notebook.widgets._util import reading_prompt_text
from pi_notebook.widgets.transcript import Transcript

from widget_helpers import AssistantStream, CommLog

PYTHON = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}


def test_the_pill_says_how_far_the_prompt_was_read_until_the_answer_starts(view):
    t: Transcript = view.transcript
    view.handle_event(AgentStartEvent())
    assert t.pill()[0] == "thinking"
    view.set_status("thinking", reading_prompt_text(PromptProgress(5400, 1200, 2600, 900)))
    assert t.pill() == ("reading the prompt · 1,400 of 4,200 tokens (1,200 cached)", "thinking", "")
    view.set_status("thinking", reading_prompt_text(PromptProgress(5400, 0, 5400, 2900)))
    assert t.pill()[0] == "reading the prompt · 5,400 of 5,400 tokens"
    stream = AssistantStream(view).start()
    stream.text_delta(stream.text_start(), "March")
    assert t.pill()[0] == "writing"
    # a progress report that arrives once the answer is being written changes nothing
    view.set_status("thinking", reading_prompt_text(PromptProgress(5400, 0, 5400, 3000)))
    assert t.pill()[0] == "writing"


async def test_a_small_models_python_call_shows_its_code_while_it_is_written(view, comms: CommLog):
    from test_view_tools import _card_html

    async def noop(tool_call_id, params, signal, on_update):
        return None

    reply = ('{"name": "python", "arguments": {"code": "import pandas as pd\\nmonthly = '
             'df.groupby(\'month\')[\'revenue\'].sum()\\nmonthly.plot()"}}')
    pieces = [reply[i:i + 7] for i in range(0, len(reply), 7)]
    partial = AssistantMessage(content=[], stop_reason="pending")

    async def inner():
        yield StartEvent(partial=partial)
        for piece in pieces:
            yield TextDeltaEvent(content_index=0, delta=piece, partial=partial)
        yield DoneEvent(reason="stop", message=partial.model_copy(update={"stop_reason": "stop"}))

    view.handle_event(AgentStartEvent())
    tools = [AgentTool(name="python", label="Python", description="run code", parameters=PYTHON, execute=noop)]
    received = 0
    seen_while_written = ""
    async for event in TextToolCallStream(tools).convert(inner()):
        if event.type == "start":
            view.handle_event(MessageStartEvent(message=event.partial))
            continue
        if event.type == "done":
            break
        view.handle_event(MessageUpdateEvent(message=event.partial, assistant_message_event=event))
        received += len(getattr(event, "delta", "") or "")
        if received >= reply.index("sum()") and not seen_while_written:
            await asyncio.sleep(0.08)  # the view's coalesced flush
            card = next(iter(view.transcript.tools.values()), None)
            assert card is not None and card.status == "preparing"
            seen_while_written = _card_html(comms, view.tool_card(card.tool_call_id))
    assert "groupby" in seen_while_written and "preparing" in seen_while_written
    assert "monthly" in seen_while_written
