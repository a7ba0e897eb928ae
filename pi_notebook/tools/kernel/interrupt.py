"""Interrupting tool code, on the kernel's main thread or on a worker thread.

Synchronous tool code runs on a worker thread (``python_tool.py``); statements with top-level
``await`` run on the kernel loop (main thread). A runaway ``while True: pass`` on the loop
blocks it, so nothing scheduled on the loop can stop it; only a signal can. ipykernel sets
SIGINT to ``SIG_IGN`` while idle (and to its own handlers while a request runs), so the
kernel's Stop button does nothing to background tool code by default (docs/design/capture.md).

``forward_sigint`` (entered by ``interrupt_main_for`` for the whole execution) keeps our SIGINT
handler installed while any tool code runs: the Stop button then interrupts the code wherever
it is (worker: asynchronous KeyboardInterrupt; awaiting: task cancel; main thread: raised in
the handler). ipykernel swaps handlers around each request; see ``forward_sigint``.

How it works:

- Every stretch of tool code that runs synchronously (the exec of a non-async cell, each *step*
  of a top-level-await coroutine, the formatting of the value, ...) runs inside
  ``ToolInterrupt.running()``. On the main thread that installs our SIGINT handler for exactly
  that stretch and puts back whatever handler was there right after it, so the handler is
  active only while tool code executes and ipykernel's own handler bookkeeping (which swaps
  handlers around every request) is never disturbed between steps.
- The handler raises ``KeyboardInterrupt`` only if tool code is executing on the main thread at
  that moment; otherwise it does nothing. A KeyboardInterrupt therefore never escapes into the
  kernel or into a user cell, even when a signal arrives just after the tool finished.
- ``ToolInterrupt.request(reason)`` (thread-safe; used by the AbortSignal listener, the
  per-call timeout watchdog and the Stop button handler) records the reason and:
  * if the run is executing on the main thread: ``signal.pthread_kill(main, SIGINT)`` (this
    also breaks blocking calls like ``time.sleep``); on another thread:
    ``PyThreadState_SetAsyncExc`` with KeyboardInterrupt;
  * if the run is awaiting: cancels the run's task on its loop (``call_soon_threadsafe``);
  * if it is between the two, the next step raises KeyboardInterrupt at its start.
  Code that swallows KeyboardInterrupt is kicked again every 0.25 s (then every 1 s) until
  it has left tool code, also after the tool stopped waiting for a stuck worker.
- SIGINT during one of ipykernel's shell requests (which swap the handler around every
  request) still reaches tool code: see ``_wrap_request_hooks``.
- ``ToolInterrupt.drive(coro)`` wraps a coroutine so that each of its steps runs inside
  ``running()`` (a small trampoline in place of ``await coro``).
- While an agent run is active but no agent code executes (the model streams, a turn ends,
  an approval waits), ``stop_aborts_run(on_stop, kernel)`` keeps the same handler installed:
  a Stop with the kernel otherwise idle then calls ``on_stop`` (the notebook layer aborts
  the run). Before, such a Stop met the idle kernel's ``SIG_IGN``: a Stop pressed a moment
  before the model's code started was lost, and the code then ran on. A Stop during a
  user's own request is that request's, as always (it still reaches agent code, above).

API:

- ``with interrupt_main_for(signal, timeout_s=None, loop=None) as run: ...``: a
  :class:`ToolInterrupt` that ``signal`` (an AbortSignal, may be None) and the timeout
  interrupt; ``run.bind_task(task)``; ``run.reason`` is ``"aborted" | "timeout" |
  "kernel interrupt" | None``.
"""

from __future__ import annotations

import asyncio
import ctypes
import signal as _signal
import threading
from collections.abc import Callable, Coroutine, Generator, Iterator
from contextlib import contextmanager
from typing import Any

from .patches import PATCHES, Patch

__all__ = ["ToolInterrupt", "forward_sigint", "interrupt_main_for", "stop_aborts_run"]

_MESSAGES = {
    "aborted": "tool code interrupted: the run was aborted",
    "timeout": "tool code interrupted: time limit reached",
    "kernel interrupt": "tool code interrupted by a kernel interrupt",
}
_KICK_INTERVAL_S = 0.25
_SLOW_KICK_INTERVAL_S = 1.0
_MAX_KICKS = 20

_lock = threading.Lock()
# The run whose code is executing on the main thread right now (read by the signal handler).
_main_running: ToolInterrupt | None = None
# Runs that a SIGINT (the kernel's Stop button) interrupts wherever their code runs; see
# forward_sigint(). Only touched on the main thread.
_guarded_runs: set[ToolInterrupt] = set()
# What a Stop does while an agent run is active and no agent code executes: each entry aborts
# its run (see stop_aborts_run()). Only touched on the main thread.
_run_stoppers: list[Callable[[], None]] = []


class _GuardState:
    def __init__(self) -> None:
        self.depth = 0
        self.prev: Any = None  # the handler ours replaced (put back when the last run ends)
        self.installed = False
        self.kernel: Any = None
        self.hooks: list[Patch] = []  # the request hooks wrapped (in PATCHES too)


_guard = _GuardState()


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _sigint_handler(signum: int, frame: Any) -> None:
    run = _main_running
    if run is not None and _on_main_thread():
        for other in list(_guarded_runs):  # parallel calls on workers stop too
            if other is not run:
                other._forward_kernel_interrupt()
        run._note("kernel interrupt")
        raise KeyboardInterrupt(run.message)
    runs = list(_guarded_runs)
    if runs:
        for guarded in runs:
            guarded._forward_kernel_interrupt()
    elif _run_stoppers:
        # A run is active between its tool calls: the Stop aborts it (each distinct
        # callback once; they only schedule the abort, nothing runs inside this handler).
        for stop in dict.fromkeys(_run_stoppers):
            stop()
    else:
        # No run and no tool code (a signal we sent landed just after a step ended, or a
        # leftover installation): like the kernel while idle, ignore it.
        return
    # Then what the handler we replaced would have done: during `%%agent --wait` (an await
    # cell) that is ipykernel's cell-cancelling handler. Not default_int_handler: raising
    # KeyboardInterrupt in whatever the loop runs now would hit the kernel, not the tool.
    prev = _guard.prev
    if callable(prev) and prev is not _signal.default_int_handler and prev is not _sigint_handler:
        prev(signum, frame)


def _in_request_sigint_handler(signum: int, frame: Any) -> None:
    """In place of ipykernel's ``default_int_handler`` during a shell request that runs while
    tool code runs (a ``%agent status``, a widget's comm message, a frontend's poll): the
    tool code is interrupted too, then the request is, as ipykernel's handler would do.
    Before, a Stop that landed in such a request (a fifth of the time while a frontend
    polls) only interrupted the request and the code kept running."""
    for guarded in list(_guarded_runs):
        guarded._forward_kernel_interrupt()
    _signal.default_int_handler(signum, frame)


def _wrap_request_hooks(kernel: Any) -> None:
    """Keep SIGINT reaching tool code across ipykernel's per-request handler swaps.

    ipykernel's ``pre_handler_hook`` saves the current handler and installs
    ``default_int_handler``; its ``post_handler_hook`` puts the saved one back. A tool that
    started during a request was left without our handler when the request ended (the
    saved one, the idle kernel's ``SIG_IGN``, came back): every Stop was ignored until the
    code ended."""
    for name in ("pre_handler_hook", "post_handler_hook"):
        orig = getattr(kernel, name, None)
        if not callable(orig):
            continue

        def wrapper(*args: Any, _orig: Any = orig, _name: str = name, **kwargs: Any) -> Any:
            result = _orig(*args, **kwargs)
            if (_guarded_runs or _run_stoppers) and _on_main_thread():
                _after_request_hook(_name)
            return result

        try:  # an instance attribute shadows the method
            patch = PATCHES.apply(kernel, name, wrapper,
                                  "SIGINT keeps reaching agent code across ipykernel's per-request handler swaps")
        except (AttributeError, TypeError):
            continue
        _guard.hooks.append(patch)


def _after_request_hook(name: str) -> None:
    current = _signal.getsignal(_signal.SIGINT)
    if name == "pre_handler_hook":
        if current is _signal.default_int_handler:
            _signal.signal(_signal.SIGINT, _in_request_sigint_handler)
        return
    # post_handler_hook put back the handler saved when the request began.
    if current is not None and current is not _sigint_handler and current is not _in_request_sigint_handler:
        _guard.prev = current  # what the kernel has between requests: put back at the end
        _guard.installed = True
        _signal.signal(_signal.SIGINT, _sigint_handler)


def _unwrap_request_hooks(kernel: Any) -> None:
    for patch in reversed(_guard.hooks):
        PATCHES.undo(patch)  # replaced since: left, our wrapper passes through (no runs are guarded)
    _guard.hooks = []


def _raise_in_thread(thread_id: int) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(KeyboardInterrupt)
    )


def _clear_async_exc(thread_id: int) -> None:
    # A NULL exception clears one that is set but not raised yet.
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)


class ToolInterrupt:
    """Interrupt state of one tool execution (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop
        self._reason: str | None = None
        self._threads: dict[int, int] = {}  # thread ident -> nesting depth of running()
        self._task: asyncio.Future[Any] | None = None
        self._closed = False
        self._kicker: threading.Thread | None = None
        self._worker_wait = False  # the task awaits a worker thread: do not cancel it

    # --- state --------------------------------------------------------------------------------

    @property
    def reason(self) -> str | None:
        return self._reason

    @property
    def requested(self) -> bool:
        return self._reason is not None

    @property
    def message(self) -> str:
        return _MESSAGES.get(self._reason or "", "tool code interrupted")

    @property
    def executing(self) -> bool:
        return bool(self._threads)

    def _note(self, reason: str) -> None:
        if self._reason is None:
            self._reason = reason

    def bind_task(self, task: asyncio.Future[Any]) -> None:
        """The task running the code: cancelled on request while the code awaits."""
        self._task = task
        if self._loop is None:
            self._loop = task.get_loop()

    def close(self) -> None:
        self._closed = True

    @contextmanager
    def waiting_for_worker(self) -> Iterator[None]:
        """While the task waits for code on a worker thread, a request interrupts the worker
        (asynchronous KeyboardInterrupt) instead of cancelling the task's wait, so the task
        sees how the code ended. Loop thread only."""
        self._worker_wait = True
        try:
            yield
        finally:
            self._worker_wait = False

    def _forward_kernel_interrupt(self) -> None:
        # Called from the SIGINT handler on the main thread, which may hold _lock right now
        # (inside _kick or running()): record the reason at once, act from the loop.
        if self._closed:
            return
        self._note("kernel interrupt")
        # Kick the worker now if the lock is free: on a loaded machine the loop callback
        # below can come late. It does the rest (task cancel, the kicker that retries).
        if _lock.acquire(blocking=False):
            try:
                self._kick_locked(main_thread=False)
            finally:
                _lock.release()
        loop = self._loop
        try:
            if loop is None or loop.is_closed():
                raise RuntimeError("no loop")
            loop.call_soon_threadsafe(self.request, "kernel interrupt")
        except RuntimeError:
            threading.Thread(target=self.request, args=("kernel interrupt",), daemon=True).start()

    # --- requesting ---------------------------------------------------------------------------

    def request(self, reason: str = "aborted") -> None:
        """Interrupt the tool code (any thread; idempotent apart from re-kicking)."""
        if self._closed:
            return
        self._note(reason)
        self._kick()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._cancel_waiting_task)
            except RuntimeError:  # loop closed meanwhile
                pass
        if self._kicker is None:
            self._kicker = threading.Thread(
                target=self._keep_kicking, name="pi-notebook-tool-interrupt", daemon=True
            )
            self._kicker.start()

    def kick(self) -> None:
        """Raise KeyboardInterrupt once in the code now executing, without recording a
        reason (used when the caller is cancelled and will not wait for the result)."""
        self._kick()

    def _kick(self) -> None:
        # Holding the lock: running() cannot finish its step (and restore the previous
        # handler) between our check and the signal, so the signal meets our handler.
        with _lock:
            self._kick_locked()

    def _kick_locked(self, main_thread: bool = True) -> None:
        main_id = threading.main_thread().ident
        for thread_id in list(self._threads):
            if thread_id == main_id:
                if main_thread:  # (not from the signal handler: it raises there itself)
                    assert main_id is not None
                    _signal.pthread_kill(main_id, _signal.SIGINT)
            else:
                _raise_in_thread(thread_id)

    def _keep_kicking(self) -> None:
        # For code that catches KeyboardInterrupt and carries on, and for a kick that did not
        # land. Retried until no thread of this run executes tool code any more, also after the
        # tool stopped waiting for a stuck worker (abandoned: still registered after close()):
        # every _KICK_INTERVAL_S at first, then every _SLOW_KICK_INTERVAL_S. Stops once nothing
        # is registered and the run is closed (or after _MAX_KICKS rounds with nothing
        # registered: the code is awaiting, cancelled through its task).
        kicks = idle_rounds = 0
        while True:
            threading.Event().wait(_KICK_INTERVAL_S if kicks < _MAX_KICKS else _SLOW_KICK_INTERVAL_S)
            if not self._threads:
                idle_rounds += 1
                if self._closed or idle_rounds >= _MAX_KICKS:
                    return
                continue
            kicks += 1
            self._kick()

    def _cancel_waiting_task(self) -> None:
        task = self._task
        if self._worker_wait:
            return
        if task is not None and not task.done() and not self._closed:
            task.cancel(self.message)

    # --- running ------------------------------------------------------------------------------

    @contextmanager
    def running(self, *, check: bool = True) -> Iterator[None]:
        """Mark a synchronous stretch of tool code (see the module docstring).

        With ``check`` (the default) a pending request raises KeyboardInterrupt at once.
        """
        guard = _Running(self)
        guard.enter()
        try:
            if check and self._reason is not None:
                raise KeyboardInterrupt(self.message)
            yield
        finally:
            guard.leave()

    def drive(self, coro: Coroutine[Any, Any, Any]) -> _Driven:
        """Awaitable running ``coro`` with each step inside :meth:`running`."""
        return _Driven(coro, self)


class _Running:
    __slots__ = ("run", "on_main", "thread_id", "prev_main", "prev_handler", "installed")

    def __init__(self, run: ToolInterrupt) -> None:
        self.run = run
        self.on_main = _on_main_thread()
        self.thread_id = threading.get_ident()
        self.prev_main: ToolInterrupt | None = None
        self.prev_handler: Any = None
        self.installed = False

    def enter(self) -> None:
        global _main_running
        if self.on_main:
            current = _signal.getsignal(_signal.SIGINT)
            # None: a handler set outside Python, which we could not put back: leave it.
            if current is not None and current is not _sigint_handler:
                _signal.signal(_signal.SIGINT, _sigint_handler)
                self.prev_handler = current
                self.installed = True
        with _lock:
            threads = self.run._threads
            threads[self.thread_id] = threads.get(self.thread_id, 0) + 1
            if self.on_main:
                self.prev_main = _main_running
                _main_running = self.run

    def leave(self) -> None:
        # A signal for this run may land while we clean up: the handler then raises here.
        # Retry until the state is restored; the interrupt itself is already recorded.
        while True:
            try:
                self._leave_once()
                return
            except KeyboardInterrupt:
                continue

    def _leave_once(self) -> None:
        global _main_running
        with _lock:
            if self.on_main and _main_running is self.run:
                _main_running = self.prev_main
            threads = self.run._threads
            depth = threads.get(self.thread_id, 0) - 1
            if depth > 0:
                threads[self.thread_id] = depth
            else:
                threads.pop(self.thread_id, None)
        if not self.on_main and depth <= 0:
            # No kick reaches this thread any more (it left the registry under the lock);
            # drop one that was set but not raised yet, so it cannot fire in our caller.
            _clear_async_exc(self.thread_id)
        if self.installed:
            # signal.signal() runs pending handlers first: a late SIGINT meets our handler,
            # which now sees no running tool code and does nothing.
            _signal.signal(_signal.SIGINT, self.prev_handler)
            self.installed = False


class _Driven:
    """Trampoline: ``await _Driven(coro, run)`` behaves like ``await coro``."""

    __slots__ = ("_coro", "_run")

    def __init__(self, coro: Coroutine[Any, Any, Any], run: ToolInterrupt) -> None:
        self._coro = coro
        self._run = run

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, run = self._coro, self._run
        to_send: Any = None
        to_throw: BaseException | None = None
        try:
            while True:
                if to_throw is None and run.requested:
                    to_throw = KeyboardInterrupt(run.message)
                try:
                    with run.running(check=False):
                        if to_throw is not None:
                            exc, to_throw = to_throw, None
                            yielded = coro.throw(exc)
                        else:
                            yielded = coro.send(to_send)
                except StopIteration as stop:
                    return stop.value
                try:
                    to_send = yield yielded
                except GeneratorExit:
                    raise
                except BaseException as exc:  # CancelledError from task.cancel(), ...
                    if isinstance(exc, asyncio.CancelledError) and run.requested:
                        # Our own cancel: the code sees what sync code would see, an interrupt
                        # at the line it was waiting on.
                        exc = KeyboardInterrupt(run.message)
                    to_throw, to_send = exc, None
        finally:
            coro.close()


def _current_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _guard_enter(run: ToolInterrupt | None, kernel: Any) -> None:
    if run is not None:
        _guarded_runs.add(run)
    _guard.depth += 1
    if _guard.depth > 1:
        return
    _guard.kernel = kernel
    current = _signal.getsignal(_signal.SIGINT)
    # None: a handler set outside Python, which we could not put back: leave it.
    if current is not None and current is not _sigint_handler:
        _signal.signal(_signal.SIGINT, _sigint_handler)
        _guard.prev = current
        _guard.installed = True
    if kernel is not None:
        _wrap_request_hooks(kernel)


def _guard_leave(run: ToolInterrupt | None) -> None:
    if run is not None:
        _guarded_runs.discard(run)
    _guard.depth -= 1
    if _guard.depth > 0:
        return
    _unwrap_request_hooks(_guard.kernel)
    current = _signal.getsignal(_signal.SIGINT)
    if current is _in_request_sigint_handler:  # we end inside a request: its handler again
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    if not _guard.installed:
        _guard.kernel = None
        return
    _guard.installed = False
    kernel, _guard.kernel = _guard.kernel, None
    if current is _sigint_handler:
        _signal.signal(_signal.SIGINT, _guard.prev)
    elif kernel is not None and getattr(kernel, "saved_sigint_handler", None) is _sigint_handler:
        # We end inside a request: ipykernel saved our handler before the request and puts
        # that back after it; make it put back the one we replaced.
        kernel.saved_sigint_handler = _guard.prev
    # else: someone replaced our handler and owns SIGINT now; leave theirs alone.


@contextmanager
def forward_sigint(run: ToolInterrupt, kernel: Any = None) -> Iterator[None]:
    """While the block runs, SIGINT (the kernel's Stop button) interrupts ``run`` wherever its
    code executes: the main thread, a worker thread or an ``await``.

    Our handler is installed when the first such block starts and the previous one is put
    back exactly when the last ends. ipykernel swaps handlers around each request (it saves
    ours in ``kernel.saved_sigint_handler`` and restores it after the request): a Stop press
    during a user's request goes to that request, as it always does. If the block ends during
    a request, ``kernel.saved_sigint_handler`` is pointed back to the replaced handler.
    Call on the main thread (elsewhere signals cannot be handled; the block then only runs).
    """
    if not _on_main_thread():
        yield
        return
    _guard_enter(run, kernel)
    try:
        yield
    finally:
        _guard_leave(run)


@contextmanager
def stop_aborts_run(on_stop: Callable[[], None], kernel: Any) -> Iterator[None]:
    """While the block runs, a Stop (SIGINT) that lands while no agent code executes and no
    request of the kernel is being handled calls ``on_stop`` from the signal handler: it
    must only schedule work (``loop.call_soon_threadsafe``), never run it there.

    Shares the handler, the request-hook wrapping and the put-back rules of
    :func:`forward_sigint` (the same depth count), so nesting a tool's block inside, or
    ending inside a request, behaves the same. Call on the main thread, with the ipykernel
    instance (without a kernel there is no Stop button; the block then only runs).
    """
    if not _on_main_thread() or kernel is None:
        yield
        return
    _run_stoppers.append(on_stop)
    _guard_enter(None, kernel)
    try:
        yield
    finally:
        _guard_leave(None)
        _run_stoppers.remove(on_stop)


@contextmanager
def interrupt_main_for(
    signal: Any = None,
    *,
    timeout_s: float | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
    kernel: Any = None,
) -> Iterator[ToolInterrupt]:
    """A :class:`ToolInterrupt` fired by ``signal`` (AbortSignal), by a timeout and by SIGINT
    (see :func:`forward_sigint`; ``kernel`` is the ipykernel instance, if any)."""
    run = ToolInterrupt(loop or _current_loop())
    remove = None
    if signal is not None:
        remove = signal.add_listener(lambda: run.request("aborted"))
    cancel_timer = threading.Event()
    if timeout_s is not None and timeout_s > 0:

        def watchdog() -> None:
            if not cancel_timer.wait(timeout_s):
                run.request("timeout")

        threading.Thread(target=watchdog, name="pi-notebook-tool-timeout", daemon=True).start()
    try:
        with forward_sigint(run, kernel):
            yield run
    finally:
        cancel_timer.set()
        run.close()
        if remove is not None:
            remove()
