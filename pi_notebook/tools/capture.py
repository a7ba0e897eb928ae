"""Per-execution output capture routed by a context variable.

Why not ``IPython.utils.capture.capture_output()``: it swaps ``sys.stdout`` and the shell's
display publisher *globally*. Held across an ``await`` it steals the output of a user cell that
runs meanwhile, and ipykernel's dispatch breaks because the capturing publisher has no
``set_parent`` (measured, jupyter-mechanics.md §5). Instead, proxies are installed once and
decide per write: code running in a context with an active :class:`Capture` writes to the
capture's callbacks, every other context writes to the original objects untouched.

API (called by the magics helper at extension load/unload):

- ``install_capture(shell)`` / ``uninstall_capture(shell)``: idempotent; install replaces
  ``sys.stdout``, ``sys.stderr`` and ``shell.display_pub`` with routing proxies and wraps
  ``threading.Thread.start`` so threads started inside a capture inherit it; uninstall puts back
  exactly the objects that were there (a proxy that has been wrapped by someone else since is
  left in place but switched to pass-through, so nothing is lost).
- ``with capture(on_stream, on_display) as cap:``: everything printed or displayed by code in
  this context (tasks it creates, threads it starts) calls ``on_stream(name, text)`` with
  ``name`` in ``{"stdout", "stderr"}`` or ``on_display(data, metadata)``; nothing reaches the
  real iopub streams. Callbacks may be called from other threads (threads started by the code)
  and run with the capture suspended, so their own output is not captured. After the block
  exits, late writes from leftovers (tasks, threads) go to the original streams again.
- ``capture_active() -> bool``.

Also routed: ``shell.ask_exit`` (what IPython's ``exit``/``quit`` call). Inside a capture it
raises ``SystemExit`` instead, so agent code cannot shut the user's kernel down; the tool
reports it as an error.

Also routed: ``input()`` and ``getpass.getpass()``. Inside a capture they raise
``StdinNotImplementedError`` with a clear message: nobody can answer agent code (and from a
worker thread during a user's request, ipykernel's own ``raw_input`` would ask the user in the
wrong cell). Both ``builtins`` (the kernel while idle) and ``kernel.raw_input`` /
``kernel.getpass`` (what ipykernel installs for each request) are guarded.

Also routed: matplotlib-inline's ``flush_figures`` (a ``post_execute`` callback that displays
and closes *all* open figures in the current request). While agent code runs on a worker
thread (``hold_figure_flush()``), a request that ends meanwhile skips it, so a half-made agent
figure never lands in the user's cell; matplotlib keeps its "draw pending" flag, so the user's
own figures are shown after the next request.

Known leaks (documented, not fixable at the Python level): output written to OS file
descriptor 1/2 directly (``os.system``, C extensions).
"""

from __future__ import annotations

import contextvars
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from IPython.core.displaypub import DisplayPublisher

__all__ = [
    "Capture",
    "RoutedDisplayPublisher",
    "RoutedStream",
    "capture",
    "capture_active",
    "hold_figure_flush",
    "install_capture",
    "uninstall_capture",
]

StreamCallback = Callable[[str, str], Any]
DisplayCallback = Callable[[dict, dict], Any]

_current: contextvars.ContextVar[Capture | None] = contextvars.ContextVar(
    "pi_notebook_tool_capture", default=None
)


class Capture:
    """One capture scope: the two callbacks plus an open/closed flag."""

    __slots__ = ("on_stream", "on_display", "closed")

    def __init__(self, on_stream: StreamCallback, on_display: DisplayCallback) -> None:
        self.on_stream = on_stream
        self.on_display = on_display
        self.closed = False

    # The token dance is _suspended() inlined: this runs for every print of agent code.
    def write(self, name: str, text: str) -> None:
        token = _current.set(None)
        try:
            self.on_stream(name, text)
        finally:
            _current.reset(token)

    def display(self, data: dict, metadata: dict) -> None:
        token = _current.set(None)
        try:
            self.on_display(data, metadata)
        finally:
            _current.reset(token)


def _active() -> Capture | None:
    cap = _current.get()
    if cap is None or cap.closed:
        return None
    return cap


def capture_active() -> bool:
    """True when code running in the current context is being captured."""
    return _active() is not None


@contextmanager
def _suspended() -> Iterator[None]:
    # Callbacks (the widget, the agent's emit) must write to the real streams.
    token = _current.set(None)
    try:
        yield
    finally:
        _current.reset(token)


@contextmanager
def capture(on_stream: StreamCallback, on_display: DisplayCallback) -> Iterator[Capture]:
    """Route this context's stdout/stderr/display output to the callbacks (see module doc)."""
    if not _state.installed:
        raise RuntimeError("install_capture(shell) must be called before capture()")
    cap = Capture(on_stream, on_display)
    token = _current.set(cap)
    try:
        yield cap
    finally:
        cap.closed = True
        _current.reset(token)


class RoutedStream:
    """Stand-in for ``sys.stdout`` / ``sys.stderr``."""

    def __init__(self, name: str, orig: Any) -> None:
        # Set through __dict__: __setattr__ below is reserved for attributes others patch in.
        self.__dict__["_pi_name"] = name
        self.__dict__["_pi_orig"] = orig
        self.__dict__["_pi_passthrough"] = False

    def write(self, text: str) -> int:
        cap = None if self._pi_passthrough else _active()
        if cap is None:
            return self._pi_orig.write(text)
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if text:
            cap.write(self._pi_name, text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pi_passthrough or _active() is None:
            flush = getattr(self._pi_orig, "flush", None)
            if flush is not None:
                flush()

    def isatty(self) -> bool:
        if _active() is not None:
            return False
        isatty = getattr(self._pi_orig, "isatty", None)
        return bool(isatty()) if isatty is not None else False

    def __getattr__(self, name: str) -> Any:
        # encoding, fileno, set_parent, echo, ... belong to the real stream.
        return getattr(self.__dict__["_pi_orig"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        # IPython 9's history "tee" assigns `sys.stdout.write`; keep such patches on the proxy
        # so they wrap the routing write (they call the original write they captured).
        self.__dict__[name] = value

    def __delattr__(self, name: str) -> None:
        del self.__dict__[name]

    def __repr__(self) -> str:
        return f"<RoutedStream {self._pi_name} -> {self._pi_orig!r}>"


class RoutedDisplayPublisher(DisplayPublisher):
    """Stand-in for ``shell.display_pub`` (a trait typed DisplayPublisher, hence the subclass)."""

    def __init__(self, orig: DisplayPublisher, **kwargs: Any) -> None:
        # Before HasTraits.__init__: it probes attributes, and __getattr__ needs _pi_orig.
        self.__dict__["_pi_orig"] = orig
        self.__dict__["_pi_passthrough"] = False
        super().__init__(**kwargs)

    def publish(self, data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> None:
        cap = None if self._pi_passthrough else _active()
        if cap is None:
            return self._pi_orig.publish(data, metadata, *args, **kwargs)
        cap.display(dict(data or {}), dict(metadata or {}))
        return None

    def clear_output(self, wait: bool = False) -> None:
        if self._pi_passthrough or _active() is None:
            return self._pi_orig.clear_output(wait)
        # A captured clear_output has nothing to clear in the tool's result: drop it.
        return None

    def __getattr__(self, name: str) -> Any:
        # ipykernel calls display_pub.set_parent(...), reads .session, .pub_socket, ...
        if name.startswith("_pi_"):
            raise AttributeError(name)
        return getattr(self.__dict__["_pi_orig"], name)


class _InstallState:
    def __init__(self) -> None:
        self.installed = False
        self.shell: Any = None
        self.stdout: RoutedStream | None = None
        self.stderr: RoutedStream | None = None
        self.display_pub: RoutedDisplayPublisher | None = None
        self.thread_start: Callable[..., Any] | None = None
        self.ask_exit: Callable[..., Any] | None = None
        self.trigger: Callable[..., Any] | None = None
        self.input_guards: list[tuple[Any, str, Any, bool]] = []  # (owner, name, guard, was own attr)


_state = _InstallState()
_install_lock = threading.Lock()
# The Thread.start we wrap; kept outside _state so a wrapper installed on top of ours keeps
# working after uninstall.
_orig_thread_start: Callable[..., Any] = threading.Thread.start


def _thread_start(self: threading.Thread) -> None:
    """``Thread.start`` replacement: a thread started inside a capture inherits the context."""
    if _active() is not None and not getattr(self, "_pi_context_wrapped", False):
        ctx = contextvars.copy_context()
        run = self.run
        self.run = lambda: ctx.run(run)  # type: ignore[method-assign]
        self._pi_context_wrapped = True  # type: ignore[attr-defined]
    return _orig_thread_start(self)


def install_capture(shell: Any) -> None:
    """Install the routing proxies once (idempotent). Call from the kernel's main thread."""
    with _install_lock:
        if _state.installed:
            if _state.shell is shell:
                return
            _uninstall_locked()
        _state.shell = shell
        _state.stdout = RoutedStream("stdout", sys.stdout)
        _state.stderr = RoutedStream("stderr", sys.stderr)
        sys.stdout = _state.stdout
        sys.stderr = _state.stderr
        orig_pub = shell.display_pub
        _state.display_pub = RoutedDisplayPublisher(orig_pub, parent=shell, shell=shell)
        shell.display_pub = _state.display_pub
        global _orig_thread_start
        if threading.Thread.start is not _thread_start:
            _orig_thread_start = threading.Thread.start
        _state.thread_start = _orig_thread_start
        threading.Thread.start = _thread_start  # type: ignore[method-assign]
        _install_exit_guard(shell)
        _install_flush_guard(shell)
        _install_input_guards(shell)
        _state.installed = True


EXIT_REFUSED = "exit() is not available to agent code: the user's kernel keeps running"


def _install_exit_guard(shell: Any) -> None:
    orig = getattr(shell, "ask_exit", None)
    if orig is None:
        return

    def ask_exit(*args: Any, **kwargs: Any) -> Any:
        if _active() is not None:
            raise SystemExit(EXIT_REFUSED)
        return orig(*args, **kwargs)

    ask_exit._pi_orig = orig  # type: ignore[attr-defined]
    ask_exit._pi_was_instance_attr = "ask_exit" in shell.__dict__  # type: ignore[attr-defined]
    shell.ask_exit = ask_exit  # instance attribute shadows the method
    _state.ask_exit = ask_exit


INPUT_REFUSED = ("input() is not available to agent code: nobody can answer it. "
                 "Ask the user in your reply instead.")


def _refusing(orig: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if _active() is not None:
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
        _state.input_guards.append((owner, name, guard, was_own))


def _uninstall_input_guards() -> None:
    for owner, name, guard, was_own in reversed(_state.input_guards):
        if getattr(owner, "__dict__", {}).get(name) is not guard:
            continue  # replaced since (e.g. ipykernel mid-request): the guard passes through
        if was_own or isinstance(owner, type(sys)):
            setattr(owner, name, guard._pi_orig)
        else:
            delattr(owner, name)
    _state.input_guards = []


_flush_holds = 0
_flush_holds_lock = threading.Lock()


@contextmanager
def hold_figure_flush() -> Iterator[None]:
    """While held, requests that end skip matplotlib-inline's ``flush_figures``."""
    global _flush_holds
    with _flush_holds_lock:
        _flush_holds += 1
    try:
        yield
    finally:
        with _flush_holds_lock:
            _flush_holds -= 1


def _is_figure_flush(fn: Any) -> bool:
    return getattr(fn, "__name__", "") == "flush_figures" and "matplotlib_inline" in (getattr(fn, "__module__", "") or "")


def _install_flush_guard(shell: Any) -> None:
    events = getattr(shell, "events", None)
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
    _state.trigger = trigger


def uninstall_capture(shell: Any = None) -> None:
    """Undo :func:`install_capture` (idempotent)."""
    with _install_lock:
        _uninstall_locked()


def _uninstall_locked() -> None:
    if not _state.installed:
        return
    shell = _state.shell
    for attr, proxy in (("stdout", _state.stdout), ("stderr", _state.stderr)):
        assert proxy is not None
        proxy.__dict__["_pi_passthrough"] = True
        if getattr(sys, attr) is proxy:
            setattr(sys, attr, proxy._pi_orig)
        # else: someone wrapped our proxy; it now forwards everything untouched.
    pub = _state.display_pub
    assert pub is not None
    pub.__dict__["_pi_passthrough"] = True
    if shell is not None and shell.display_pub is pub:
        shell.display_pub = pub._pi_orig
    # DisplayPublisher.__init__ registered the proxy's pre/post_execute trackers: drop them.
    events = getattr(shell, "events", None)
    for event, callback in (("post_execute", "_on_post_execute"), ("pre_execute", "_on_pre_execute")):
        method = pub.__dict__.get(callback) or getattr(type(pub), callback, None)
        if events is not None and method is not None:
            try:
                events.unregister(event, getattr(pub, callback))
            except ValueError:
                pass
    guard = _state.ask_exit
    if guard is not None and shell is not None and shell.__dict__.get("ask_exit") is guard:
        if guard._pi_was_instance_attr:  # type: ignore[attr-defined]
            shell.__dict__["ask_exit"] = guard._pi_orig  # type: ignore[attr-defined]
        else:
            del shell.__dict__["ask_exit"]
    _uninstall_input_guards()
    trigger = _state.trigger
    events = getattr(shell, "events", None)
    if trigger is not None and events is not None and events.__dict__.get("trigger") is trigger:
        del events.__dict__["trigger"]
    if threading.Thread.start is _thread_start and _state.thread_start is not None:
        threading.Thread.start = _state.thread_start  # type: ignore[method-assign]
    _state.__init__()  # type: ignore[misc]
