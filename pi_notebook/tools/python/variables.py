"""Tools that let the model look at the user's variables without running code.

- ``list_variables``: one line per user variable: name, type, shape or length, short repr.
  Skips modules, private names (``_x``), IPython internals (``In``, ``Out``, ``exit``,
  ``quit``, ``get_ipython``) and names the shell hides (``user_ns_hidden``).
- ``inspect_variable(name)``: pandas DataFrame: shape, dtypes, ``describe()``, ``head()``;
  numpy array: shape, dtype, min/max/mean/std (numeric); anything else: type and a truncated
  repr.

Every text is redacted *before* it is cut (``format.cut``/``clip``; the reprs used here
redact a value before reprlib shortens it), so no piece of a secret survives a cut.

A user ``__repr__`` (or ``__len__``, ``describe()``) may be slow, endless or raising. They run
on a worker thread (``worker.py``), one value at a time, with a deadline per value
(``repr_timeout_s``): past it the worker gets an asynchronous KeyboardInterrupt, and a value
stuck in a call that never returns to Python is left behind (the worker is abandoned, the
listing goes on in a new one). Such a value reads ``<repr took too long (> N s)>``; a raising
one ``<repr failed: Type: message>``. Abort and the kernel's Stop button end the tool call
(``interrupt.py``). Output printed by those methods is discarded.

``make_variable_tools(shell, settings=None) -> list[AgentTool]``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextvars
import functools
import reprlib
import time
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...agent.types import AgentTool, AgentToolResult
from ...ai.types import TextContent
from ..kernel import worker as _worker
from ..kernel.kernel_host import kernel_host
from ..kernel.capture import capture, capture_installed
from ..trust.credentials import CREDENTIAL_NOTE, looks_like_credential, redact_shapes
from ..output.format import clip, cut, dataframe_summary, series_summary
from ..kernel.interrupt import interrupt_main_for

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = ["describe_variable", "list_user_variables", "make_variable_tools"]

_INTERNAL = frozenset({"In", "Out", "exit", "quit", "get_ipython"})
_MAX_LISTED = 200
DEFAULT_REPR_TIMEOUT_S = 3.0
_GRACE_S = 0.5  # after the deadline's interrupt, how long before the worker is left behind
_POLL_S = 0.02


class _RedactingRepr(reprlib.Repr):
    """reprlib, but strings and instance reprs are redacted before reprlib shortens them."""

    def repr_str(self, x: str, level: int) -> str:
        keep = self.maxstring + 512  # what reprlib can show, plus room for a whole secret
        if len(x) > 2 * keep:
            x = x[:keep] + x[-keep:]
        return super().repr_str(redact_shapes(cut(x, 0)), level)

    def repr_instance(self, x: Any, level: int) -> str:
        s = redact_shapes(cut(builtins.repr(x), 0))  # cut(.., 0) only redacts; a raising repr propagates
        if len(s) > self.maxother:
            i = max(0, (self.maxother - 3) // 2)
            j = max(0, self.maxother - 3 - i)
            s = s[:i] + "..." + s[len(s) - j:]
        return cut(s, 0)


_short = _RedactingRepr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = _short.maxtuple = _short.maxdict = _short.maxset = 6
_long = _RedactingRepr()  # inspect_variable: bounded even for huge containers
_long.maxstring = _long.maxother = 4000
_long.maxlist = _long.maxtuple = _long.maxdict = _long.maxset = _long.maxdeque = 100
_long.maxlevel = 4


def _type_name(obj: Any) -> str:
    cls = type(obj)
    module = cls.__module__
    if module in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{module.split('.')[0]}.{cls.__qualname__}"


def _shape(obj: Any) -> str:
    shape = getattr(obj, "shape", None)
    if isinstance(shape, tuple):
        return "shape " + "x".join(str(n) for n in shape)
    if isinstance(obj, (str, bytes, list, tuple, dict, set, frozenset)):
        return f"len {len(obj)}"
    return ""


def _short_repr(obj: Any) -> str:
    return clip(" ".join(_short.repr(obj).split()), 100)


def _credential(name: str, value: Any) -> bool:
    return type(value) in (str, bytes, bytearray) and looks_like_credential(value, name)


def _row(name: str, value: Any) -> str:
    if _credential(name, value):
        return f"{name} | {_type_name(value)} | len {len(value)} | ({CREDENTIAL_NOTE})"
    parts = [name, _type_name(value)]
    shape = _shape(value)
    if shape:
        parts.append(shape)
    return " | ".join(parts) + " | " + _short_repr(value)


def _visible(shell: InteractiveShell) -> list[tuple[str, Any]]:
    hidden = getattr(shell, "user_ns_hidden", {}) or {}
    out = []
    for name, value in list(shell.user_ns.items()):
        if name.startswith("_") or name in _INTERNAL:
            continue
        if name in hidden and hidden[name] is value:
            continue
        if isinstance(value, types.ModuleType):
            continue
        out.append((name, value))
    return out


def _failure(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:
        message = "?"
    return f"repr failed: {type(exc).__name__}: {clip(message, 200)}" if message else \
        f"repr failed: {type(exc).__name__}"


def _too_long(limit_s: float) -> str:
    return f"repr took too long (> {limit_s:g} s)"


class _Progress:
    """Which job the worker is on and since when (written by the worker, read by the loop)."""

    def __init__(self) -> None:
        self.index = 0
        self.started = time.monotonic()


async def run_bounded(jobs: list[Callable[[], str]], limit_s: float, *, signal: Any = None,
                      kernel: Any = None) -> list[str] | None:
    """Run each job on a worker thread with a deadline of ``limit_s`` (module doc).

    Returns one text per job, ``None`` if Abort or Stop ended the call.
    """
    results: list[str | None] = [None] * len(jobs)
    loop = asyncio.get_running_loop()
    progress = _Progress()
    with interrupt_main_for(signal, loop=loop, kernel=kernel) as run:

        def work(start: int) -> None:
            for i in range(start, len(jobs)):
                progress.index, progress.started = i, time.monotonic()
                try:
                    with run.running():
                        text = jobs[i]()
                except KeyboardInterrupt:
                    if run.requested:
                        return
                    text = _too_long(limit_s)
                except BaseException as exc:
                    text = _failure(exc)
                results[i] = text
            progress.index = len(jobs)

        def job(start: int) -> None:
            if capture_installed():
                with capture(_discard, _discard):
                    work(start)
            else:
                work(start)

        start = 0
        while start < len(jobs) and not run.requested:
            worker, future = _worker.submit(functools.partial(job, start), contextvars.copy_context())
            waiting = asyncio.wrap_future(future)
            kicked: tuple[int, float] | None = None
            start = len(jobs)
            while not waiting.done():
                try:
                    await asyncio.wait({waiting}, timeout=_POLL_S)
                except asyncio.CancelledError:
                    run.kick()
                    _worker.abandon(worker)
                    raise
                now = time.monotonic()
                index = progress.index
                if run.requested:
                    if kicked is None:
                        kicked = (index, now)
                    elif now - kicked[1] > _GRACE_S:
                        _worker.abandon(worker)
                        break
                    continue
                if index >= len(jobs) or now - progress.started <= limit_s:
                    continue
                if kicked is None or kicked[0] != index:
                    kicked = (index, now)
                    run.kick()
                elif now - kicked[1] > _GRACE_S:
                    # Stuck in a call that does not return to Python: leave it behind.
                    _worker.abandon(worker)
                    results[index] = _too_long(limit_s)
                    start = index + 1
                    break
        if run.requested:
            return None
    return [r if r is not None else _too_long(limit_s) for r in results]


def _discard(*_: Any) -> None:
    return None


def _visible_sorted(shell: InteractiveShell) -> list[tuple[str, Any]]:
    return sorted(_visible(shell), key=lambda kv: kv[0].lower())


async def list_user_variables(shell: InteractiveShell, limit_s: float = DEFAULT_REPR_TIMEOUT_S, *,
                              signal: Any = None) -> str | None:
    """The listing (None when aborted)."""
    items = _visible_sorted(shell)
    extra = len(items) - _MAX_LISTED
    items = items[:_MAX_LISTED]
    if not items:
        return "No user variables defined."

    def job(name: str, value: Any) -> Callable[[], str]:
        return lambda: _row(name, value)

    rows = await run_bounded([job(n, v) for n, v in items], limit_s, signal=signal,
                             kernel=kernel_host(shell).kernel)
    if rows is None:
        return None
    rows = [row if row.startswith(f"{name} | ") else f"{name} | {_type_name(value)} | <{row}>"
            for row, (name, value) in zip(rows, items, strict=True)]
    if extra > 0:
        rows.append(f"... {extra} more variables")
    return redact_shapes(cut("name | type | shape/len | value\n" + "\n".join(rows), 0))


def _is_pandas(obj: Any, name: str) -> bool:
    cls = type(obj)
    return cls.__name__ == name and cls.__module__.split(".")[0] == "pandas"


def _is_ndarray(obj: Any) -> bool:
    cls = type(obj)
    return cls.__name__ == "ndarray" and cls.__module__.split(".")[0] == "numpy"


def describe_variable(value: Any, name: str, budget: int = 6000) -> str:
    if _credential(name, value):
        return f"{name}: {_type_name(value)}, len {len(value)} ({CREDENTIAL_NOTE})"
    if _is_pandas(value, "DataFrame"):
        text = dataframe_summary(value)
        try:
            text += "\ndescribe():\n" + value.describe(include="all").to_string(max_cols=20)
        except Exception as exc:  # describe() fails on some exotic frames
            text += f"\ndescribe() failed: {type(exc).__name__}: {exc}"
    elif _is_pandas(value, "Series"):
        text = series_summary(value)
        try:
            text += "\ndescribe():\n" + value.describe().to_string()
        except Exception as exc:
            text += f"\ndescribe() failed: {type(exc).__name__}: {exc}"
    elif _is_ndarray(value):
        text = f"numpy.ndarray: shape {value.shape}, dtype {value.dtype}, size {value.size}"
        if value.size and value.dtype.kind in "biuf":
            import numpy as np

            finite = value[np.isfinite(value)] if value.dtype.kind == "f" else value
            if finite.size:
                text += (f"\nmin {finite.min().item()!r}, max {finite.max().item()!r}, "
                         f"mean {finite.mean().item():.6g}, std {finite.std().item():.6g}")
            if finite.size != value.size:
                text += f"\nnon-finite values: {value.size - finite.size}"
        text += "\n" + repr(value)
    else:
        text = f"{_type_name(value)}"
        shape = _shape(value)
        if shape:
            text += f", {shape}"
        text += "\n" + _long.repr(value)
    return cut(redact_shapes(cut(f"{name}: {text}", 0)), budget)  # redact, then cut


_ABORTED = "Stopped: the run was aborted or interrupted before the listing finished."


def make_variable_tools(shell: InteractiveShell, settings: Any = None) -> list[AgentTool]:
    """``settings``: what ``make_notebook_tools`` takes (``max_output_chars`` and
    ``repr_timeout_s`` are used), read at each call."""
    from .python_tool import resolve_settings

    def budgets() -> tuple[int, float]:
        conf = resolve_settings(settings)
        return int(conf.max_output_chars or 6000), float(conf.repr_timeout_s or DEFAULT_REPR_TIMEOUT_S)

    async def list_variables(tool_call_id: str, params: Any, signal: Any = None,
                             on_update: Any = None) -> AgentToolResult:
        budget, limit_s = budgets()
        text = await list_user_variables(shell, limit_s, signal=signal)
        if text is None:
            return AgentToolResult(content=[TextContent(text=_ABORTED)], details={"text": _ABORTED},
                                   is_error=True)
        return AgentToolResult(content=[TextContent(text=cut(text, budget))], details={"text": text})

    async def inspect_variable(tool_call_id: str, params: Any, signal: Any = None,
                               on_update: Any = None) -> AgentToolResult:
        name = params.get("name") if isinstance(params, dict) else getattr(params, "name", None)
        if not isinstance(name, str) or not name:
            raise ValueError("inspect_variable needs a 'name' string argument")
        if name not in shell.user_ns:
            raise ValueError(f"No variable named {clip(name, 100)!r} in the user namespace. "
                             "Use list_variables to see what exists.")
        budget, limit_s = budgets()
        value = shell.user_ns[name]
        texts = await run_bounded([lambda: describe_variable(value, name, budget)], limit_s,
                                  signal=signal, kernel=kernel_host(shell).kernel)
        if texts is None:
            return AgentToolResult(content=[TextContent(text=_ABORTED)], details={"name": name},
                                   is_error=True)
        text = texts[0]
        if not text.startswith(f"{name}: "):  # the describing itself failed or took too long
            text = f"{name}: {_type_name(value)}\n<{text}>"
        return AgentToolResult(content=[TextContent(text=text)], details={"name": name, "text": text})

    return [
        AgentTool(
            name="list_variables",
            label="Variables",
            description="List the user's notebook variables: name, type, shape or length, short value.",
            parameters={"type": "object", "properties": {}},
            execute=list_variables,
        ),
        AgentTool(
            name="inspect_variable",
            label="Inspect",
            description=("Describe one notebook variable: DataFrames (dtypes, describe, head), "
                         "arrays (shape, dtype, stats), other objects (truncated repr)."),
            parameters={
                "type": "object",
                "properties": {"name": {"type": "string", "description": "The variable name."}},
                "required": ["name"],
            },
            execute=inspect_variable,
        ),
    ]
