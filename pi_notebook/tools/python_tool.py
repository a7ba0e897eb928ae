"""The ``python`` tool: run code in the user's kernel namespace, like a cell, but privately.

``run_code(shell, code, *, signal, on_stream, on_display, timeout_s) -> ExecutionResult``
executes ``code`` with IPython semantics without ``run_cell*`` and without
``capture_output()`` (both break a concurrently running user cell or kernel dispatch,
jupyter-mechanics.md §5):

- ``shell.transform_cell`` (magics, ``!cmd``; the extension's own input transformers are
  skipped, they would make agent code wait for its own run), ``shell.transform_ast``, compile
  with ``PyCF_ALLOW_TOP_LEVEL_AWAIT``, exec in ``shell.user_ns``;
- the last expression's value is formatted with ``shell.display_formatter`` (not stored in
  ``Out``/``_``; ``In`` and ``execution_count`` are untouched); a trailing ``;`` hides it;
- output is captured through the routed proxies of ``capture.py``; new matplotlib figures are
  displayed as PNG and closed;
- errors carry IPython-style traceback text; the code runs in its own task on the caller's loop,
  interruptible by the AbortSignal, the timeout and the kernel's Stop button (``interrupt.py``).

Where the code runs (jupyter-mechanics.md, addendum trap 1): the cell is compiled statement by
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
import __future__

import ast
import asyncio
import base64
import contextvars
import inspect
import io
import itertools
import linecache
import sys
import time
import traceback as _traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from types import CodeType
from typing import Any, Union

from ..agent.types import AgentTool, AgentToolResult
from ..ai.types import ImageContent, TextContent
from . import interrupt as _interrupt_module
from . import worker as _worker
from .capture import LATE_LABEL, capture, hold_figure_flush, install_capture, restore_routing
from .capture import _state as _capture_state
from .fdroute import route_fds
from .format import IMAGE_MIMES, bundle_text, cut, prepare_image, strip_ansi, terminal_text, value_text
from .interrupt import ToolInterrupt, interrupt_main_for
from .redact import redact, redact_data, strip_unsafe_head
from .sink import OutputSink, redact_bundle
from .updates import DisplayOutput, ErrorOutput, PythonCallDetails, ResultOutput, StreamOutput, ToolOutput

__all__ = [
    "ExecutionResult",
    "PythonToolSettings",
    "make_python_tool",
    "result_content",
    "run_code",
]

_cell_numbers = itertools.count(1)
_INTERRUPT_FILE = _interrupt_module.__file__


@dataclass
class PythonToolSettings:
    """Budgets and switches of the notebook tools (built by the magics layer)."""

    max_output_chars: int = 8000  # stdout + stderr text sent to the model
    max_value_chars: int = 4000  # the value / display texts sent to the model
    max_images: int = 3  # images per call sent to the model
    image_pixel_budget: int = 1_000_000  # pixels per image (downscaled above)
    timeout_s: float | None = 300.0  # per call; None or 0 disables
    model_accepts_images: bool | Callable[[], bool] = True
    max_detail_chars: int = 200_000  # per stream kept in details (view/transcript/export)
    stream_interval_s: float = 0.1  # coalescing of live stream updates
    max_figures: int = 10  # images kept and drawn per call; further new figures are closed
    repr_timeout_s: float = 3.0  # list_variables (per value) / inspect_variable deadline
    route_fd_output: bool = True  # route fd 1/2 written during agent code to the call

    def accepts_images(self) -> bool:
        value = self.model_accepts_images
        try:
            return bool(value()) if callable(value) else bool(value)
        except Exception:
            return False


SettingsSource = Union[PythonToolSettings, Callable[[], PythonToolSettings], None]


def resolve_settings(settings: SettingsSource) -> PythonToolSettings:
    """A settings object, or a callable returning one (read at each call), or None."""
    if settings is None:
        return PythonToolSettings()
    if isinstance(settings, PythonToolSettings):
        return settings
    if callable(settings):
        value = settings()
        if isinstance(value, PythonToolSettings):
            return value
    raise TypeError("settings must be a PythonToolSettings, a callable returning one, or None")


@dataclass
class ExecutionResult:
    """The outcome of one ``run_code`` (all text already redacted)."""

    stdout: str = ""
    stderr: str = ""
    displays: list[dict[str, Any]] = field(default_factory=list)  # {"data", "metadata"}
    value: dict[str, Any] | None = None  # {"data", "metadata"}
    value_text: str | None = None  # model text of the value (_repr_llm_, DataFrame summary...)
    error: dict[str, Any] | None = None  # {"ename", "evalue", "traceback"}
    elapsed_s: float = 0.0
    interrupted: bool = False
    timed_out: bool = False
    aborted: bool = False
    stdout_total: int = 0  # characters written, including any dropped from the middle
    stderr_total: int = 0
    displays_dropped: int = 0
    figures_dropped: int = 0  # figures or images beyond max_figures (closed, not drawn/kept)
    code: str = ""
    outputs: list[ToolOutput] = field(default_factory=list)  # streams and displays, in order

    @property
    def is_error(self) -> bool:
        return self.error is not None or self.interrupted

    def details(self) -> PythonCallDetails:
        outputs = list(self.outputs)
        if self.value is not None:
            outputs.append(ResultOutput(data=self.value["data"], metadata=self.value.get("metadata") or {}))
        if self.error is not None:
            tb = self.error.get("traceback") or ""
            outputs.append(ErrorOutput(ename=self.error["ename"], evalue=self.error.get("evalue") or "",
                                       traceback=tb.splitlines() if tb else []))
        return PythonCallDetails(
            code=self.code, outputs=outputs, elapsed_s=round(self.elapsed_s, 3),
            interrupted=self.interrupted, timed_out=self.timed_out, aborted=self.aborted,
        )


# --- execution --------------------------------------------------------------------------------

def _skip_own_transformer(fn: Any) -> bool:
    module = getattr(fn, "__module__", "") or ""
    return module.startswith("pi_notebook") or bool(getattr(fn, "_pi_notebook_skip_in_tools", False))


def _transform(shell: Any, code: str) -> str:
    manager: Any = getattr(shell, "input_transformer_manager", None)
    cleanup = getattr(manager, "cleanup_transforms", None)
    if not cleanup or not any(_skip_own_transformer(t) for t in cleanup):
        return shell.transform_cell(code)
    # Synchronous on the loop thread: no cell can transform in between.
    manager.cleanup_transforms = [t for t in cleanup if not _skip_own_transformer(t)]
    try:
        return shell.transform_cell(code)
    finally:
        manager.cleanup_transforms = cleanup


def _register_source(src: str) -> str:
    filename = f"<agent-code-{next(_cell_numbers)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(keepends=True), filename)
    return filename


def _quiet(src: str) -> bool:
    """IPython hides the value of a cell whose last line ends with ';'."""
    lines = [ln.split("#", 1)[0].rstrip() for ln in src.rstrip().splitlines()]
    lines = [ln for ln in lines if ln]
    return bool(lines) and lines[-1].endswith(";")


def _format_traceback(shell: Any, etype: type, evalue: BaseException, tb: Any, filename: str) -> str:
    # Start the traceback at the first frame of the agent code (drop our own frames).
    start = tb
    while start is not None and start.tb_frame.f_code.co_filename != filename:
        start = start.tb_next
    if start is None:
        start = tb
    # ...and end it before our SIGINT handler's frame (an interrupt is raised from there).
    node = start
    while node is not None and node.tb_next is not None:
        if node.tb_next.tb_frame.f_code.co_filename == _INTERRUPT_FILE:
            node.tb_next = None
            break
        node = node.tb_next
    try:
        if issubclass(etype, SyntaxError):
            lines = shell.InteractiveTB.structured_traceback(etype, evalue, None)
        else:
            lines = shell.InteractiveTB.structured_traceback(etype, evalue, start, tb_offset=0)
        text = "\n".join(lines)
    except Exception:
        text = "".join(_traceback.format_exception(etype, evalue, start))
    return strip_ansi(text)


def _new_figures(before: set[int]) -> list[Any]:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    return [plt.figure(num) for num in plt.get_fignums() if num not in before]


def _show_and_close_figures(shell: Any, figures: list[Any], room: int) -> int:
    """The kernel shows new figures in post_execute, which never fires for agent code.

    Draws at most ``room`` of them (drawing is the slow part); closes all; returns how many
    were closed without being drawn."""
    plt = sys.modules.get("matplotlib.pyplot")
    dropped = 0
    for index, fig in enumerate(figures):
        try:
            if index >= room:
                dropped += 1
                continue
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
            data = {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"), "text/plain": repr(fig)}
            shell.display_pub.publish(data=data, metadata={})
        finally:
            if plt is not None:
                plt.close(fig)
    return dropped


@dataclass
class _Outcome:
    value: dict[str, Any] | None = None
    value_text: str | None = None
    error: dict[str, Any] | None = None
    interrupted: bool = False
    figures_dropped: int = 0


def _caller_cancelled() -> bool:
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling()) if cancelling is not None else False


def _clear_our_cancel(run: ToolInterrupt) -> None:
    """Forget a cancel() we sent to this task to interrupt it (it is handled)."""
    task = asyncio.current_task()
    if run.requested and task is not None and hasattr(task, "cancelling") and task.cancelling():
        task.uncancel()  # type: ignore[attr-defined,unused-ignore]  # Python >= 3.11 (cancelling() exists)


# --- where each part runs ---------------------------------------------------------------------

_ABANDON_GRACE_S = 0.5  # after an interrupt, how long to wait for a worker before giving up
_POLL_S = 0.2  # how often a waiting task looks for a new interrupt request
_BLOCKED_NOTE = (" (the code was inside a call that does not respond to interrupts; "
                 "it stops as soon as that call returns)")


class _Abandoned(Exception):
    """The worker did not stop within the grace period after an interrupt."""


class _Gate:
    """Forwards a worker's output to the sink until the task stops waiting for it."""

    __slots__ = ("sink", "open")

    def __init__(self, sink: OutputSink) -> None:
        self.sink = sink
        self.open = True

    def stream(self, name: str, text: str) -> None:
        if self.open:
            self.sink.stream(name, text)

    def display(self, data: dict, metadata: dict) -> None:
        if self.open:
            self.sink.display(data, metadata)


async def _on_worker(run: ToolInterrupt, sink: OutputSink, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` (synchronous agent code) on a worker thread in a copy of this context and
    return its result or raise its exception, here on the loop.

    The loop stays free meanwhile: Abort clicks, other requests and the live output (the sink
    hops to the loop) are handled at once. An interrupt request raises KeyboardInterrupt in
    the worker (``run.running()`` registers the thread); if the code is stuck in a call that
    does not return to Python, the task stops waiting after ``_ABANDON_GRACE_S`` and the
    worker's later output is dropped.
    """
    gate = _Gate(sink)

    def job() -> tuple[bool, Any]:
        try:
            # The worker's own capture: it outlives our wait if the worker is abandoned.
            with capture(gate.stream, gate.display), run.running():
                return True, fn()
        except BaseException as exc:
            return False, exc

    worker, concurrent_future = _worker.submit(job, contextvars.copy_context())
    future = asyncio.wrap_future(concurrent_future)
    deadline: float | None = None
    # A request ending meanwhile must not show (and close) the figures this code is making.
    with run.waiting_for_worker(), hold_figure_flush():
        while True:
            try:
                done, _ = await asyncio.wait({future}, timeout=_POLL_S if deadline is None else 0.05)
            except asyncio.CancelledError:
                if not run.requested:
                    # Our caller is cancelled: stop the code, do not wait for it.
                    run.kick()
                    gate.open = False
                    _worker.abandon(worker)
                    raise
                _clear_our_cancel(run)  # our own cancel, sent before this wait began
                continue
            if done:
                break
            if run.requested:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + _ABANDON_GRACE_S
                elif now >= deadline:
                    gate.open = False
                    _worker.abandon(worker)
                    raise _Abandoned()
    ok, value = future.result()
    if not ok:
        raise value
    return value


def _async_flag(code_obj: CodeType) -> bool:
    return bool(code_obj.co_flags & inspect.CO_COROUTINE)


def _compile_steps(tree: ast.Module, last: ast.Expression | None,
                   filename: str) -> tuple[list[tuple[bool, list[CodeType]]], tuple[bool, CodeType] | None]:
    """Compile the cell statement by statement (as IPython does) and group them.

    A statement that uses top-level ``await`` compiles to a code object with CO_COROUTINE;
    it must run on the loop. All others run on a worker thread, consecutive ones in one
    job. In a mixed cell, only the statements that await stay on the loop, so a busy loop
    before or after an ``await`` is still interruptible by the Abort button.
    """
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    groups: list[tuple[bool, list[CodeType]]] = []
    for node in tree.body:
        module = ast.Module(body=[node], type_ignores=[])
        code_obj = compile(module, filename, "exec", flags=flags, dont_inherit=True)
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            # Compiled one by one, later statements must still see the cell's future imports.
            for alias in node.names:
                feature = getattr(__future__, alias.name, None)
                flags |= getattr(feature, "compiler_flag", 0)
        is_async = _async_flag(code_obj)
        if groups and not is_async and not groups[-1][0]:
            groups[-1][1].append(code_obj)
        else:
            groups.append((is_async, [code_obj]))
    value = None
    if last is not None:
        code_obj = compile(last, filename, "eval", flags=flags, dont_inherit=True)
        value = (_async_flag(code_obj), code_obj)
    return groups, value


def _format_value(shell: Any, value: Any) -> tuple[dict, dict, str | None] | None:
    if value is None:
        return None
    data, metadata = shell.display_formatter.format(value)
    return data, metadata, (value_text(value, data) if data else None)


async def _execute(shell: Any, code: str, sink: OutputSink, run: ToolInterrupt,
                   late: OutputSink | None = None, max_figures: int = 10,
                   route_fd_output: bool = True) -> _Outcome:
    out = _Outcome()
    filename = "<agent-code>"
    plt = sys.modules.get("matplotlib.pyplot")
    figures_before = set(plt.get_fignums()) if plt is not None else set()
    user_global_ns, user_ns = shell.user_global_ns, shell.user_ns
    late_stream = late.stream if late is not None else None
    late_display = late.display if late is not None else None
    with capture(sink.stream, sink.display, on_late_stream=late_stream,
                 on_late_display=late_display) as cap, route_fds(cap, route_fd_output):
        try:
            with run.running():
                src = _transform(shell, code)
                filename = _register_source(src)
                tree = shell.transform_ast(ast.parse(src, filename=filename))
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr) and not _quiet(src):
                    last = ast.Expression(tree.body.pop().value)
                groups, last_step = _compile_steps(tree, last, filename)
            formatted = None
            for index, (is_async, codes) in enumerate(groups):
                if is_async:
                    with run.running():
                        result = eval(codes[0], user_global_ns, user_ns)
                    if inspect.iscoroutine(result):
                        await run.drive(result)
                    continue
                # The value joins the job of the last group when both are synchronous.
                value_code = None
                if index == len(groups) - 1 and last_step is not None and not last_step[0]:
                    value_code, last_step = last_step[1], None

                def run_sync(codes: list[CodeType] = codes, value_code: CodeType | None = value_code) -> Any:
                    for code_obj in codes:
                        exec(code_obj, user_global_ns, user_ns)
                    if value_code is None:
                        return None
                    return _format_value(shell, eval(value_code, user_global_ns, user_ns))

                formatted = await _on_worker(run, sink, run_sync)
            if last_step is not None:
                is_async, value_code = last_step
                if is_async:
                    with run.running():
                        value = eval(value_code, user_global_ns, user_ns)
                    if inspect.iscoroutine(value):
                        value = await run.drive(value)
                    # Formatting calls the value's own repr code: also off the loop.
                    formatted = None if value is None else await _on_worker(
                        run, sink, lambda: _format_value(shell, value))
                else:
                    formatted = await _on_worker(
                        run, sink, lambda: _format_value(shell, eval(value_code, user_global_ns, user_ns)))
            if formatted is not None:
                data, metadata, text = formatted
                if data:
                    out.value = {"data": redact_bundle(data), "metadata": redact_data(metadata)}
                    out.value_text = redact(text) if text is not None else None
        except _Abandoned:
            _clear_our_cancel(run)
            out.interrupted = True
            out.error = {"ename": "KeyboardInterrupt", "evalue": run.message + _BLOCKED_NOTE, "traceback": ""}
        except asyncio.CancelledError as exc:
            if run.requested:
                _clear_our_cancel(run)
                out.interrupted = True
                out.error = {"ename": "KeyboardInterrupt", "evalue": run.message, "traceback": ""}
            elif _caller_cancelled():
                raise  # our caller was cancelled: not ours to swallow
            else:  # the code itself raised (or awaited something cancelled): its error
                out.error = _error_record(shell, exc, filename, run)
        except BaseException as exc:  # everything the code raises is the tool's result
            etype, evalue, tb = type(exc), exc, exc.__traceback__
            out.interrupted = isinstance(exc, KeyboardInterrupt) and run.requested
            if out.interrupted:
                _clear_our_cancel(run)
            evalue_text = str(evalue)
            if out.interrupted and run.requested:
                evalue_text = run.message
            out.error = {
                "ename": etype.__name__,
                "evalue": redact(evalue_text),
                "traceback": redact(_format_traceback(shell, etype, evalue, tb, filename)),
            }
            del exc, tb, evalue
        finally:
            # On the loop, after the worker: figures made off the main thread are drawn here
            # (what post_execute would do for a cell).
            try:
                with run.running(check=False):
                    out.figures_dropped = _show_and_close_figures(
                        shell, _new_figures(figures_before), max(0, max_figures - sink.images_kept))
            except BaseException:
                pass
    restore_routing()
    return out


def _error_record(shell: Any, exc: BaseException, filename: str, run: ToolInterrupt) -> dict[str, Any]:
    text = str(exc) or ("cancelled" if isinstance(exc, asyncio.CancelledError) else "")
    return {
        "ename": type(exc).__name__,
        "evalue": redact(text),
        "traceback": redact(_format_traceback(shell, type(exc), exc, exc.__traceback__, filename)),
    }


async def run_code(
    shell: Any,
    code: str,
    *,
    signal: Any = None,
    on_stream: Callable[[str, str], Any] | None = None,
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
    kernel = getattr(shell, "kernel", None)
    with interrupt_main_for(signal, timeout_s=timeout_s, loop=loop, kernel=kernel) as run:
        task = loop.create_task(_execute(shell, code, sink, run, late, max_figures, route_fd_output),
                                name="pi-notebook-python-tool")
        run.bind_task(task)
        try:
            try:
                outcome = await task
            except asyncio.CancelledError:
                if not task.done():
                    task.cancel()
                if not (task.cancelled() and run.requested and not _caller_cancelled()):
                    raise
                # Interrupted before the code's first step (e.g. aborted before it started).
                outcome = _Outcome(interrupted=True, error={
                    "ename": "KeyboardInterrupt", "evalue": run.message, "traceback": ""})
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

    def stream(name: str, text: str) -> None:
        if on_late is not None:
            on_late(StreamOutput(name=name, text=text))  # type: ignore[arg-type]
            return
        orig = getattr(_capture_state, name, None)
        target = getattr(orig, "_pi_orig", None) or getattr(sys, f"__{name}__")
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


# --- the model's view -------------------------------------------------------------------------

def _short_traceback(text: str, max_lines: int = 40, max_chars: int = 3000) -> str:
    lines = text.strip("\n").splitlines()
    if len(lines) > max_lines:
        lines = ["[... earlier traceback lines cut ...]", *lines[-max_lines:]]
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = "[... cut ...]" + strip_unsafe_head(text[-max_chars:])
    return text


def result_content(result: ExecutionResult, settings: PythonToolSettings) -> list[TextContent | ImageContent]:
    """The model-facing content of an execution (see the module docstring)."""
    parts: list[str] = []
    images: list[ImageContent] = []
    accepts_images = settings.accepts_images()
    out_budget = settings.max_output_chars
    streams = [(n, terminal_text(t)) for n, t in (("stdout", result.stdout), ("stderr", result.stderr)) if t]
    total = sum(len(t) for _, t in streams) or 1
    for name, text in streams:
        budget = max(200, out_budget * len(text) // total) if out_budget > 0 else 0
        parts.append(f"[{name}]\n{cut(text, budget).rstrip()}")

    def add_bundle(label: str, data: dict[str, Any], text: str | None) -> None:
        image_mime = next((m for m in IMAGE_MIMES if m in data), None)
        if image_mime is not None:
            if not accepts_images:
                parts.append(f"[{label}: {image_mime} image, not shown: the model does not take images]")
            elif len(images) >= settings.max_images:
                parts.append(f"[{label}: {image_mime} image omitted: at most {settings.max_images} images per call]")
            else:
                prepared = prepare_image(data[image_mime], image_mime, settings.image_pixel_budget)
                if isinstance(prepared, str):
                    parts.append(f"[{label}: {prepared}]")
                else:
                    b64, mime, note = prepared
                    images.append(ImageContent(data=b64, mime_type=mime))
                    parts.append(f"[{label}: image {len(images)} attached ({note})]")
            return
        if text is None:
            text = bundle_text(data)
        if text is None:
            kinds = ", ".join(sorted(data)) or "empty"
            parts.append(f"[{label}: {kinds} (not shown to the model)]")
            return
        parts.append(f"[{label}]\n{cut(strip_ansi(text), settings.max_value_chars).rstrip()}")

    for i, display in enumerate(result.displays, 1):
        add_bundle(f"display {i}", display.get("data") or {}, None)
    if result.displays_dropped:
        parts.append(f"[{result.displays_dropped} more displays not kept]")
    if result.figures_dropped:
        parts.append(f"[{result.figures_dropped} more figures/images not drawn or kept: at most "
                     f"{settings.max_figures} per call; they were closed]")
    if result.value is not None:
        add_bundle("value", result.value.get("data") or {}, result.value_text)
    if result.error is not None:
        err = result.error
        head = f"{err['ename']}: {err['evalue']}" if err.get("evalue") else err["ename"]
        if result.interrupted:
            parts.append(f"[interrupted] {head}")
        else:
            parts.append(f"[error] {head}")
        if err.get("traceback"):
            parts.append(_short_traceback(err["traceback"]))
    if not parts:
        parts.append("(no output)")
    parts.append(f"[elapsed {result.elapsed_s:.2f} s]")
    content: list[TextContent | ImageContent] = [TextContent(text="\n\n".join(parts))]
    content.extend(images)
    return content


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


def make_python_tool(shell: Any, settings: SettingsSource = None,
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

        def on_stream(name: str, text: str) -> None:
            if on_update is not None:
                on_update(AgentToolResult(content=[], details=StreamOutput(name=name, text=text)))  # type: ignore[arg-type]

        def on_display(data: dict, metadata: dict) -> None:
            if on_update is not None:
                on_update(AgentToolResult(content=[], details=DisplayOutput(data=data, metadata=metadata)))

        on_late = None
        if on_late_output is not None:
            def on_late(record: ToolOutput) -> None:
                on_late_output(tool_call_id, record)

        result = await run_code(
            shell, code, signal=signal, on_stream=on_stream, on_display=on_display,
            timeout_s=conf.timeout_s or None, stream_interval_s=conf.stream_interval_s,
            max_detail_chars=conf.max_detail_chars, max_figures=conf.max_figures,
            on_late=on_late, route_fd_output=conf.route_fd_output,
        )
        return AgentToolResult(
            content=result_content(result, conf),
            details=result.details(),
            is_error=result.is_error,
        )

    return AgentTool(
        name="python",
        label="Python",
        description=PYTHON_TOOL_DESCRIPTION,
        parameters=PYTHON_TOOL_PARAMETERS,
        execute=execute,
    )
