"""%agent commands, model errors, sessions, and the terminal (no kernel) text mode."""

from __future__ import annotations

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from magics_helpers import FakeView, run_cell, runtime, settle

from pi_notebook.ai.providers.faux import faux_assistant_message, register_faux_provider


async def test_missing_key_ends_run_with_error_and_leaves_no_messages(shell, faux, monkeypatch):
    faux.set_responses([faux_assistant_message("before")])
    await run_cell(shell, "%%agent\nfirst\n")
    await settle()
    rt = runtime()
    before = list(rt.agent.state.messages)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    await run_cell(shell, "%%agent -m openai/gpt-4.1\nhello\n")
    await settle()
    view = FakeView.instances[-1]
    assert view.kinds("finish") == [("finish", "error")]
    # refused before any request: the conversation is exactly as it was
    assert rt.agent.state.messages == before
    notices = [text for _, level, text in view.kinds("notice") if level == "error"]
    assert notices and "OPENAI_API_KEY" in notices[0]
    assert rt.runs.latest is not None and "OPENAI_API_KEY" in (rt.runs.latest.error or "")


async def test_a_refused_model_does_not_stick(shell, faux, monkeypatch, capsys):
    """A -m refused for its missing key changes nothing: the next plain cell uses the model
    it used before, %agent status does not name the refused one, --new reset nothing."""
    faux.set_responses([faux_assistant_message("before")])
    await run_cell(shell, "%%agent\nfirst\n")
    await settle()
    rt = runtime()
    before_model, before_resolved = rt.agent.state.model, rt.resolved
    before_messages = list(rt.agent.state.messages)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    await run_cell(shell, "%%agent -m openai/gpt-4.1 --new --thinking high\nhello\n")
    await settle()
    assert FakeView.instances[-1].kinds("finish") == [("finish", "error")]
    assert rt.agent.state.model is before_model and rt.resolved is before_resolved
    assert rt.agent.state.messages == before_messages  # --new did not reset the conversation
    shell.run_line_magic("agent", "")
    status = capsys.readouterr().out
    assert "openai" not in status and "-m in the cell" not in status
    faux.set_responses([faux_assistant_message("after")])
    await run_cell(shell, "%%agent\nagain\n")
    await settle()
    assert FakeView.instances[-1].kinds("finish") == [("finish", "done")]
    assert rt.agent.state.thinking_level != "high"
    assert rt.agent.state.messages[-1].content[0].text == "after"


async def test_unknown_model_is_a_one_line_usage_error(shell):
    result = await run_cell(shell, "%%agent -m opnai/gpt-4.1\nhello\n")
    assert isinstance(result.error_in_exec, UsageError)
    assert "openai/gpt-4.1" in str(result.error_in_exec) and "\n" not in str(result.error_in_exec)
    assert runtime().run is None  # nothing started


async def test_model_command_and_status(shell, capsys):
    handle = register_faux_provider(provider="fauxcmd", models=[{"id": "m2", "context_window": 5000}])
    try:
        shell.run_line_magic("agent", "model fauxcmd/m2")
        out = capsys.readouterr().out
        assert "Model: fauxcmd/m2" in out
        assert runtime().agent.state.model.id == "m2"
        shell.run_line_magic("agent", "")
        status = capsys.readouterr().out
        assert "model: fauxcmd/m2" in status and "run: idle" in status
    finally:
        handle.unregister()


async def test_help_history_and_sessions(shell, faux, capsys):
    shell.run_line_magic("agent", "help")
    assert "%steer TEXT" in capsys.readouterr().out
    shell.run_line_magic("agent", "sessions")
    assert "No saved sessions" in capsys.readouterr().out
    faux.set_responses([faux_assistant_message("the reply")])
    await run_cell(shell, "%%agent\nthe question\n")
    await settle()
    shell.run_line_magic("agent", "history")
    history = capsys.readouterr().out
    assert "user: the question" in history and "assistant: the reply" in history
    shell.run_line_magic("agent", "sessions")
    assert "2 messages" in capsys.readouterr().out


async def test_resume_continues_newest_session_of_this_notebook(shell, faux):
    faux.set_responses([faux_assistant_message("first reply"), faux_assistant_message("resumed reply")])
    await run_cell(shell, "%%agent\nfirst\n")
    await settle()
    rt = runtime()
    rt.reset()  # like a restart: the agent forgets, the session file stays
    assert rt.agent.state.messages == []
    await run_cell(shell, "%%agent --resume\ncontinue\n")
    await settle()
    roles = [m.role for m in rt.agent.state.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert rt.agent.state.messages[1].content[0].text == "first reply"


async def test_resume_answers_a_call_left_without_result_before_the_new_prompt(shell, faux):
    from pi_notebook.ai.types import AssistantMessage, ToolCall, UserMessage
    from pi_notebook.session.store import new_session_path, write_session

    rt = runtime()
    rt.session_dir().mkdir(parents=True, exist_ok=True)
    write_session(new_session_path(rt.session_dir(), rt.session_name()), [
        UserMessage(content="run it"),
        AssistantMessage(content=[ToolCall(id="c1", name="python", arguments={"code": "1"})],
                         stop_reason="toolUse"),
    ], model="faux/faux-1", name=rt.session_name())
    faux.set_responses([faux_assistant_message("resumed reply")])
    await run_cell(shell, "%%agent --resume\ncontinue\n")
    await settle()
    roles = [m.role for m in rt.agent.state.messages]
    assert roles == ["user", "assistant", "toolResult", "user", "assistant"]
    assert rt.agent.state.messages[2].is_error
    notices = [text for _, _, text in FakeView.instances[-1].kinds("notice")]
    assert sum(text.startswith("Repaired the loaded transcript") for text in notices) == 1


async def test_resume_without_session_is_a_usage_error(shell):
    result = await run_cell(shell, "%%agent --resume\nhi\n")
    assert isinstance(result.error_in_exec, UsageError)
    assert "no saved session" in str(result.error_in_exec)


async def test_save_writes_a_session_and_refuses_outside_paths(shell, faux, tmp_path):
    from pi_notebook.session.store import load_session

    faux.set_responses([faux_assistant_message("kept")])
    await run_cell(shell, "%%agent\nkeep this\n")
    await settle()
    shell.run_line_magic("agent", "save saved.jsonl")
    loaded = load_session(tmp_path / "saved.jsonl")
    assert [m.role for m in loaded.messages] == ["user", "assistant"]
    result = await run_cell(shell, "%agent save /etc/evil.jsonl")
    assert isinstance(result.error_in_exec, UsageError)
    result = await run_cell(shell, "%agent save saved.jsonl")
    assert isinstance(result.error_in_exec, UsageError)  # exists: nothing overwritten


async def test_load_newer_format_version_is_refused(shell, tmp_path):
    (tmp_path / "future.jsonl").write_text('{"type":"session","version":99,"startedAt":1}\n')
    result = await run_cell(shell, "%agent load future.jsonl")
    assert isinstance(result.error_in_exec, UsageError)
    assert "\n" not in str(result.error_in_exec)


async def test_terminal_ipython_streams_plain_text_and_blocks(tmp_path, monkeypatch, capsys):
    """No kernel: %%agent always blocks (the loop only runs during a cell) and prints text."""
    import pi_notebook.magics as magics

    monkeypatch.chdir(tmp_path)
    handle = register_faux_provider(provider="fauxterm")
    ip = InteractiveShell.instance()
    try:
        ip.run_line_magic("load_ext", "pi_notebook")
        rt = magics.current_runtime()
        rt.tools_factory = lambda r: []
        rt.settings.autosave = False
        handle.set_responses([faux_assistant_message("Plain text answer.")])
        result = await run_cell(ip, "%%agent -m fauxterm/faux-1\nhello terminal\n")
        assert result.success
        assert not rt.is_running()  # blocked until the run ended
        out = capsys.readouterr().out
        assert "Plain text answer." in out and "hello terminal" in out
        assert [m.role for m in rt.agent.state.messages] == ["user", "assistant"]
    finally:
        ip.run_line_magic("unload_ext", "pi_notebook")
        InteractiveShell.clear_instance()
        handle.unregister()


def test_get_agent_returns_the_kernels_agent(shell):
    import pi_notebook

    assert pi_notebook.get_agent() is runtime().agent


async def test_config_changes_apply_to_the_next_run(shell, faux):
    handle = register_faux_provider(provider="fauxcfg", models=[{"id": "cfg-1"}])
    try:
        handle.set_responses([faux_assistant_message("from the configured model")])
        shell.run_line_magic("config", "AgentMagics.thinking = 'high'")
        shell.run_line_magic("config", "AgentMagics.model = 'fauxcfg/cfg-1'")
        shell.run_line_magic("config", "AgentMagics.system_prompt = 'Be terse.'")
        await run_cell(shell, "%%agent\nhi\n")
        await settle()
        state = runtime().agent.state
        assert (state.thinking_level, state.model.id, state.system_prompt) == ("high", "cfg-1", "Be terse.")
        assert FakeView.instances[-1].model_label == "fauxcfg/cfg-1"
        assert state.messages[-1].content[0].text == "from the configured model"
        before = runtime().settings.approval
        await run_cell(shell, "%config AgentMagics.approval = 'sometimes'")  # rejected by traitlets
        assert runtime().settings.approval == before
    finally:
        handle.unregister()


def test_approval_default_comes_from_environment(monkeypatch):
    from pi_notebook.magics.config import AgentMagics

    monkeypatch.setenv("PI_NOTEBOOK_APPROVAL", "auto")
    assert AgentMagics().approval == "auto"
    monkeypatch.setenv("PI_NOTEBOOK_APPROVAL", "bogus")
    assert AgentMagics().approval == "ask"


async def test_steer_cell_that_starts_a_run_blocks_when_waiting(shell, faux):
    from pi_notebook.magics.wait import CellPlan, plan_cell

    runtime().settings.wait = "always"
    faux.set_responses([faux_assistant_message("answered the steer")])
    assert plan_cell("%steer go {now}\n") == CellPlan(after=True)
    result = await run_cell(shell, "%steer go {now}\n")
    assert result.success
    assert not runtime().is_running()  # the cell blocked until the run ended
    assert runtime().agent.state.messages[-1].content[0].text == "answered the steer"
    # a multi-line cell is left alone
    assert plan_cell("%steer a\nx = 1\n") is None


def test_wait_default_comes_from_environment(monkeypatch):
    from pi_notebook.magics.config import AgentMagics

    monkeypatch.delenv("PI_NOTEBOOK_WAIT", raising=False)
    assert AgentMagics().wait == "auto"
    monkeypatch.setenv("PI_NOTEBOOK_WAIT", "Always")
    assert AgentMagics().wait == "always"


async def test_status_names_the_version(shell, capsys):
    """A bug report that pastes `%agent` says which pi_notebook it is about."""
    from pi_notebook import __version__

    shell.run_line_magic("agent", "")
    assert f"version: pi_notebook {__version__}" in capsys.readouterr().out.splitlines()


async def test_load_keeps_check_labels_repairs_a_call_without_result_and_names_its_model(
        shell, tmp_path, capsys):
    """A session saved while a python call waited for approval, with a run check's turn:
    %agent load shows the check under its label, answers the call (one notice line) before the
    next message, and %agent status says the model came from the loaded session."""
    from pi_notebook.agent.types import CheckMessage
    from pi_notebook.ai.types import AssistantMessage, TextContent, ToolCall, UserMessage
    from pi_notebook.session.store import write_session

    write_session(tmp_path / "ended.jsonl", [
        UserMessage(content="sum the column"),
        CheckMessage(content="Check: no output shows the total; print it.",
                     shown="No output showed the total: the agent was asked to print it."),
        AssistantMessage(content=[TextContent(text="Running."),
                                  ToolCall(id="c1", name="python", arguments={"code": "print(1)"})],
                         stop_reason="toolUse"),
    ], model="openai/gpt-4.1")
    rt = runtime()
    rt.conversation.resolved = None  # no model named in this kernel yet
    capsys.readouterr()
    shell.run_line_magic("agent", "load ended.jsonl")
    out = capsys.readouterr().out
    repaired = [line for line in out.splitlines() if line.startswith("Repaired")]
    assert len(repaired) == 1 and "1 tool call (python)" in repaired[0]
    assert [m.role for m in rt.agent.state.messages] == ["user", "user", "assistant", "toolResult"]
    assert rt.agent.state.messages[3].is_error
    shell.run_line_magic("agent", "history")
    history = capsys.readouterr().out
    assert "check: No output showed the total" in history
    assert "user: Check:" not in history
    assert "result python: Not run: the session ended" in history
    shell.run_line_magic("agent", "")
    status = capsys.readouterr().out
    assert "the loaded session ended.jsonl" in status and "%agent model" not in status
