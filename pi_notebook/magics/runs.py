"""Which run is which: the three runs the notebook layer asks about, named once.

- ``newest``: the newest run not yet ended (with the runs queued before it, chained through
  ``Run.after``); what a waiting cell waits for. None once it has ended.
- ``serving``: the run the agent is working for right now; events, approvals and notices
  go to its view. None between runs, and while a queued run waits its turn.
- ``latest``: the latest run started, kept after it ended: its view may still be on
  screen as a live widget (a final transcript that could not be written keeps it), so a
  kernel shutdown closes it too; ``%agent`` status and tests read how it went.

"The run at work, else the newest" (:meth:`Runs.current`) is where a notice or the
approval policy of this moment belongs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..widgets.protocol import RunView
from .lifecycle import Run

__all__ = ["Runs", "AbortFromView"]


class Runs:
    def __init__(self) -> None:
        self.newest: Run | None = None
        self.serving: Run | None = None
        self.latest: Run | None = None

    def current(self) -> Run | None:
        """The run at work, else the newest one (queued or starting)."""
        return self.serving or self.newest

    def chain(self) -> Iterator[Run]:
        """The newest run and every run it waits for, newest first."""
        return Run.chain(self.newest)

    def live(self) -> Run | None:
        """The newest run that will still answer (not ended, aborting or removed)."""
        return next((r for r in self.chain()
                     if r.phase != "ended" and not (r.removed or r.abort_requested)), None)

    def started(self, run: Run) -> None:
        self.newest = self.latest = run

    def ended(self, run: Run) -> bool:
        """``run`` has ended: it is no longer served or waited for. True when it was the
        newest (nothing is left to wait for)."""
        if self.serving is run:
            self.serving = None
        if self.newest is run:
            self.newest = None
            return True
        return False

    def live_views(self) -> list[RunView]:
        """Views that may still show live widgets: the chain's, and the latest run's."""
        views = [run.view for run in self.chain()]
        if self.latest is not None and self.latest.view not in views:
            views.append(self.latest.view)
        return views


class AbortFromView:
    """A view's Abort button: made with the view, bound to its run once the run exists
    (the run holds the view, so the view comes first)."""

    def __init__(self, abort: Callable[[Run], None]) -> None:
        self._abort = abort
        self.run: Run | None = None

    def __call__(self) -> None:
        if self.run is not None:
            self._abort(self.run)
