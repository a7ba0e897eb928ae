"""The Undo button under a finished run: shown only for a run that changed names in a live
view, enabled only for the newest undoable run while no run is active, undoing where it was
clicked, and leaving static text (no widget, no button) once it cannot undo any more."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from pi_notebook.magics.undo_offers import (GONE, RUN_ACTIVE, UNDONE_ELSEWHERE, UNLOADED, WAIT_FOR_LATER,
                                            UndoOffers)
from pi_notebook.review.changes import visible_items
from pi_notebook.review.undo import MAX_RUNS
from pi_notebook.review.watch import review_for
from pi_notebook.widgets.undo_bar import FALLBACK_TEXT, UNDO_LABEL, UndoBar

from widget_helpers import CommLog


class Shell:
    def __init__(self, ns: dict[str, Any]) -> None:
        self.user_ns = ns


class Shown:
    """The displayed view of a finished run: what show_below displayed and replaced."""

    def __init__(self, live: bool = True) -> None:
        self.live_widget = live
        self.outputs: list[dict[str, Any]] = []

    def show_below(self, bundle: dict[str, Any]):
        self.outputs.append(bundle)
        return self.outputs.append


class Harness:
    def __init__(self, ns: dict[str, Any]) -> None:
        self.shell = Shell(ns)
        self.running = False
        self.hops: list[str] = []
        self.offers = UndoOffers(self.shell, lambda: self.running, self.hop)

    def hop(self, fn: Any, *args: Any) -> None:
        self.hops.append(threading.current_thread().name)
        fn(*args)

    def agent_run(self, *codes: str, live: bool = True) -> tuple[Shown, UndoBar | None]:
        """One finished run of agent code: the review around each call, then the offer."""
        review = review_for(self.shell)
        record = review.start_run(f"run {len(review.stack.runs) + 1}")
        ns = self.shell.user_ns
        for code in codes:
            watch = review.before_call(code, visible_items(ns, {}))
            exec(code, ns)
            ns.pop("__builtins__", None)
            review.after_call(watch, ns, visible_items(ns, {}))
        shown = Shown(live)
        return shown, self.offers.offer(shown, record)  # type: ignore[arg-type]  # a DisplayedView's two members


def text_of(bar: UndoBar) -> str:
    return bar.message.value


def click(bar: UndoBar) -> None:
    thread = threading.Thread(target=bar.button.click, name="comm-thread")
    thread.start()
    thread.join(5)


def test_only_a_run_that_changed_names_in_a_live_view_gets_a_button(comms: CommLog):
    h = Harness({"rows": [1]})
    assert h.agent_run("total = sum(rows)", live=False)[1] is None  # no live widget frontend
    h.offers.close()
    h = Harness({"rows": [1]})
    assert h.agent_run("print(len(rows))")[1] is None  # nothing changed: nothing to undo
    shown, bar = h.agent_run("rows.append(2)\nmade = 1")
    assert bar is not None and bar.enabled and bar.button.description == UNDO_LABEL
    assert "<code>rows</code>" in text_of(bar) and "<code>made</code>" in text_of(bar)
    # the saved notebook: the widget output and a line of text, no static button anywhere
    assert shown.outputs[0]["text/plain"] == FALLBACK_TEXT
    assert set(shown.outputs[0]) == {"application/vnd.jupyter.widget-view+json", "text/plain"}


def test_only_the_newest_undoable_run_is_enabled_and_runs_undo_in_order(comms: CommLog):
    h = Harness({"rows": [1], "total": 0})
    first_shown, first = h.agent_run("rows.append(2)")
    second_shown, second = h.agent_run("total = 5")
    assert first is not None and second is not None
    assert not first.enabled and WAIT_FOR_LATER in text_of(first)
    assert second.enabled
    h.agent_run("print(1)")  # a later run that changed nothing does not stand in the way
    assert second.enabled
    click(first)  # a stale click on the older bar undoes nothing
    assert h.shell.user_ns == {"rows": [1, 2], "total": 5}
    click(second)
    assert h.hops == ["comm-thread", "comm-thread"]  # the click hopped onto the loop
    assert h.shell.user_ns["total"] == 0 and h.shell.user_ns["rows"] == [1, 2]
    ended = second_shown.outputs[-1]
    assert set(ended) == {"text/markdown", "text/plain"}  # static text where the button was
    assert "restored <code>total</code>" in ended["text/markdown"] and "<button" not in ended["text/markdown"]
    assert second.closed and first.enabled  # the run before it can be undone now
    click(first)
    assert h.shell.user_ns["rows"] == [1]
    assert "restored <code>rows</code>" in first_shown.outputs[-1]["text/markdown"]
    assert h.offers.bars == []


def test_no_undo_while_a_run_is_active(comms: CommLog):
    h = Harness({"rows": [1]})
    _, bar = h.agent_run("rows.append(2)")
    assert bar is not None
    h.running = True
    click(bar)  # clicked before the page heard that a run started
    assert h.shell.user_ns["rows"] == [1, 2] and not bar.enabled and RUN_ACTIVE in text_of(bar)
    h.running = False
    h.offers.refresh()  # the run ended
    assert bar.enabled
    click(bar)
    assert h.shell.user_ns["rows"] == [1]


def test_newer_work_of_the_user_is_left_alone_and_named_where_they_clicked(comms: CommLog):
    h = Harness({"total": 1, "rows": [1]})
    shown, bar = h.agent_run("total = 2\nrows.append(2)")
    assert bar is not None
    h.shell.user_ns["total"] = 3  # the user's work after the run
    click(bar)
    assert h.shell.user_ns == {"total": 3, "rows": [1]}
    assert "left as they are, changed since the run: <code>total</code>" in shown.outputs[-1]["text/markdown"]


def test_a_run_undone_another_way_or_dropped_ends_its_button(comms: CommLog):
    h = Harness({"rows": [1]})
    shown, bar = h.agent_run("rows.append(2)")
    assert bar is not None
    review_for(h.shell).undo(h.shell.user_ns)  # %agent undo
    h.offers.refresh()
    assert bar.closed and UNDONE_ELSEWHERE in shown.outputs[-1]["text/plain"]
    old_shown, old = h.agent_run("rows.append(3)")
    for i in range(MAX_RUNS):
        h.agent_run(f"n{i} = {i}")
    assert old is not None and old.closed and GONE in old_shown.outputs[-1]["text/plain"]
    assert len(h.offers.bars) == MAX_RUNS


@pytest.mark.parametrize("name", ["<img src=x onerror=alert(1)>", "a`b"])
def test_the_message_is_text_only(comms: CommLog, name: str):
    bar = UndoBar([name], lambda: None)
    assert "<img" not in bar.message.value
    assert "<img" not in UndoBar.final_bundle(f"restored `{name}`")["text/markdown"]
    bar.close()


def test_unloading_ends_every_button_as_text(comms: CommLog):
    h = Harness({"rows": [1]})
    shown, bar = h.agent_run("rows.append(2)")
    h.offers.close()
    assert bar is not None and bar.closed and UNLOADED in shown.outputs[-1]["text/plain"]
    assert h.offers.bars == [] and h.shell.user_ns["rows"] == [1, 2]  # nothing undone by it


def test_runs_are_told_apart_by_identity_not_by_their_contents(comms: CommLog):
    import pandas as pd

    h = Harness({"df": pd.DataFrame({"a": [1, 2]})})
    review = review_for(h.shell)
    bars = []
    for value in (5, 6):  # two runs alike: the same label, a frame copied by each
        record = review.start_run("the run of cell [1]")
        watch = review.before_call(f"df.loc[0, 'a'] = {value}", visible_items(h.shell.user_ns, {}))
        h.shell.user_ns["df"].loc[0, "a"] = value
        review.after_call(watch, h.shell.user_ns, visible_items(h.shell.user_ns, {}))
        bars.append(h.offers.offer(Shown(), record))  # type: ignore[arg-type]  # a DisplayedView's two members
    first, second = bars
    assert first is not None and second is not None
    assert second.enabled and not first.enabled and not first.closed
