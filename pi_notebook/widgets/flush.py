"""Coalesced widget flushing: at most one flush per interval per view.

Every widget trait change is a comm message that carries the *whole* trait value
(measured, see bench/widget_updates.py: 2,000 per-delta updates = 14.5 MB and a browser 6-7 s
behind). So event handlers only change Python-side state and call ``request()``;
the scheduler runs the flush callback on the loop, spaced at least ``interval``
seconds apart, and ``flush_now()`` forces the final one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["FlushScheduler", "DEFAULT_INTERVAL"]

DEFAULT_INTERVAL = 0.05


class FlushScheduler:
    """Calls ``flush`` on ``loop`` no more than once per ``interval`` seconds.

    All methods must be called on the loop's thread. A request made while a flush is
    already scheduled costs nothing; the first request after a quiet period flushes
    on the next loop iteration (so a single event still shows up at once).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, flush: Callable[[], None],
                 interval: float = DEFAULT_INTERVAL) -> None:
        self._loop = loop
        self._flush = flush
        self.interval = interval
        self._handle: asyncio.TimerHandle | None = None
        self._last = float("-inf")
        self._closed = False
        self.flush_count = 0

    @property
    def pending(self) -> bool:
        return self._handle is not None

    def request(self) -> None:
        if self._handle is not None or self._closed:
            return
        delay = max(0.0, self.interval - (self._loop.time() - self._last))
        self._handle = self._loop.call_later(delay, self._run)

    def flush_now(self) -> None:
        """Flush immediately (e.g. the final flush when a run ends)."""
        self._cancel()
        self._run()

    def close(self) -> None:
        """Stop scheduling; a pending flush is dropped."""
        self._closed = True
        self._cancel()

    def _cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _run(self) -> None:
        self._handle = None
        self._last = self._loop.time()
        self.flush_count += 1
        self._flush()
