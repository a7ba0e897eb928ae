"""Context compaction: stays inside the window, keeps tool calls paired, reports."""

from __future__ import annotations

import copy

import pytest

from pi_notebook.ai.providers.faux import (
    faux_assistant_message, faux_text, faux_tool_call, register_faux_provider,
)
from pi_notebook.ai.stream import complete, stream
from pi_notebook.ai.types import (
    AssistantMessage, Context, TextContent, ToolCall, ToolResultMessage, UserMessage,
)
from pi_notebook.session import estimate_tokens, make_context_compactor


def _call(i: int, text: str = "") -> AssistantMessage:
    content = [TextContent(text=text)] if text else []
    content.append(ToolCall(id=f"c{i}", name="python", arguments={"code": f"step({i})"}))
    return AssistantMessage(content=content, api="faux", provider="faux", model="faux-1",
                            stop_reason="toolUse", timestamp=1000 + 3 * i)


def _result(i: int, size: int) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=f"c{i}", tool_name="python",
                             content=[TextContent(text=f"out{i}:" + "x" * size)],
                             timestamp=1001 + 3 * i)


def _history(turns: int, calls_per_turn: int, size: int) -> list:
    messages: list = []
    i = 0
    for t in range(turns):
        messages.append(UserMessage(content=f"question {t} " + "q" * 40, timestamp=10 * t))
        for _ in range(calls_per_turn):
            messages.append(_call(i, "working on it"))
            messages.append(_result(i, size))
            i += 1
        messages.append(AssistantMessage(content=[TextContent(text=f"answer {t}")], api="faux",
                                         provider="faux", model="faux-1", stop_reason="stop"))
    return messages


def assert_paired(messages: list) -> None:
    """Every tool call has its result after it and every result its call before it."""
    open_calls: dict[str, int] = {}
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            for b in m.content:
                if isinstance(b, ToolCall):
                    open_calls[b.id] = i
        elif isinstance(m, ToolResultMessage):
            assert m.tool_call_id in open_calls, f"result {m.tool_call_id} has no call before it"
            del open_calls[m.tool_call_id]
    assert not open_calls, f"calls without results: {sorted(open_calls)}"


async def test_small_history_is_returned_unchanged():
    compact = make_context_compactor(10_000)
    messages = _history(1, 2, 100)
    assert await compact(messages, None) is messages


async def test_drops_oldest_tool_outputs_first_without_mutating_input():
    infos = []
    # low_water=1: shrink only to the budget, so that the outputs alone are enough
    compact = make_context_compactor(3000, reserve_tokens=500, on_compaction=infos.append,
                                     low_water=1.0)
    messages = _history(2, 3, 1600)  # 6 outputs of ~400 tokens each
    snapshot = copy.deepcopy(messages)
    result = await compact(messages, None)
    assert messages == snapshot  # neither the list nor any message was changed
    assert estimate_tokens(result) <= 2500
    assert_paired(result)
    outputs = [m.content[0].text for m in result if isinstance(m, ToolResultMessage)]
    dropped = [o.startswith("[output dropped to fit the context window: ") for o in outputs]
    assert dropped[0] and not dropped[-1]
    assert dropped == sorted(dropped, reverse=True)  # a prefix of the oldest ones
    assert "1605 chars]" in outputs[0]
    assert len(infos) == 1 and infos[0].dropped_outputs == sum(dropped)
    assert infos[0].summarized_messages == 0 and infos[0].fits
    assert "dropped" in infos[0].describe()


async def test_summarizes_oldest_turns_when_dropping_outputs_is_not_enough():
    seen = []

    async def summarize(messages):
        seen.append(list(messages))
        return f"summary of {len(messages)} messages"

    infos = []
    compact = make_context_compactor(1200, summarize=summarize, reserve_tokens=200,
                                     on_compaction=infos.append)
    # many small turns: outputs are tiny, the prose itself is what overflows
    messages = []
    for t in range(40):
        messages.append(UserMessage(content=f"question {t} " + "q" * 200, timestamp=t))
        messages.append(AssistantMessage(content=[TextContent(text="a" * 200)], api="faux",
                                         provider="faux", model="faux-1", timestamp=t))
    last_user = messages[-2]
    result = await compact(messages, None)
    assert estimate_tokens(result) <= 1000
    assert result[0].content[0].text.startswith("[Summary of ")
    assert "summary of" in result[0].content[0].text
    assert last_user in result and result[-2] is last_user
    assert len(seen) == 1 and infos[-1].summarized_messages == len(seen[0])
    # the same history again: the cached summary is reused, the model is not asked again
    again = await compact(messages, None)
    assert again[0] == result[0] and len(seen) == 1
    # a longer history that still fits below the budget: it is appended to the compacted one,
    # which is kept as it was (the model is not asked again)
    longer = [*messages, AssistantMessage(content=[TextContent(text="b" * 40)], api="faux",
                                          provider="faux", model="faux-1", timestamp=98),
              UserMessage(content="one more " + "q" * 40, timestamp=99)]
    appended = await compact(longer, None)
    assert appended[: len(result)] == result and appended[len(result):] == longer[len(messages):]
    assert len(seen) == 1
    # much longer: compacted again, the earlier summary standing in for what it covered
    for t in range(100, 120):
        longer.append(AssistantMessage(content=[TextContent(text="a" * 200)], api="faux",
                                       provider="faux", model="faux-1", timestamp=t))
        longer.append(UserMessage(content=f"question {t} " + "q" * 200, timestamp=t))
    await compact(longer, None)
    assert len(seen) == 2
    assert seen[1][0].content[0].text.endswith(f"summary of {len(seen[0])} messages")
    assert len(seen[1]) < len(seen[0])


async def test_summary_never_splits_a_tool_call_from_its_result():
    compact = make_context_compactor(1500, reserve_tokens=300)
    messages = []
    for i in range(30):
        messages.append(UserMessage(content="u" * 120, timestamp=i))
        # one assistant message with two parallel calls, then both results
        messages.append(AssistantMessage(
            content=[ToolCall(id=f"a{i}", name="python", arguments={"code": "1" * 80}),
                     ToolCall(id=f"b{i}", name="python", arguments={"code": "2" * 80})],
            api="faux", provider="faux", model="faux-1", stop_reason="toolUse"))
        messages.append(ToolResultMessage(tool_call_id=f"a{i}", tool_name="python",
                                          content=[TextContent(text="r" * 30)]))
        messages.append(ToolResultMessage(tool_call_id=f"b{i}", tool_name="python",
                                          content=[TextContent(text="r" * 30)]))
    result = await compact(messages, None)
    assert estimate_tokens(result) <= 1200
    assert_paired(result)
    assert isinstance(result[0], UserMessage) and "[Summary of" in result[0].content[0].text
    assert not isinstance(result[1], ToolResultMessage)


async def test_failing_summarizer_falls_back_to_an_extract():
    async def broken(messages):
        raise RuntimeError("model unavailable")

    compact = make_context_compactor(800, summarize=broken, reserve_tokens=100)
    messages = []
    for t in range(30):
        messages.append(UserMessage(content=f"topic{t} " + "q" * 150, timestamp=t))
    result = await compact(messages, None)
    text = result[0].content[0].text
    assert "model summary failed: RuntimeError" in text
    # an extract too long for its cap keeps its newest lines
    assert "- user: topic28 " in text and "- user: topic0 " not in text
    assert "[the start of this summary was cut]" in text
    assert estimate_tokens(result) <= 700


async def test_a_prompt_larger_than_the_window_is_cut_with_a_marker():
    infos = []
    compact = make_context_compactor(400, reserve_tokens=100, on_compaction=infos.append)
    messages = [UserMessage(content="head " + "z" * 4000 + " tail")]
    result = await compact(messages, None)
    assert messages[0].content.endswith(" tail") and len(messages[0].content) == 4010  # untouched
    text = result[0].content
    assert text.startswith("head ") and text.endswith(" tail")
    assert "chars cut to fit the context window ...]" in text
    assert estimate_tokens(result) + 4 <= 300
    assert infos and infos[0].fits and infos[0].cut_messages == 1
    assert "cut 1 oversize message" in infos[0].describe()


async def test_what_cannot_fit_at_all_is_a_clear_error_and_nothing_is_returned():
    from pi_notebook.session.compaction import ContextBudgetError

    compact = make_context_compactor(400, reserve_tokens=100)
    # one assistant message with 100 parallel calls: one segment, nothing left to cut
    calls = [ToolCall(id=f"p{i}", name="python", arguments={"code": "1"}) for i in range(100)]
    messages: list = [UserMessage(content="go"),
                      AssistantMessage(content=calls, api="faux", provider="faux", model="faux-1",
                                       stop_reason="toolUse")]
    messages += [ToolResultMessage(tool_call_id=f"p{i}", tool_name="python",
                                   content=[TextContent(text="ok")]) for i in range(100)]
    with pytest.raises(ContextBudgetError, match=r"does not fit the model's context window.*"
                                                   r"nothing was sent"):
        await compact(messages, None)
    # the system prompt and tools alone overflow: the same error, before any work
    crowded = make_context_compactor(400, reserve_tokens=100, overhead_tokens=lambda: 500)
    with pytest.raises(ContextBudgetError, match=r"system prompt and tools \(~500 tokens\)"):
        await crowded([UserMessage(content="hi")], None)


async def test_bad_configuration_is_a_clear_error():
    with pytest.raises(ValueError, match="positive"):
        make_context_compactor(0)
    with pytest.raises(ValueError, match="leaves no room"):
        make_context_compactor(1000, reserve_tokens=1000)


async def test_every_request_of_a_scripted_agent_run_stays_inside_the_window():
    """A real Agent on the faux model whose tool outputs far exceed a small window."""
    from pi_notebook.agent import Agent, AgentTool, AgentToolResult

    window = 3000
    faux = register_faux_provider(models=[{"id": "tiny", "context_window": window}])
    try:
        model = faux.get_model()
        requests: list[Context] = []

        def scripted(i):
            def step(context, options, state, model):
                requests.append(context)
                if i < 12:
                    return faux_assistant_message(
                        [faux_text(f"step {i}"), faux_tool_call("dump", {"n": i}, id=f"t{i}")],
                        stop_reason="toolUse")
                return faux_assistant_message("all done")
            return step

        faux.set_responses([scripted(i) for i in range(13)])

        async def dump(tool_call_id, params, signal, on_update):
            return AgentToolResult(content=[TextContent(text=f"row {params['n']} " * 400)])

        tool = AgentTool(name="dump", description="print a big table",
                         parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
                         execute=dump)
        infos = []
        # stream_fn given explicitly: the faux provider needs no API key resolution
        agent = Agent(initial_state={"model": model, "tools": [tool]}, stream_fn=stream,
                      transform_context=make_context_compactor(window, reserve_tokens=600,
                                                               on_compaction=infos.append))
        await agent.prompt("dump twelve tables")
        assert agent.state.messages[-1].content[0].text == "all done"
        assert len(requests) == 13
        for context in requests:
            assert_paired(context.messages)
        # the faux provider's own prompt estimate: what the model would be charged
        for message, _context in zip(
            [m for m in agent.state.messages if isinstance(m, AssistantMessage)], requests,
            strict=True,
        ):
            assert message.usage.input <= window
        assert infos and all(i.fits for i in infos)
        # the agent's own transcript still holds every full output
        full = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
        assert len(full) == 12 and all("[output dropped" not in m.content[0].text for m in full)
    finally:
        faux.unregister()


async def test_model_summarizer_asks_the_model_and_falls_back_on_error():
    from pi_notebook.session import make_model_summarizer

    faux = register_faux_provider()
    try:
        asked = []

        def reply(context, options, state, model):
            asked.append(context)
            return faux_assistant_message("- x holds the data")

        faux.set_responses([reply])
        summarize = make_model_summarizer(faux.get_model(), complete_fn=complete)
        history = _history(1, 1, 50)
        assert await summarize(history) == "- x holds the data"
        prompt = asked[0].messages[0].content
        assert "step(0)" in prompt and "[python output]" in prompt and "question 0" in prompt
        assert "Jupyter kernel" in asked[0].system_prompt
        # queue empty: the request ends in an error, the compactor uses the extract
        compact = make_context_compactor(800, summarize=summarize, reserve_tokens=100)
        messages = [UserMessage(content=f"topic{t} " + "q" * 150, timestamp=t) for t in range(30)]
        result = await compact(messages, None)
        assert "model summary failed: RuntimeError" in result[0].content[0].text
    finally:
        faux.unregister()



async def test_history_without_a_user_message_still_fits_with_a_note_in_front():
    compact = make_context_compactor(2000, reserve_tokens=400)
    messages: list = []
    for i in range(60):
        messages.append(_call(i, "thinking aloud " * 20))
        messages.append(_result(i, 40))
    result = await compact(messages, None)
    assert estimate_tokens(result) + 8 * len(result) <= 1600
    assert_paired(result)
    assert isinstance(result[0], UserMessage)
    assert "earlier messages of this conversation were dropped" in result[0].content[0].text
    assert result[-1].tool_call_id == "c59"


async def test_a_long_conversation_on_a_small_window_always_leaves_the_whole_answer():
    """Fifteen requests on an 8k text-only model that answers 2,048 tokens, half of them with a
    figure, the provider counting 30 % more tokens than chars/4: whatever the compactor sends,
    the max-tokens clamp gives the whole answer (a fixed 4096 margin and images counted for a
    text-only model gave the fourth answer 1 token)."""
    from pi_notebook.ai.options import clamp_max_tokens_to_context, estimate_context_tokens
    from pi_notebook.ai.types import ImageContent, Model, Usage
    from pi_notebook.session.compaction import context_overhead_tokens

    model = Model(id="m", api="openai-completions", provider="p", context_window=8192, max_tokens=2048,
                  input=["text"])
    system_prompt = "You are an analyst. " * 60
    overhead = context_overhead_tokens(system_prompt, [])
    compact = make_context_compactor(8192, max_output_tokens=2048, overhead_tokens=overhead, images=False)
    history: list = []
    clock = 0
    for request in range(15):
        clock += 10
        history.append(UserMessage(content=f"question {request}: " + "what about region y? " * 30,
                                   timestamp=clock))
        sent = await compact(list(history))
        context = Context(system_prompt=system_prompt, messages=sent)
        assert clamp_max_tokens_to_context(model, context, 2048) == 2048, request
        # the reply, with the provider's real count of what was sent (30 % over the estimate)
        real_input = int(estimate_context_tokens(context, images=False).tokens * 1.3)
        clock += 1
        history.append(AssistantMessage(
            content=[ToolCall(id=f"t{request}", name="python", arguments={"code": "df.plot()\n" * 40})],
            api="openai-completions", provider="p", model="m", stop_reason="toolUse", timestamp=clock,
            usage=Usage(input=real_input, output=300, total_tokens=real_input + 300)))
        clock += 1
        content = [TextContent(text="out: " + "1.5 " * 400)]
        if request % 2:
            content.append(ImageContent(data="iVBORw0KGgo=", mime_type="image/png"))
        history.append(ToolResultMessage(tool_call_id=f"t{request}", tool_name="python", content=content,
                                         timestamp=clock))
        clock += 1
        history.append(AssistantMessage(content=[TextContent(text="The answer is 42. " * 20)],
                                        api="openai-completions", provider="p", model="m",
                                        stop_reason="stop", timestamp=clock,
                                        usage=Usage(input=real_input + 900, output=120,
                                                    total_tokens=real_input + 1020)))
