"""Interrupting tool code that runs on the kernel's main thread.

Tool code runs on the kernel loop (main thread). A runaway ``while True: pass`` there blocks the
loop, so nothing scheduled on the loop can stop it; only a signal can. ipykernel sets SIGINT to
``SIG_IGN`` while idle (and to its own handlers while a request runs), so the kernel's Stop
button does nothing to background tool code by default (jupyter-mechanics.md §5).

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
  Code that swallows KeyboardInterrupt is kicked again every second (a few times).
- ``ToolInterrupt.drive(coro)`` wraps a coroutine so that each of its steps runs inside
  ``running()`` (a small trampoline in place of ``await coro``).

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
from collections.abc import Coroutine, Generator, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["ToolInterrupt", "interrupt_main_for"]

_MESSAGES = {
    "aborted": "tool code interrupted: the run was aborted",
    "timeout": "tool code interrupted: time limit reached",
    "kernel interrupt": "tool code interrupted by a kernel interrupt",
}
_KICK_INTERVAL_S = 1.0
_MAX_KICKS = 5

_lock = threading.Lock()
# The run whose code is executing on the main thread right now (read by the signal handler).
_main_running: ToolInterrupt | None = None


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _sigint_handler(signum: int, frame: Any) -> None:
    run = _main_running
    if run is None or not _on_main_thread():
        # No tool code executing (e.g. a signal we sent landed just after the step ended):
        # the request is already recorded; the next step or the task cancel handles it.
        return
    run._note("kernel interrupt")
    raise KeyboardInterrupt(run.message)


def _raise_in_thread(thread_id: int) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(KeyboardInterrupt)
    )


class ToolInterrupt:
    """Interrupt state of one tool execution (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop
        self._reason: str | None = None
        self._threads: dict[int, int] = {}  # thread ident -> nesting depth of running()
        self._task: asyncio.Future[Any] | None = None
        self._closed = False
        self._kicker: threading.Thread | None = None

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

    def _kick(self) -> None:
        main_id = threading.main_thread().ident
        # Holding the lock: running() cannot finish its step (and restore the previous
        # handler) between our check and the signal, so the signal meets our handler.
        with _lock:
            for thread_id in list(self._threads):
                if thread_id == main_id:
                    assert main_id is not None
                    _signal.pthread_kill(main_id, _signal.SIGINT)
                else:
                    _raise_in_thread(thread_id)

    def _keep_kicking(self) -> None:
        # For code that catches KeyboardInterrupt and carries on.
        for _ in range(_MAX_KICKS):
            threading.Event().wait(_KICK_INTERVAL_S)
            if self._closed:
                return
            self._kick()

    def _cancel_waiting_task(self) -> None:
        task = self._task
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


@contextmanager
def interrupt_main_for(
    signal: Any = None,
    *,
    timeout_s: float | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
) -> Iterator[ToolInterrupt]:
    """A :class:`ToolInterrupt` fired by ``signal`` (AbortSignal) and by a timeout."""
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
        yield run
    finally:
        cancel_timer.set()
        run.close()
        if remove is not None:
            remove()
