"""Kernel hooks that must behave differently while agent code runs (inside a capture).

Installed and removed by ``capture.install_capture`` / ``uninstall_capture``; each hook asks
``current()`` (the open capture of the calling context, or None) and behaves as before for
everything else:

- ``shell.ask_exit`` (what IPython's ``exit``/``quit`` call) raises ``SystemExit`` instead,
  so agent code cannot shut the user's kernel down; the tool reports it as an error.
- ``input()`` / ``getpass.getpass()`` (``builtins`` while idle, ``kernel.raw_input`` /
  ``kernel.getpass`` that ipykernel installs per request) raise ``StdinNotImplementedError``
  with a clear message: nobody can answer agent code, and from a worker thread during a
  user's request ipykernel would ask the user in the wrong cell.
- The two figure callbacks of ``post_execute`` are skipped by requests that end while
  ``hold_figure_flush()`` is held (agent code is running, from its first statement until its
  figures are closed):
  * matplotlib-inline's ``flush_figures`` displays and closes *all* open figures of the
    current request: a half-made agent figure would land in the user's cell;
  * pyplot's ``_draw_all_if_interactive`` draws every *stale* figure, on the kernel's main
    thread: agent code making 1,000 pyplot figures kept every request (a ``%agent status``,
    a widget's request) busy drawing all of them, 32 s without an answer. The agent's
    figures are drawn (at most ``max_figures``, off the loop) or closed undrawn by the tool.
  matplotlib keeps its "draw pending" and "stale" flags, so the user's own figures are drawn
  and shown after the next request.
- ``shell._showtraceback`` (called when a display formatter raises, e.g. a broken
  ``_repr_html_``; ipykernel publishes an ``error`` message in whatever cell is current)
  writes the traceback to the capture's stderr instead.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "DISPLAY_ERROR_NOTE",
    "EXIT_REFUSED",
    "INPUT_REFUSED",
    "hold_figure_flush",
    "install_guards",
    "uninstall_guards",
]


class _Guards:
    def __init__(self) -> None:
        self.current: Callable[[], Any] = lambda: None
        self.ask_exit: Callable[..., Any] | None = None
        self.trigger: Callable[..., Any] | None = None
        self.input_guards: list[tuple[Any, str, Any, bool]] = []  # (owner, name, guard, was own attr)
        self.showtraceback: Callable[..., Any] | None = None


_guards = _Guards()


def _current_capture() -> Any:
    return _guards.current()


def install_guards(shell: Any, current: Callable[[], Any]) -> None:
    """Install every hook on ``shell`` (``current()``: the open capture of the caller)."""
    _guards.current = current
    _install_exit_guard(shell)
    _install_flush_guard(shell)
    _install_input_guards(shell)
    _install_traceback_guard(shell)


def uninstall_guards(shell: Any) -> None:
    """Remove what :func:`install_guards` installed (hooks replaced since are left alone)."""
    for name, guard in (("ask_exit", _guards.ask_exit), ("_showtraceback", _guards.showtraceback)):
        if guard is not None and shell is not None and shell.__dict__.get(name) is guard:
            if guard.__dict__["_pi_was_instance_attr"]:
                shell.__dict__[name] = guard.__dict__["_pi_orig"]
            else:
                del shell.__dict__[name]
    _uninstall_input_guards()
    trigger = _guards.trigger
    events = getattr(shell, "events", None)
    if trigger is not None and events is not None and events.__dict__.get("trigger") is trigger:
        del events.__dict__["trigger"]
    _guards.__init__()  # type: ignore[misc]


DISPLAY_ERROR_NOTE = "Error while formatting a value for display:\n"


def _install_traceback_guard(shell: Any) -> None:
    orig = getattr(shell, "_showtraceback", None)
    if orig is None:
        return

    def showtraceback(etype: Any, evalue: Any, stb: Any, *args: Any, **kwargs: Any) -> Any:
        cap = _current_capture()
        if cap is None:
            return orig(etype, evalue, stb, *args, **kwargs)
        from .format import strip_ansi

        text = "\n".join(stb) if isinstance(stb, (list, tuple)) else str(stb)
        cap.write("stderr", DISPLAY_ERROR_NOTE + strip_ansi(text) + "\n")
        return None

    showtraceback._pi_orig = orig  # type: ignore[attr-defined]
    showtraceback._pi_was_instance_attr = "_showtraceback" in shell.__dict__  # type: ignore[attr-defined]
    shell._showtraceback = showtraceback
    _guards.showtraceback = showtraceback


EXIT_REFUSED = "exit() is not available to agent code: the user's kernel keeps running"


def _install_exit_guard(shell: Any) -> None:
    orig = getattr(shell, "ask_exit", None)
    if orig is None:
        return

    def ask_exit(*args: Any, **kwargs: Any) -> Any:
        if _current_capture() is not None:
            raise SystemExit(EXIT_REFUSED)
        return orig(*args, **kwargs)

    ask_exit._pi_orig = orig  # type: ignore[attr-defined]
    ask_exit._pi_was_instance_attr = "ask_exit" in shell.__dict__  # type: ignore[attr-defined]
    shell.ask_exit = ask_exit  # instance attribute shadows the method
    _guards.ask_exit = ask_exit


INPUT_REFUSED = ("input() is not available to agent code: nobody can answer it. "
                 "Ask the user in your reply instead.")


def _refusing(orig: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if _current_capture() is not None:
            from IPython.core.error import StdinNotImplementedError

            raise StdinNotImplementedError(INPUT_REFUSED)
        return orig(*args, **kwargs)

    guarded._pi_orig = orig  # type: ignore[attr-defined]
    return guarded


def _install_input_guards(shell: Any) -> None:
    import builtins
    import getpass

    targets: list[tuple[Any, str]] = [(builtins, "input"), (getpass, "getpass")]
    kernel = getattr(shell, "kernel", None)
    if kernel is not None:
        targets += [(kernel, name) for name in ("raw_input", "getpass") if hasattr(kernel, name)]
    for owner, name in targets:
        orig = getattr(owner, name)
        was_own = name in getattr(owner, "__dict__", {})
        guard = _refusing(orig)
        setattr(owner, name, guard)  # on the kernel: an instance attribute shadows the method
        _guards.input_guards.append((owner, name, guard, was_own))


def _uninstall_input_guards() -> None:
    guard: Any
    for owner, name, guard, was_own in reversed(_guards.input_guards):
        if getattr(owner, "__dict__", {}).get(name) is not guard:
            continue  # replaced since (e.g. ipykernel mid-request): the guard passes through
        if was_own or isinstance(owner, type(sys)):
            setattr(owner, name, guard.__dict__["_pi_orig"])
        else:
            delattr(owner, name)
    _guards.input_guards = []


_flush_holds = 0
_flush_holds_lock = threading.Lock()


@contextmanager
def hold_figure_flush() -> Iterator[None]:
    """While held, requests that end skip the figure callbacks (module docstring)."""
    global _flush_holds
    with _flush_holds_lock:
        _flush_holds += 1
    try:
        yield
    finally:
        with _flush_holds_lock:
            _flush_holds -= 1


# (callback name, a part of its module's name): see the module docstring.
_FIGURE_CALLBACKS = (("flush_figures", "matplotlib_inline"), ("_draw_all_if_interactive", "matplotlib"))


def _is_figure_flush(fn: Any) -> bool:
    name = getattr(fn, "__name__", "")
    module = getattr(fn, "__module__", "") or ""
    return any(name == n and part in module for n, part in _FIGURE_CALLBACKS)


def _install_flush_guard(shell: Any) -> None:
    events: Any = getattr(shell, "events", None)
    orig = getattr(events, "trigger", None)
    if orig is None:
        return

    def trigger(event: str, *args: Any, **kwargs: Any) -> Any:
        callbacks = events.callbacks.get(event) if event == "post_execute" and _flush_holds else None
        if not callbacks or not any(_is_figure_flush(f) for f in callbacks):
            return orig(event, *args, **kwargs)
        # Run the others; the list object stays in place (register/unregister keep working).
        kept = [f for f in callbacks if not _is_figure_flush(f)]
        saved = list(callbacks)
        callbacks[:] = kept
        try:
            return orig(event, *args, **kwargs)
        finally:
            added = [f for f in callbacks if f not in kept]  # registered meanwhile
            removed = [f for f in kept if f not in callbacks]
            callbacks[:] = [f for f in saved if f not in removed] + added

    trigger._pi_orig = orig  # type: ignore[attr-defined]
    events.trigger = trigger  # instance attribute shadows the method
    _guards.trigger = trigger
