"""Abort a request exactly while its retry wait is running, whatever the machine's load.

    from helpers.retry_wait import abort_in_retry_wait
    delays = abort_in_retry_wait(monkeypatch, controller)
    ... run the stream ...
    assert delays == [30_000]     # the wait that was interrupted (the server's retry-after)

A timer ("abort after 0.2 s") races the request on a loaded machine: the abort can land
before the first attempt is even sent, and the test then checks something else. Here the
retry sleep (``pi_notebook.ai._retry.abortable_sleep``) is wrapped so that the abort is
scheduled once the real sleep has started; it runs on the loop's next step, when the sleep is
suspended with its abort listener registered.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pi_notebook.ai import _retry

__all__ = ["abort_in_retry_wait"]


def abort_in_retry_wait(monkeypatch: Any, controller: Any) -> list[float]:
    """Patch the retry sleep to abort ``controller`` once it waits; returns the delays asked."""
    real_sleep = _retry.abortable_sleep
    delays: list[float] = []

    async def sleep(delay_ms: float, signal: Any = None) -> None:
        delays.append(delay_ms)
        # runs after real_sleep has reached its await (it does not yield before that)
        asyncio.get_running_loop().call_soon(controller.abort)
        await real_sleep(delay_ms, signal)

    monkeypatch.setattr(_retry, "abortable_sleep", sleep)
    return delays
