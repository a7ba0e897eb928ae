from __future__ import annotations

from typing import Any

import pytest

from pi_notebook.agent import Agent
from pi_notebook.ai.providers.faux import faux_assistant_message, register_faux_provider
from pi_notebook.ai.stream import stream_simple
from pi_notebook.ai.types import TextContent, UserMessage
from pi_notebook.session.prompt_notes import PromptNotes


def texts(message: Any) -> list[str]:
    content = message["content"] if isinstance(message, dict) else message.content
    if isinstance(content, str):
        return [content]
    return [b["text"] if isinstance(b, dict) else b.text for b in content]


async def test_notes_reach_the_model_but_not_the_transcript() -> None:
    notes = PromptNotes()
    faux = register_faux_provider()
    requests: list[list[list[str]]] = []

    def answer(context: Any, options: Any, state: Any, model: Any) -> Any:
        requests.append([texts(m) for m in context.messages if m.role == "user"])
        return faux_assistant_message("ok")

    async def transform(messages: list[Any], signal: Any = None) -> list[Any]:
        return notes.apply(messages)

    try:
        faux.set_responses([answer, answer])
        agent = Agent(initial_state={"model": faux.get_model(), "system_prompt": "t"},
                      stream_fn=stream_simple, transform_context=transform)
        first = UserMessage(content=[TextContent(text="plot revenue")])
        notes.attach(first, "[ctx] df: DataFrame 3 x 2")
        await agent.prompt(first)
        second = UserMessage(content="now by region")
        notes.attach(second, "[ctx] df: DataFrame 3 x 3")
        await agent.prompt(second)
    finally:
        faux.unregister()
    assert requests[0] == [["[ctx] df: DataFrame 3 x 2", "plot revenue"]]
    # the first prompt keeps its own note: the request prefix is stable from run to run
    assert requests[1] == [["[ctx] df: DataFrame 3 x 2", "plot revenue"],
                           ["[ctx] df: DataFrame 3 x 3", "now by region"]]
    stored = [texts(m) for m in agent.state.messages if m.role == "user"]
    assert stored == [["plot revenue"], ["now by region"]]


def test_dict_messages_copies_and_limits() -> None:
    notes = PromptNotes(max_notes=2)
    stored = {"role": "user", "content": "q1", "timestamp": 1}
    notes.attach(stored, "n1")
    applied = notes.apply([stored, {"role": "assistant", "content": []}])
    assert applied[0]["content"] == [{"type": "text", "text": "n1"}, {"type": "text", "text": "q1"}]
    assert stored["content"] == "q1"  # the original is untouched
    notes.attach({"role": "user", "content": "q2", "timestamp": 2}, "n2")
    notes.attach({"role": "user", "content": "q3", "timestamp": 3}, "n3")
    assert notes.note_for(stored) is None  # the oldest note went
    notes.attach({"role": "user", "content": "q4", "timestamp": 4}, None)  # nothing to attach
    with pytest.raises(ValueError, match="needs a user message"):
        notes.attach({"role": "assistant", "content": []}, "x")
