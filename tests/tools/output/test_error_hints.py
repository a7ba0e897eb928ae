"""The near-miss hint for a KeyError (tools/output/error_hints.py), in the tool result and the history."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pi_notebook.tools.output.error_hints import error_hint, key_error_hint
from pi_notebook.tools.context.history import ExecutionHistory

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
    from helpers.shell import get_shell

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


@pytest.mark.parametrize(("name", "line"), [
    ("plt", "import matplotlib.pyplot as plt"), ("np", "import numpy as np"), ("pd", "import pandas as pd")])
def test_a_common_import_that_is_missing_gets_its_import_line(name: str, line: str) -> None:
    assert error_hint("NameError", f"name '{name}' is not defined", {}) == \
        f"{name} is not imported in this notebook: start the code with `{line}`"


def test_a_package_that_is_not_installed_is_named_with_what_is() -> None:
    hint = error_hint("ModuleNotFoundError", "No module named 'not_a_package_here'", {})
    assert hint is not None and hint.startswith("not_a_package_here is not installed in this kernel")
    assert "use what is installed: pandas, numpy, matplotlib" in hint
    # an alias of a package this kernel lacks: the same hint, not an import line that fails
    sns = error_hint("NameError", "name 'sns' is not defined", {})
    assert sns == error_hint("ModuleNotFoundError", "No module named 'seaborn'", {})
    assert sns is not None and sns.startswith("seaborn is not installed")


@pytest.mark.parametrize(("ename", "evalue"), [
    ("NameError", "name 'totals' is not defined"),  # the user's own name: nothing to import
    ("ModuleNotFoundError", "No module named 'pandas.not_a_submodule'"),  # installed: the message says it
    ("ValueError", "No module named 'x'"),
])
def test_no_hint_for_other_names_and_errors(ename: str, evalue: str) -> None:
    assert error_hint(ename, evalue, {}) is None


async def test_the_python_tool_result_carries_the_import_hint() -> None:
    from helpers.shell import get_shell, routed

    from pi_notebook.tools.python.python_tool import PythonToolSettings, make_python_tool

    shell = get_shell()
    saved = shell.user_ns.pop("plt", None)
    tool = make_python_tool(shell, PythonToolSettings())
    try:
        with routed():
            result = await tool.execute("c1", {"code": "plt.plot([1, 2])"})
    finally:
        if saved is not None:
            shell.user_ns["plt"] = saved
    text = result.content[0].text
    assert "[error] NameError: name 'plt' is not defined (plt is not imported in this notebook: start " \
           "the code with `import matplotlib.pyplot as plt`)" in text


@pytest.mark.parametrize("make", [
    lambda: pd.to_numeric(pd.Series(["101.12 EUR"])),
    lambda: pd.Series(["1,204.50 EUR"]).astype(float),
    lambda: int("1,204"),
    lambda: float("12 mm"),
])
def test_a_number_written_as_text_gets_how_to_take_it_out(make: Callable[[], object]) -> None:
    with pytest.raises(ValueError) as caught:
        make()
    hint = error_hint("ValueError", str(caught.value), {})
    assert hint is not None and "number written as text" in hint
    # the suggested cleaning turns each such value into its number
    cleaned = pd.Series(["101.12 EUR", "1,204.50 EUR", "-3.5 mm", "$12"]).str.replace(
        r"[^0-9.-]", "", regex=True).astype(float)
    assert "[^0-9.-]" in hint and cleaned.tolist() == [101.12, 1204.5, -3.5, 12.0]


def test_a_value_with_no_digits_is_made_missing() -> None:
    hint = error_hint("ValueError", "could not convert string to float: 'n/a'", {})
    assert hint is not None and "errors='coerce'" in hint


def test_a_reduction_over_a_text_column_says_to_convert_it() -> None:
    with pytest.raises(TypeError) as caught:
        pd.Series(["$1.5", "$2"], dtype=object).mean()
    hint = error_hint("TypeError", str(caught.value), {})
    assert hint is not None and "holds text" in hint


def test_other_value_errors_get_no_hint() -> None:
    assert error_hint("ValueError", "math domain error", {}) is None
    assert error_hint("TypeError", "unsupported operand type(s) for +: 'int' and 'str'", {}) is None


def test_an_extract_pattern_without_a_group_gets_one() -> None:
    with pytest.raises(ValueError) as caught:
        pd.Series(["101.12 EUR"]).str.extract(r"[0-9.]+")
    hint = error_hint("ValueError", str(caught.value), {})
    assert hint is not None
    suggested = hint.split("`")[1]
    assert suggested == "s.str.extract(r'([0-9.]+)')"
    assert pd.Series(["101.12 EUR"]).str.extract(r"([0-9.]+)")[0].tolist() == ["101.12"]
