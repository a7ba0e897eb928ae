from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.shell import recording

from pi_notebook.tools.context.history import ExecutionHistory
from pi_notebook.tools.context.references import expand_references, find_references, reference_block

CANARY = "sk-canary-references-14142135"


@contextlib.contextmanager
def notebook() -> Iterator[tuple[Any, ExecutionHistory, dict[str, int]]]:
    """Three recorded cells; returns their execution counts by role."""
    with recording() as (shell, history):
        counts = {}
        for role, source in (("define", "base = 40"), ("value", "base + 2"),
                             ("fail", "missing_name * 2")):
            counts[role] = shell.run_cell(source, store_history=True).execution_count
        yield shell, history, counts


def kinds(prompt: str) -> list[tuple[str, int | None]]:
    return [(r.kind, r.count) for r in find_references(prompt)]


def test_spellings_found() -> None:
    assert kinds("explain In[3] and Out [4], and {Err[5]}") == [("in", 3), ("out", 4), ("err", 5)]
    assert kinds("what does cell 3 do? compare with cell #4 and cells [6]-[7]") == [
        ("cell", 3), ("cell", 4), ("cell", 6), ("cell", 7)]
    assert kinds("fix the last cell") == [("last_cell", None)]
    assert kinds("explain the error") == [("last_error", None)]
    assert kinds("plot _ please, and __") == [("underscore", 1), ("underscore", 2)]
    # not references: identifiers, code, positions in the file
    assert kinds("rename snake_case_var and call f_(x); use `_` in code") == []
    assert kinds("the third cell of the notebook") == []
    assert kinds("cells 1-100")[-1] == ("cell", 10)  # a range is capped


def test_block_resolves_history_and_ipython_caches() -> None:
    with notebook() as (shell, history, counts):
        prompt = (f"why does In[{counts['fail']}] fail? the value was Out[{counts['value']}], "
                  f"see Err[{counts['fail']}] and cell {counts['define']}; and _ too")
        block = reference_block(prompt, history, shell.user_ns)
    assert block is not None
    assert f"In[{counts['fail']}]:\nmissing_name * 2" in block
    assert f"Out[{counts['value']}]: 42" in block
    assert f"Err[{counts['fail']}]: NameError: name 'missing_name' is not defined at line 1" in block
    assert f"In [{counts['define']}] (code, ok" in block and "base = 40" in block
    assert "_ (the last output): 42" in block


def test_last_cell_and_last_error() -> None:
    with notebook() as (shell, history, counts):
        block = reference_block("fix the last cell", history, shell.user_ns)
        assert block is not None and f"is cell [{counts['fail']}]" in block and "NameError" in block
        shell.run_cell("ok = 1", store_history=True)
        error_block = reference_block("explain the error", history, shell.user_ns)
        assert error_block is not None and "missing_name" in error_block
        last_block = reference_block("and the previous cell?", history, shell.user_ns)
        assert last_block is not None and "ok = 1" in last_block


def test_cells_from_before_the_recorder_and_unknown_counts() -> None:
    with notebook() as (shell, history, counts):
        history.clear()  # as if pi_notebook were loaded after these cells ran
        block = reference_block(f"explain In[{counts['define']}] and Out[{counts['value']}] and In[9999]",
                                history, shell.user_ns)
    assert block is not None
    assert f"In[{counts['define']}]:\nbase = 40" in block  # from IPython's In list
    assert f"Out[{counts['value']}]: 42" in block  # from IPython's Out dict
    assert "'In[9999]': no cell with execution count 9999 (cells run so far: 1.." in block


def test_expand_keeps_the_prompt_and_appends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFERENCES_TEST_SECRET", CANARY)
    with notebook() as (shell, history, _counts):
        shell.run_cell(f"'{CANARY}'", store_history=True)
        prompt = "what is _ ?"
        expanded = expand_references(prompt, history, shell.user_ns)
        plain = expand_references("just a question", history, shell.user_ns)
    assert expanded.startswith(prompt + "\n\n[Notebook references")
    assert CANARY not in expanded and "[redacted]" in expanded
    assert plain == "just a question"


def test_plain_english_error_without_an_error_adds_nothing() -> None:
    history = ExecutionHistory()
    assert reference_block("what is the error rate per region?", history, {}) is None
    block = reference_block("fix the last cell", history, {})
    assert block is not None and "no recorded cell" in block
