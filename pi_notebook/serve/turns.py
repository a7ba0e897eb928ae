"""One kernel, one queue: outside calls take their turn on the kernel loop.

The HTTP server runs on its own thread and loop (server.py) so ``initialize``, ``ping`` and
``tools/list`` are answered while a cell runs. A call that touches the namespace is handed to
the kernel loop with ``call_soon_threadsafe``, the same hop the views' Abort uses
(magics/loop.py), as a task started in a copy of the ``%agent serve`` cell's context, and there:

- it cannot start while a user cell runs synchronous code: the kernel loop is blocked and
  the handed-over coroutine simply waits in the loop's queue;
- it waits while a user cell awaits (top-level ``await`` frees the loop) or a ``%%agent`` run
  is active: :class:`Turns` asks ``busy()`` before it starts and again while it waits;
- calls from all clients pass one ``asyncio.Lock`` on the kernel loop, FIFO, so they run one
  after the other in the order they reached the kernel, and none is dropped.

``busy()`` returns why the kernel is busy (a short sentence) or None. :attr:`Turns.waiting`
says what the call in front is waiting for, for the progress notifications the server sends.
Cancelling the returned future (the client went away, ``%agent serve stop``) cancels the
call on the kernel loop, waiting or running.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["CellWatch", "Turns", "on_loop"]

T = TypeVar("T")

# How often a waiting call asks busy() again: a poll of a few attribute reads, cheap enough
# at this rate, and a call starts at most this late after the kernel became free.
POLL_S = 0.05


class CellWatch:
    """Is a user cell executing? ``pre_run_cell`` / ``post_run_cell`` on the shell's events
    (silent executions fire neither: they are not the user's cells)."""

    def __init__(self, events: Any) -> None:
        self._events = events
        self.running = False
        events.register("pre_run_cell", self._pre)
        events.register("post_run_cell", self._post)

    def _pre(self, info: Any) -> None:
        self.running = True

    def _post(self, result: Any) -> None:
        self.running = False

    def close(self) -> None:
        for event, callback in (("pre_run_cell", self._pre), ("post_run_cell", self._post)):
            try:
                self._events.unregister(event, callback)
            except ValueError:
                pass


class Turns:
    def __init__(self, loop: asyncio.AbstractEventLoop, busy: Callable[[], str | None],
                 context: contextvars.Context | None = None) -> None:
        self.loop = loop
        self._busy = busy
        # each call's task starts in a copy of this context: the ``%agent serve`` cell's, so
        # what a call displays goes to that cell (ipykernel 7 keeps the parent there)
        self._context = context
        self._lock: asyncio.Lock | None = None  # made on the kernel loop, at the first call
        # handed over (counted on the calling thread) and finished (on the kernel loop): each
        # counter has one writer, so no lock is needed to read their difference anywhere
        self.submitted = 0
        self.finished = 0
        self.waiting: str | None = None  # why the call in front has not started

    def submit(self, work: Callable[[], Awaitable[T]]) -> concurrent.futures.Future[T]:
        """Run ``work()`` on the kernel loop in its turn (callable from any thread)."""
        self.submitted += 1
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self.loop.call_soon_threadsafe(self._start, work, future)
        return future

    def _start(self, work: Callable[[], Awaitable[T]], future: concurrent.futures.Future[T]) -> None:
        if future.cancelled():  # given up before it reached the loop
            self.finished += 1
            return
        context = self._context.copy() if self._context is not None else contextvars.copy_context()
        task = context.run(self.loop.create_task, self._turn(work))

        def settle(done: asyncio.Task[T]) -> None:
            if future.done():
                return
            if done.cancelled():
                future.cancel()
            elif (error := done.exception()) is not None:
                future.set_exception(error)
            else:
                future.set_result(done.result())

        def given_up(gone: concurrent.futures.Future[T]) -> None:
            if gone.cancelled() and not self.loop.is_closed():
                self.loop.call_soon_threadsafe(task.cancel)

        task.add_done_callback(settle)
        future.add_done_callback(given_up)

    async def _turn(self, work: Callable[[], Awaitable[T]]) -> T:
        try:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                while (reason := self._busy()) is not None:
                    self.waiting = reason
                    await asyncio.sleep(POLL_S)
                self.waiting = None
                return await work()
        finally:
            self.waiting = None
            self.finished += 1

    @property
    def queued(self) -> int:
        """Calls handed over and not finished (waiting or running)."""
        return self.submitted - self.finished


async def on_loop(future: concurrent.futures.Future[T]) -> T:
    """Await a kernel-loop future from the server's loop (cancelling one cancels the other)."""
    return await asyncio.wrap_future(future)
