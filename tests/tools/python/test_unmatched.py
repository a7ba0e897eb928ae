"""A comparison of a column with text no row holds gets a note (tools/python/unmatched.py)."""

from __future__ import annotations

import pytest

from pi_notebook.tools.python.unmatched import MAX_NOTE_CHARS, unmatched_note

pd = pytest.importorskip("pandas")

STAYS = pd.DataFrame({"room": ["single", "double", "suite", "suite"], "hotel": ["Cedar"] * 4,
                      "nights": [1, 2, 3, 4]})


@pytest.mark.parametrize("code", [
    "share = (stays['room'] == 'Suite').mean()",
    "suites = stays[stays['room'] == 'Suite']",
    "rest = stays[stays.room != 'Suite']",
    "picked = stays[stays['room'].isin(['Suite', 'double'])]",
    "picked = stays[stays['room'].eq('Suite')]",
    "x = stays.query('nights > 1'); y = stays['room'] == 'Suite'",
])
def test_a_value_no_row_holds_is_named_with_the_one_it_holds(code: str) -> None:
    note = unmatched_note(code, {"stays": STAYS})
    assert note == "[note] 'Suite' matches no row of stays['room'] (it holds 'suite')."


def test_values_the_column_holds_and_other_comparisons_say_nothing() -> None:
    ns = {"stays": STAYS}
    assert unmatched_note("s = stays[stays['room'] == 'suite']", ns) is None
    assert unmatched_note("s = stays[stays['nights'] == 3]", ns) is None       # not text
    assert unmatched_note("s = stays[stays['nights'] == 'three']", ns) is None  # a number column
    assert unmatched_note("s = other[other['room'] == 'Suite']", ns) is None    # not in the namespace
    assert unmatched_note("s = stays[stays['missing'] == 'x']", ns) is None     # no such column
    assert unmatched_note("s = (", ns) is None                                  # not Python


def test_a_value_with_nothing_close_is_named_alone() -> None:
    note = unmatched_note("s = stays[stays['hotel'] == 'Birch']", {"stays": STAYS})
    assert note == "[note] 'Birch' matches no row of stays['hotel']."


def test_bounded_by_comparisons_and_length() -> None:
    code = "\n".join(f"s{i} = stays[stays['hotel'] == '{'x' * 200}{i}']" for i in range(50))
    note = unmatched_note(code, {"stays": STAYS})
    assert note is not None and len(note) <= MAX_NOTE_CHARS + 20 and note.count("matches no row") <= 8


def test_a_column_of_many_distinct_values_is_looked_at_within_bounds() -> None:
    big = pd.DataFrame({"id": [f"row{i}" for i in range(500_000)]})
    note = unmatched_note("x = big[big['id'] == 'ROW7']", {"big": big})
    assert note is not None and "matches no row of big['id']" in note


async def test_the_python_tool_result_carries_the_note() -> None:
    from helpers.shell import get_shell, names_kept, routed

    from pi_notebook.tools.python.python_tool import PythonToolSettings, make_python_tool

    shell = get_shell()
    with names_kept(shell):
        shell.user_ns["stays"] = STAYS
        tool = make_python_tool(shell, PythonToolSettings())
        with routed():
            result = await tool.execute("c1", {"code": "share = (stays['room'] == 'Suite').mean()\nprint(share)"})
    text = result.content[0].text
    assert "[note] 'Suite' matches no row of stays['room'] (it holds 'suite')." in text
