"""The Undo buttons under finished runs: when each may undo, and what a click does.

``UndoOffers.offer(shown, record)`` when a run's view is frozen: if the run changed the user's
names and its cell has a live widget frontend, an :class:`~pi_notebook.widgets.undo_bar.UndoBar`
is displayed after its transcript. The kernel side is ``%agent undo``'s: ``NamespaceReview``
undoes runs newest first, and leaves a name the user changed since alone (and names it).

So a bar is enabled only while its run is the newest run an undo would restore
(``UndoStack.newest``) and no run is active; the others say why they wait ("a later run
changed variables too: undo it first"). A click checks the same again on the kernel loop
(a click can race a run that starts), undoes, and the result replaces the bar as static text
where the user clicked; the run before it then becomes undoable and its bar is enabled.
A run undone by ``%agent undo``, or dropped from the stack (``MAX_RUNS``), gets the same
static end. Nothing here survives the kernel: after a restart the frontend marks the bar
disconnected and the stylesheet hides its button (``theme.py``); at a shutdown the bars are
closed with the views (``frontend.install_shutdown_close``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..review.undo import RunRecord
from ..review.watch import review_for

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..widgets.undo_bar import UndoBar
    from .display import DisplayedView

__all__ = ["UndoOffers", "WAIT_FOR_LATER", "RUN_ACTIVE"]

WAIT_FOR_LATER = "A later run changed variables too: undo that one first (its button, or %agent undo)."
RUN_ACTIVE = "A run is active: undo restores a finished run. Wait for it to end, or abort it."
UNDONE_ELSEWHERE = "This run was undone with %agent undo."
GONE = "This run can no longer be undone (only the latest runs are kept)."
UNLOADED = "Undo button off: pi_notebook was unloaded (after %load_ext pi_notebook, %agent undo restores this run)."

Replace = Callable[[dict[str, object]], None]


@dataclass
class _Offer:
    record: RunRecord
    bar: UndoBar
    replace: Replace  # replaces the bar's output (its display id) with a bundle


class UndoOffers:
    """One per runtime. ``is_running``: a run is active; ``call_on_loop``: hop onto the kernel
    loop (button clicks may come on another thread)."""

    def __init__(self, shell: InteractiveShell, is_running: Callable[[], bool],
                 call_on_loop: Callable[..., None]) -> None:
        self._shell = shell
        self._is_running = is_running
        self._call_on_loop = call_on_loop
        self._offers: list[_Offer] = []

    @property
    def bars(self) -> list[UndoBar]:
        return [offer.bar for offer in self._offers]

    def offer(self, shown: DisplayedView, record: RunRecord | None) -> UndoBar | None:
        """Show an Undo button after ``shown``'s transcript, when its run changed names."""
        if record is None or not record.changes or not shown.live_widget:
            return None
        from ..widgets.undo_bar import UndoBar

        bar = UndoBar(record.changes, lambda: self._call_on_loop(self.clicked, record))
        replace = shown.show_below(bar.bundle())
        if replace is None:
            bar.close()
            return None
        self._offers.append(_Offer(record, bar, replace))
        self.refresh()
        return bar

    def refresh(self) -> None:
        """Enable the bar of the newest undoable run, and only it; end the bars whose run is
        no longer on the stack."""
        stack = review_for(self._shell).stack
        newest = stack.newest()
        running = self._is_running()
        kept = {id(run) for run in stack.runs}  # by identity: records compare by their fields
        for offer in list(self._offers):
            if id(offer.record) not in kept:
                self._end(offer, UNDONE_ELSEWHERE if offer.record.undone else GONE)
            elif running:
                offer.bar.set_enabled(False, RUN_ACTIVE)
            elif offer.record is newest:
                offer.bar.set_enabled(True)
            else:
                offer.bar.set_enabled(False, WAIT_FOR_LATER)

    def clicked(self, record: RunRecord) -> None:
        """A bar's button, on the kernel loop: undo its run if it is still the newest."""
        offer = next((o for o in self._offers if o.record is record), None)
        if offer is None:
            return
        review = review_for(self._shell)
        if self._is_running():
            offer.bar.set_enabled(False, RUN_ACTIVE)
            return
        if review.stack.newest() is not record:
            self.refresh()
            return
        report = review.undo(self._shell.user_ns)
        self._end(offer, report.text())
        self.refresh()

    def _end(self, offer: _Offer, text: str) -> None:
        from ..widgets.undo_bar import UndoBar

        self._offers.remove(offer)
        try:
            offer.replace(UndoBar.final_bundle(text))
        finally:
            offer.bar.close()

    def close(self) -> None:
        """The extension is unloaded: every button ends as static text (the runs stay on the
        stack: ``%agent undo`` restores them after ``%load_ext pi_notebook``)."""
        for offer in list(self._offers):
            self._end(offer, UNLOADED)
