"""Copies before agent code, undo after it: the review of one namespace across runs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pi_notebook.review.changes import visible_items
from pi_notebook.review.watch import NamespaceReview


def agent_call(review: NamespaceReview, ns: dict, code: str, protect=(), budget=512 * 2**20) -> list[str]:
    watch = review.before_call(code, visible_items(ns, {}), protect, budget)
    exec(code, ns)
    ns.pop("__builtins__", None)
    return review.after_call(watch, ns, visible_items(ns, {})).lines()


def test_undo_restores_rebinds_deletions_creations_and_in_place_changes():
    review = NamespaceReview()
    df = pd.DataFrame({"a": [1, 2, 3]})
    ns = {"df": df, "n": 1, "items": [1, 2], "gone": "keep"}
    review.start_run("run 1")
    agent_call(review, ns, "df.drop(columns=['a'], inplace=True)\nn = 2\nitems.append(3)\ndel gone\nfresh = 1")
    report = review.undo(ns)
    assert list(ns["df"].columns) == ["a"] and ns["df"]["a"].tolist() == [1, 2, 3]
    assert ns["n"] == 1 and ns["items"] == [1, 2] and ns["gone"] == "keep" and "fresh" not in ns
    assert set(report.restored) == {"df", "n", "items", "gone"} and report.removed == ("fresh",)
    assert "Nothing to undo" in review.undo(ns).text()


def test_over_the_budget_is_said_before_and_after():
    review = NamespaceReview()
    big = np.zeros(200_000)  # 1.6 MB
    ns = {"big": big}
    review.stack.budget = 2**20
    preview = review.preview("big[0] = 1", ns)
    assert preview.unrestorable == ("undo could not restore `big`: 2 MB is over the undo budget of 1 MB",)
    review.start_run("run 1")
    agent_call(review, ns, "big[0] = 1", budget=2**20)
    report = review.undo(ns)
    assert report.restored == ()
    assert report.not_restored == (("big", "changed in place, and 2 MB, over the undo budget of 1 MB"),)
    assert "not restored: `big`" in report.text()
    assert ns["big"][0] == 1  # left as the run made it


def test_a_name_the_user_changed_after_the_run_is_left_alone():
    review = NamespaceReview()
    ns = {"total": 1, "rows": [1]}
    review.start_run("run 1")
    agent_call(review, ns, "total = 2\nrows.append(2)")
    ns["total"] = 3  # the user's newer work
    report = review.undo(ns)
    assert ns["total"] == 3 and report.left_alone == ("total",)
    assert ns["rows"] == [1] and report.restored == ("rows",)
    assert "left as they are, changed since the run: `total`" in report.text()


def test_two_runs_are_undone_in_order():
    review = NamespaceReview()
    ns = {"x": [1]}
    review.start_run("run 1")
    agent_call(review, ns, "x.append(2)")
    review.start_run("run 2")
    agent_call(review, ns, "x.append(3)\ny = 1")
    review.undo(ns)
    assert ns == {"x": [1, 2]}
    review.undo(ns)
    assert ns == {"x": [1]}


def test_copies_off_still_undo_a_rebinding():
    review = NamespaceReview()
    df = pd.DataFrame({"a": [1]})
    ns = {"df": df}
    review.start_run("run 1")
    agent_call(review, ns, "df = df.assign(b=2)", budget=0)
    review.undo(ns)
    assert ns["df"] is df


def test_preview_names_whose_variables_the_code_touches():
    review = NamespaceReview()
    ns = {"df": pd.DataFrame({"a": [1]}), "made": 1}
    review.agent_made.add("made")
    preview = review.preview("df = df.dropna()\ndf.drop(columns=['a'], inplace=True)\nmade += 1\nout = 2", ns)
    assert preview.lines == ("assigns `df`, which you created; calls `df.drop(..., inplace=True)`",
                             "changes `made += 1` in `made`, which the agent created", "creates `out`")


def test_a_protected_name_changed_without_showing_it_is_put_back():
    review = NamespaceReview()
    df = pd.DataFrame({"a": [1, 2]})
    ns = {"df": df, "alias": df}
    review.start_run("run 1")
    assert review.preview("alias.loc[0, 'a'] = 9", ns, ["df"]).protected == ()
    lines = agent_call(review, ns, "alias.loc[0, 'a'] = 9", protect=["df"])
    assert ns["df"]["a"].tolist() == [1, 2]
    assert any("`df` protected (AgentMagics.protect): the change was undone" in line for line in lines)
    assert review.preview("df['a'] = 0", ns, ["df"]).protected == ("df",)


def test_a_user_change_between_calls_is_not_the_agents():
    review = NamespaceReview()
    ns = {"rows": [1]}
    review.start_run("run 1")
    watch = review.before_call("rows.append(2)", visible_items(ns, {}), epoch=1)
    ns["rows"].append(2)
    assert review.after_call(watch, ns, visible_items(ns, {})).lines() == [
        "`rows` changed in place: list of 2, length 1 → 2"]
    ns["rows"].append(3)  # a user cell: the execution count moved
    watch = review.before_call("x = 1", visible_items(ns, {}), epoch=2)
    ns["x"] = 1
    assert review.after_call(watch, ns, visible_items(ns, {})).lines() == ["`x` created: int"]


def test_preview_says_what_undo_cannot_take_back():
    preview = NamespaceReview().preview("df.to_csv('out.csv')", {"df": pd.DataFrame()})
    assert preview.unrestorable == ("undo cannot take back what the code does outside the kernel: "
                                    "`df.to_csv(…)`",)


def test_a_protected_name_over_the_budget_is_not_copied_and_its_change_is_said():
    review = NamespaceReview()
    big = np.zeros(1000)
    ns = {"big": big, "alias": big}
    review.start_run("run 1")
    lines = agent_call(review, ns, "alias[0] = 1", protect=["big"], budget=1000)
    assert ns["big"][0] == 1
    assert any("`big` protected (AgentMagics.protect) and changed, and could not be put back" in line
               for line in lines)
