"""The near-miss hint for a KeyError (tools/error_hints.py), in the tool result and the history."""

from __future__ import annotations

import pytest

from pi_notebook.tools.error_hints import key_error_hint
from pi_notebook.tools.history import ExecutionHistory

pd = pytest.importorskip("pandas")


def test_a_near_miss_names_the_key_and_where_it_is() -> None:
    ns = {"df": pd.DataFrame({"region": [1], "units": [2]}), "cfg": {"learning_rate": 0.1}, "_hidden": {"regoin2": 1}}
    assert key_error_hint("KeyError", "'regoin'", ns) == "did you mean 'region' (a column of df)?"
    assert key_error_hint("KeyError", "'learning_rat'", ns) == "did you mean 'learning_rate' (a key of cfg)?"


@pytest.mark.parametrize(("ename", "evalue"), [
    ("KeyError", "'something_else'"),  # nothing close
    ("KeyError", "5"),  # not a string key
    ("KeyError", "not a literal ("),
    ("NameError", "'regoin'"),  # Python already suggests names
])
def test_no_hint_without_a_close_string_key(ename: str, evalue: str) -> None:
    assert key_error_hint(ename, evalue, {"df": pd.DataFrame({"region": [1]})}) is None


def test_an_object_that_raises_is_skipped() -> None:
    class Lying(dict):
        def __iter__(self):
            raise RuntimeError("no")

    assert key_error_hint("KeyError", "'regoin'", {"x": Lying(), "df": pd.DataFrame({"region": [1]})}) \
        == "did you mean 'region' (a column of df)?"


def test_the_last_error_note_carries_the_hint() -> None:
    from tools_helpers import get_shell

    shell = get_shell()
    history = ExecutionHistory()
    history.install(shell)
    shell.user_ns["hint_df"] = pd.DataFrame({"region": ["north"], "units": [3]})
    try:
        shell.run_cell("hint_df.groupby('regoin')['units'].sum()", store_history=True)
        note = history.last_error_note()
    finally:
        history.uninstall()
        shell.user_ns.pop("hint_df", None)
    assert note is not None
    assert note.startswith("Cell [") and ("raised KeyError: 'regoin' (did you mean 'region' (a column of "
                                          "hint_df)?) at line 1: hint_df.groupby('regoin')") in note
