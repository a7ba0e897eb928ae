"""The typed message seam: ``AgentMessage`` is pi's messages plus a typed custom
extension point; event payloads are typed yet hold exactly the objects they were given."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from agent_helpers import MockStream, assistant, model, user

from pi_notebook.agent import AgentContext, AgentLoopConfig, agent_loop
from pi_notebook.agent.types import (
    AgentEndEvent,
    AgentToolResult,
    CustomAgentMessage,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    llm_message,
    message_role,
)
from pi_notebook.ai.types import AssistantMessage, TextDeltaEvent, UserMessage
from pi_notebook.widgets.items import OtherItem
from pi_notebook.widgets.text import render_event_text
from pi_notebook.widgets.transcript import Transcript


@dataclass
class Note:
    """An app's own message type: pi's CustomAgentMessages, in Python."""

    text: str
    role: str = "note"
    content: str = ""
    timestamp: int = 1


def test_a_custom_object_with_a_role_is_a_custom_agent_message():
    assert isinstance(Note("x"), CustomAgentMessage)
    assert isinstance(SimpleNamespace(role="hookMessage"), CustomAgentMessage)
    assert not isinstance(object(), CustomAgentMessage)
    assert message_role(Note("x")) == "note" and message_role({"role": "note"}) == "note"
    assert message_role(object()) is None and message_role({"role": 3}) is None


def test_event_payloads_are_the_objects_given_never_copies():
    note, as_dict, prompt = Note("fyi"), {"role": "note", "text": "fyi"}, user("hi")
    messages: list[Any] = [prompt, note, as_dict]
    for message in messages:
        assert MessageStartEvent(message=message).message is message
        assert MessageEndEvent(message=message).message is message
    assert AgentEndEvent(messages=messages).messages is messages
    answer, results = assistant("ok"), []
    turn_end = TurnEndEvent(message=answer, tool_results=results)
    assert turn_end.message is answer and turn_end.tool_results is results
    delta = TextDeltaEvent(content_index=0, delta="o", partial=answer)
    update = MessageUpdateEvent(message=answer, assistant_message_event=delta)
    assert update.message is answer and update.assistant_message_event is delta
    result, args = AgentToolResult(details={"k": 1}), {"code": "1"}
    assert ToolExecutionEndEvent(tool_call_id="c", tool_name="t", result=result, is_error=False).result is result
    partial = ToolExecutionUpdateEvent(tool_call_id="c", tool_name="t", args=args, partial_result=result)
    assert partial.partial_result is result and partial.args is args


def test_llm_message_gives_pi_models_for_the_llm_roles_and_none_for_custom_ones():
    prompt = user("hi")
    assert llm_message(prompt) is prompt
    from_dict = llm_message({"role": "user", "content": "hi", "timestamp": 5})
    assert isinstance(from_dict, UserMessage) and from_dict.content == "hi" and from_dict.timestamp == 5
    from_object = llm_message(SimpleNamespace(role="assistant", content=[], stop_reason="error",
                                              error_message="boom"))  # an assistant-shaped object
    assert isinstance(from_object, AssistantMessage) and from_object.error_message == "boom"
    assert llm_message(Note("x")) is None and llm_message({"role": "note"}) is None
    assert llm_message({"role": "assistant", "stopReason": "not a reason"}) is None  # invalid: custom
    assistant_dict = llm_message({"role": "assistant", "content": [{"type": "text", "text": "hey"}],
                                  "stopReason": "aborted"})
    assert isinstance(assistant_dict, AssistantMessage) and assistant_dict.stop_reason == "aborted"


async def test_a_custom_message_object_flows_through_the_loop_to_convert_to_llm_as_is():
    note = Note("from the app", content="from the app")
    seen: list[list[Any]] = []

    def convert(messages: list[Any]) -> list[Any]:
        seen.append(list(messages))
        return [UserMessage(content=m.text) if isinstance(m, Note) else m for m in messages]

    stream = MockStream(assistant("ok"))
    prompt = user("hello")
    s = agent_loop([note, prompt], AgentContext(), AgentLoopConfig(model=model(), convert_to_llm=convert),
                   stream_fn=stream)
    events = [e async for e in s]
    result = await s.result()
    assert seen[0][0] is note and result[0] is note
    starts = [e.message for e in events if isinstance(e, MessageStartEvent)]
    assert starts[0] is note
    assert isinstance(events[-1], AgentEndEvent) and events[-1].messages is result


def test_the_views_show_a_custom_message_by_its_role_object_or_mapping():
    for message in (Note("x", content="a note from the app"),
                    {"role": "note", "content": [{"type": "text", "text": "a note from the app"}]}):
        t = Transcript("faux/test")
        t.apply(MessageStartEvent(message=message))
        others = [i for i in t.items if isinstance(i, OtherItem)]
        assert [(o.role, o.text) for o in others] == [("note", "a note from the app")]
        assert render_event_text(MessageStartEvent(message=message)) == "\n[note] a note from the app\n"
    t = Transcript("faux/test")
    t.apply(MessageStartEvent(message={"role": "user", "content": "typed at the edge", "timestamp": 1}))
    assert [getattr(i, "text", None) for i in t.items] == ["typed at the edge"]
