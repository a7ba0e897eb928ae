"""The execution engine of the ``python`` tool: one cell of agent code, run like IPython
runs a cell but without ``run_cell`` (see ``python_tool.py`` for the whole contract).

``execute(shell, code, sink, run, late, max_figures, route_fd_output) -> Outcome``: transform
(IPython transforms, the extension's own transformers skipped), compile statement by
statement with top-level ``await``, run the synchronous groups on a worker thread
(``worker.py``) and the awaiting statements on the loop, format the last value, turn
whatever the code raised into an error record, show (at most ``max_figures``) and close new
matplotlib figures (each with its words, ``figure_text.py``), all inside the call's routed
capture (``capture.py``) and fd routing (``fdroute.py``).
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
from dataclasses import dataclass
from types import CodeType
from typing import TYPE_CHECKING, Any

from ..kernel import interrupt as _interrupt_module
from ..kernel import worker as _worker
from ..kernel.capture import capture, hold_figure_flush, restore_routing
from ..kernel.fdroute import route_fds
from ..output.format import strip_ansi, value_text
from ..kernel.interrupt import ToolInterrupt
from ..trust.redact import redact, redact_data
from ..kernel.sink import OutputSink, redact_bundle
from ..output.updates import FIGURE_TEXT_MIME, ErrorOutput, ResultOutput, StreamName
from ..output.figure_text import figure_text

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = ["Outcome", "caller_cancelled", "execute", "transform_source"]

_cell_numbers = itertools.count(1)
_INTERRUPT_FILE = _interrupt_module.__file__


# --- execution --------------------------------------------------------------------------------

def _skip_own_transformer(fn: Any) -> bool:
    module = getattr(fn, "__module__", "") or ""
    return module.startswith("pi_notebook") or bool(getattr(fn, "_pi_notebook_skip_in_tools", False))


def _transform(shell: InteractiveShell, code: str) -> str:
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


# the code as the tool will compile it, for readers of the code before it runs (namespace_review.py)
transform_source = _transform


def _register_source(src: str) -> str:
    filename = f"<agent-code-{next(_cell_numbers)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(keepends=True), filename)
    return filename


def _quiet(src: str) -> bool:
    """IPython hides the value of a cell whose last line ends with ';'."""
    lines = [ln.split("#", 1)[0].rstrip() for ln in src.rstrip().splitlines()]
    lines = [ln for ln in lines if ln]
    return bool(lines) and lines[-1].endswith(";")


def _format_traceback(shell: InteractiveShell, etype: type, evalue: BaseException, tb: Any, filename: str) -> str:
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


def _render_pngs(figures: list[Any]) -> list[tuple[bytes, str] | str]:
    """Each figure as PNG bytes and its words (figure_text.py: read after this draw, which
    set its tick labels), or the text of the error that stopped its drawing."""
    pngs: list[tuple[bytes, str] | str] = []
    for fig in figures:
        try:
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
        except Exception as exc:  # one broken figure must not cost the others
            pngs.append(f"{type(exc).__name__}: {exc}")
            continue
        try:
            words = figure_text(fig)
        except Exception:  # the image goes on without its words
            words = ""
        pngs.append((buf.getvalue(), words))
    return pngs


def _close_figures(figures: list[Any]) -> None:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for fig in figures:
        try:
            plt.close(fig)
        except Exception:
            pass


async def _show_and_close_figures(shell: InteractiveShell, run: ToolInterrupt, sink: OutputSink,
                                  figures: list[Any], room: int) -> int:
    """The kernel shows new figures in post_execute, which never fires for agent code.

    Draws at most ``room`` of them, on a worker thread (drawing is the slow part: on the loop,
    ten figures kept the kernel silent for over a second), and none once the run was
    interrupted; publishes them on the loop; closes all; returns how many were closed
    without being drawn."""
    to_draw = [] if run.requested else figures[:room]
    try:
        pngs: list[tuple[bytes, str] | str] = []
        if to_draw:
            try:
                pngs = await _on_worker(run, sink, lambda: _render_pngs(to_draw))
            except (_Abandoned, KeyboardInterrupt):  # stopped while drawing: what is drawn is lost
                pngs = []
                _clear_our_cancel(run)
        for fig, png in zip(to_draw, pngs, strict=False):  # fewer pngs: stopped while drawing
            if isinstance(png, str):
                sink.stream("stderr", f"a figure could not be drawn: {png}\n")
                continue
            image, words = png
            data = {"image/png": base64.b64encode(image).decode("ascii"), "text/plain": repr(fig)}
            if words:
                data[FIGURE_TEXT_MIME] = words
            shell.display_pub.publish(data=data, metadata={})
    finally:
        _close_figures(figures)
    return len(figures) - len(pngs)


@dataclass
class Outcome:
    value: ResultOutput | None = None
    value_text: str | None = None
    error: ErrorOutput | None = None
    interrupted: bool = False
    figures_dropped: int = 0


def caller_cancelled() -> bool:
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

    def stream(self, name: StreamName, text: str) -> None:
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


def _format_value(shell: InteractiveShell, value: Any) -> tuple[dict, dict, str | None] | None:
    if value is None:
        return None
    formatter = shell.display_formatter
    if formatter is None:  # (a shell always has one once initialised)
        return None
    data, metadata = formatter.format(value)
    return data, metadata, (value_text(value, data) if data else None)


async def execute(shell: InteractiveShell, code: str, sink: OutputSink, run: ToolInterrupt,
                   late: OutputSink | None = None, max_figures: int = 10,
                   route_fd_output: bool = True) -> Outcome:
    out = Outcome()
    plt = sys.modules.get("matplotlib.pyplot")
    figures_before = set(plt.get_fignums()) if plt is not None else set()
    late_stream = late.stream if late is not None else None
    late_display = late.display if late is not None else None
    # Held from the first statement until the figures are closed: a request that ends
    # meanwhile neither shows nor draws the figures this code makes (guards.py).
    with hold_figure_flush(), capture(sink.stream, sink.display, on_late_stream=late_stream,
                                      on_late_display=late_display) as cap, route_fds(cap, route_fd_output):
        try:
            await _run_code(shell, code, sink, run, out)
        except BaseException:  # our caller was cancelled: nothing is shown
            _close_figures(_new_figures(figures_before))
            raise
        out.figures_dropped = await _show_and_close_figures(
            shell, run, sink, _new_figures(figures_before), max(0, max_figures - sink.images_kept))
    restore_routing()
    return out


async def _run_code(shell: InteractiveShell, code: str, sink: OutputSink, run: ToolInterrupt, out: Outcome) -> None:
    """Run the cell into ``out``: everything the code raises becomes ``out.error``; only the
    cancellation of our caller propagates."""
    filename = "<agent-code>"
    user_global_ns, user_ns = shell.user_global_ns, shell.user_ns
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
                out.value = ResultOutput(data=redact_bundle(data), metadata=redact_data(metadata))
                out.value_text = redact(text) if text is not None else None
    except _Abandoned:
        _clear_our_cancel(run)
        out.interrupted = True
        out.error = ErrorOutput(ename="KeyboardInterrupt", evalue=run.message + _BLOCKED_NOTE)
    except asyncio.CancelledError as exc:
        if run.requested:
            _clear_our_cancel(run)
            out.interrupted = True
            out.error = ErrorOutput(ename="KeyboardInterrupt", evalue=run.message)
        elif caller_cancelled():
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
        out.error = error_output(etype.__name__, redact(evalue_text),
                                 redact(_format_traceback(shell, etype, evalue, tb, filename)))
        del exc, tb, evalue


def error_output(ename: str, evalue: str, traceback_text: str) -> ErrorOutput:
    """The record of an exception; the traceback as the lines the view and the model read."""
    return ErrorOutput(ename=ename, evalue=evalue, traceback=traceback_text.splitlines())


def _error_record(shell: InteractiveShell, exc: BaseException, filename: str, run: ToolInterrupt) -> ErrorOutput:
    text = str(exc) or ("cancelled" if isinstance(exc, asyncio.CancelledError) else "")
    return error_output(type(exc).__name__, redact(text),
                        redact(_format_traceback(shell, type(exc), exc, exc.__traceback__, filename)))
