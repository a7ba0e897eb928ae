"""The ``python`` tool: run code in the user's kernel namespace, like a cell, but privately.

``run_code(shell, code, *, signal, on_stream, on_display, timeout_s) -> ExecutionResult``
executes ``code`` with IPython semantics without ``run_cell*`` and without
``capture_output()`` (both break a concurrently running user cell or kernel dispatch,
docs/design/capture.md):

- ``shell.transform_cell`` (magics, ``!cmd``; the extension's own input transformers are
  skipped, they would make agent code wait for its own run), ``shell.transform_ast``, compile
  with ``PyCF_ALLOW_TOP_LEVEL_AWAIT``, exec in ``shell.user_ns``;
- the last expression's value is formatted with ``shell.display_formatter`` (not stored in
  ``Out``/``_``; ``In`` and ``execution_count`` are untouched); a trailing ``;`` hides it;
- output is captured through the routed proxies of ``capture.py``; new matplotlib figures are
  displayed as PNG and closed;
- errors carry IPython-style traceback text; the code runs in its own task on the caller's loop,
  interruptible by the AbortSignal, the timeout and the kernel's Stop button (``interrupt.py``).

Where the code runs (docs/design/capture.md, "Where agent code runs"): the cell is compiled statement by
statement, as IPython does. Statements that use top-level ``await`` (their code object has
CO_COROUTINE) run on the loop, step by step. All other statements, consecutive ones together,
and the formatting of the value run on a worker thread (``worker.py``) in a copy of the task's
context, so the routed capture follows them. Meanwhile the kernel loop and the main shell are
free: the Abort click is processed at once and interrupts the worker with an asynchronous
KeyboardInterrupt, the view keeps streaming, other cells run. Consequences:

- a busy ``while True: pass`` is stopped by Abort, Stop and the timeout within milliseconds;
  a call that never returns to Python (``time.sleep(60)``, a long C routine) cannot see the
  interrupt: after ``_ABANDON_GRACE_S`` the tool reports the interrupt and stops waiting; the
  code stops as soon as that call returns, and its later output is dropped;
- in a mixed cell only the statements with ``await`` stay on the loop (a busy loop there is
  stopped by Stop and the timeout through SIGINT on the main thread, as before, but not by an
  Abort click, which cannot be processed while the loop is busy);
- new matplotlib figures are displayed and closed on the loop after the worker finished;
  Agg/inline figures can be made off the main thread, GUI backends (``%matplotlib qt/tk``)
  cannot, so they are not supported in agent code;
- thread-bound state: consecutive calls normally reuse the same worker thread, but objects
  bound to the main thread (a ``sqlite3`` connection made in a user cell, asyncio's loop of
  the main thread) are not usable from agent code; ``asyncio.run()`` works there;
- ``input()`` reads the kernel's stdin (EOFError while idle); ``exit()`` is refused
  (``capture.py``); ``%timeit``, ``%time``, ``!cmd`` work.

``on_stream(name, text)`` receives *redacted*, coalesced chunks (at most one per
``stream_interval_s`` per stream, a possible secret prefix held back until it is complete,
live text capped at ``max_detail_chars`` per stream); ``on_display(data, metadata)`` receives
redacted bundles. Both are called on the loop thread (``sink.py``).

Also around each execution (docs/design/capture.md): fd 1/2 are routed to the call
(``fdroute.py``); threads and tasks the code started that write after it returned go to the
late-output path (redacted, labelled: ``on_late_output`` or the original stream); stream
swaps by the code stay in the call and the proxies are checked afterwards
(``capture.restore_routing``); at most ``max_figures`` images are kept per call (new figures
beyond that are closed undrawn and counted); anything the code raises, ``BaseException``s
included, is the call's error result (only a cancellation of the caller propagates).

Modules: the engine is ``execution.py``, the model's text ``model_text.py``, the live and
kept output ``sink.py``; this module holds the settings, ``run_code`` and the tool.

``make_python_tool(shell, settings, on_late_output=None) -> AgentTool`` wraps ``run_code``
for the agent: live updates are ``AgentToolResult(content=[], details=StreamOutput |
DisplayOutput)`` (``updates.py``); the final result's ``content`` is the model text (and
images), cut to the model budgets, and its ``details`` a ``PythonCallDetails``: the code and
every recorded output in order (stream, display, result, error; redacted, cut only by
``max_detail_chars`` per stream), the execution time (not the approval wait), and
``interrupted`` / ``timed_out`` / ``aborted``. ``is_error`` is True for exceptions and
interrupts.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...agent.types import AgentTool, AgentToolResult
from ..kernel.capture import LATE_LABEL, install_capture
from ..kernel.capture import _state as _capture_state
from ..kernel.kernel_host import kernel_host
from .execution import Outcome, caller_cancelled, execute
from ..kernel.interrupt import interrupt_main_for
from ..output.error_hints import error_hint
from .model_text import result_content
from ..context.namespace import assigned_summary
from .namespace_review import finish_call, watch_call
from .unmatched import unmatched_note
from ..kernel.sink import OutputSink
from .python_types import ExecutionResult, PythonToolSettings, SettingsSource, resolve_settings
from ..output.updates import DisplayOutput, ErrorOutput, StreamName, StreamOutput, ToolOutput

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = [
    "ExecutionResult",
    "PythonToolSettings",
    "make_python_tool",
    "result_content",
    "run_code",
]


async def run_code(
    shell: InteractiveShell,
    code: str,
    *,
    signal: Any = None,
    on_stream: Callable[[StreamName, str], Any] | None = None,
    on_display: Callable[[dict, dict], Any] | None = None,
    timeout_s: float | None = None,
    stream_interval_s: float = 0.1,
    max_detail_chars: int = 200_000,
    max_figures: int = 10,
    on_late: Callable[[ToolOutput], Any] | None = None,
    route_fd_output: bool = True,
) -> ExecutionResult:
    """Run ``code`` like a cell in ``shell.user_ns``; see the module docstring.

    ``on_late(record)`` receives output that threads/tasks/processes started by the code
    write after it returned (redacted; on the loop thread); without it that output is
    written, redacted and labelled, to the original stream."""
    if not isinstance(code, str):
        raise TypeError(f"code must be a string, not {type(code).__name__}")
    install_capture(shell)
    loop = asyncio.get_running_loop()
    sink = OutputSink(loop, on_stream, on_display, stream_interval_s, max_detail_chars,
                      max_images=max(0, max_figures))
    late = _late_sink(loop, on_late, stream_interval_s, max_detail_chars, max_figures)
    started = time.monotonic()
    kernel = kernel_host(shell).kernel
    with interrupt_main_for(signal, timeout_s=timeout_s, loop=loop, kernel=kernel) as run:
        task = loop.create_task(execute(shell, code, sink, run, late, max_figures, route_fd_output),
                                name="pi-notebook-python-tool")
        run.bind_task(task)
        try:
            try:
                outcome = await task
            except asyncio.CancelledError:
                if not task.done():
                    task.cancel()
                if not (task.cancelled() and run.requested and not caller_cancelled()):
                    raise
                # Interrupted before the code's first step (e.g. aborted before it started).
                outcome = Outcome(interrupted=True, error=ErrorOutput(ename="KeyboardInterrupt",
                                                                      evalue=run.message))
        finally:
            elapsed = time.monotonic() - started
            sink.close()
        timed_out = outcome.interrupted and run.reason == "timeout"
        aborted = outcome.interrupted and run.reason == "aborted"
    stdout, stdout_total = sink.text("stdout")
    stderr, stderr_total = sink.text("stderr")
    return ExecutionResult(
        code=code,
        outputs=sink.outputs(),
        aborted=aborted,
        figures_dropped=outcome.figures_dropped + sink.images_dropped,
        stdout=stdout,
        stderr=stderr,
        displays=sink.displays,
        value=outcome.value,
        value_text=outcome.value_text,
        error=outcome.error,
        elapsed_s=elapsed,
        interrupted=outcome.interrupted,
        timed_out=timed_out,
        stdout_total=stdout_total,
        stderr_total=stderr_total,
        displays_dropped=sink.displays_dropped,
    )


def _late_sink(loop: asyncio.AbstractEventLoop, on_late: Callable[[ToolOutput], Any] | None,
               interval: float, cap: int, max_figures: int) -> OutputSink:
    """Where output written after the call returned goes (redacted, coalesced)."""

    at_line_start = {"stdout": True, "stderr": True}

    def stream(name: StreamName, text: str) -> None:
        if on_late is not None:
            on_late(StreamOutput(name=name, text=text))
            return
        orig = getattr(_capture_state, name, None)
        target = getattr(orig, "_pi_target", None) or getattr(sys, f"__{name}__")
        labelled = []
        for line in text.splitlines(keepends=True):
            labelled.append(f"{LATE_LABEL}{line}" if at_line_start[name] else line)
            at_line_start[name] = line.endswith("\n")
        target.write("".join(labelled))

    def display(data: dict, metadata: dict) -> None:
        if on_late is not None:
            on_late(DisplayOutput(data=data, metadata=metadata))
            return
        kinds = ", ".join(sorted(data)) or "empty"
        stream("stdout", f"(a display was not shown: {kinds})\n")

    return OutputSink(loop, stream, display, interval, cap, max_images=max(0, max_figures))


# --- the tool ---------------------------------------------------------------------------------

PYTHON_TOOL_DESCRIPTION = (
    "Run Python code in the user's Jupyter kernel, like a notebook cell: the notebook's "
    "variables are available and what you define stays. IPython syntax works (%magics, "
    "!shell commands, top-level await). Returns stdout/stderr, displays (figures are shown "
    "and closed), the value of the last expression, or the error with its traceback. Long "
    "output is shortened; prefer printing summaries over whole datasets."
)

PYTHON_TOOL_PARAMETERS = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "The Python/IPython code to run."},
    },
    "required": ["code"],
}


def make_python_tool(shell: InteractiveShell, settings: SettingsSource = None,
                     on_late_output: Callable[[str, ToolOutput], Any] | None = None) -> AgentTool:
    """The ``python`` AgentTool bound to ``shell``.

    ``settings``: a :class:`PythonToolSettings`, a callable returning one (read at each call,
    so configuration changes apply to the next call), or None (defaults).
    ``on_late_output(tool_call_id, record)``: output of the code's threads/tasks/processes
    after the call returned (see ``run_code``)."""

    async def execute(tool_call_id: str, params: Any, signal: Any = None,
                      on_update: Callable[[AgentToolResult], Any] | None = None) -> AgentToolResult:
        code = params.get("code") if isinstance(params, dict) else getattr(params, "code", None)
        if not isinstance(code, str):
            raise ValueError("the python tool needs a 'code' string argument")
        conf = resolve_settings(settings)

        def on_stream(name: StreamName, text: str) -> None:
            if on_update is not None:
                on_update(AgentToolResult(content=[], details=StreamOutput(name=name, text=text)))

        def on_display(data: dict, metadata: dict) -> None:
            if on_update is not None:
                on_update(AgentToolResult(content=[], details=DisplayOutput(data=data, metadata=metadata)))

        on_late = None
        if on_late_output is not None:
            def on_late(record: ToolOutput) -> None:
                on_late_output(tool_call_id, record)

        watch = watch_call(shell, code, conf)
        result = await run_code(
            shell, code, signal=signal, on_stream=on_stream, on_display=on_display,
            timeout_s=conf.timeout_s or None, stream_interval_s=conf.stream_interval_s,
            max_detail_chars=conf.max_detail_chars, max_figures=conf.max_figures,
            on_late=on_late, route_fd_output=conf.route_fd_output,
        )
        changes = finish_call(shell, watch)
        quiet = not (result.stdout or result.stderr or result.displays or result.value or result.error)
        assigned = assigned_summary(code, shell.user_ns) if quiet else None
        hint = note = None
        if result.error is not None and not result.interrupted:
            hint = error_hint(result.error.ename, result.error.evalue, shell.user_ns)
        elif result.error is None:
            note = unmatched_note(code, shell.user_ns)
        return AgentToolResult(
            content=result_content(result, conf, assigned, hint, changes, note),
            details=result.details(changes),
            is_error=result.is_error,
        )

    return AgentTool(
        name="python",
        label="Python",
        description=PYTHON_TOOL_DESCRIPTION,
        parameters=PYTHON_TOOL_PARAMETERS,
        execute=execute,
    )
