"""The notebook context wired into the magics: the history recorder at load, the context tools,
the per-prompt note (what reaches the model, and what never reaches the transcript or the
session file), ``%agent fix`` and ``%agent code``, and the settings handed to the tools."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
from magics_helpers import FakeView, runtime, settle
from magics_helpers import run_cell as _run_cell_async

from pi_notebook.agent import AgentTool
from pi_notebook.agent.types import AgentToolResult
from pi_notebook.ai.providers.faux import faux_assistant_message, faux_tool_call
from pi_notebook.ai.types import TextContent
from pi_notebook.tools.context.history import installed_history
from pi_notebook.tools.context.prompt_context import CONTEXT_HEADER

REPO = pathlib.Path(__file__).resolve().parents[2]


async def run_cell(ip, code: str):
    """Like ipykernel's async branch: ``run_cell_async``, then ``post_run_cell`` (which only
    IPython's sync ``run_cell`` wrapper fires itself)."""
    result = await _run_cell_async(ip, code)
    ip.events.trigger("post_execute")
    ip.events.trigger("post_run_cell", result)
    return result


def _text(message) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(b.text for b in content if b.type == "text")


def _recorder(seen: list, answer: str = "ok"):
    def respond(context, options, state, model):
        seen.append(list(context.messages))
        return faux_assistant_message(answer)
    return respond


def _fake_python() -> AgentTool:
    """A ``python`` tool that executes nothing: code containing "boom" fails."""

    async def execute(tool_call_id, params, signal=None, on_update=None):
        if "boom" in params["code"]:
            raise RuntimeError("boom")
        return AgentToolResult(content=[TextContent(text="ran")])

    return AgentTool(name="python", description="run code", execute=execute,
                     parameters={"type": "object", "properties": {"code": {"type": "string"}},
                                 "required": ["code"]})


def _session_text(tmp_path: pathlib.Path) -> str:
    files = sorted((tmp_path / "sessions").glob("*"))
    assert files, "no session file was written"
    return "".join(p.read_text() for p in files)


# --- load / unload ---------------------------------------------------------------------------

async def test_load_ext_installs_the_history_recorder_and_unload_removes_it(shell):
    history = installed_history(shell)
    assert history is not None
    await run_cell(shell, "x_ = 1\n")
    await run_cell(shell, "undefined_name_\n")
    assert history.last_error() is not None and "NameError" in history.last_error_note()
    shell.run_line_magic("unload_ext", "pi_notebook")
    assert installed_history(shell) is None
    before = len(history.records())
    await run_cell(shell, "y_ = 2\n")
    assert len(history.records()) == before  # its hooks are gone
    shell.run_line_magic("load_ext", "pi_notebook")  # (the fixture unloads again)
    assert installed_history(shell) is not None and installed_history(shell) is not history


def test_load_ext_imports_no_agent_core_and_no_widgets():
    code = textwrap.dedent("""
        import sys
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance()
        ip.run_line_magic("load_ext", "pi_notebook")
        from pi_notebook.tools.context.history import installed_history
        assert installed_history(ip) is not None
        heavy = ("pi_notebook.agent", "pi_notebook.ai.types", "pydantic", "jsonschema", "httpx",
                 "ipywidgets", "pi_notebook.tools.trust.approval", "pi_notebook.tools.python.python_tool")
        print([m for m in heavy if m in sys.modules])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=REPO, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_approval_constants_are_not_redefined_in_the_magics():
    root = REPO / "pi_notebook" / "magics"
    defined = [p.name for p in root.glob("*.py")
               if "APPROVAL_POLICIES = " in p.read_text() or '"PI_NOTEBOOK_APPROVAL"' in p.read_text()]
    assert defined == []
    from pi_notebook.magics.args import APPROVAL_POLICIES as from_args
    from pi_notebook.magics.config import APPROVAL_POLICIES as from_config
    from pi_notebook.tools.trust.approval import APPROVAL_POLICIES, default_policy
    from pi_notebook.tools.trust.policy import default_policy as policy_default

    assert from_args is from_config is APPROVAL_POLICIES and default_policy is policy_default


# --- settings handed to the tools ------------------------------------------------------------

async def test_tool_settings_and_approval_timeout_come_from_the_traits(shell, faux):
    from pi_notebook.magics.settings import python_tool_settings

    rt = runtime()
    rt.settings.max_figures = 4
    rt.settings.repr_timeout = 0.5
    settings = python_tool_settings(rt.settings)
    assert (settings.max_figures, settings.repr_timeout_s) == (4, 0.5)
    assert rt.conversation.approval.timeout_s is None  # 0: no limit
    rt.settings.approval_timeout = 12.5
    faux.set_responses([faux_assistant_message("ok")])
    await run_cell(shell, "%%agent\nhi\n")
    await settle()
    assert rt.conversation.approval.timeout_s == 12.5


def test_build_agent_adds_the_context_tools(shell):
    from pi_notebook.magics.settings import python_tool_settings
    from pi_notebook.magics.wiring import AgentHooks, notebook_tools

    rt = runtime()
    hooks = AgentHooks(policy=lambda: "deny", ask=None, is_interactive=lambda: False,  # type: ignore[arg-type]
                       notify=lambda _: None, on_compaction=lambda _: None, stream_options=dict,
                       notebook_path=lambda: "")
    names = [t.name for t in notebook_tools(shell, hooks, python_tool_settings(rt.settings))]
    assert names == ["python", "list_variables", "inspect_variable", "notebook_history", "read_notebook"]


async def test_read_notebook_uses_the_notebook_path_setting(shell, tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# The plan: sum revenue")])
    path = tmp_path / "analysis.ipynb"
    nbformat.write(nb, path)
    rt = runtime()
    rt.settings.notebook_path = str(path)
    from pi_notebook.tools.context.prompt_context import make_context_tools

    tool = make_context_tools(shell, lambda: rt.settings.notebook_path)[1]
    result = await tool.execute("c1", {})
    assert "The plan: sum revenue" in result.content[0].text


# --- what reaches the model --------------------------------------------------------------------

async def test_note_reaches_the_model_but_not_the_transcript_or_the_session_file(shell, faux, tmp_path):
    shell.user_ns["sales"] = pd.DataFrame({"month": ["jan"], "region": ["north"], "revenue": [1.5]})
    await run_cell(shell, "sales['revenu'].sum()\n")  # KeyError inside pandas
    failing = shell.execution_count - 1
    seen: list = []
    faux.set_responses([_recorder(seen)])
    await run_cell(shell, "%%agent\nwhy did that fail?\n")
    await settle()
    sent = seen[0][-1]
    assert sent.role == "user"
    note, typed = sent.content[0].text, sent.content[-1].text
    assert note.startswith(CONTEXT_HEADER) and typed == "why did that fail?"
    assert f"Cell [{failing}] raised KeyError" in note and "revenu" in note
    assert "sales: DataFrame 1 x 3 (month: " in note and "revenue: float64" in note
    # saved: only what the user typed
    rt = runtime()
    stored = rt.agent.state.messages[0]
    assert _text(stored) == "why did that fail?" and len(stored.content) == 1
    session = _session_text(tmp_path)
    assert "why did that fail?" in session
    assert "Notebook context" not in session and "revenue: float64" not in session
    view = FakeView.instances[-1]
    assert view.kinds("user") == [("user", "prompt", "why did that fail?")]


async def test_each_prompt_keeps_its_own_note_and_the_namespace_is_refreshed(shell, faux):
    seen: list = []
    faux.set_responses([_recorder(seen), _recorder(seen)])
    shell.user_ns["first_frame"] = pd.DataFrame({"a": [1]})
    await run_cell(shell, "%%agent\none\n")
    await settle()
    shell.user_ns["second_frame"] = pd.DataFrame({"b": [2.0]})
    await run_cell(shell, "%%agent\ntwo\n")
    await settle()
    first_note, second_note = seen[1][0].content[0].text, seen[1][-1].content[0].text
    assert first_note == seen[0][-1].content[0].text  # an old prompt's note is stable (cache prefix)
    assert "second_frame" not in first_note and "second_frame: DataFrame 1 x 1 (b: float64)" in second_note


async def test_no_note_when_the_budget_is_zero(shell, faux):
    runtime().settings.context_tokens = 0
    shell.user_ns["df"] = pd.DataFrame({"a": [1]})
    seen: list = []
    faux.set_responses([_recorder(seen)])
    await run_cell(shell, "%%agent\nhello\n")
    await settle()
    assert [b.text for b in seen[0][-1].content] == ["hello"]


async def test_a_steering_message_gets_its_own_note(shell, faux):
    gate = asyncio.Event()

    async def slow_tool(tool_call_id, params, signal, on_update):
        await gate.wait()
        return AgentToolResult(content=[TextContent(text="tool done")])

    rt = runtime()
    rt.agent.state.tools = [AgentTool(name="wait", description="waits", execute=slow_tool,
                                      parameters={"type": "object", "properties": {}})]
    seen: list = []
    faux.set_responses([faux_assistant_message([faux_tool_call("wait", {})], stop_reason="toolUse"),
                        _recorder(seen)])
    await run_cell(shell, "%%agent\ndo it\n")
    while not rt.agent.state.pending_tool_calls:
        await asyncio.sleep(0.01)
    shell.user_ns["made_meanwhile"] = pd.DataFrame({"z": [1]})
    await run_cell(shell, "%steer use made_meanwhile")
    gate.set()
    await settle()
    steer = seen[0][-1]
    assert steer.content[-1].text == "use made_meanwhile"
    assert steer.content[0].text.startswith(CONTEXT_HEADER) and "made_meanwhile: DataFrame" in steer.content[0].text
    assert [_text(m) for m in rt.agent.state.messages if m.role == "user"] == ["do it", "use made_meanwhile"]


async def test_reset_clears_the_notes(shell, faux):
    shell.user_ns["df"] = pd.DataFrame({"a": [1]})
    faux.set_responses([faux_assistant_message("ok")])
    await run_cell(shell, "%%agent\nhello\n")
    await settle()
    rt = runtime()
    assert rt.conversation.notes.note_for(rt.agent.state.messages[0])
    prompt = rt.agent.state.messages[0]
    shell.run_line_magic("agent", "reset")
    assert rt.conversation.notes.note_for(prompt) is None


async def test_a_failing_context_never_fails_the_run(shell, faux, monkeypatch):
    import pi_notebook.tools.context.prompt_context as pc

    def broken(*a, **k):
        raise RuntimeError("context exploded")

    monkeypatch.setattr(pc, "context_for_prompt", broken)
    seen: list = []
    faux.set_responses([_recorder(seen)])
    await run_cell(shell, "%%agent\nhello\n")
    await settle()
    assert runtime().runs.latest.status == "done" and [b.text for b in seen[0][-1].content] == ["hello"]


# --- %agent fix ------------------------------------------------------------------------------

async def test_fix_without_an_error_says_so_and_starts_nothing(shell, capsys):
    await run_cell(shell, "ok_ = 1\n")
    capsys.readouterr()
    shell.run_line_magic("agent", "fix")
    assert capsys.readouterr().out.strip() == "The last cell did not raise an error."
    assert runtime().runs.latest is None


async def test_fix_runs_with_the_full_request_in_the_note_and_a_short_visible_line(shell, faux, tmp_path):
    await run_cell(shell, "total_ = undefined_thing + 1\n")
    failing = shell.execution_count - 1
    seen: list = []
    faux.set_responses([_recorder(seen, "Fixed: `undefined_thing` was never defined.")])
    shell.run_line_magic("agent", "fix")
    await settle()
    visible = f"Fix the error in cell [{failing}]."
    assert FakeView.instances[-1].kinds("user") == [("user", "prompt", visible)]
    sent = seen[0][-1]
    note, typed = sent.content[0].text, sent.content[-1].text
    assert typed == visible
    assert f"Explain and fix the error in cell [{failing}]: NameError" in note
    assert "total_ = undefined_thing + 1" in note and "what you changed" in note
    rt = runtime()
    assert [_text(m) for m in rt.agent.state.messages if m.role == "user"] == [visible]
    assert "Explain and fix" not in _session_text(tmp_path)


# --- %agent code -----------------------------------------------------------------------------

async def test_code_puts_the_latest_runs_successful_code_in_the_next_input(shell, faux, monkeypatch, capsys):
    rt = runtime()
    rt.agent.state.tools = [_fake_python()]
    rt.settings.approval = "auto"
    payloads: list = []
    monkeypatch.setattr(shell, "set_next_input", lambda text, replace=False: payloads.append((text, replace)))
    shell.run_line_magic("agent", "code")
    assert capsys.readouterr().out.strip() == "The last run ran no code to the end."
    faux.set_responses([
        faux_assistant_message([faux_tool_call("python", {"code": "old_run = 1"})], stop_reason="toolUse"),
        faux_assistant_message("first done"),
        faux_assistant_message([faux_tool_call("python", {"code": "a = 1"})], stop_reason="toolUse"),
        faux_assistant_message([faux_tool_call("python", {"code": "boom()"})], stop_reason="toolUse"),
        faux_assistant_message([faux_tool_call("python", {"code": "b = a + 1"})], stop_reason="toolUse"),
        faux_assistant_message("second done"),
    ])
    await run_cell(shell, "%%agent\nfirst\n")
    await settle()
    await run_cell(shell, "%%agent\nsecond\n")
    await settle()
    capsys.readouterr()
    shell.run_line_magic("agent", "code")
    assert len(payloads) == 1
    text, replace = payloads[0]
    lines = len(text.rstrip("\n").split("\n"))
    confirmation = capsys.readouterr().out.strip()  # said in the cell itself
    assert confirmation == f"The code of the latest run ({lines} lines) is in a new cell below.", confirmation
    assert replace is False
    assert "a = 1" in text and "b = a + 1" in text and text.index("a = 1") < text.index("b = a + 1")
    assert "boom" not in text and "old_run" not in text
    assert "Left out: 1 failed attempt" in text
    shell.run_line_magic("agent", "reset")
    shell.run_line_magic("agent", "code")
    assert capsys.readouterr().out.strip().endswith("The last run ran no code to the end.")
    assert len(payloads) == 1


def test_help_lists_fix_and_code(shell, capsys):
    shell.run_line_magic("agent", "help")
    out = capsys.readouterr().out
    assert "%agent fix" in out and "%agent code" in out


def test_system_prompt_explains_the_note_block():
    from pi_notebook.magics.config import DEFAULT_SYSTEM_PROMPT

    assert CONTEXT_HEADER[:40] in " ".join(DEFAULT_SYSTEM_PROMPT.split())
    assert "notebook_history" in DEFAULT_SYSTEM_PROMPT and "read_notebook" in DEFAULT_SYSTEM_PROMPT


@pytest.mark.parametrize("line", ["fix now", "code x"])
def test_fix_and_code_take_no_argument(shell, line):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="takes no argument"):
        shell.run_line_magic("agent", line)

