"""A conversation recorded from a real Agent on the faux model, restored and continued."""

from __future__ import annotations

from pi_notebook.agent import Agent, AgentTool, AgentToolResult
from pi_notebook.ai.providers.faux import (
    faux_assistant_message, faux_text, faux_thinking, faux_tool_call, register_faux_provider,
)
from pi_notebook.ai.stream import stream
from pi_notebook.ai.types import TextContent
from pi_notebook.session import SessionWriter, load_session


def _tool() -> AgentTool:
    async def execute(tool_call_id, params, signal, on_update):
        return AgentToolResult(content=[TextContent(text=f"ran: {params['code']}")],
                               details={"code": params["code"]})

    return AgentTool(name="python", description="run code", execute=execute,
                     parameters={"type": "object", "properties": {"code": {"type": "string"}},
                                 "required": ["code"]})


def _script(faux, seen):
    def record(reply):
        def step(context, options, state, model):
            seen.append([m.model_dump() for m in context.messages])
            return reply
        return step

    faux.set_responses([
        record(faux_assistant_message(
            [faux_thinking("plan"), faux_text("computing"),
             faux_tool_call("python", {"code": "x = 1"}, id="call-1")], stop_reason="toolUse")),
        record(faux_assistant_message("x is 1")),
    ])


async def test_recorded_session_restores_and_continues_with_the_same_context(tmp_path):
    faux = register_faux_provider()
    try:
        model = faux.get_model()
        path = tmp_path / "s.jsonl"
        writer = SessionWriter(path, model=f"{model.provider}/{model.id}", name="nb")
        seen: list = []
        _script(faux, seen)
        agent = Agent(initial_state={"model": model, "tools": [_tool()],
                                     "system_prompt": "be brief"}, stream_fn=stream)
        unsubscribe = agent.subscribe(writer.on_agent_event)
        await agent.prompt("set x")
        unsubscribe()
        writer.close()
        transcript = list(agent.state.messages)
        assert [getattr(m, "role", None) for m in transcript] == [
            "user", "assistant", "toolResult", "assistant"]

        # "restart": a new agent from the file only
        loaded = load_session(path)
        assert loaded.warnings == []
        assert loaded.header.model == "faux/faux-1" and loaded.header.name == "nb"
        assert loaded.messages == transcript  # field by field
        restored = Agent(initial_state={"model": model, "tools": [_tool()],
                                        "system_prompt": "be brief",
                                        "messages": loaded.messages}, stream_fn=stream)

        # both continue with the same prompt; the model must see the same context
        contexts = []
        for continuing in (agent, restored):
            def capture(context, options, state, model):
                contexts.append([m.model_dump(exclude={"timestamp"}) for m in context.messages])
                return faux_assistant_message("ok")
            faux.set_responses([capture])
            await continuing.prompt("and now?")
        assert contexts[0] == contexts[1]
        assert len(contexts[0]) == 5
    finally:
        faux.unregister()
