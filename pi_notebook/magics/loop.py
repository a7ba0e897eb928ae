"""The kernel's asyncio loop, and the hop onto it from other threads.

Everything in the run lifecycle runs on the kernel loop's thread. Widget comm handlers
may not: ipykernel 7.0-7.3 under JupyterLab run them on a subshell thread, and asyncio
objects touched from there never wake the loop. Entry points such handlers call (Abort,
remove a queued message) go through :meth:`KernelLoop.call`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from ..tools.kernel.kernel_host import KernelHost

__all__ = ["KernelLoop"]


class KernelLoop:
    """Finds the loop (once a cell runs on it) and remembers its thread."""

    def __init__(self, host: KernelHost) -> None:
        self._host = host
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.get_ident()

    def attach(self) -> asyncio.AbstractEventLoop:
        """The running loop (or the kernel's, between cells); raises RuntimeError when
        there is none yet (terminal IPython between cells)."""
        loop: asyncio.AbstractEventLoop | None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = self._host.asyncio_loop()
            if loop is None:
                raise
        self.loop = loop
        self.thread = threading.get_ident()
        return loop

    def call(self, fn: Callable[..., object], *args: object) -> None:
        """``fn(*args)`` on the loop: now when we are on its thread, else a thread-safe hop."""
        loop = self.loop
        if loop is None or (threading.get_ident() == self.thread and not loop.is_closed()):
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)
