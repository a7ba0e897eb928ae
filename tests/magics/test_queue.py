"""Queued %%agent cells keep their own options; the prompt queue owns every queued row."""

from __future__ import annotations

import asyncio

from magics_helpers import FakeView, run_cell, runtime, settle

from pi_notebook.agent import AgentTool, AgentToolResult
from pi_notebook.ai.providers.faux import faux_assistant_message, faux_tool_call, register_faux_provider
from pi_notebook.ai.types import TextContent


def _texts(messages):
    out = []
    for m in messages:
        content = m.content if not isinstance(m.content, str) else [TextContent(text=m.content)]
        out.append((m.role, "".join(getattr(b, "text", "") for b in content if b.type == "text")))
    return out


def _gated(text: str, gate: asyncio.Event):
    async def step(context, options, state, model):
        await gate.wait()
        return faux_assistant_message(text)
    return step


def _python_tool(executed: list[str]) -> AgentTool:
    async def execute(tool_call_id, params, signal, on_update):
        executed.append(params["code"])
        return AgentToolResult(content=[TextContent(text="ran")])

    return AgentTool(name="python", description="runs code", execute=execute,
                     parameters={"type": "object", "properties": {"code": {"type": "string"}}})


async def test_queued_cell_with_approve_deny_really_denies(shell, faux):
    rt = runtime()
    executed: list[str] = []
    rt.agent.state.tools = [_python_tool(executed)]
    gate = asyncio.Event()
    faux.set_responses([
        _gated("A answered", gate),
        faux_assistant_message([faux_tool_call("python", {"code": "secret_step()"})], stop_reason="toolUse"),
        faux_assistant_message("B gave up"),
    ])
    await run_cell(shell, "%%agent --approve auto\nA\n")
    await run_cell(shell, "%%agent --approve deny\nB\n")
    gate.set()
    await settle()
    assert executed == []  # B's call was blocked by B's own policy, not run under A's "auto"
    results = [m for m in rt.agent.state.messages if m.role == "toolResult"]
    assert len(results) == 1 and results[0].is_error
    assert "disabled" in _texts(results)[0][1]
    first, second = FakeView.instances[-2:]
    assert first.kinds("policy") == [("policy", "auto")]
    assert second.kinds("policy") == [("policy", "deny")]  # the header shows the policy in force


async def test_queued_cell_with_approve_auto_runs_under_a_denying_run(shell, faux):
    rt = runtime()
    executed: list[str] = []
    rt.agent.state.tools = [_python_tool(executed)]
    gate = asyncio.Event()
    faux.set_responses([
        _gated("A answered", gate),
        faux_assistant_message([faux_tool_call("python", {"code": "allowed()"})], stop_reason="toolUse"),
        faux_assistant_message("B done"),
    ])
    await run_cell(shell, "%%agent --approve deny\nA\n")
    await run_cell(shell, "%%agent --approve auto\nB\n")
    gate.set()
    await settle()
    assert executed == ["allowed()"]


async def test_queued_cell_with_its_own_model_runs_with_that_model(shell, faux):
    other = register_faux_provider(provider="fauxq", models=[{"id": "qx"}])
    try:
        gate = asyncio.Event()
        faux.set_responses([_gated("from the first model", gate)])
        other.set_responses([faux_assistant_message("from qx")])
        await run_cell(shell, "%%agent\nA\n")
        result = await run_cell(shell, "%%agent -m fauxq/qx --thinking high\nB\n")
        assert result.success  # queued, not refused
        gate.set()
        await settle()
        rt = runtime()
        answers = [m for m in rt.agent.state.messages if m.role == "assistant"]
        assert [(m.provider, _texts([m])[0][1]) for m in answers] == [
            ("faux", "from the first model"), ("fauxq", "from qx")]
        assert rt.agent.state.model.id == "qx" and rt.agent.state.thinking_level == "high"
        assert FakeView.instances[-1].model_label == "fauxq/qx"
    finally:
        other.unregister()


async def test_run_all_two_queued_cells_both_run_in_order(shell, faux):
    gate = asyncio.Event()
    faux.set_responses([_gated("a", gate), faux_assistant_message("b"), faux_assistant_message("c")])
    await run_cell(shell, "%%agent\nA\n")
    await run_cell(shell, "%%agent\nB\n")
    await run_cell(shell, "%%agent\nC\n")
    assert runtime().is_running()
    gate.set()
    await settle()
    assert _texts(runtime().agent.state.messages) == [
        ("user", "A"), ("assistant", "a"), ("user", "B"), ("assistant", "b"), ("user", "C"),
        ("assistant", "c")]
    a, b, c = FakeView.instances[-3:]
    assert [v.text() for v in (a, b, c)] == ["a", "b", "c"]  # each answer under its own cell
    assert all(v.kinds("finish") == [("finish", "done")] for v in (a, b, c))
    assert all(("close",) in v.calls for v in (a, b, c))  # no widget model outlives its run


async def test_identical_steers_bind_to_their_own_rows(shell, faux):
    gate = asyncio.Event()

    async def slow_tool(tool_call_id, params, signal, on_update):
        await gate.wait()
        return AgentToolResult(content=[TextContent(text="tool done")])

    rt = runtime()
    rt.agent.state.tools = [AgentTool(name="wait", description="waits", execute=slow_tool,
                                      parameters={"type": "object", "properties": {}})]
    faux.set_responses([faux_assistant_message([faux_tool_call("wait", {})], stop_reason="toolUse"),
                        faux_assistant_message("one"), faux_assistant_message("two")])
    await run_cell(shell, "%%agent\ngo\n")
    while not rt.agent.state.pending_tool_calls:
        await asyncio.sleep(0.01)
    await run_cell(shell, "%steer same words")
    await run_cell(shell, "%steer same words")
    view = FakeView.instances[-1]
    tokens = [c[3] for c in view.kinds("queued")]
    assert len(tokens) == 2 and tokens[0] != tokens[1]
    gate.set()
    await settle()
    delivered = view.kinds("delivered")
    assert [d[1] for d in delivered] == tokens  # each delivery names its own row, in order
    assert all(d[2:] == ("same words", "steer") for d in delivered)
    assert len(rt.queue) == 0


async def test_removing_a_queued_cell_skips_it_and_the_next_still_runs(shell, faux):
    gate = asyncio.Event()
    faux.set_responses([_gated("a", gate), faux_assistant_message("c")])
    await run_cell(shell, "%%agent\nA\n")
    await run_cell(shell, "%%agent\nB\n")
    await run_cell(shell, "%%agent\nC\n")
    a, b, c = FakeView.instances[-3:]
    token_b = next(q[3] for q in a.kinds("queued") if q[2].endswith("runs next: B"))
    assert runtime().scheduler.remove_queued(token_b)
    gate.set()
    await settle()
    assert _texts(runtime().agent.state.messages) == [
        ("user", "A"), ("assistant", "a"), ("user", "C"), ("assistant", "c")]
    assert b.kinds("finish") == [("finish", "removed")]
    assert c.text() == "c"


async def test_abort_drops_the_cells_queued_behind_the_run(shell, faux):
    slow = register_faux_provider(provider="slowq", tokens_per_second=50)
    try:
        slow.set_responses([faux_assistant_message("word " * 400)])
        await run_cell(shell, "%%agent -m slowq/faux-1\nA\n")
        await run_cell(shell, "%%agent\nB\n")
        a, b = FakeView.instances[-2:]
        while not a.events:
            await asyncio.sleep(0.01)
        shell.run_line_magic("agent", "abort")
        await settle(3)
        assert a.kinds("finish") == [("finish", "aborted")]
        assert b.kinds("finish") == [("finish", "aborted")], b.calls
        assert any("Not sent" in n[2] for n in b.kinds("notice"))
        assert [m.role for m in runtime().agent.state.messages] == ["user", "assistant"]
        assert a.kinds("status").count(("status", "aborting")) == 1
    finally:
        slow.unregister()


async def test_a_failed_run_leaves_the_queued_cell_unsent(shell, faux):
    gate = asyncio.Event()

    async def failing(context, options, state, model):
        await gate.wait()
        return faux_assistant_message("", stop_reason="error", error_message="server exploded")

    faux.set_responses([failing, faux_assistant_message("never")])
    await run_cell(shell, "%%agent\nA\n")
    await run_cell(shell, "%%agent\nB\n")
    gate.set()
    await settle()
    a, b = FakeView.instances[-2:]
    assert a.kinds("finish") == [("finish", "error")]
    assert b.kinds("finish") == [("finish", "removed")]
    assert "never" not in str(_texts(runtime().agent.state.messages))


async def test_queued_resume_is_refused_with_what_to_do(shell, faux):
    from IPython.core.error import UsageError

    gate = asyncio.Event()
    faux.set_responses([_gated("a", gate)])
    await run_cell(shell, "%%agent\nA\n")
    result = await run_cell(shell, "%%agent --resume\nB\n")
    assert isinstance(result.error_in_exec, UsageError)
    assert "abort" in str(result.error_in_exec)
    gate.set()
    await settle()


async def test_cells_run_right_after_an_abort_are_not_lost(shell, faux):
    slow = register_faux_provider(provider="slowlost", tokens_per_second=50)
    try:
        slow.set_responses([faux_assistant_message("word " * 400), faux_assistant_message("B ran"),
                            faux_assistant_message("follow-up ran")])
        await run_cell(shell, "%%agent -m slowlost/faux-1\nA\n")
        a = FakeView.instances[-1]
        while not a.events:
            await asyncio.sleep(0.01)
        shell.run_line_magic("agent", "abort")
        assert runtime().is_running()  # still winding down
        await run_cell(shell, "%%agent\nB\n")  # queued behind an aborting run: still sent
        await run_cell(shell, "%followup after B")
        await settle(5)
        texts = _texts(runtime().agent.state.messages)
        assert texts[-4:] == [("user", "B"), ("assistant", "B ran"), ("user", "after B"),
                              ("assistant", "follow-up ran")]
        assert a.kinds("finish") == [("finish", "aborted")]
    finally:
        slow.unregister()


async def test_abort_button_of_a_queued_cell_drops_only_that_cell(shell, faux):
    gate = asyncio.Event()
    faux.set_responses([_gated("a", gate), faux_assistant_message("c")])
    await run_cell(shell, "%%agent\nA\n")
    await run_cell(shell, "%%agent\nB\n")
    await run_cell(shell, "%%agent\nC\n")
    a, b, c = FakeView.instances[-3:]
    b.on_abort()
    await asyncio.sleep(0.01)
    assert b.kinds("finish") == [("finish", "removed")]  # at once, not when A ends
    assert not a.kinds("finish")
    gate.set()
    await settle()
    assert [t for _, t in _texts(runtime().agent.state.messages)] == ["A", "a", "C", "c"]
    assert c.text() == "c"
