"""What the Runtime asks of the kernel it sits in: the shell, the kernel host, the loop,
a run's view in its cell, the Stop button, the notebook's folder and where sessions go.

The conversation (conversation.py) and the scheduling of runs (scheduling.py) both hold
one :class:`KernelSide`; neither touches ``shell.kernel`` or a widget class directly.
Everything here runs on the kernel loop thread, except :meth:`KernelSide.call_on_loop`,
the hop onto it. The Stop guard (tools/kernel/interrupt.py) and the MCP link's module are
imported on first use, so ``%load_ext`` stays cheap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..tools.kernel.kernel_host import KernelHost, kernel_host
from ..widgets.protocol import RunView
from .autosave import session_dir, session_name
from .config import AgentMagics
from .display import DisplayedView, current_cell_number
from .frontend import has_widget_frontend, is_headless, shutdown_requested, track_view
from .lifecycle import Run
from .loop import KernelLoop

if TYPE_CHECKING:
    from pathlib import Path

    from IPython.core.interactiveshell import InteractiveShell

__all__ = ["KernelSide", "ViewFactory", "STOP_GRACE_S"]

# How long a Stop waits before it aborts the run: long enough for the shutdown_request that
# follows jupyter_client's interrupt before a shutdown or restart (see KernelSide.stop_guard).
STOP_GRACE_S = 1.0

# (model label, kernel loop, on_abort, on_remove_queued) -> a view; the test seam
ViewFactory = Callable[[str, "asyncio.AbstractEventLoop | None", Callable[[], None],
                        Callable[[object], None]], RunView]


class KernelSide:
    """The shell and the kernel (or terminal) hosting it, seen from the Runtime."""

    def __init__(self, shell: InteractiveShell, settings: AgentMagics,
                 view_factory: ViewFactory | None = None) -> None:
        self.shell = shell
        self.host: KernelHost = kernel_host(shell)  # the one seam to the kernel (or terminal)
        self.settings = settings
        self.kernel_loop = KernelLoop(self.host)
        self.view_factory = view_factory  # test seam: views without ipywidgets

    # --- the loop -------------------------------------------------------------------------
    def attach_loop(self) -> asyncio.AbstractEventLoop:
        """Find the kernel loop (raises RuntimeError in terminal IPython between cells)."""
        return self.kernel_loop.attach()

    def call_on_loop(self, fn: Callable[..., object], *args: object) -> None:
        self.kernel_loop.call(fn, *args)

    # --- a run's view ---------------------------------------------------------------------
    def make_view(self, label: str, on_abort: Callable[[], None], on_remove_queued: Callable[[object], None],
                  context_window: int) -> DisplayedView:
        """A run's view for this host, not shown yet (``DisplayedView.show``)."""
        loop = self.kernel_loop.loop
        if self.view_factory is not None:
            view = self.view_factory(label, loop, on_abort, on_remove_queued)
            return DisplayedView(view, self.host, self.log)
        return DisplayedView.for_host(self.host, self.log, label, loop, on_abort, on_remove_queued,
                                       context_window, headless=is_headless(self.shell))

    def cell_number(self) -> int | None:
        """The execution count of the cell being run."""
        return current_cell_number(self.shell)

    def track_rendering(self, view: RunView) -> None:
        """A view shown without frontend evidence: its rendering will be the evidence."""
        track_view(getattr(view, "widget", None))

    def is_interactive(self, run: Run | None) -> bool:
        """Can a human click approval buttons for ``run`` (the run at work)?"""
        if run is None:
            return False
        if not self.host.has_kernel:
            # terminal IPython: its text view asks with input(), if a person types there
            return _stdin_is_a_terminal()
        if not run.interactive:
            # the first run of a kernel starts before any frontend evidence (its own view is
            # the first widget shown): its view rendering since then counts (frontend.py)
            run.interactive = has_widget_frontend(self.shell)
        return run.interactive

    def form_view(self, run: Run | None) -> RunView | None:
        """The view that may show an MCP server's input form now: the run at work's, in a
        kernel with a frontend (not headless, not terminal IPython)."""
        if run is None or not self.host.has_kernel or not self.is_interactive(run):
            return None
        return run.view

    # --- the Stop button ------------------------------------------------------------------
    @contextmanager
    def stop_guard(self, run: Run, loop: asyncio.AbstractEventLoop, abort: Callable[[], None]) -> Iterator[None]:
        """While a run's task works: the kernel's Stop button calls ``abort`` when no agent
        code executes and the kernel handles no request of the user's (tools/kernel/interrupt.py,
        docs/design/capture.md); while agent code runs it interrupts that code, as before."""
        from ..tools.kernel.interrupt import stop_aborts_run

        def pressed() -> None:
            # jupyter_client interrupts the kernel right before every shutdown and restart; its
            # shutdown_request follows within milliseconds. Aborting then would end the run and
            # close its view's widgets after the frontend dropped them ("Comm not found" in the
            # page's console); the kernel ends the run by going away instead. A run that ended
            # meanwhile (a waiting cell's Stop aborts at once) takes no run started since with it.
            if not shutdown_requested() and run.phase != "ended":
                abort()

        def stop() -> None:  # called from the SIGINT handler: only schedule the abort
            loop.call_soon_threadsafe(loop.call_later, STOP_GRACE_S, pressed)

        with stop_aborts_run(stop, self.host.kernel):
            yield

    # --- where things are -----------------------------------------------------------------
    def notebook_dir(self) -> Path:
        """The notebook's folder (AGENTS.md and the MCP config are found from there)."""
        from .mcp_run import notebook_dir

        return notebook_dir(self.shell, self.settings.notebook_path.strip())

    def session_dir(self) -> Path:
        return session_dir(self.settings.session_dir)

    def session_name(self) -> str:
        return session_name(self.shell.user_ns or {})

    # --- calls that must not break a run --------------------------------------------------
    def try_view(self, call: Callable[[], object]) -> None:
        """Call into a view; a broken (or older) view must not break the run."""
        try:
            call()
        except Exception as exc:
            self.log(f"pi_notebook view call failed: {exc!r}")

    def log(self, text: str) -> None:
        self.host.log_warning(text)


def _stdin_is_a_terminal() -> bool:
    import sys

    try:
        return bool(sys.stdin is not None and sys.stdin.isatty())
    except (AttributeError, ValueError):  # replaced or closed
        return False
