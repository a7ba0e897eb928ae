"""Loading a huge session never sends a request larger than the model's window.

A session file is written, loaded as ``%agent load`` / ``--resume`` do, put into a real
Agent on the faux provider, and continued. The faux provider records what it receives:
the context (its own prompt estimate, system prompt and tools included) and the
``max_tokens`` of the request; both are checked against the model's window.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.agents import magics_agent

from pi_notebook.agent import Agent, AgentTool, AgentToolResult
from pi_notebook.ai.options import build_base_options
from pi_notebook.ai.providers.faux import (
    faux_assistant_message,
    faux_tool_call,
    register_faux_provider,
    serialize_context,
)
from pi_notebook.ai.stream import complete, stream_simple
from pi_notebook.ai.types import (
    AssistantMessage,
    Context,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pi_notebook.session import load_session, write_session
from pi_notebook.session.compaction import (
    context_overhead_tokens,
    make_context_compactor,
    make_model_summarizer,
)

WINDOW = 32_768
MAX_OUTPUT = 4_096
SYSTEM_PROMPT = "You are a data analysis assistant in a Jupyter kernel. " * 20


def _faux_tokens(context: Context) -> int:
    """The faux provider's prompt estimate (UTF-16 units / 4), as in its usage."""
    text = serialize_context(context)
    return -(-len(text.encode("utf-16-le")) // 2 // 4)


def _python_tool() -> AgentTool:
    async def execute(tool_call_id, params, signal, on_update):
        return AgentToolResult(content=[TextContent(text="ran " + params.get("code", ""))])

    return AgentTool(name="python", description="Run Python code in the kernel. " * 10,
                     parameters={"type": "object", "properties": {"code": {"type": "string"}},
                                 "required": ["code"]}, execute=execute)


def _assert_paired(messages: list) -> None:
    open_calls: set[str] = set()
    for m in messages:
        if isinstance(m, AssistantMessage):
            open_calls |= {b.id for b in m.content if isinstance(b, ToolCall)}
        elif isinstance(m, ToolResultMessage):
            assert m.tool_call_id in open_calls, f"result {m.tool_call_id} without its call"
            open_calls.discard(m.tool_call_id)
    assert not open_calls, f"calls without results: {sorted(open_calls)[:5]}"


def _big_history(turns: int, output_chars: int) -> list:
    """``turns`` x (question, call, output, answer): 4 messages per turn."""
    messages: list = []
    for t in range(turns):
        messages.append(UserMessage(content=f"question {t}: describe df{t}", timestamp=4 * t))
        messages.append(AssistantMessage(
            content=[TextContent(text=f"looking at df{t}"),
                     ToolCall(id=f"call_{t:04d}_abcdefghijklmnop", name="python",
                              arguments={"code": f"df{t}.describe()"})],
            api="faux", provider="faux", model="faux-1", stop_reason="toolUse",
            # what the original run reported: a large prompt
            usage=Usage(input=30_000, output=50, total_tokens=30_050), timestamp=4 * t + 1))
        messages.append(ToolResultMessage(
            tool_call_id=f"call_{t:04d}_abcdefghijklmnop", tool_name="python",
            content=[TextContent(text=f"df{t} stats " + "1.2345 " * (output_chars // 7))],
            timestamp=4 * t + 2))
        messages.append(AssistantMessage(
            content=[TextContent(text=f"df{t} has {t} rows")], api="faux", provider="faux",
            model="faux-1", stop_reason="stop", usage=Usage(input=30_100, output=20),
            timestamp=4 * t + 3))
    return messages


class _Recorder:
    """Faux steps that record every request (context and options) the model gets."""

    def __init__(self) -> None:
        self.requests: list[tuple[Context, dict[str, Any]]] = []

    def reply(self, message: AssistantMessage) -> Any:
        def step(context, options, state, model):
            self.requests.append((context, dict(options)))
            return message
        return step


@pytest.fixture
def faux():
    handle = register_faux_provider(models=[{"id": "window-32k", "context_window": WINDOW,
                                             "max_tokens": MAX_OUTPUT}])
    yield handle
    handle.unregister()


def _agent(model, messages: list, summarize=None, infos=None) -> Agent:
    tools = [_python_tool()]
    agent = Agent(initial_state={"model": model, "tools": tools, "system_prompt": SYSTEM_PROMPT},
                  stream_fn=stream_simple)
    agent.transform_context = make_context_compactor(
        model.context_window, summarize, max_output_tokens=model.max_tokens,
        overhead_tokens=lambda: context_overhead_tokens(agent.state.system_prompt,
                                                        agent.state.tools),
        on_compaction=(infos.append if infos is not None else None))
    agent.state.messages = list(messages)
    return agent


def _assert_fits(context: Context, options: dict[str, Any], model) -> None:
    prompt = _faux_tokens(context)
    # the max_tokens every wire adapter sends (the faux one passes options through):
    # the answer keeps its full room, because compaction budgeted by the max output
    max_tokens = build_base_options(model, context, options)["max_tokens"]
    assert max_tokens == MAX_OUTPUT
    assert prompt + max_tokens <= WINDOW, (prompt, max_tokens)
    _assert_paired(list(context.messages))


async def _load(tmp_path, messages: list) -> list:
    path = tmp_path / "huge.jsonl"
    write_session(path, messages, model="faux/window-32k")
    loaded = load_session(path)
    assert loaded.warnings == [] and len(loaded.messages) == len(messages)
    return loaded.messages


async def test_2000_messages_with_5mb_of_outputs_fit_on_the_first_request(tmp_path, faux):
    history = _big_history(500, 10_000)  # 2000 messages, ~5 MB of tool output
    assert sum(len(m.content[0].text) for m in history if isinstance(m, ToolResultMessage)) > 5e6
    messages = await _load(tmp_path, history)
    recorder = _Recorder()
    faux.set_responses([
        recorder.reply(faux_assistant_message(
            [faux_tool_call("python", {"code": "df.head()"}, id="new-call")], stop_reason="toolUse")),
        recorder.reply(faux_assistant_message("continued")),
    ])
    infos: list = []
    agent = _agent(faux.get_model(), messages, infos=infos)
    await agent.prompt("now compare df0 and df499")
    assert agent.state.messages[-1].content[0].text == "continued"
    assert len(recorder.requests) == 2
    for context, options in recorder.requests:
        _assert_fits(context, options, faux.get_model())
        sent = list(context.messages)
        assert sent[-1].role in ("user", "toolResult")
        assert any(isinstance(m, UserMessage) and "compare df0 and df499" in str(m.content)
                   for m in sent)
    # the newest output reached the model whole; the agent's own transcript is untouched
    assert recorder.requests[1][0].messages[-1].content[0].text == "ran df.head()"
    assert len(agent.state.messages) == 2000 + 4
    assert infos and all(i.fits for i in infos) and infos[0].tokens_before > 1_000_000


async def test_one_tool_result_larger_than_the_window_is_cut_with_a_marker(tmp_path, faux):
    huge = "HEAD " + "row of data\n" * 500_000 + " TAIL"  # ~6 MB in one message
    history = [
        UserMessage(content="load the file", timestamp=1),
        AssistantMessage(content=[ToolCall(id="c1", name="python", arguments={"code": "print(f)"})],
                         api="faux", provider="faux", model="faux-1", stop_reason="toolUse",
                         timestamp=2),
        ToolResultMessage(tool_call_id="c1", tool_name="python", content=[TextContent(text=huge)],
                          timestamp=3),
    ]
    messages = await _load(tmp_path, history)
    recorder = _Recorder()
    faux.set_responses([recorder.reply(faux_assistant_message("it is a table"))])
    infos: list = []
    agent = _agent(faux.get_model(), messages, infos=infos)
    await agent.continue_()
    context, options = recorder.requests[0]
    _assert_fits(context, options, faux.get_model())
    sent = context.messages[-1]
    assert isinstance(sent, ToolResultMessage) and sent.tool_call_id == "c1"
    text = sent.content[0].text
    assert text.startswith("HEAD ") and text.endswith(" TAIL")
    assert "chars cut to fit the context window ...]" in text
    assert len(text) > 20_000  # cut, not dropped: the model still sees a useful part
    assert infos[0].cut_messages == 1 and infos[0].dropped_outputs == 0
    assert agent.state.messages[2].content[0].text == huge  # the transcript keeps all of it


async def test_huge_code_argument_and_images_are_cut_keeping_the_pair(tmp_path, faux):
    from pi_notebook.ai.types import ImageContent

    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    history: list = [UserMessage(content=[TextContent(text="look")] +
                                 [ImageContent(data=png, mime_type="image/png")] * 40, timestamp=1),
                     AssistantMessage(content=[ToolCall(id="big", name="python",
                                                        arguments={"code": "x = 1\n" * 200_000})],
                                      api="faux", provider="faux", model="faux-1",
                                      stop_reason="toolUse", timestamp=2),
                     ToolResultMessage(tool_call_id="big", tool_name="python",
                                       content=[TextContent(text="ok")], timestamp=3)]
    messages = await _load(tmp_path, history)
    recorder = _Recorder()
    faux.set_responses([recorder.reply(faux_assistant_message("done"))])
    agent = _agent(faux.get_model(), messages)
    await agent.continue_()
    context, options = recorder.requests[0]
    _assert_fits(context, options, faux.get_model())
    call = context.messages[-2].content[0]
    assert call.id == "big" and "chars cut to fit" in call.arguments["code"]


async def test_summary_request_itself_fits_and_a_failing_summary_still_fits(tmp_path, faux):
    # prose-heavy turns: dropping outputs is not enough, the old turns are summarised
    history: list = []
    for t in range(400):
        history.append(UserMessage(content=f"topic {t} " + "explain this " * 60, timestamp=2 * t))
        history.append(AssistantMessage(content=[TextContent(text="because " * 150)], api="faux",
                                        provider="faux", model="faux-1", stop_reason="stop",
                                        timestamp=2 * t + 1))
    messages = await _load(tmp_path, history)
    model = faux.get_model()
    summaries = _Recorder()

    def summary_step(context, options, state, model):
        summaries.requests.append((context, dict(options)))
        return faux_assistant_message("- the user asked about 400 topics")

    recorder = _Recorder()
    faux.set_responses([summary_step, recorder.reply(faux_assistant_message("next"))])
    summarize = make_model_summarizer(model, complete_fn=complete)
    infos: list = []
    agent = _agent(model, messages, summarize=summarize, infos=infos)
    await agent.prompt("and topic 401?")
    # the summary request was bounded by the window too
    (summary_context, summary_options), = summaries.requests
    assert _faux_tokens(summary_context) + summary_options["max_tokens"] <= WINDOW
    assert "older messages left out" in summary_context.messages[0].content
    context, options = recorder.requests[0]
    _assert_fits(context, options, faux.get_model())
    assert "the user asked about 400 topics" in context.messages[0].content[0].text
    assert infos[0].summarized_messages > 0

    # the summariser fails (no reply queued): the extract stands in, still within the window
    recorder = _Recorder()
    failing = make_model_summarizer(model, complete_fn=complete)
    faux.set_responses([lambda *a: (_ for _ in ()).throw(RuntimeError("model down")),
                        recorder.reply(faux_assistant_message("next"))])
    agent = _agent(model, messages, summarize=failing)
    await agent.prompt("and topic 402?")
    context, options = recorder.requests[0]
    _assert_fits(context, options, faux.get_model())
    assert "model summary failed" in context.messages[0].content[0].text


async def test_a_thousand_calls_in_one_turn_drop_the_oldest_calls_with_a_note(tmp_path, faux):
    history: list = [UserMessage(content="run the whole pipeline", timestamp=0)]
    for i in range(1000):
        history.append(AssistantMessage(
            content=[TextContent(text=f"step {i}: " + "reasoning " * 30),
                     ToolCall(id=f"s{i}", name="python", arguments={"code": f"step_{i}()"})],
            api="faux", provider="faux", model="faux-1", stop_reason="toolUse", timestamp=2 * i + 1))
        history.append(ToolResultMessage(tool_call_id=f"s{i}", tool_name="python",
                                         content=[TextContent(text=f"done {i}")],
                                         timestamp=2 * i + 2))
    messages = await _load(tmp_path, history)
    recorder = _Recorder()
    faux.set_responses([recorder.reply(faux_assistant_message("finished"))])
    infos: list = []
    agent = _agent(faux.get_model(), messages, infos=infos)
    await agent.continue_()
    context, options = recorder.requests[0]
    _assert_fits(context, options, faux.get_model())
    sent = list(context.messages)
    assert isinstance(sent[0], UserMessage)
    assert "earlier messages of this conversation were dropped" in sent[0].content[0].text
    assert sent[0].content[-1].text == "run the whole pipeline"
    assert sent[-1].tool_call_id == "s999"  # the newest steps are the ones kept
    assert infos[0].dropped_messages > 0 and "dropped the" in infos[0].describe()


async def test_a_history_that_cannot_fit_ends_the_run_with_an_error_and_sends_nothing(faux):
    recorder = _Recorder()
    faux.set_responses([recorder.reply(faux_assistant_message("never"))])
    model = faux.get_model()
    agent = _agent(model, [])
    agent.state.system_prompt = "x" * (WINDOW * 4)  # the system prompt alone fills the window
    await agent.prompt("hello")
    assert recorder.requests == []
    last = agent.state.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "error"
    assert "leave no room for the conversation" in (last.error_message or "")


async def test_the_magics_agent_never_sends_more_than_the_window_after_a_load(tmp_path, faux):
    """The agent the magics build (their transform_context), continued after a load."""
    wired, notices = magics_agent(_python_tool)
    agent = wired.agent
    agent.state.model = faux.get_model()
    agent.state.messages = await _load(tmp_path, _big_history(500, 10_000))
    recorder = _Recorder()
    faux.set_responses([recorder.reply(faux_assistant_message("continued"))])
    await agent.prompt("go on")
    context, options = recorder.requests[0]
    prompt = _faux_tokens(context)
    max_tokens = build_base_options(faux.get_model(), context, options)["max_tokens"]
    assert prompt + max_tokens <= WINDOW
    assert max_tokens > 1  # the stale usage of the loaded answers no longer squeezes it
    _assert_paired(list(context.messages))
    assert any(n.startswith("Context compacted: ") for n in notices)
