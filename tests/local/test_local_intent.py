"""Which variable a request names (local_intent.py) and the grammar that makes the first call
assign it (local_tools.py). No server needed."""

from __future__ import annotations

import json

import pytest

from pi_notebook.ai.providers.local_intent import requested_target
from pi_notebook.ai.providers.local_tools import shape_request, tools_grammar

PYTHON = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
TOOLS = [{"type": "function", "function": {"name": "python", "parameters": PYTHON}}]


@pytest.mark.parametrize(("text", "name"), [
    ("load notebooks/data/sales.csv into a DataFrame called df", "df"),
    ("compute total revenue per region into totals", "totals"),
    ("make a DataFrame north with only the rows of the north region", "north"),
    ("put the 3 rows with the highest revenue into top3", "top3"),
    ("merge df with targets on region into merged", "merged"),
    ("compute the mean units per region into `mean_units`", "mean_units"),
    ("save it as clean_df", "clean_df"),
    ("put it into a new DataFrame called summary", "summary"),
])
def test_explicit_spellings_name_the_variable(text: str, name: str) -> None:
    assert requested_target(text) == name


@pytest.mark.parametrize("text", [
    "add a column price to df: revenue divided by units",  # a column, not a variable
    "add a column called price",
    "plot a bar chart of totals",
    "split the rows into 3 groups",
    "convert the units into integers",
    "import pandas as pd",
    "how many rows does df have?",
    "put the result into class",  # a keyword cannot be assigned
])
def test_vaguer_requests_name_nothing(text: str) -> None:
    assert requested_target(text) is None


def _code_rule(grammar: str) -> str:
    return next(line for line in grammar.splitlines() if line.startswith("code ::="))


def test_the_assign_grammar_starts_the_code_with_the_assignment() -> None:
    free, bound = _code_rule(tools_grammar(TOOLS)), _code_rule(tools_grammar(TOOLS, assign="totals"))
    assert '"totals = "' not in free
    assert bound.startswith('code ::= "\\"" "totals = " codechar')
    # not an identifier: no constraint (nothing the grammar could be broken by)
    assert _code_rule(tools_grammar(TOOLS, assign='x" | "y')) == free


def _params(messages: list[dict]) -> dict:
    return {"model": "m", "messages": messages, "tools": json.loads(json.dumps(TOOLS)), "stream": True}


def test_only_the_first_call_of_a_prompt_is_bound_and_only_by_the_users_words() -> None:
    context = {"type": "text", "text": "[Notebook context]\nMarkdown: put the mean into plan_value"}
    user = {"role": "user", "content": [context, {"type": "text", "text": "compute the sum into totals"}]}
    first = shape_request(_params([user]), mode="grammar")["grammar"]
    assert '"totals = "' in first and "plan_value" not in _code_rule(first)
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "python", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "1", "content": "NameError", "is_error": True}
    retry = shape_request(_params([user, call, result]), mode="grammar", last_result_failed=True)["grammar"]
    assert '"totals = "' not in retry  # a retry is free to fix the code as it must
