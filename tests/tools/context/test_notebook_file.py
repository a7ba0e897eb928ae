from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from pi_notebook.agent import Agent
from pi_notebook.ai.providers.faux import faux_assistant_message, faux_tool_call, register_faux_provider
from pi_notebook.ai.stream import stream_simple
from pi_notebook.tools.context.notebook_file import (
    NotebookLocation,
    locate_notebook,
    make_notebook_file_tool,
    render_notebook,
)

CANARY = "sk-canary-notebook-file-16180339"


def write_notebook(path: Path, extra_cells: int = 0) -> Path:
    nb = new_notebook()
    nb.cells = [
        new_markdown_cell("# Plan\n1. load sales\n2. total revenue per region", id="plan"),
        new_code_cell("import pandas as pd\nsales = pd.read_csv('sales.csv')", execution_count=1, id="load",
                      outputs=[new_output("stream", name="stdout", text="loaded 120 rows\n")]),
        new_code_cell("sales.revenue.sum()", execution_count=2, id="total",
                      outputs=[new_output("execute_result", execution_count=2,
                                          data={"text/plain": "1234.5", "text/html": "<b>1234.5</b>"})]),
        new_code_cell("sales['revenu']", execution_count=3, id="oops", outputs=[new_output(
            "error", ename="KeyError", evalue="'revenu'",
            traceback=["\x1b[31m---------\x1b[0m", "\x1b[31mKeyError\x1b[0m: 'revenu'"])]),
        new_code_cell("plot()", execution_count=4, id="fig", outputs=[new_output(
            "display_data", data={"image/png": "iVBORw0KGgo="})]),
        new_code_cell("print(token)", execution_count=5, id="leak",
                      outputs=[new_output("stream", name="stdout", text=f"{CANARY}\n")]),
        new_code_cell("not_run_yet()", id="later"),
    ]
    nb.cells += [new_code_cell("x = 1\n" * 200, id=f"bulk{i}") for i in range(extra_cells)]
    nbformat.write(nb, path)
    return path


def test_render_shows_markdown_code_outputs_ids_and_counts(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTEBOOK_FILE_TEST_TOKEN", CANARY)
    text = render_notebook(write_notebook(tmp_path / "analysis.ipynb"))
    assert text.startswith("Notebook analysis.ipynb: 7 cells, saved ")
    assert "--- [0] markdown, id plan ---\n# Plan\n1. load sales" in text
    assert "--- [1] code, In[1], id load ---" in text and "loaded 120 rows" in text
    assert "output:\n1234.5" in text and "<b>" not in text
    assert "KeyError: 'revenu'" in text and "\x1b[" not in text
    assert "[image/png image]" in text and "iVBOR" not in text
    assert "--- [6] code, not run, id later ---" in text
    assert CANARY not in text and "[redacted]" in text


def test_range_cell_id_and_budget(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "n.ipynb", extra_cells=20)
    ranged = render_notebook(path, start=2, end=3)
    assert "--- [2] code" in ranged and "--- [3] code" in ranged and "--- [1]" not in ranged
    assert "--- [0] markdown" in render_notebook(path, cell_id="plan")
    assert "No cell with id 'nope'" in render_notebook(path, cell_id="nope")
    assert "--- [26] code" in render_notebook(path, start=-1)
    assert "No cells in the range 5..2" in render_notebook(path, start=5, end=2)
    limited = render_notebook(path, max_chars=4000)
    assert len(limited) <= 4000 and "not shown: over this tool's budget; call read_notebook with start=" in limited
    no_outputs = render_notebook(path, end=2, with_outputs=False)
    assert "loaded 120 rows" not in no_outputs


def test_missing_and_broken_files_are_clear(tmp_path: Path) -> None:
    assert "No saved notebook at" in render_notebook(tmp_path / "Untitled.ipynb")
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json")
    assert "could not be read" in render_notebook(broken)


def test_locate_order_and_relative_paths(tmp_path: Path) -> None:
    nb = write_notebook(tmp_path / "work.ipynb")
    other = write_notebook(tmp_path / "other.ipynb")
    # JPY_SESSION_NAME relative to a server root above the kernel's directory: found by name
    found = locate_notebook({}, env={"JPY_SESSION_NAME": "projects/q3/work.ipynb"}, cwd=tmp_path)
    assert found.path == nb and found.origin == "JPY_SESSION_NAME"
    found = locate_notebook({"__session__": str(nb)}, env={"JPY_SESSION_NAME": str(other)})
    assert found.path == nb and found.origin == "__session__"
    found = locate_notebook({"__vsc_ipynb_file__": str(other), "__session__": str(nb)}, env={})
    assert found.path == other
    found = locate_notebook({"__session__": str(nb)}, explicit=str(other), env={})
    assert found.path == other and found.origin == "setting"
    missing = locate_notebook({"__session__": str(nb)}, explicit=tmp_path / "gone.ipynb", env={})
    assert missing.path is None and "gone.ipynb" in missing.describe_missing()
    nothing = locate_notebook({}, env={}, cwd=tmp_path)
    assert nothing.path is None and "JPY_SESSION_NAME" in nothing.describe_missing()
    unsaved = locate_notebook({}, env={"JPY_SESSION_NAME": str(tmp_path / "Untitled1.ipynb")})
    assert unsaved.path is None and "not have been saved" in unsaved.describe_missing()


async def test_read_notebook_reaches_the_model(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "analysis.ipynb")
    tool = make_notebook_file_tool(lambda: locate_notebook({"__session__": str(path)}, env={}))
    faux = register_faux_provider()
    seen: list[str] = []

    def answer(context: Any, options: Any, state: Any, model: Any) -> Any:
        seen.append("".join(getattr(b, "text", "") for b in context.messages[-1].content))
        return faux_assistant_message("The plan has two steps.")

    try:
        faux.set_responses([faux_assistant_message(
            [faux_tool_call("read_notebook", {"start": 0, "end": 1}, id="r1")], stop_reason="toolUse"), answer])
        agent = Agent(initial_state={"model": faux.get_model(), "system_prompt": "t", "tools": [tool]},
                      stream_fn=stream_simple)
        await agent.prompt("follow the plan in the Markdown above")
    finally:
        faux.unregister()
    assert "# Plan" in seen[0] and "loaded 120 rows" in seen[0] and "[2]" not in seen[0]


async def test_tool_without_a_notebook_and_bad_arguments() -> None:
    tool = make_notebook_file_tool(lambda: NotebookLocation(path=None))
    result = await tool.execute("c", {}, None, None)
    assert "does not know its notebook file" in result_text(result)
    with pytest.raises(ValueError, match="'start' must be an integer"):
        await tool.execute("c", {"start": "2"}, None, None)


def result_text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content or [])
