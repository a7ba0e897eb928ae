"""The run lifecycle in a real InteractiveShell (no kernel) on a faux model."""

from __future__ import annotations

import asyncio
import threading

from IPython.core.error import UsageError
from magics_helpers import FakeView, run_cell, runtime, settle

from pi_notebook.agent import AgentTool, AgentToolResult
from pi_notebook.ai.providers.faux import faux_assistant_message, faux_tool_call
from pi_notebook.ai.types import TextContent


def _texts(messages):
    out = []
    for m in messages:
        content = m.content if not isinstance(m.content, str) else [TextContent(text=m.content)]
        out.append((m.role, "".join(getattr(b, "text", "") for b in content if b.type == "text")))
    return out


async def test_agent_cell_returns_at_once_and_run_continues(shell, faux):
    faux.set_responses([faux_assistant_message("Hello from the agent.")])
    result = await run_cell(shell, "%%agent\nsay hello\n")
    assert result.success
    rt = runtime()
    assert rt.is_running()  # returned before the run ended
    await settle()
    assert not rt.is_running()
    view = FakeView.instances[-1]
    assert ("user", "prompt", "say hello") in view.calls
    assert view.text() == "Hello from the agent."
    assert view.kinds("finish") == [("finish", "done")]
    assert _texts(rt.agent.state.messages) == [("user", "say hello"),
                                               ("assistant", "Hello from the agent.")]


async def test_conversation_continues_across_cells_and_new_starts_fresh(shell, faux):
    faux.set_responses([faux_assistant_message("one"), faux_assistant_message("two"),
                        faux_assistant_message("three")])
    await run_cell(shell, "%%agent\nfirst\n")
    await settle()
    await run_cell(shell, "%%agent\nsecond\n")
    await settle()
    assert len(runtime().agent.state.messages) == 4
    await run_cell(shell, "%%agent --new\nthird\n")
    await settle()
    assert _texts(runtime().agent.state.messages) == [("user", "third"), ("assistant", "three")]


async def test_steer_is_delivered_after_tool_batch_before_next_model_call(shell, faux):
    gate = asyncio.Event()
    seen_contexts = []

    async def slow_tool(tool_call_id, params, signal, on_update):
        await gate.wait()
        return AgentToolResult(content=[TextContent(text="tool done")])

    rt = runtime()
    rt.agent.state.tools = [AgentTool(name="wait", description="waits", execute=slow_tool,
                                      parameters={"type": "object", "properties": {}})]

    def second(context, options, state, model):
        seen_contexts.append([m.role for m in context.messages])
        return faux_assistant_message("after steer")

    faux.set_responses([faux_assistant_message([faux_tool_call("wait", {})], stop_reason="toolUse"),
                        second])
    await run_cell(shell, "%%agent\ndo it\n")
    while not rt.agent.state.pending_tool_calls:
        await asyncio.sleep(0.01)
    await run_cell(shell, "%steer use {braces} and $dollars literally")
    view = FakeView.instances[-1]
    queued = view.kinds("queued")
    assert queued and queued[0][1:3] == ("steer", "use {braces} and $dollars literally")
    gate.set()
    await settle()
    # delivered after the tool result, before the second model call
    assert seen_contexts == [["user", "assistant", "toolResult", "user"]]
    delivered = [e for e in view.events if e.type == "message_start" and e.message.role == "user"]
    assert [_texts([e.message])[0][1] for e in delivered] == ["do it",
                                                                "use {braces} and $dollars literally"]
    # the queue tells the view which row was delivered (by token, with its kind), right
    # before the view sees that message_start
    token = queued[0][3]
    index = view.calls.index(("delivered", token, "use {braces} and $dollars literally", "steer"))
    assert ("unqueued", token) not in view.calls[:index]


async def test_followup_lands_after_final_answer(shell, faux):
    rt = runtime()
    calls = []

    def first(context, options, state, model):
        calls.append("first")
        return faux_assistant_message("answer one " * 20)

    def second(context, options, state, model):
        calls.append([m.role for m in context.messages])
        return faux_assistant_message("answer two")

    faux.set_responses([first, second])
    await run_cell(shell, "%%agent\nq1\n")
    await run_cell(shell, "%followup and then this")
    await settle()
    assert calls == ["first", ["user", "assistant", "user"]]
    assert _texts(rt.agent.state.messages)[2] == ("user", "and then this")
    view = FakeView.instances[-1]
    token = view.kinds("queued")[0][3]
    assert ("delivered", token, "and then this", "followup") in view.calls


async def test_agent_cell_while_running_is_queued_into_its_own_view(shell, faux):
    faux.set_responses([faux_assistant_message("long answer " * 30), faux_assistant_message("B answer")])
    await run_cell(shell, "%%agent\nA\n")
    await run_cell(shell, "%%agent\nB\n")
    first, second = FakeView.instances[-2:]
    token = first.kinds("queued")[0][3]
    # the running view points at the waiting cell; the prompt itself is in the cell's own view
    kind, row = first.kinds("queued")[0][1:3]
    assert kind == "prompt" and row.endswith("runs next: B") and ("user", "prompt", "B") not in first.calls
    assert ("status", "queued") in second.calls
    await settle()
    assert first.text().startswith("long answer")
    assert second.text() == "B answer"  # the answer to B streams under B's cell
    assert ("user", "prompt", "B") in second.calls
    assert ("unqueued", token) in first.calls  # its row left A's view when B started
    assert first.kinds("finish") == [("finish", "done")]
    assert second.kinds("finish") == [("finish", "done")]
    # one conversation: B was answered after A
    assert _texts(runtime().agent.state.messages) == [
        ("user", "A"), ("assistant", "long answer " * 30), ("user", "B"), ("assistant", "B answer")]


async def test_remove_queued_from_another_thread(shell, faux):
    faux.set_responses([faux_assistant_message("x " * 200), faux_assistant_message("never")])
    rt = runtime()
    await run_cell(shell, "%%agent\nA\n")
    await run_cell(shell, "%followup drop me")
    view = FakeView.instances[-1]
    token = view.kinds("queued")[0][3]
    thread = threading.Thread(target=view.on_remove_queued, args=(token,))
    thread.start()
    thread.join()
    await asyncio.sleep(0.05)
    assert rt.agent.follow_up_queue == ()
    await settle()
    assert [r for r, _ in _texts(rt.agent.state.messages)] == ["user", "assistant"]


async def test_abort_from_another_thread_during_stream(shell):
    from pi_notebook.ai.providers.faux import register_faux_provider

    slow = register_faux_provider(provider="slowfaux", tokens_per_second=50)
    try:
        slow.set_responses([faux_assistant_message("word " * 400)])
        rt = runtime()
        rt.agent.state.model = slow.get_model()
        await run_cell(shell, "%%agent\ntalk\n")
        view = FakeView.instances[-1]
        while not view.events:
            await asyncio.sleep(0.01)
        thread = threading.Thread(target=view.on_abort)
        thread.start()
        thread.join()
        await settle(2.0)
        assert view.kinds("finish") == [("finish", "aborted")]
        last = rt.agent.state.messages[-1]
        assert last.stop_reason == "aborted"
        assert not rt.is_running()
    finally:
        slow.unregister()


async def test_abort_during_tool_keeps_transcript_valid(shell, faux):
    started = asyncio.Event()

    async def hang(tool_call_id, params, signal, on_update):
        started.set()
        while not signal.aborted:
            await asyncio.sleep(0.01)
        return AgentToolResult(content=[TextContent(text="stopped")], is_error=True)

    rt = runtime()
    rt.agent.state.tools = [AgentTool(name="hang", description="hangs", execute=hang,
                                      parameters={"type": "object", "properties": {}})]
    faux.set_responses([faux_assistant_message([faux_tool_call("hang", {}), faux_tool_call("hang", {})],
                                               stop_reason="toolUse"),
                        faux_assistant_message("should not be asked")])
    await run_cell(shell, "%%agent\nhang please\n")
    await started.wait()
    shell.run_line_magic("agent", "abort")
    await settle(2.0)
    messages = rt.agent.state.messages
    calls = [b.id for m in messages if m.role == "assistant" for b in m.content if b.type == "toolCall"]
    results = [m.tool_call_id for m in messages if m.role == "toolResult"]
    assert sorted(calls) == sorted(results) and len(calls) == 2
    assert FakeView.instances[-1].kinds("finish") == [("finish", "aborted")]
    # the loop ends with pi's aborted turn; the scripted answer is never streamed
    assert messages[-1].role == "assistant" and messages[-1].stop_reason == "aborted"
    assert "should not be asked" not in str([m.model_dump() for m in messages])


async def test_failed_run_reports_error_and_kernel_stays_usable(shell, faux):
    faux.set_responses([])  # the faux provider answers with an error
    await run_cell(shell, "%%agent\nhello\n")
    await settle()
    view = FakeView.instances[-1]
    assert view.kinds("finish") == [("finish", "error")]
    assert runtime().agent.state.messages[-1].stop_reason == "error"
    result = await run_cell(shell, "x = 1 + 1")
    assert result.success and shell.user_ns["x"] == 2


async def test_steer_with_no_run_starts_one(shell, faux):
    faux.set_responses([faux_assistant_message("started by steer")])
    await run_cell(shell, "%steer hello")
    await settle()
    view = FakeView.instances[-1]
    assert ("user", "steer", "hello") in view.calls
    assert view.text() == "started by steer"


async def test_bad_arguments_are_usage_errors_without_traceback(shell, capsys):
    result = await run_cell(shell, "%%agent --thinking loud\nhi\n")
    assert isinstance(result.error_in_exec, UsageError)
    assert "--thinking must be one of" in str(result.error_in_exec)
    assert "Traceback" not in capsys.readouterr().out
    result = await run_cell(shell, "%%agent\n   \n")
    assert isinstance(result.error_in_exec, UsageError)


async def test_autosave_writes_every_finished_message(shell, faux, tmp_path):
    from pi_notebook.session.store import list_sessions, load_session

    faux.set_responses([faux_assistant_message("saved answer")])
    await run_cell(shell, "%%agent\nsave me\n")
    await settle()
    sessions = list_sessions(tmp_path / "sessions")
    assert len(sessions) == 1
    loaded = load_session(sessions[0].path)
    assert _texts(loaded.messages) == [("user", "save me"), ("assistant", "saved answer")]


async def test_load_restores_conversation(shell, faux, tmp_path, capsys):
    faux.set_responses([faux_assistant_message("remember 42")])
    await run_cell(shell, "%%agent\nremember\n")
    await settle()
    rt = runtime()
    before = [m.model_dump() for m in rt.agent.state.messages]
    path = rt.session_path
    shell.run_line_magic("agent", "reset")
    assert rt.agent.state.messages == []
    shell.run_line_magic("agent", f"load {path.name[:-len('.jsonl')]}")
    assert [m.model_dump() for m in rt.agent.state.messages] == before
    assert "Loaded 2 messages" in capsys.readouterr().out


async def test_load_outside_working_directory_is_refused(shell):
    result = await run_cell(shell, "%agent load ../../etc/passwd.jsonl")
    assert isinstance(result.error_in_exec, UsageError)
    assert "outside the working directory" in str(result.error_in_exec)


async def test_export_writes_valid_notebook(shell, faux, tmp_path):
    import nbformat

    faux.set_responses([faux_assistant_message("exported")])
    await run_cell(shell, "%%agent\nexport me\n")
    await settle()
    shell.run_line_magic("agent", "export out.ipynb")
    nb = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    nbformat.validate(nb)
    assert any("exported" in cell.source for cell in nb.cells)
    result = await run_cell(shell, "%agent export out.ipynb")
    assert isinstance(result.error_in_exec, UsageError)  # never overwritten


async def test_unload_aborts_and_removes_everything(shell, faux):
    from pi_notebook.magics.wait import _inserter

    faux.set_responses([faux_assistant_message("z " * 500)])
    await run_cell(shell, "%%agent\nlong\n")
    rt = runtime()
    task = rt.run.task
    shell.run_line_magic("unload_ext", "pi_notebook")
    await asyncio.sleep(0.1)
    assert task.done()
    assert _inserter not in shell.ast_transformers
    for kind, name in (("cell", "agent"), ("line", "agent"), ("line", "steer"), ("line", "followup")):
        assert name not in shell.magics_manager.magics[kind]
    assert not any(type(c).__module__.startswith("pi_notebook") for c in shell.configurables)
    pending = [t for t in asyncio.all_tasks() if t.get_name() == "pi_notebook-run"]
    assert pending == []
    shell.run_line_magic("load_ext", "pi_notebook")  # the fixture unloads again


async def test_new_while_running_aborts_and_starts_fresh_in_its_own_view(shell):
    from pi_notebook.ai.providers.faux import register_faux_provider

    slow = register_faux_provider(provider="slownew", tokens_per_second=100)
    try:
        slow.set_responses([faux_assistant_message("old " * 500), faux_assistant_message("fresh answer")])
        rt = runtime()
        rt.agent.state.model = slow.get_model()
        await run_cell(shell, "%%agent\nold question\n")
        first = FakeView.instances[-1]
        while not first.events:
            await asyncio.sleep(0.01)
        await run_cell(shell, "%%agent --new\nnew question\n")
        second = FakeView.instances[-1]
        await settle(5.0)
        assert first.kinds("finish") == [("finish", "aborted")]
        assert second.kinds("finish") == [("finish", "done")]
        assert second.text() == "fresh answer"
        assert "fresh" not in first.text()
        assert _texts(rt.agent.state.messages) == [("user", "new question"), ("assistant", "fresh answer")]
    finally:
        slow.unregister()


async def test_a_broken_view_does_not_break_the_run(shell, faux):
    class BrokenView(FakeView):
        def handle_event(self, event):
            raise RuntimeError("view bug")

    runtime().view_factory = BrokenView
    faux.set_responses([faux_assistant_message("still answered")])
    await run_cell(shell, "%%agent\nhello\n")
    await settle()
    rt = runtime()
    assert _texts(rt.agent.state.messages) == [("user", "hello"), ("assistant", "still answered")]
    assert FakeView.instances[-1].kinds("finish") == [("finish", "done")]


async def test_context_compaction_keeps_requests_in_window_and_is_shown(shell):
    from pi_notebook.ai.providers.faux import register_faux_provider
    from pi_notebook.session.compaction import estimate_tokens

    small = register_faux_provider(provider="fauxsmall", models=[{"id": "tiny", "context_window": 4000}])
    try:
        rt = runtime()
        rt.agent.state.model = small.get_model()
        rt.resolved = None
        rt.settings.model = "fauxsmall/tiny"

        async def big(tool_call_id, params, signal, on_update):
            return AgentToolResult(content=[TextContent(text="x" * 4000)])  # ~1,000 tokens

        rt.agent.state.tools = [AgentTool(name="big", description="big output", execute=big,
                                          parameters={"type": "object", "properties": {}})]
        sizes = []

        def call(context, options, state, model):
            sizes.append(estimate_tokens(context.messages))
            return faux_assistant_message([faux_tool_call("big", {})], stop_reason="toolUse")

        def final(context, options, state, model):
            sizes.append(estimate_tokens(context.messages))
            return faux_assistant_message("done")

        small.set_responses([call, call, call, call, call, final])
        await run_cell(shell, "%%agent\nfill the context\n")
        await settle(10)
        assert len(sizes) == 6
        assert max(sizes) <= 4000
        messages = rt.agent.state.messages
        calls = [b.id for m in messages if m.role == "assistant" for b in m.content if b.type == "toolCall"]
        assert len(calls) == 5 and len([m for m in messages if m.role == "toolResult"]) == 5
        notices = [c for c in FakeView.instances[-1].kinds("notice") if "Context compacted" in c[2]]
        assert notices  # the view says so
    finally:
        small.unregister()
        runtime().settings.model = ""


async def test_a_provider_says_what_its_server_is_doing_in_the_run_view(shell, faux):
    def step(context, options, state, model):
        options["on_status"]("Starting the local model server…")  # as the embedded provider does
        return faux_assistant_message("ready")

    faux.set_responses([step])
    await run_cell(shell, "%%agent\nhello\n")
    await settle(30)
    notices = FakeView.instances[-1].kinds("notice")
    assert ("notice", "info", "Starting the local model server…") in notices, notices


async def test_the_run_view_says_how_far_the_server_has_read_the_prompt(shell, faux):
    from pi_notebook.ai.types import PromptProgress

    def step(context, options, state, model):
        for processed in (2000, 4000, 5400):  # as the Chat Completions mapper passes llama-server's
            options["on_progress"](PromptProgress(5400, 0, processed, 100))
        return faux_assistant_message("ready")

    faux.set_responses([step])
    await run_cell(shell, "%%agent\nhello\n")
    await settle(30)
    statuses = [c for c in FakeView.instances[-1].kinds("status") if len(c) == 3]
    assert statuses == [("status", "thinking", f"reading the prompt · {n} of 5,400 tokens")
                        for n in ("2,000", "4,000", "5,400")], statuses


def test_a_waiting_cells_row_names_the_cell_and_the_start_of_its_prompt() -> None:
    from pi_notebook.magics.scheduling import waiting_cell_row

    assert waiting_cell_row(7, "Plot it") == "cell [7] runs next: Plot it"
    long = waiting_cell_row(3, "x" * 200 + "\nsecond line")
    assert long == "cell [3] runs next: " + "x" * 80 + "…"
    assert waiting_cell_row(None, "  \n") == "a waiting cell runs next: "
