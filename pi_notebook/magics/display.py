"""A run view shown in its cell, and frozen to a static transcript when the run ends.

:class:`DisplayedView` owns everything about *where* a view lives: its display id, the
parent header of the cell that showed it, and the final swap of the live widget for a
Markdown transcript (what a saved notebook shows on GitHub, nbviewer and after a
restart). After that swap the view is closed, so no widget model outlives its run.

ipykernel 7 keeps the parent header in a context variable, so the run task already
publishes as a reply to its ``%%agent`` cell. ipykernel 6 has one global parent, the
*latest* request, which would attach the transcript to whatever cell ran last; there
the display publisher's parent is swapped for the one synchronous ``update_display``
call (on the loop thread, so no other output can slip in between).

Which kernel, and its parent header, are the kernel host's business
(tools/kernel/kernel_host.py: ``parent_header``, ``publishing_as``).

A client nobody sits at (``frontend.is_headless``) gets a
:class:`~pi_notebook.widgets.static_view.StaticView`: no widget, one Markdown output that
this class republishes while the run goes on, and the run's figures as ``image/*``
outputs after the final transcript.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..tools.kernel.kernel_host import KernelHost, ParentHeader
from ..widgets.protocol import RunStatus, RunView

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = ["DisplayedView", "current_cell_number"]

Log = Callable[[str], None]


class DisplayedView:
    """One cell's view; ``displayed=False`` for a view that prints itself (terminal)."""

    def __init__(self, view: RunView, host: KernelHost, log: Log, *, displayed: bool = True) -> None:
        self.view = view
        self._host = host
        self._log = log
        self._displayed = displayed
        self.display_id: str | None = None
        self._parent: ParentHeader | None = None
        self.frozen = False
        self._widget_shown = False

    @classmethod
    def for_host(cls, host: KernelHost, log: Log, label: str, loop: asyncio.AbstractEventLoop | None,
                  on_abort: Callable[[], None], on_remove_queued: Callable[[object], None],
                  context_window: int, *, headless: bool = False) -> DisplayedView:
        """The view this host can show: the widget view under a kernel, Markdown only for
        a headless client, else text."""
        if not host.has_kernel:
            from ..widgets.text_view import TextView

            return cls(TextView(label), host, log, displayed=False)  # it prints itself
        if headless:
            from ..widgets.static_view import StaticView

            return cls(StaticView(label, loop, context_window=context_window or None), host, log)
        from ..widgets.view import AgentView

        if loop is None:
            raise RuntimeError("the kernel loop is not known yet")
        view = AgentView(label, loop, on_abort, on_remove_queued, context_window=context_window or None)
        return cls(view, host, log)

    def show(self, parent: ParentHeader | None = None) -> None:
        """Display the view under a fresh display id: in the current cell, or in the cell of
        ``parent`` (a request's parent header) when given."""
        if not self._displayed:
            return
        from IPython.display import display

        self.display_id = uuid.uuid4().hex
        self._parent = parent or self._host.parent_header()
        with self._host.publishing_as(self._parent):
            display(self.view, display_id=self.display_id)
        self._widget_shown = getattr(self.view, "model_id", None) is not None  # (closed at freeze)
        attach = getattr(self.view, "attach", None)
        if callable(attach):  # a view that asks for its output to be republished
            attach(self._republish)

    @property
    def live_widget(self) -> bool:
        """The view was displayed as a widget (a frontend renders controls in its cell)."""
        return self._widget_shown

    def show_below(self, bundle: dict[str, object]) -> Callable[[dict[str, object]], None] | None:
        """Display ``bundle`` as an output of the view's cell, after what is there; returns
        what replaces that output later (None when it could not be shown)."""
        if self.display_id is None:
            return None
        from IPython.display import display, update_display

        below = uuid.uuid4().hex
        try:
            with self._host.publishing_as(self._parent):
                display(bundle, raw=True, display_id=below)
        except Exception as exc:
            self._log(f"pi_notebook output below the view failed: {exc!r}")
            return None

        def replace(new: dict[str, object]) -> None:
            try:
                with self._host.publishing_as(self._parent):
                    update_display(new, raw=True, display_id=below)
            except Exception as exc:
                self._log(f"pi_notebook output below the view: update failed: {exc!r}")
        return replace

    def _republish(self, bundle: dict[str, object]) -> None:
        """Replace the shown output with ``bundle`` (the transcript so far)."""
        if self.frozen or self.display_id is None:
            return
        from IPython.display import update_display

        try:
            with self._host.publishing_as(self._parent):
                update_display(bundle, raw=True, display_id=self.display_id)
        except Exception as exc:
            self._log(f"pi_notebook transcript update failed: {exc!r}")

    def freeze(self, status: RunStatus) -> None:
        """End the view: final status, static transcript in place of the widget, close.
        Once only; a broken view never breaks the end of a run."""
        if self.frozen:
            return
        self.frozen = True
        try:
            self.view.finish(status)
        except Exception as exc:
            self._log(f"pi_notebook view.finish failed: {exc!r}")
        if self.display_id is not None:
            try:
                markdown = self.view.to_markdown()
                # text/plain is the transcript as text where the view has one (no HTML tags
                # for a terminal, nbconvert --to markdown or an agent reading the .ipynb)
                to_text = getattr(self.view, "to_text", None)
                plain = to_text() if callable(to_text) else markdown
            except Exception as exc:
                markdown = plain = f"*(transcript unavailable: {type(exc).__name__})*"
            from IPython.display import update_display

            try:
                with self._host.publishing_as(self._parent):
                    update_display({"text/markdown": markdown, "text/plain": plain}, raw=True,
                                   display_id=self.display_id)
            except Exception as exc:  # the live view stays; the run still ends cleanly
                self._log(f"pi_notebook final transcript failed: {exc!r}")
                return  # keep the widget models: they are what the cell still shows
            self._write_figures()
        try:
            self.view.close()
        except Exception as exc:
            self._log(f"pi_notebook view.close failed: {exc!r}")


    def _write_figures(self) -> None:
        """The run's figures as outputs of their own, after the transcript (views that
        offer them: the headless one)."""
        figures = getattr(self.view, "figure_bundles", None)
        if not callable(figures):
            return
        from IPython.display import display

        try:
            bundles = figures()
            with self._host.publishing_as(self._parent):
                for bundle in bundles:
                    display(bundle, raw=True)
        except Exception as exc:
            self._log(f"pi_notebook figures failed: {exc!r}")


def current_cell_number(shell: InteractiveShell) -> int | None:
    """The ``In[n]`` of the cell running now (IPython 9 has already advanced
    ``shell.execution_count`` at this point, IPython 8 has not; the cell's own result
    object has the number in both)."""
    result = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    count = getattr(result, "execution_count", None)
    return count if isinstance(count, int) else None
