"""Threads that run the synchronous parts of agent code, off the kernel's main thread.

Why: code that runs on the main thread holds the kernel loop *and* the main shell. A widget
click (a comm message) is then not processed until the code ends, on ipykernel 6.29 (no
subshells) and 7.4 (the click is routed back to the main shell): the Abort button could not
stop ``while True: pass`` (docs/design/capture.md, "Where agent code runs"). On a worker thread the loop
stays free, so the click, streaming and other requests are handled at once.

- ``submit(fn, context) -> (worker, concurrent.futures.Future)``: run ``context.run(fn)`` on an
  idle worker (or a new one). The future gets fn's result or exception.
- ``abandon(worker)``: the caller stops waiting (the code is stuck in a call that does not see
  the asynchronous interrupt); the thread exits when its job ends instead of being reused.

Workers are reused, most recently used first, so consecutive calls usually run on the same
thread: thread-bound objects that agent code creates (``sqlite3`` connections, ...) keep
working from one call to the next. At most ``_MAX_IDLE`` idle threads are kept.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import itertools
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["abandon", "submit"]

_MAX_IDLE = 2
_numbers = itertools.count(1)
_pool_lock = threading.Lock()
_idle: list[_Worker] = []


class _Worker(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name=f"pi-notebook-agent-code-{next(_numbers)}", daemon=True)
        self.jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.abandoned = False

    def run(self) -> None:
        while True:
            try:
                job = self.jobs.get()
                if job is None:
                    return
                job()
            except BaseException:
                pass
            if self.abandoned or not _release(self):
                return


def _release(worker: _Worker) -> bool:
    with _pool_lock:
        if len(_idle) >= _MAX_IDLE:
            return False
        _idle.append(worker)
        return True


def _acquire() -> _Worker:
    with _pool_lock:
        while _idle:
            worker = _idle.pop()
            if worker.is_alive():
                return worker
    worker = _Worker()
    # Start it in an empty context: capture.py's Thread.start wrapper must not bind this
    # long-lived thread to the capture of the call that happened to create it.
    contextvars.Context().run(worker.start)
    return worker


# While agent code runs on a worker, the main thread must get the GIL quickly to handle a
# click: every socket call of a message round trip gives the GIL up, and taking it back from
# a thread that computes waits one switch interval (5 ms by default; measured ~200 ms for an
# Abort click against `while True: pass`). A shorter interval while workers run fixes that.
_SWITCH_INTERVAL_S = 0.0005
_busy = 0
_saved_interval: float | None = None


def _busy_enter() -> None:
    global _busy, _saved_interval
    with _pool_lock:
        _busy += 1
        if _busy == 1:
            current = sys.getswitchinterval()
            if current > _SWITCH_INTERVAL_S:
                _saved_interval = current
                sys.setswitchinterval(_SWITCH_INTERVAL_S)


def _busy_leave() -> None:
    global _busy, _saved_interval
    with _pool_lock:
        _busy -= 1
        if _busy == 0 and _saved_interval is not None:
            # Put it back unless someone else changed it meanwhile.
            if abs(sys.getswitchinterval() - _SWITCH_INTERVAL_S) < 1e-9:
                sys.setswitchinterval(_saved_interval)
            _saved_interval = None


def submit(fn: Callable[[], Any], context: contextvars.Context) -> tuple[_Worker, concurrent.futures.Future[Any]]:
    """Run ``context.run(fn)`` on a worker thread (see the module docstring)."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def job() -> None:
        if not future.set_running_or_notify_cancel():
            return
        _busy_enter()
        try:
            result = context.run(fn)
        except BaseException as exc:
            _busy_leave()
            future.set_exception(exc)
        else:
            _busy_leave()
            future.set_result(result)

    worker = _acquire()
    worker.jobs.put(job)
    return worker, future


def abandon(worker: _Worker) -> None:
    """Stop reusing ``worker``: it exits once its current job returns."""
    worker.abandoned = True
