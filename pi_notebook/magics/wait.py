"""Blocking runs for headless execution and Run All, without nest_asyncio.

IPython has no async magics, so a ``%%agent`` cell that must block is rewritten by an
``input_transformers_cleanup`` hook (these run before IPython's own ``%%`` handling)
into one top-level ``await`` of :func:`run_and_wait`. The cell then blocks while the
kernel loop keeps running the agent, widget updates and comm messages.

A cell that is exactly one ``%steer``/``%followup`` line and starts a run (no run active)
blocks under the same rule, through :func:`submit_and_wait`; queueing into a run never blocks.

When to block (``--wait`` / ``--no-wait`` > ``AgentMagics.wait`` > detection):
- no kernel (terminal IPython): always, since its loop only runs during a cell;
- no widget-capable frontend detected (nbclient, papermill, ``jupyter execute``): block,
  so the saved notebook holds the transcript and later cells see the results;
- a widget frontend (JupyterLab, Notebook, VS Code): return at once.

In an interactive frontend, a plain code cell executed while a run is active gets
``await wait_for_active_run()`` prepended, so Run All behaves like running cells one
by one. Agent magics never wait, and code the agent itself runs (its ``python`` tool
calls ``transform_cell``) is recognised by a context variable and left alone:
otherwise the run would wait for itself.

Kernel interrupt while waiting: the cell is cancelled, the run is aborted, the
cancellation propagates. An Abort of the run ends the waiting cell normally.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

__all__ = ["agent_cell_transformer", "has_widget_frontend", "should_wait", "run_and_wait",
           "submit_and_wait", "wait_for_active_run", "install_transformers", "uninstall_transformers"]

_MODULE = "pi_notebook.magics.wait"
_AGENT_MAGIC = "%%agent"
# Cells starting with these never wait for an active run.
_NO_WAIT_PREFIXES = ("%%", "%steer", "%followup", "%agent", "%unload_ext", "%reload_ext",
                     "%load_ext", "%config")


def has_widget_frontend(shell: Any) -> bool:
    """Is a frontend that renders widgets (and has a human) attached to this kernel?

    Signals, any of which counts:
    - ipywidgets' ``jupyter.widget.control`` comm is open (JupyterLab/Notebook open it
      on connect; nbclient never does);
    - the kernel was started for a notebook session by jupyter_server
      (``JPY_SESSION_NAME`` / ``__session__``) or by VS Code (``__vsc_ipynb_file__``):
      the control comm alone misses a frontend that connected before ipywidgets was
      imported (the kernel closes the comm and the frontend does not retry).
    """
    if getattr(shell, "kernel", None) is None:
        return False
    if _control_comm_open():
        return True
    user_ns = getattr(shell, "user_ns", {}) or {}
    if os.environ.get("JPY_SESSION_NAME") or user_ns.get("__session__"):
        return True
    return bool(user_ns.get("__vsc_ipynb_file__"))


def _control_comm_open() -> bool:
    widget_module = sys.modules.get("ipywidgets.widgets.widget")
    if widget_module is not None:
        control = getattr(getattr(widget_module, "Widget", None), "_control_comm", None)
        if control is not None:
            return True
    try:
        import comm

        manager = comm.get_comm_manager()
        comms = getattr(manager, "comms", {}) or {}
        return any(getattr(c, "target_name", "") == "jupyter.widget.control" for c in comms.values())
    except Exception:
        return False


def should_wait(explicit: bool | None, mode: str, shell: Any) -> bool:
    if getattr(shell, "kernel", None) is None:
        return True  # terminal IPython: the loop only runs while a cell runs
    if explicit is not None:
        return explicit
    if mode == "always":
        return True
    if mode == "never":
        return False
    return not has_widget_frontend(shell)


def _runtime() -> Any:
    from . import current_runtime

    return current_runtime()


def _is_agent_magic(first: str) -> bool:
    return first == _AGENT_MAGIC or (first.startswith(_AGENT_MAGIC)
                                     and first[len(_AGENT_MAGIC)].isspace())


def agent_cell_transformer(lines: list[str]) -> list[str]:
    """``input_transformers_cleanup`` hook (see the module docstring)."""
    if not lines:
        return lines
    runtime = _runtime()
    if runtime is None:
        return lines
    from .runtime import IN_AGENT_RUN

    if IN_AGENT_RUN.get():
        return lines  # code the agent runs: never rewrite
    first = lines[0].rstrip("\r\n")
    if _is_agent_magic(first):
        line = first[len(_AGENT_MAGIC):].strip()
        try:
            from .args import parse_agent_args

            args = parse_agent_args(line)
        except Exception:
            return lines  # let the magic itself report the UsageError
        if not should_wait(args.wait, runtime.settings.wait, runtime.shell):
            return lines
        cell = "".join(lines[1:])
        return [f"await __import__({_MODULE!r}, fromlist=['_']).run_and_wait({line!r}, {cell!r})\n"]
    submitted = _submission(lines)
    if submitted is not None:
        # %steer/%followup with no run active start one: block like %%agent would
        if runtime.is_running() or not should_wait(None, runtime.settings.wait, runtime.shell):
            return lines
        kind, text = submitted
        return [f"await __import__({_MODULE!r}, fromlist=['_']).submit_and_wait({kind!r}, {text!r})\n"]
    if not runtime.settings.wait_for_runs or not runtime.is_running():
        return lines
    stripped = first.lstrip()
    if not stripped or stripped.startswith(_NO_WAIT_PREFIXES):
        return lines
    if not any(line.strip() and not line.lstrip().startswith("#") for line in lines):
        return lines
    return [f"await __import__({_MODULE!r}, fromlist=['_']).wait_for_active_run()\n", *lines]


def _submission(lines: list[str]) -> tuple[str, str] | None:
    """``(kind, text)`` for a cell that is exactly one ``%steer``/``%followup`` line."""
    if any(line.strip() for line in lines[1:]):
        return None
    first = lines[0].strip()
    for kind in ("steer", "followup"):
        magic = f"%{kind}"
        if first == magic or (first.startswith(magic) and first[len(magic)].isspace()):
            return kind, first[len(magic):].strip()
    return None


async def _await_run(task: asyncio.Task[Any] | None, runtime: Any) -> None:
    if task is None or task.done():
        return
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.done():
            return  # the run itself ended (cancelled by unload): end the cell normally
        runtime.abort()  # the *cell* was cancelled: kernel interrupt -> stop the agent too
        raise
    except Exception:
        return  # the run shows its own failure in its view


async def run_and_wait(line: str, cell: str) -> None:
    """The rewritten ``%%agent`` cell: start (or queue) through the magic's own path, then wait."""
    from IPython.core.error import UsageError

    runtime = _runtime()
    if runtime is None:
        raise UsageError("pi_notebook is not loaded: run %load_ext pi_notebook first.")
    from .args import parse_agent_args

    args = parse_agent_args(line)
    run = runtime.start_cell(args, cell, interactive=has_widget_frontend(runtime.shell))
    await _await_run(run.task if run is not None else None, runtime)


async def submit_and_wait(kind: str, text: str) -> None:
    """The rewritten ``%steer``/``%followup`` cell when it starts a run that must block."""
    from IPython.core.error import UsageError

    runtime = _runtime()
    if runtime is None:
        raise UsageError("pi_notebook is not loaded: run %load_ext pi_notebook first.")
    running_before = runtime.is_running()
    run = runtime.submit(kind, text, interactive=has_widget_frontend(runtime.shell))
    if run is not None and not running_before:
        await _await_run(run.task, runtime)


async def wait_for_active_run() -> None:
    """Prepended to plain cells while a run is active (interactive frontends)."""
    runtime = _runtime()
    if runtime is None or not runtime.is_running():
        return
    await _await_run(runtime.run.task, runtime)


def install_transformers(shell: Any) -> None:
    cleanup = shell.input_transformers_cleanup
    if agent_cell_transformer not in cleanup:
        cleanup.append(agent_cell_transformer)


def uninstall_transformers(shell: Any) -> None:
    cleanup = shell.input_transformers_cleanup
    while agent_cell_transformer in cleanup:
        cleanup.remove(agent_cell_transformer)
