"""Which cells wait, and how: the user's cell is never rewritten (In[n], line numbers)."""

from __future__ import annotations

import asyncio
import types
import weakref

import pytest
from magics_helpers import FakeView, run_cell, runtime, settle

from pi_notebook.ai.providers.faux import faux_assistant_message, register_faux_provider
from pi_notebook.magics import frontend
from pi_notebook.magics.runtime import IN_AGENT_RUN
from pi_notebook.magics.control_cells import is_control_cell
from pi_notebook.magics.wait import (
    WAITING_TEXT,
    CellPlan,
    WaitInterrupted,
    has_widget_frontend,
    plan_cell,
    wait_mode,
)


@pytest.fixture(autouse=True)
def no_frontend_evidence(monkeypatch):
    monkeypatch.setattr(frontend, "_seen", False)
    monkeypatch.setattr(frontend, "_tracked", weakref.WeakSet())
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)


@pytest.fixture
def slow(shell):
    """A model that streams for a few seconds, so a run stays active."""
    handle = register_faux_provider(provider="slowwait", tokens_per_second=100)
    handle.set_responses([faux_assistant_message("v " * 2000)])
    runtime().agent.state.model = handle.get_model()
    yield handle
    runtime().abort()
    handle.unregister()


def _displayed(capsys) -> str:
    return capsys.readouterr().out


async def test_plans_while_a_run_is_active(shell, slow):
    assert plan_cell("x = 1\n") is None  # no run yet
    await run_cell(shell, "%%agent\ngo\n")
    assert runtime().is_running()
    assert plan_cell("x = 1\nprint(x)\n") == CellPlan(before=True)
    # cell magics other than %%agent wait too: nothing is prepended to their text any more
    assert plan_cell("%%timeit\n1+1\n") == CellPlan(before=True)
    # control cells, extension commands and comment-only cells never wait
    for cell in ("%steer more\n", "%followup later\n", "%agent abort\n", "%agent\n",
                 "\n%agent reset\n", "%%agent\nq\n", "%unload_ext pi_notebook\n",
                 "%config AgentMagics.approval = 'auto'\n", "# just a note\n", "\n\n"):
        assert plan_cell(cell) is None, cell
    token = IN_AGENT_RUN.set(True)  # code the agent runs would wait for its own run
    try:
        assert plan_cell("x = 1\n") is None
    finally:
        IN_AGENT_RUN.reset(token)
    runtime().settings.wait_for_runs = False
    assert plan_cell("x = 1\n") is None
    runtime().settings.wait_for_runs = True


def test_agent_cell_plans_follow_flags_settings_and_evidence(shell):
    rt = runtime()
    rt.settings.wait = "never"
    assert plan_cell("%%agent\nq\n") is None
    assert plan_cell("%%agent --wait -m faux/faux-1\nq\n") == CellPlan(after=True)
    rt.settings.wait = "always"
    assert plan_cell("%%agent --no-wait\nq\n") is None
    assert plan_cell("%%agent\nq\n") == CellPlan(after=True)
    rt.settings.wait = "auto"  # no frontend seen: block until the end or until one shows it
    assert plan_cell("%%agent\nq\n") == CellPlan(after=True, until_rendered=True)
    assert plan_cell("%steer go\n") == CellPlan(after=True, until_rendered=True)
    assert plan_cell("%steer go\nx = 1\n") is None  # not a one-line submission
    # %agent fix starts a run like %%agent: it plans like one and is no control cell
    assert plan_cell("%agent fix\n") == CellPlan(after=True, until_rendered=True)
    assert not is_control_cell("%agent fix") and is_control_cell("%agent status")
    rt.settings.wait = "never"
    assert plan_cell("%agent fix\n") is None
    rt.settings.wait = "auto"
    # a bad line is left for the magic to report as a UsageError
    assert plan_cell("%%agent --bogus\nq\n") is None


def test_the_transformed_cell_is_what_ipython_makes_of_it(shell):
    # nothing is added to the text: In[n], _ih and the saved history hold the user's code
    assert shell.transform_cell("x = 1\nprint(x)\n") == "x = 1\nprint(x)\n"
    assert shell.transform_cell("%steer go {now}\n") == "get_ipython().run_line_magic('steer', 'go {now}')\n"
    # a question to the agent is not IPython's help syntax
    assert shell.transform_cell("%followup and then?\n") == \
        "get_ipython().run_line_magic('followup', 'and then?')\n"
    assert shell.transform_cell("x = 1\n%steer why?\n") == \
        "x = 1\nget_ipython().run_line_magic('steer', 'why?')\n"
    # and a %%agent cell stays a cell magic, so a terminal keeps reading its body
    assert shell.input_transformer_manager.check_complete("%%agent -m faux/faux-1\n")[0] == "incomplete"


async def test_waiting_cell_keeps_its_source_and_line_numbers(shell, slow, capsys):
    await run_cell(shell, "%%agent\ngo\n")
    raw = "a = 1\nb = len(__import__('pi_notebook').get_agent().state.messages)\n1 / 0\n"
    result = await run_cell(shell, raw)
    assert not runtime().is_running()  # it ran after the run ended ...
    assert shell.user_ns["b"] == 2  # ... and saw the whole conversation
    stored = raw.rstrip("\n")  # IPython keeps cells without their trailing newline
    assert shell.user_ns["In"][-1] == stored and shell.user_ns["_ih"][-1] == stored
    assert shell.history_manager.input_hist_raw[-1] == stored
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    tb = result.error_in_exec.__traceback__
    lines = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<ipython-input-"):
            lines.append(tb.tb_lineno)
        tb = tb.tb_next
    assert lines == [3]  # the user's own line number
    out = _displayed(capsys)
    assert WAITING_TEXT in out  # said at once that it waits (the kernel clears it after)


async def test_future_import_first_in_a_waiting_cell(shell, slow):
    await run_cell(shell, "%%agent\ngo\n")
    result = await run_cell(shell, "from __future__ import annotations\ndef f(x: Undefined): pass\nok = 1\n")
    assert result.success and shell.user_ns["ok"] == 1


async def test_interrupting_a_waiting_cell_aborts_the_run_in_one_line(shell, slow):
    await run_cell(shell, "%%agent\nlong\n")
    rt = runtime()
    cell = asyncio.ensure_future(run_cell(shell, "never_runs = 1\n"))
    await asyncio.sleep(0.2)
    assert rt.is_running() and not cell.done()
    cell.cancel()  # what ipykernel does to the cell on a kernel interrupt
    result = await cell
    error = result.error_in_exec
    assert isinstance(error, WaitInterrupted)
    assert error._render_traceback_() == [
        "Interrupted: this cell stopped waiting for the agent run above, and the run was aborted."]
    assert "never_runs" not in shell.user_ns
    await settle(3)
    assert rt.agent.state.messages[-1].stop_reason == "aborted"


async def test_abort_ends_the_wait_and_the_cell_runs(shell, slow):
    await run_cell(shell, "%%agent\nlong\n")
    cell = asyncio.ensure_future(run_cell(shell, "after_abort = 1\n"))
    await asyncio.sleep(0.2)
    runtime().abort()
    result = await asyncio.wait_for(cell, 5)
    assert result.success and shell.user_ns["after_abort"] == 1


async def test_blocking_agent_cell_waits_to_the_end(shell, faux):
    runtime().settings.wait = "always"
    faux.set_responses([faux_assistant_message("all done")])
    result = await run_cell(shell, "%%agent\ngo\n")
    assert result.success and not runtime().is_running()
    assert shell.user_ns["In"][-1] == "get_ipython().run_cell_magic('agent', '', 'go\\n')"


class CountedWidget:
    _view_count = None


class RenderedView(FakeView):
    """A view whose widget counts frontend views (ipywidgets' ``_view_count``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.widget = CountedWidget()


async def test_auto_mode_blocks_until_a_frontend_shows_the_view(shell, slow):
    rt = runtime()
    rt.settings.wait = "auto"
    rt.view_factory = RenderedView
    assert not has_widget_frontend(shell)
    cell = asyncio.ensure_future(run_cell(shell, "%%agent\nlong\n"))
    await asyncio.sleep(0.3)
    assert not cell.done()  # headless so far: the cell blocks
    view = FakeView.instances[-1]
    assert view.widget._view_count == 0  # asked the frontend to count its views
    assert rt.run.interactive is False
    view.widget._view_count = 1  # what a frontend sends once it shows the view
    result = await asyncio.wait_for(cell, 2)
    assert result.success and rt.is_running()  # returned while the run goes on
    assert rt.run.interactive is True  # approvals may now ask
    assert has_widget_frontend(shell)  # and later cells do not block


def test_a_request_that_cannot_answer_input_is_headless(shell, monkeypatch):
    """nbclient sends allow_stdin=False: no widget frontend is there, the cell blocks to the
    end (no view to wait for) and the view is the static one."""
    from pi_notebook.magics.frontend import is_headless

    parent = {"content": {"allow_stdin": False}}
    monkeypatch.setattr(shell.kernel, "get_parent", lambda channel="shell": parent, raising=False)
    assert is_headless(shell) and wait_mode(None, "auto", shell) == "run"
    parent["content"]["allow_stdin"] = True  # JupyterLab, Notebook 7, VS Code
    assert not is_headless(shell) and wait_mode(None, "auto", shell) == "run_or_frontend"
    assert not is_headless(types.SimpleNamespace(user_ns={}))  # terminal: its own text view


def test_detection_ignores_inherited_session_variables(shell, monkeypatch):
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/me/analysis.ipynb")
    shell.user_ns["__vsc_ipynb_file__"] = "/x.ipynb"
    try:
        assert has_widget_frontend(shell) is False  # an nbclient kernel inherits these
        assert wait_mode(None, "auto", shell) == "run_or_frontend"
    finally:
        del shell.user_ns["__vsc_ipynb_file__"]
    assert wait_mode(False, "always", shell) is None
    assert wait_mode(None, "always", shell) == "run"
    assert wait_mode(None, "never", shell) is None
    assert wait_mode(False, "never", types.SimpleNamespace(user_ns={})) == "run"  # no kernel


def test_unload_removes_every_hook(shell):
    from pi_notebook.magics.wait import _inserter

    assert _inserter in shell.ast_transformers
    from pi_notebook.tools.kernel.patches import PATCHES

    assert PATCHES.find(shell, "should_run_async") is not None
    shell.run_line_magic("unload_ext", "pi_notebook")
    assert _inserter not in shell.ast_transformers
    assert "should_run_async" not in shell.__dict__
    shell.run_line_magic("load_ext", "pi_notebook")  # the fixture unloads it again


async def test_a_no_wait_first_run_can_ask_once_its_view_is_shown(shell, slow):
    """``--no-wait`` returns before any frontend evidence; the approval hook asks
    ``is_interactive()`` at the first tool call, by when the view has been rendered."""
    rt = runtime()
    rt.view_factory = RenderedView
    assert not has_widget_frontend(shell)
    result = await run_cell(shell, "%%agent --no-wait\nlong\n")
    assert result.success and rt.is_running()
    assert rt.run.interactive is False and rt.is_interactive() is False  # nothing rendered yet
    FakeView.instances[-1].widget._view_count = 1  # the frontend shows the view
    assert rt.is_interactive() is True and rt.run.interactive is True
