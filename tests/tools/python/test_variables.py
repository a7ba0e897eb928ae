from __future__ import annotations

import pytest

from pi_notebook.tools.python.variables import make_variable_tools
from helpers.shell import get_shell

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")


@pytest.fixture
def tools():
    shell = get_shell()
    shell.user_ns.update({
        "frame": pd.DataFrame({"x": [1.0, 2.0, 3.0], "label": ["a", "b", "c"]}),
        "arr": np.arange(12, dtype=float).reshape(3, 4),
        "items": [1, 2, 3, 4],
        "_private": 1,
        "np_mod": np,
        "note": "hello",
    })
    listing, inspect = make_variable_tools(shell)
    yield listing, inspect
    for name in ("frame", "arr", "items", "_private", "np_mod", "note"):
        shell.user_ns.pop(name, None)


async def test_list_variables(tools) -> None:
    listing, _ = tools
    text = (await listing.execute("c", {}, None, None)).content[0].text
    lines = {line.split(" | ")[0]: line for line in text.splitlines()[1:]}
    assert "frame | pandas.DataFrame | shape 3x2" in lines["frame"]
    assert "shape 3x4" in lines["arr"] and "len 4" in lines["items"] and "'hello'" in lines["note"]
    for hidden in ("_private", "np_mod", "In", "Out", "exit", "quit", "get_ipython"):
        assert hidden not in lines


async def test_inspect_dataframe_array_and_other(tools) -> None:
    _, inspect = tools
    df_text = (await inspect.execute("c", {"name": "frame"}, None, None)).content[0].text
    assert "3 rows x 2 columns" in df_text and "float64" in df_text and "describe()" in df_text
    assert "mean" in df_text and "unique" in df_text  # describe(include="all")
    arr_text = (await inspect.execute("c", {"name": "arr"}, None, None)).content[0].text
    assert "shape (3, 4), dtype float64" in arr_text and "min 0.0, max 11.0" in arr_text
    other = (await inspect.execute("c", {"name": "items"}, None, None)).content[0].text
    assert "list, len 4" in other and "[1, 2, 3, 4]" in other


async def test_inspect_unknown_name_is_a_clear_error(tools) -> None:
    _, inspect = tools
    with pytest.raises(ValueError, match="No variable named 'nope'"):
        await inspect.execute("c", {"name": "nope"}, None, None)


async def test_variable_texts_are_redacted(tools, monkeypatch: pytest.MonkeyPatch) -> None:
    listing, inspect = tools
    monkeypatch.setenv("SOME_SECRET", "canary-variable-value")
    get_shell().user_ns["leaky"] = "canary-variable-value"
    try:
        listed = (await listing.execute("c", {}, None, None)).content[0].text
        inspected = (await inspect.execute("c", {"name": "leaky"}, None, None)).content[0].text
    finally:
        get_shell().user_ns.pop("leaky")
    assert "canary-variable-value" not in listed + inspected and "[redacted]" in inspected
