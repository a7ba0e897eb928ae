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

A client nobody sits at (``frontend.is_headless``) gets a
:class:`~pi_notebook.widgets.static_view.StaticView`: no widget, one Markdown output that
this class republishes while the run goes on, and the run's figures as ``image/*``
outputs after the final transcript.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from ..widgets.protocol import RunStatus, RunView

__all__ = ["DisplayedView", "current_cell_number"]

Log = Callable[[str], None]


class DisplayedView:
    """One cell's view; ``displayed=False`` for a view that prints itself (terminal)."""

    def __init__(self, view: RunView, shell: Any, log: Log, *, displayed: bool = True) -> None:
        self.view = view
        self._shell = shell
        self._log = log
        self._displayed = displayed
        self.display_id: str | None = None
        self._parent: dict[str, Any] | None = None
        self.frozen = False

    @classmethod
    def for_shell(cls, shell: Any, log: Log, label: str, loop: asyncio.AbstractEventLoop | None,
                  on_abort: Callable[[], None], on_remove_queued: Callable[[object], None],
                  context_window: int, *, headless: bool = False) -> DisplayedView:
        """The view this shell can show: the widget view under a kernel, Markdown only for
        a headless client, else text."""
        if getattr(shell, "kernel", None) is None:
            from ..widgets.text_view import TextView

            return cls(TextView(label), shell, log, displayed=False)  # it prints itself
        if headless:
            from ..widgets.static_view import StaticView

            return cls(StaticView(label, loop, context_window=context_window or None), shell, log)
        from ..widgets.view import AgentView

        if loop is None:
            raise RuntimeError("the kernel loop is not known yet")
        view = AgentView(label, loop, on_abort, on_remove_queued, context_window=context_window or None)
        return cls(view, shell, log)

    def show(self) -> None:
        """Display the view in the current cell under a fresh display id."""
        if not self._displayed:
            return
        from IPython.display import display

        self.display_id = uuid.uuid4().hex
        self._parent = _current_parent(self._shell)
        display(self.view, display_id=self.display_id)
        attach = getattr(self.view, "attach", None)
        if callable(attach):  # a view that asks for its output to be republished
            attach(self._republish)

    def _republish(self, bundle: dict[str, Any]) -> None:
        """Replace the shown output with ``bundle`` (the transcript so far)."""
        if self.frozen or self.display_id is None:
            return
        from IPython.display import update_display

        try:
            with _parent_of(self._shell, self._parent):
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
            except Exception as exc:
                markdown = f"*(transcript unavailable: {type(exc).__name__})*"
            from IPython.display import update_display

            try:
                with _parent_of(self._shell, self._parent):
                    update_display({"text/markdown": markdown, "text/plain": markdown}, raw=True,
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
            with _parent_of(self._shell, self._parent):
                for bundle in bundles:
                    display(bundle, raw=True)
        except Exception as exc:
            self._log(f"pi_notebook figures failed: {exc!r}")


def current_cell_number(shell: Any) -> int | None:
    """The ``In[n]`` of the cell running now (IPython 9 has already advanced
    ``shell.execution_count`` at this point, IPython 8 has not; the cell's own result
    object has the number in both)."""
    result = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    count = getattr(result, "execution_count", None)
    return count if isinstance(count, int) else None


def _current_parent(shell: Any) -> dict[str, Any] | None:
    kernel = getattr(shell, "kernel", None)
    try:
        parent = kernel.get_parent("shell") if kernel is not None else None
    except Exception:
        return None
    return parent if isinstance(parent, dict) and parent else None


@contextlib.contextmanager
def _parent_of(shell: Any, parent: dict[str, Any] | None) -> Iterator[None]:
    """Publish as a reply to ``parent`` (module docstring: only ipykernel 6 needs it)."""
    publisher = getattr(shell, "display_pub", None)
    major = _ipykernel_major()
    if not parent or major is None or major >= 7 or publisher is None \
            or not hasattr(publisher, "set_parent"):
        yield
        return
    saved = getattr(publisher, "parent_header", None)
    publisher.set_parent(parent)
    try:
        yield
    finally:
        publisher.set_parent(saved)  # the routed publisher forwards set_parent; a plain assignment would stay on the proxy


def _ipykernel_major() -> int | None:
    module = sys.modules.get("ipykernel")  # imported already when there is a kernel
    info = getattr(module, "version_info", None)
    try:
        return int(info[0]) if info else None
    except (TypeError, ValueError):
        return None
