from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from helpers.shell import get_shell

from pi_notebook.ai.options import estimate_text_tokens
from pi_notebook.tools.context.history import ExecutionHistory, installed_history, uninstall_history
from pi_notebook.tools.context.notebook_file import NotebookLocation
from pi_notebook.tools.context.prompt_context import (
    CONTEXT_HEADER,
    close_line,
    context_for_prompt,
    make_context_tools,
    notebook_context,
)

pd = pytest.importorskip("pandas")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def test_block_has_error_references_namespace_and_file(tmp_path: Path) -> None:
    shell = get_shell()
    history = ExecutionHistory()
    history.install(shell)
    names = set(shell.user_ns)
    try:
        with quiet():
            shell.run_cell("import pandas as pd\nsales = pd.DataFrame({'month': ['jan'], 'revenue': [1.0]})",
                           store_history=True)
            count = shell.run_cell("sales['revenu'].sum()", store_history=True).execution_count
        nb = tmp_path / "analysis.ipynb"
        nb.write_text("{}")
        block = notebook_context(f"why did In[{count}] fail?", history, shell.user_ns,
                                 hidden=shell.user_ns_hidden, notebook=NotebookLocation(path=nb))
    finally:
        history.uninstall()
        for name in set(shell.user_ns) - names:  # the shell is shared by the whole suite
            del shell.user_ns[name]
    assert block is not None and block.startswith(CONTEXT_HEADER)
    assert f"Last error: Cell [{count}] raised KeyError: 'revenu' (did you mean 'revenue' (a column of sales)?) at line 1" in block
    assert f"In[{count}]:\nsales['revenu'].sum()" in block
    assert "sales: DataFrame 1 x 2 (month:" in block
    assert block.rstrip().endswith("Notebook file: analysis.ipynb (read_notebook shows its cells and saved outputs).\n" + close_line())
    assert block.index("Last error") < block.index("[Notebook references") < block.index("Notebook variables")


def test_budget_and_nothing_to_say() -> None:
    ns = {f"v{i}": i for i in range(3000)}
    block = notebook_context("hello", None, ns, token_budget=200)
    assert block is not None and estimate_text_tokens(block) <= 200
    assert notebook_context("hello", ExecutionHistory(), {}) is None


async def test_context_tools_and_block_for_a_live_shell(tmp_path: Path) -> None:
    shell = get_shell()
    nb = tmp_path / "live.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# The plan")]), nb)
    setting = {"path": str(nb)}
    try:
        tools = make_context_tools(shell, lambda: setting["path"])
        assert [t.name for t in tools] == ["notebook_history", "read_notebook"]
        assert installed_history(shell) is not None
        with quiet():
            shell.run_cell("live_value = 7", store_history=True)
        history_text = text_of(await tools[0].execute("c", {"last": 1}, None, None))
        notebook_text = text_of(await tools[1].execute("c", {}, None, None))
        assert "live_value = 7" in history_text and "# The plan" in notebook_text
        block = context_for_prompt(shell, "what is live_value?", notebook_path=setting["path"])
        assert block is not None and "live_value: int = 7" in block and "Notebook file: live.ipynb" in block
    finally:
        uninstall_history(shell)
        shell.user_ns.pop("live_value", None)


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content or [])


def test_only_offered_tools_are_named_and_markdown_stands_in_for_read_notebook(tmp_path: Path) -> None:
    nb = tmp_path / "plan.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("## Plan\n1. Load.\n2. Mean units per region into `mean_units`."),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_markdown_cell("Notes for later"),
    ]), nb)
    shell = get_shell()
    history = ExecutionHistory()
    history.install(shell)
    try:
        with quiet():
            count = shell.run_cell("y = undefined_name", store_history=True).execution_count
        where = NotebookLocation(path=nb)
        full = notebook_context("continue with step 2 of the plan", history, {}, notebook=where)
        small = notebook_context("continue with step 2 of the plan", history, {}, notebook=where,
                                 offered=["python"])
    finally:
        history.uninstall()
    assert full is not None and "read_notebook" in full and "notebook_history" in full
    assert "Mean units" not in full  # the tool reads the file; the prompt stays small
    assert small is not None
    assert "read_notebook" not in small and "notebook_history" not in small
    assert f"Last error: Cell [{count}] raised NameError" in small
    assert "2. Mean units per region into `mean_units`." in small and "Notes for later" in small
    assert small.index("## Plan") < small.index("Notes for later")  # in the notebook's order
    unrelated = notebook_context("how many rows are there?", None, {}, notebook=where, offered=["python"])
    assert unrelated is None  # Markdown travels only with a prompt that points at it
