"""Per-execution output capture routed by a context variable.

Why not ``IPython.utils.capture.capture_output()``: it swaps ``sys.stdout`` and the shell's
display publisher *globally*. Held across an ``await`` it steals the output of a user cell that
runs meanwhile, and ipykernel's dispatch breaks because the capturing publisher has no
``set_parent`` (docs/design/capture.md). Instead, proxies are installed once and
decide per write: code running in a context with an active :class:`Capture` writes to the
capture's callbacks, every other context writes to the original objects untouched.

API (called by the magics helper at extension load/unload):

- ``install_capture(shell)`` / ``uninstall_capture(shell)``: idempotent; install replaces
  ``sys.stdout``, ``sys.stderr`` and ``shell.display_pub`` with routing proxies and wraps
  ``threading.Thread.start`` so threads started inside a capture inherit it; uninstall puts back
  exactly the objects that were there (a proxy that has been wrapped by someone else since is
  left in place but switched to pass-through, so nothing is lost).
- ``with capture(on_stream, on_display, *, on_late_stream=None, on_late_display=None) as
  cap:``: everything printed or displayed by code in
  this context (tasks it creates, threads it starts) calls ``on_stream(name, text)`` with
  ``name`` in ``{"stdout", "stderr"}`` or ``on_display(data, metadata)``; nothing reaches the
  real iopub streams. Callbacks may be called from other threads (threads started by the code)
  and run with the capture suspended, so their own output is not captured. After the block
  exits, late writes from leftovers (tasks, threads) take the late-output path (below).
- ``capture_active() -> bool``.

Also changed for agent code (``guards.py``): ``exit()`` raises instead of stopping the
kernel, ``input()``/``getpass()`` raise ``StdinNotImplementedError``, matplotlib-inline's
end-of-request figure flush skips figures agent code is making (``hold_figure_flush()``),
and a raising display formatter's traceback goes to the capture's stderr instead of becoming
an ``error`` output of whatever cell is current.

Late output: a thread or task started by agent code inherits its capture; what it writes
after the capture closed (the tool returned) goes to the capture's ``on_late_stream`` /
``on_late_display`` (the python tool: redacted and labelled), else to an enclosing capture,
else, redacted and labelled, to the original stream: never raw.

Stream swaps by agent code: while installed, ``sys`` is given a module subclass whose
``__setattr__`` makes ``sys.stdout = x`` / ``sys.stderr = x`` (``contextlib.redirect_stdout``
too) *context-local* when the assigning code is captured: it lands on the call's root capture
(``Capture.streams``) and the global keeps the routing proxy, so a user cell running at the
same time keeps its output and later cells are unaffected. The proxy then writes that call's
text to the replacement, and attribute reads (``sys.stdout.getvalue()``) go to it as well.
``shell.display_pub = x`` (``capture_output()``) is handled the same way with a traitlets
observer. ``restore_routing()`` (after each call) puts the proxies back if something went
around the hooks (``sys.__dict__["stdout"] = ...``).

OS-level output (file descriptors 1/2: ``os.system``, subprocesses, C extensions) is routed by
``fdroute.py``; see docs/design/capture.md for what is guaranteed.
"""

from __future__ import annotations

import contextvars
import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from IPython.core.displaypub import DisplayPublisher

from .guards import hold_figure_flush, install_guards, uninstall_guards
from .patches import PATCHES, Patch

if TYPE_CHECKING:
    from ..output.updates import StreamName  # (updates.py imports pydantic: not at %load_ext)
    from IPython.core.interactiveshell import InteractiveShell

__all__ = [
    "Capture",
    "RoutedDisplayPublisher",
    "RoutedStream",
    "capture",
    "capture_active",
    "capture_installed",
    "current_capture",
    "hold_figure_flush",
    "install_capture",
    "restore_routing",
    "uninstall_capture",
]

LATE_LABEL = "[late output of agent code] "

StreamCallback = Callable[["StreamName", str], Any]
DisplayCallback = Callable[[dict, dict], Any]

_current: contextvars.ContextVar[Capture | None] = contextvars.ContextVar(
    "pi_notebook_tool_capture", default=None
)


class Capture:
    """One capture scope: the callbacks, an open/closed flag, the enclosing capture, and the
    stream replacements made by the code (on the root capture of a call)."""

    __slots__ = ("on_stream", "on_display", "on_late_stream", "on_late_display", "closed",
                 "parent", "streams", "display_pub")

    def __init__(self, on_stream: StreamCallback, on_display: DisplayCallback,
                 on_late_stream: StreamCallback | None = None,
                 on_late_display: DisplayCallback | None = None,
                 parent: Capture | None = None) -> None:
        self.on_stream = on_stream
        self.on_display = on_display
        self.on_late_stream = on_late_stream
        self.on_late_display = on_late_display
        self.closed = False
        self.parent = parent
        self.streams: dict[str, Any] = {}
        self.display_pub: Any = None

    @property
    def root(self) -> Capture:
        cap = self
        while cap.parent is not None:
            cap = cap.parent
        return cap

    def stream_target(self, name: StreamName) -> Any:
        """The object agent code put in place of ``sys.<name>``, if any."""
        return self.root.streams.get(name)

    def route_stream(self, name: StreamName, text: str, orig: Any) -> None:
        """Deliver a write of code in this capture's context, open or closed (module doc)."""
        cap: Capture | None = self
        while cap is not None:
            if not cap.closed:
                cap.write(name, text)
                return
            if cap.on_late_stream is not None:
                _call_suspended(cap.on_late_stream, name, text)
                return
            cap = cap.parent
        _late_fallback(orig, text)

    def route_display(self, data: dict, metadata: dict, orig_stream: Any) -> None:
        cap: Capture | None = self
        while cap is not None:
            if not cap.closed:
                cap.display(data, metadata)
                return
            if cap.on_late_display is not None:
                _call_suspended(cap.on_late_display, data, metadata)
                return
            cap = cap.parent
        text = data.get("text/plain") if isinstance(data, dict) else None
        _late_fallback(orig_stream, f"{text if isinstance(text, str) else '<display>'}\n")

    # The token dance is _suspended() inlined: this runs for every print of agent code.
    def write(self, name: StreamName, text: str) -> None:
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


def _call_suspended(fn: Callable[..., Any], *args: Any) -> None:
    token = _current.set(None)
    try:
        fn(*args)
    except Exception:  # a broken late handler must not break the code that printed
        pass
    finally:
        _current.reset(token)


def _late_fallback(orig: Any, text: str) -> None:
    from ..trust.redact import redact

    try:
        orig.write(LATE_LABEL + redact(text))
    except Exception:
        pass


def current_capture() -> Capture | None:
    """The capture of the current context (open or closed), if any."""
    return _current.get()


def capture_installed() -> bool:
    return _state.installed


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
def capture(on_stream: StreamCallback, on_display: DisplayCallback, *,
            on_late_stream: StreamCallback | None = None,
            on_late_display: DisplayCallback | None = None) -> Iterator[Capture]:
    """Route this context's stdout/stderr/display output to the callbacks (see module doc).

    A capture opened inside another one (same context) has it as ``parent``: stream
    replacements are kept on the root, late output falls back to the enclosing capture."""
    if not _state.installed:
        raise RuntimeError("install_capture(shell) must be called before capture()")
    cap = Capture(on_stream, on_display, on_late_stream, on_late_display, parent=_current.get())
    token = _current.set(cap)
    try:
        yield cap
    finally:
        cap.closed = True
        _current.reset(token)


class RoutedStream:
    """Stand-in for ``sys.stdout`` / ``sys.stderr``."""

    def __init__(self, name: StreamName, orig: Any) -> None:
        # Set through __dict__: __setattr__ below is reserved for attributes others patch in.
        self.__dict__["_pi_name"] = name
        self.__dict__["_pi_target"] = orig
        self.__dict__["_pi_passthrough"] = False

    def write(self, text: str) -> int:
        cap = None if self._pi_passthrough else _current.get()
        if cap is None:
            return self._pi_target.write(text)
        target = cap.stream_target(self._pi_name)
        if target is not None:  # agent code swapped sys.stdout for its own object
            return target.write(text)
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if text:
            cap.route_stream(self._pi_name, text, self._pi_target)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        cap = None if self._pi_passthrough else _current.get()
        target = cap.stream_target(self._pi_name) if cap is not None else None
        if target is not None:
            flush = getattr(target, "flush", None)
        elif cap is None:
            flush = getattr(self._pi_target, "flush", None)
        else:
            return
        if flush is not None:
            flush()

    def isatty(self) -> bool:
        if _active() is not None:
            return False
        isatty = getattr(self._pi_target, "isatty", None)
        return bool(isatty()) if isatty is not None else False

    def __getattr__(self, name: str) -> Any:
        # encoding, fileno, set_parent, echo, ... belong to the real stream (or to what the
        # current agent code put in its place: `sys.stdout.getvalue()` after a swap).
        if name.startswith("_pi_"):
            raise AttributeError(name)
        cap = None if self.__dict__["_pi_passthrough"] else _current.get()
        target = cap.stream_target(self.__dict__["_pi_name"]) if cap is not None else None
        return getattr(target if target is not None else self.__dict__["_pi_target"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        # IPython 9's history "tee" assigns `sys.stdout.write`; keep such patches on the proxy
        # so they wrap the routing write (they call the original write they captured).
        self.__dict__[name] = value

    def __delattr__(self, name: str) -> None:
        del self.__dict__[name]

    def __repr__(self) -> str:
        return f"<RoutedStream {self._pi_name} -> {self._pi_target!r}>"


class RoutedDisplayPublisher(DisplayPublisher):
    """Stand-in for ``shell.display_pub`` (a trait typed DisplayPublisher, hence the subclass)."""

    def __init__(self, orig: DisplayPublisher, **kwargs: Any) -> None:
        # Before HasTraits.__init__: it probes attributes, and __getattr__ needs _pi_target.
        self.__dict__["_pi_target"] = orig
        self.__dict__["_pi_passthrough"] = False
        super().__init__(**kwargs)

    def publish(self, data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> None:
        cap = None if self._pi_passthrough else _current.get()
        if cap is None:
            return self._pi_target.publish(data, metadata, *args, **kwargs)
        replacement = cap.root.display_pub
        if replacement is not None:  # agent code installed its own publisher (capture_output)
            return replacement.publish(data, metadata, *args, **kwargs)
        cap.route_display(dict(data or {}), dict(metadata or {}), _state.stdout or sys.stdout)
        return None

    def clear_output(self, wait: bool = False) -> None:
        if self._pi_passthrough or _active() is None:
            return self._pi_target.clear_output(wait)
        # A captured clear_output has nothing to clear in the tool's result: drop it.
        return None

    def __getattr__(self, name: str) -> Any:
        # ipykernel calls display_pub.set_parent(...), reads .session, .pub_socket, ...
        if name.startswith("_pi_"):
            raise AttributeError(name)
        return getattr(self.__dict__["_pi_target"], name)


class _InstallState:
    def __init__(self) -> None:
        self.installed = False
        self.shell: InteractiveShell | None = None
        self.stdout: RoutedStream | None = None
        self.stderr: RoutedStream | None = None
        self.display_pub: RoutedDisplayPublisher | None = None
        self.thread_start: Callable[..., Any] | None = None
        self.sys_class: type | None = None
        self.global_sets: dict[str, Any] = {}  # what code outside captures assigned last
        self.pub_observer: Callable[..., Any] | None = None
        self.patches: list[Patch] = []  # what install_capture replaced (in PATCHES too)


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
        self.run = lambda: ctx.run(run)  # type: ignore[method-assign]  # per instance, on purpose
        self._pi_context_wrapped = True  # type: ignore[attr-defined]  # our marker on a foreign Thread
    return _orig_thread_start(self)


def install_capture(shell: InteractiveShell) -> None:
    """Install the routing proxies once (idempotent). Call from the kernel's main thread."""
    with _install_lock:
        if _state.installed:
            if _state.shell is shell:
                return
            _uninstall_locked()
        _state.shell = shell
        _state.stdout = RoutedStream("stdout", sys.stdout)
        _state.stderr = RoutedStream("stderr", sys.stderr)
        why = "output of agent code goes to its tool call; everything else passes through"
        _state.patches = [PATCHES.apply(sys, "stdout", _state.stdout, why),
                          PATCHES.apply(sys, "stderr", _state.stderr, why)]
        orig_pub = shell.display_pub
        _state.display_pub = RoutedDisplayPublisher(orig_pub, parent=shell, shell=shell)
        _state.patches.append(PATCHES.apply(shell, "display_pub", _state.display_pub,
                                            "displays of agent code go to its tool call"))
        global _orig_thread_start
        if threading.Thread.start is not _thread_start:
            _orig_thread_start = threading.Thread.start
            _state.patches.append(PATCHES.apply(
                threading.Thread, "start", _thread_start,
                "a thread started by agent code keeps routing its output to the tool call"))
        _state.thread_start = _orig_thread_start
        install_guards(shell, _active)
        _install_swap_guards(shell)
        _state.installed = True


class _RoutedSys(types.ModuleType):
    """``sys``'s class while installed: stream assignments by agent code stay in its call."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("stdout", "stderr") and _state.installed:
            cap = _active()
            if cap is not None:
                streams = cap.root.streams
                if isinstance(value, RoutedStream):
                    streams.pop(name, None)  # "restoring" the proxy ends the swap
                else:
                    streams[name] = value
                return
            _state.global_sets[name] = value
        super().__setattr__(name, value)


_pub_guard = threading.local()


def _restore_sys_class() -> None:
    if _state.sys_class is not None and type(sys) is _RoutedSys:
        sys.__class__ = _state.sys_class


def _install_swap_guards(shell: InteractiveShell) -> None:
    if type(sys) is types.ModuleType:
        sys.__class__ = _RoutedSys
        _state.sys_class = types.ModuleType
        _state.patches.append(PATCHES.record(
            sys, "__class__", types.ModuleType, _RoutedSys,
            "agent code that assigns sys.stdout/stderr swaps them for its own call only",
            restore=_restore_sys_class))
    observe = getattr(shell, "observe", None)
    if observe is None:
        return

    def on_display_pub(change: Any) -> None:
        if getattr(_pub_guard, "busy", False):
            return
        cap = _active()
        proxy = _state.display_pub
        if cap is None or proxy is None:
            return
        root = cap.root
        root.display_pub = None if change["new"] is proxy else change["new"]
        if change["new"] is not proxy:
            _pub_guard.busy = True
            try:
                shell.display_pub = proxy  # the global stays routed
            finally:
                _pub_guard.busy = False

    observe(on_display_pub, names="display_pub")
    _state.pub_observer = on_display_pub


def restore_routing() -> list[str]:
    """Put the proxies back where something went around the hooks (module doc); returns
    the names repaired."""
    repaired: list[str] = []
    if not _state.installed:
        return repaired
    for name, proxy in (("stdout", _state.stdout), ("stderr", _state.stderr)):
        current = sys.__dict__.get(name)
        if current is proxy or proxy is None:
            continue
        if current is _state.global_sets.get(name) or isinstance(current, RoutedStream):
            continue  # set by code outside any capture (a user cell): theirs
        sys.__dict__[name] = proxy
        repaired.append(name)
    shell = _state.shell
    if shell is not None and _state.display_pub is not None and shell.display_pub is not _state.display_pub \
            and _state.pub_observer is None:
        shell.display_pub = _state.display_pub
        repaired.append("display_pub")
    return repaired


def uninstall_capture(shell: InteractiveShell | None = None) -> None:
    """Undo :func:`install_capture` (idempotent)."""
    with _install_lock:
        _uninstall_locked()


def _uninstall_locked() -> None:
    if not _state.installed:
        return
    shell = _state.shell
    for proxy in (_state.stdout, _state.stderr, _state.display_pub):
        assert proxy is not None
        proxy.__dict__["_pi_passthrough"] = True  # a proxy someone wrapped forwards untouched
    patches, _state.patches = _state.patches, []
    for patch in patches:
        if patch.owner is not threading.Thread and patch.name != "__class__":  # those after the guards, as before
            PATCHES.undo(patch)
    pub = _state.display_pub
    assert pub is not None
    # DisplayPublisher.__init__ registered the proxy's pre/post_execute trackers: drop them.
    events = getattr(shell, "events", None)
    for event, callback in (("post_execute", "_on_post_execute"), ("pre_execute", "_on_pre_execute")):
        method = pub.__dict__.get(callback) or getattr(type(pub), callback, None)
        if events is not None and method is not None:
            try:
                events.unregister(event, getattr(pub, callback))
            except ValueError:
                pass
    uninstall_guards(shell)
    for patch in patches:
        if patch.owner is sys and patch.name == "__class__":
            PATCHES.undo(patch)
    if _state.pub_observer is not None and shell is not None:
        try:
            shell.unobserve(_state.pub_observer, names="display_pub")
        except ValueError:
            pass
    for patch in patches:
        if patch.owner is threading.Thread:
            PATCHES.undo(patch)
    _state.__init__()  # type: ignore[misc]  # reset the state object in place: holders keep it
