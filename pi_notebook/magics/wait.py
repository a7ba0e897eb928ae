"""Cells that wait for agent runs, without changing a character of the user's cell.

Two kinds of cells wait (docs/design/waiting.md has the whole design and what was measured):

- *before*: a plain code cell run while an agent run is active waits for that run first,
  so Run All behaves like running the cells one by one (interactive frontends; off with
  ``AgentMagics.wait_for_runs = False``). Control cells (``%agent …``, ``%steer``,
  ``%followup``, ``%%agent`` which queues, ``%load_ext``/``%config``…) never wait.
- *after*: a ``%%agent`` cell (or ``%agent fix``, or a one-line ``%steer``/``%followup`` that
  starts a run)
  blocks until its run ends when ``--wait`` / ``AgentMagics.wait`` say so, or in ``auto``
  mode until either the run ends or a widget frontend shows the run's view: headless
  executors (nbclient, papermill) never render it, so their cell blocks to the end and the
  saved notebook holds the transcript. Terminal IPython always blocks.

How, without rewriting the cell (``In[n]``, history and every line number stay the user's):

1. ``should_run_async`` (wrapped on the shell) decides the plan from the raw cell and
   answers True for a cell that will wait, so IPython runs it on the kernel loop;
2. a ``pre_run_cell`` hook arms that plan for the very cell it was made for;
3. an AST transformer (``shell.ast_transformers``) adds one ``await`` statement before the
   user's first statement or after the last one. IPython compiles each top-level statement
   on its own, so the user's statements keep their line numbers and ``from __future__``
   imports stay first in theirs.

Code the agent itself runs (its ``python`` tool) is never touched: it would wait for its
own run (``IN_AGENT_RUN``).

Stop (kernel interrupt) while a cell waits: the run is aborted too (on ipykernel 6 it is
the only way to stop it while a cell waits) and the cell fails with one line saying so.
An Abort of the run (button, ``%agent abort``) ends the wait and the cell goes on.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from ..tools.kernel.kernel_host import KernelHost, kernel_host
from ..tools.kernel.patches import PATCHES
from .control_cells import install_control_bypass, is_control_cell, starts_run, uninstall_control_bypass
from .frontend import (
    count_new_views,
    frontend_seen,
    has_widget_frontend,
    install_shutdown_close,
    is_headless,
    stop_counting_views,
    track_view,
    uninstall_shutdown_close,
    view_rendered,
)

if TYPE_CHECKING:
    from IPython.core.interactiveshell import ExecutionInfo, InteractiveShell

    from .config import AgentMagics, WaitSetting
    from .lifecycle import Run
    from .runs import Runs
    from .settings import RunSettings
    from .undo_offers import UndoOffers

__all__ = ["WaitHost", "CellPlan", "WaitInterrupted", "has_widget_frontend", "plan_cell", "wait_mode",
           "wait_before_cell", "wait_after_cell", "is_waiting", "install_transformers",
           "uninstall_transformers", "WAITING_TEXT", "CommandStep", "set_command_step", "before_command"]

_MODULE = "pi_notebook.magics.wait"
_AGENT_MAGIC = "%%agent"
# First lines of cells that never wait for an active run besides the control cells.
_NEVER_WAIT = ("%unload_ext", "%reload_ext", "%load_ext", "%config")
WAITING_TEXT = ("waiting for the agent run above to finish — Abort it there or with "
                "%agent abort")
# the same line as Markdown: frontends prefer it, and it wraps at word boundaries (JupyterLab
# breaks plain-text outputs anywhere: "fin / ish" at 800 px)
WAITING_MARKDOWN = ("*waiting for the agent run above to finish — Abort it there or with "
                    "`%agent abort`*")
_POLL_S = 0.05  # how often a blocking cell looks for a frontend that rendered its view
_END_GRACE_S = 5.0  # how long an interrupted cell lets its aborted run end (see _let_it_end)

WaitMode = Literal["run", "run_or_frontend"]


@dataclass(frozen=True)
class CellPlan:
    before: bool = False  # wait for the active run before the cell's own code
    after: bool = False  # block until the run the cell started (or queued into) ends ...
    until_rendered: bool = False  # ... or until a widget frontend shows its view
    # a control command that first waits on the loop for what it needs (the command's line;
    # ``%agent mcp tools NAME`` waits for its server to start): see CommandStep
    step: str | None = None


class CommandStep(Protocol):
    """A control command's part that must run on the kernel loop before the command itself
    (a magic cannot await): ``needs_loop`` decides from the line, ``run`` awaits. Set by the
    extension at load (``set_command_step``); the MCP commands are one (mcp_command.py)."""

    def needs_loop(self, line: str) -> bool: ...
    async def run(self, line: str) -> None: ...


class WaitInterrupted(Exception):
    """The kernel was interrupted while a cell waited for an agent run.

    IPython shows ``_render_traceback_`` instead of a traceback: one line, no internals."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def _render_traceback_(self) -> list[str]:
        return [f"Interrupted: {self.message}"]


# --- deciding -------------------------------------------------------------------------------
def wait_mode(explicit: bool | None, setting: WaitSetting, shell: InteractiveShell) -> WaitMode | None:
    """How a ``%%agent`` cell blocks: ``--wait``/``--no-wait`` > ``AgentMagics.wait`` >
    evidence of a widget frontend. None: it returns at once."""
    if not kernel_host(shell).has_kernel:
        return "run"  # terminal IPython: the loop only runs while a cell runs
    if explicit is not None:
        return "run" if explicit else None
    if setting == "always":
        return "run"
    if setting == "never":
        return None
    if has_widget_frontend(shell):
        return None
    # a client nobody sits at shows no widget (frontend.is_headless): nothing to wait for but
    # the run's end
    return "run" if is_headless(shell) else "run_or_frontend"


class WaitHost(Protocol):
    """What waiting needs of the kernel's conversation (the Runtime is one): a small typed
    seam instead of an import of runtime.py, which imports this module."""

    @property
    def shell(self) -> InteractiveShell: ...
    @property
    def host(self) -> KernelHost: ...
    @property
    def settings(self) -> AgentMagics: ...
    @property
    def runs(self) -> Runs: ...
    @property
    def undo_offers(self) -> UndoOffers: ...
    @property
    def run(self) -> Run | None: ...

    def is_running(self) -> bool: ...
    def settings_now(self) -> RunSettings: ...
    def abort(self) -> None: ...
    def check_run_outcome(self, run: Run) -> None: ...


_host: WaitHost | None = None
_step: CommandStep | None = None


def set_command_step(step: CommandStep | None) -> None:
    global _step
    _step = step


def _runtime() -> WaitHost | None:
    """The host set by ``install_transformers`` (None once unloaded)."""
    return _host


def _first_line(lines: list[str]) -> str:
    return next((line.strip() for line in lines if line.strip()), "")


def _is_magic(line: str, magic: str) -> bool:
    return line == magic or (line.startswith(magic) and line[len(magic)].isspace())


def _after_plan(mode: WaitMode | None) -> CellPlan | None:
    if mode is None:
        return None
    return CellPlan(after=True, until_rendered=mode == "run_or_frontend")


def plan_cell(raw_cell: str, runtime: WaitHost | None = None) -> CellPlan | None:
    """What the cell waits for, decided from its raw text (None: it does not wait)."""
    runtime = runtime if runtime is not None else _runtime()
    if runtime is None:
        return None
    from .lifecycle import IN_AGENT_RUN

    if IN_AGENT_RUN.get():
        return None  # code the agent runs: it would wait for its own run
    if not runtime.shell.autoawait:
        return None  # without top-level await IPython could not run the inserted wait
    lines = raw_cell.splitlines()
    if not any(line.strip() and not line.lstrip().startswith("#") for line in lines):
        return None
    first = _first_line(lines)
    if _is_magic(first, _AGENT_MAGIC):
        from .args import parse_agent_args

        try:
            args = parse_agent_args(first[len(_AGENT_MAGIC):].strip())
        except Exception:
            return None  # the magic itself reports the UsageError
        return _after_plan(wait_mode(args.wait, runtime.settings_now().wait, runtime.shell))
    code_lines = [line for line in lines if line.strip()]
    if len(code_lines) == 1 and starts_run(first):
        # %agent fix is a %%agent cell whose prompt is made for it: it blocks, or queues and
        # blocks, exactly like one
        return _after_plan(wait_mode(None, runtime.settings_now().wait, runtime.shell))
    if len(code_lines) == 1 and (_is_magic(first, "%steer") or _is_magic(first, "%followup")):
        # it starts a run when none is active: block like %%agent would; queueing never blocks
        if runtime.is_running():
            return None
        return _after_plan(wait_mode(None, runtime.settings_now().wait, runtime.shell))
    if len(code_lines) == 1 and _step is not None and is_control_cell(raw_cell) and _step.needs_loop(first):
        return CellPlan(step=first)
    if is_control_cell(raw_cell) or first.startswith(_NEVER_WAIT):
        return None
    if runtime.settings.wait_for_runs and runtime.is_running():
        return CellPlan(before=True)
    return None


# --- arming the plan for the cell it was made for ----------------------------------------
class _Cells:
    """The plan handed from ``should_run_async`` to ``pre_run_cell`` to the AST transformer."""

    def __init__(self) -> None:
        self.decided: tuple[str, CellPlan | None] | None = None
        self.armed: CellPlan | None = None
        self.waiting = 0  # cells awaiting a run right now
        self.counting = False  # new widgets count their views (until the magic has run)
        self.pending_count: tuple[InteractiveShell, int] | None = None  # (shell, count) to restore


_cells = _Cells()


def is_waiting() -> bool:
    return _cells.waiting > 0


def _on_pre_execute() -> None:
    _cells.armed = None
    _restore_count()
    if _cells.counting:
        _cells.counting = False
        count_new_views(False)


def _on_pre_run_cell(info: ExecutionInfo) -> None:
    raw = info.raw_cell or ""
    decided, _cells.decided = _cells.decided, None
    if decided is not None and decided[0] == raw:
        # the kernel asked should_run_async for this cell: a None there means IPython runs
        # it synchronously, where an inserted await could not run
        _cells.armed = decided[1]
    else:
        _cells.armed = plan_cell(raw)  # run_cell_async called directly: it is awaited
    if _cells.armed is not None and _cells.armed.until_rendered:
        # the view this cell creates reports when a frontend shows it (see frontend.py)
        _cells.counting = True
        count_new_views(True)


def _wrap_should_run_async(shell: InteractiveShell) -> None:
    original = shell.should_run_async

    def should_run_async(raw_cell: str, *args: object, **kwargs: object) -> bool:
        plan = None
        if kwargs.get("preprocessing_exc_tuple") is None:
            plan = plan_cell(raw_cell)
        _cells.decided = (raw_cell, plan)
        return bool(original(raw_cell, *args, **kwargs)) or plan is not None

    PATCHES.apply(shell, "should_run_async", should_run_async,
                  "a cell that will wait for an agent run is run on the kernel loop (async)")


def _unwrap_should_run_async(shell: InteractiveShell) -> None:
    PATCHES.undo(PATCHES.find(shell, "should_run_async"))


def _await_statement(function: str, argument: bool | str | None, line: int) -> ast.stmt:
    args = "" if argument is None else repr(argument)
    statement = ast.parse(f"await __import__({_MODULE!r}, fromlist=['_']).{function}({args})",
                          mode="exec").body[0]
    for node in ast.walk(statement):
        if hasattr(node, "lineno"):
            for name, value in (("lineno", line), ("end_lineno", line), ("col_offset", 0),
                                ("end_col_offset", 0)):
                setattr(node, name, value)
    return statement


class WaitInserter(ast.NodeTransformer):
    """Adds the armed plan's ``await`` to the cell's module (and nothing else)."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        from .lifecycle import IN_AGENT_RUN

        if IN_AGENT_RUN.get():
            return node  # the agent's tool code, not a cell
        plan, _cells.armed = _cells.armed, None
        if plan is None or not node.body:
            return node
        if plan.step is not None:
            node.body.insert(0, _await_statement("before_command", plan.step, node.body[0].lineno))
        if plan.before:
            node.body.insert(0, _await_statement("wait_before_cell", None, node.body[0].lineno))
        if plan.after:
            last = node.body[-1]
            node.body.append(_await_statement("wait_after_cell", plan.until_rendered,
                                              getattr(last, "end_lineno", None) or last.lineno))
        return node


# --- waiting ----------------------------------------------------------------------------------
def _own_count(shell: InteractiveShell, mine: int) -> None:
    """Control cells that ran next to the waiting cell took execution counts: give the
    waiting cell its own back for its output and reply, and restore the counter after."""
    current = getattr(shell, "execution_count", None)
    if not isinstance(current, int) or current <= mine:
        return
    _cells.pending_count = (shell, current)
    shell.execution_count = mine

    def restore_soon(*_: object) -> None:
        shell.events.unregister("post_run_cell", restore_soon)
        asyncio.get_running_loop().call_soon(_restore_count)

    shell.events.register("post_run_cell", restore_soon)


def _restore_count() -> None:
    pending, _cells.pending_count = _cells.pending_count, None
    if pending is not None:
        shell, count = pending
        shell.execution_count = max(shell.execution_count, count)


def _own_parent(host: KernelHost) -> None:
    """ipykernel 6 keeps one global parent header. Code that ran on the loop while this cell
    waited (the run's end publishes its transcript as the ``%%agent`` cell) can leave the
    display publisher pointing at another cell: point everything back at this one."""
    host.restore_parent(host.saved_parent())


async def _wait_for_run(runtime: WaitHost, task: asyncio.Task[None], message: str,
                        stop: Callable[[], bool] | None = None) -> bool:
    """Wait for ``task`` (the run); True when it ended, False when ``stop()`` said enough.
    A kernel interrupt aborts the run and raises :class:`WaitInterrupted`."""
    _cells.waiting += 1
    try:
        while not task.done():
            if stop is not None and stop():
                return False
            try:
                await asyncio.wait({task}, timeout=_POLL_S if stop is not None else None)
            except asyncio.CancelledError:
                if task.done():
                    break
                runtime.abort()  # Stop pressed: the run stops with the cell
                await _let_it_end(runtime, task)
                raise WaitInterrupted(message) from None
        return True
    finally:
        _cells.waiting -= 1


async def _let_it_end(runtime: WaitHost, task: asyncio.Task[None]) -> None:
    """After an interrupt: give the aborted run a moment to end, so its final transcript is
    written while this cell is still the one running (an executor such as nbclient keeps
    only the output that arrives before the cell's reply). If it does not end in time, the
    views publish the transcript so far instead."""
    try:
        await asyncio.wait({task}, timeout=_END_GRACE_S)
    except asyncio.CancelledError:
        pass  # a second interrupt: go at once
    if task.done():
        return
    from .lifecycle import Run

    for run in Run.chain(runtime.run):
        flush = getattr(run.view, "flush", None)
        if callable(flush):
            try:
                flush()
            except Exception:
                pass  # the cell still ends with its one line


async def before_command(line: str) -> None:
    """Inserted before a control command whose step needs the loop (CommandStep)."""
    step = _step
    if step is not None:
        await step.run(line)


async def wait_before_cell() -> None:
    """Inserted before a plain cell's code while a run is active."""
    runtime = _runtime()
    if runtime is None or not runtime.is_running():
        return
    from IPython.display import clear_output, display

    shell = runtime.shell
    mine = shell.execution_count
    display({"text/plain": WAITING_TEXT, "text/markdown": WAITING_MARKDOWN}, raw=True, display_id=True)
    try:
        while runtime.is_running():
            current = runtime.run
            if current is None or current.task is None:
                break  # is_running() with no task: nothing to wait for
            await _wait_for_run(runtime, current.task,
                                "this cell stopped waiting for the agent run above, and the run "
                                "was aborted.")
    finally:
        _own_parent(runtime.host)
        clear_output()  # only the waiting line: the cell's own code has not run yet
        _own_count(shell, mine)


async def wait_after_cell(until_rendered: bool = False) -> None:
    """Appended to a ``%%agent`` (or run-starting ``%steer``) cell that must block."""
    if _cells.counting:  # the magic has made its view
        _cells.counting = False
        count_new_views(False)
    runtime = _runtime()
    if runtime is None or not runtime.is_running():
        return
    run = runtime.run
    if run is None:
        return
    shell = runtime.shell
    mine = shell.execution_count
    stop = None
    if until_rendered:
        widget = getattr(run.view, "widget", None)
        track_view(widget)

        def stop() -> bool:
            if view_rendered(widget) or frontend_seen():
                run.interactive = True  # someone sees the view: approvals can be asked
                return True
            return False

    try:
        while runtime.is_running() and runtime.run is run and run.task is not None:
            if not await _wait_for_run(runtime, run.task, "the agent run was aborted.", stop):
                return  # a frontend shows the view: the run goes on there
    finally:
        _own_parent(runtime.host)
        _own_count(shell, mine)
    if run.task is not None and run.task.done():
        # A blocking run that ended in error fails its cell (AgentMagics.raise_on_error), so
        # nbclient/papermill stop as for any failing cell; the transcript is written by now.
        runtime.check_run_outcome(run)


# --- %steer/%followup text ending in "?" ---------------------------------------------------
def keep_question_marks(lines: list[str]) -> list[str]:
    """``input_transformers_cleanup``: a ``%steer``/``%followup`` line ending in ``?`` becomes
    the call IPython makes of a line magic, before IPython's help syntax (``x?``) takes it.
    One line stays one line, so line numbers do not move."""
    out = []
    for line in lines:
        body = line.rstrip("\r\n")
        if body.endswith("?") and (_is_magic(body, "%steer") or _is_magic(body, "%followup")):
            name, _, args = body[1:].partition(" ")
            line = f"get_ipython().run_line_magic({name!r}, {args!r}){line[len(body):]}"
        out.append(line)
    return out


# --- installing ---------------------------------------------------------------------------
_inserter = WaitInserter()


def _live_views() -> list[object]:
    runtime = _runtime()
    if runtime is None:
        return []
    return [*runtime.runs.live_views(), *(bar.box for bar in runtime.undo_offers.bars)]


def install_transformers(shell: InteractiveShell, host: WaitHost | None = None) -> None:
    """Everything waiting needs: the ``should_run_async`` wrapper, the two event hooks,
    the AST transformer, the control-cell bypass and the close-views-at-shutdown hook;
    ``host`` is the conversation whose runs cells wait for."""
    global _host
    if host is not None:
        _host = host
    if _inserter in shell.ast_transformers:
        return
    _wrap_should_run_async(shell)
    shell.input_transformers_cleanup.append(keep_question_marks)
    shell.events.register("pre_execute", _on_pre_execute)
    shell.events.register("pre_run_cell", _on_pre_run_cell)
    shell.ast_transformers.append(_inserter)
    install_control_bypass(shell, is_waiting)
    kernel_host(shell).guard_shell_parent(True)
    install_shutdown_close(shell, _live_views)


def uninstall_transformers(shell: InteractiveShell) -> None:
    global _host, _step
    _host, _step = None, None
    while _inserter in shell.ast_transformers:
        shell.ast_transformers.remove(_inserter)
    while keep_question_marks in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(keep_question_marks)
    for name, hook in (("pre_execute", _on_pre_execute), ("pre_run_cell", _on_pre_run_cell)):
        try:
            shell.events.unregister(name, hook)
        except ValueError:
            pass
    _unwrap_should_run_async(shell)
    uninstall_control_bypass(shell)
    kernel_host(shell).guard_shell_parent(False)
    uninstall_shutdown_close(shell)
    stop_counting_views()
    _cells.decided = _cells.armed = None
    _cells.counting = False
