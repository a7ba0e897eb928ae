"""Which variable a request names (intent.py) and the grammar that makes the first call
assign it (tool_calls.py). No server needed."""

from __future__ import annotations

import json

import pytest

from pi_notebook.local.intent import requested_subject, requested_target
from pi_notebook.local.tool_calls import shape_request, tools_grammar
from pi_notebook.tools.context.namespace import ListedVariable, namespace_summary, read_listed_variables

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
    free, bound = _code_rule(tools_grammar(TOOLS)), _code_rule(tools_grammar(TOOLS, start="totals = "))
    assert '"totals = "' not in free
    assert bound.startswith('code ::= "\\"" "totals = " char*')
    assert _code_rule(tools_grammar(TOOLS, start="df")).startswith('code ::= "\\"" "df" char*')
    # not an identifier: no constraint (nothing the grammar could be broken by)
    assert _code_rule(tools_grammar(TOOLS, start='x" | "y')) == free


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


CONTEXT = ("[Notebook context for this prompt, added by pi_notebook; the user did not type it]\n"
           "Last error: Cell [2] raised KeyError: 'x'.\n\n"
           "Notebook variables (3):\ntotals: Series len 2 float64\ndf: DataFrame 24 x 4 (month: str)\n"
           "targets: DataFrame 2 x 2 (region: str, target: int64)\n\nNotebook file: a.ipynb")


LISTED = read_listed_variables(CONTEXT)


def test_the_subject_is_the_first_notebook_variable_the_request_names() -> None:
    assert LISTED.names == ["totals", "df", "targets"]
    assert requested_subject("plot a bar chart of totals", LISTED) == "totals"
    assert requested_subject("how many rows does `df` have?", LISTED) == "df"
    assert requested_subject("what is the mean of the units column?", LISTED) is None
    assert requested_subject("plot totals", read_listed_variables("no variables listed")) is None
    # "region" is a column inside a line, not a variable
    assert requested_subject("sum by region", LISTED) is None


def test_the_listing_the_summary_prints_is_the_value_the_intent_reader_gets() -> None:
    pd = pytest.importorskip("pandas")
    ns = {"sales": pd.DataFrame({"month": ["Jan"], "region": ["N"], "units": [3]}),
          "rate": 0.2, "by_region": pd.Series([1.0], name="units")}
    summary = namespace_summary(ns)
    context = f"[Notebook context]\nLast error: none\n\n{summary}\n\nNotebook file: a.ipynb"
    listed = read_listed_variables(context)
    assert sorted(listed.names) == ["by_region", "rate", "sales"]
    assert ListedVariable("sales", "DataFrame", ("month", "region", "units")) in listed.variables
    assert listed.frames == ["sales"] and listed.columns == ["month", "region", "units"]
    assert requested_subject("plot by_region", listed) == "by_region"


def test_a_named_result_wins_over_a_named_subject() -> None:
    user = {"role": "user", "content": [{"type": "text", "text": CONTEXT},
                                        {"type": "text", "text": "merge df with targets into merged"}]}
    assert '"merged = "' in _code_rule(shape_request(_params([user]), mode="grammar")["grammar"])
    user["content"][1]["text"] = "plot a bar chart of totals"
    assert _code_rule(shape_request(_params([user]), mode="grammar")["grammar"]).startswith(
        'code ::= "\\"" "totals" char*')


def test_a_request_that_spells_out_code_is_not_steered() -> None:
    text = "Which month was best? Run this code:\nmonthly = df.groupby('month').sum(); print(monthly)"
    user = {"role": "user", "content": [{"type": "text", "text": CONTEXT}, {"type": "text", "text": text}]}
    rule = _code_rule(shape_request(_params([user]), mode="grammar")["grammar"])
    assert '"df"' not in rule and '"monthly = "' not in rule
    # nor started from the notebook's only DataFrame (the quickstart lost its `monthly = ` so)
    one = "Notebook variables (1):\ndf: DataFrame 24 x 4 (month: str, region: str, units: int64)\n"
    user = {"role": "user", "content": [{"type": "text", "text": one}, {"type": "text", "text": text}]}
    rule = _code_rule(shape_request(_params([user]), mode="grammar")["grammar"])
    assert '"df"' not in rule and rule.startswith('code ::= "\\"" char*'), rule


# --- what a request asks to leave behind, by where its words stand ---------------------------

from pi_notebook.local.intent import Outcome, expected_outcomes  # noqa: E402


@pytest.mark.parametrize(("text", "name"), [
    ("put the top 3 in top3", "top3"),                         # "put ... in X" (not in the old list)
    ("store the mean per region in means.", "means"),
    ("I want monthly to contain the sums per month", "monthly"),  # a holding verb after the name
    ("give me the sum per region, name it region_sums", "region_sums"),
    ("keep the north rows in a DataFrame called north_df", "north_df"),
    ("save the cleaned data as clean and plot it", "clean"),
    ("put the result to `res`", "res"),
])
def test_a_result_name_is_found_by_where_it_stands(text: str, name: str) -> None:
    assert requested_target(text, known={"df"}) == name


@pytest.mark.parametrize("text", [
    "sort df in descending order",
    "filter the rows in Leeds",        # capitalised after a preposition: a value
    "what is the total in euros?",
    "compute it and show the result in percent",
    "show the rows of df in df",       # an existing variable after a preposition is the subject
])
def test_words_after_a_preposition_that_are_not_new_names(text: str) -> None:
    assert requested_target(text, known={"df"}) is None


def test_columns_and_figures_are_outcomes_too() -> None:
    assert expected_outcomes("add a new column margin to df", known={"df"}, columns={"revenue"}) == [
        Outcome("column", "margin")]
    assert expected_outcomes("what is the mean of the revenue column?", {"df"}, {"revenue"}) == []
    assert expected_outcomes("a histogram of revenue", {"df"}) == [Outcome("figure")]
    assert LISTED.columns == ["month", "region", "target"]


def test_the_first_call_is_bound_to_a_name_only_if_it_is_new() -> None:
    user = {"role": "user", "content": [{"type": "text", "text": CONTEXT},
                                        {"type": "text", "text": "put the region sums in totals"}]}
    # totals exists (CONTEXT lists it): after a preposition it is the subject, so the call
    # starts from it rather than re-assigning it blindly
    grammar = shape_request(_params([user]), mode="grammar")["grammar"]
    assert '"totals = "' not in _code_rule(grammar) and '"totals"' in _code_rule(grammar)
    fresh = {"role": "user", "content": [{"type": "text", "text": CONTEXT},
                                         {"type": "text", "text": "put the region sums in sums"}]}
    assert '"sums = "' in _code_rule(shape_request(_params([fresh]), mode="grammar")["grammar"])


def test_a_request_naming_no_variable_reads_the_only_dataframe() -> None:
    from pi_notebook.local.intent import implicit_subject

    one = "Notebook variables (2):\nloans: DataFrame 32 x 7 (member: str, days: int64)\nn: int 3\n"
    listed = read_listed_variables(one)
    assert implicit_subject("who borrowed the most books?", listed) == "loans"
    series = read_listed_variables(one.replace("loans: DataFrame", "loans: Series"))
    assert implicit_subject("how many are there?", series) is None
    # a file the request names, a variable it names, or two DataFrames to choose from: no guess
    assert implicit_subject("read shop/visits.csv and count the rows", listed) is None
    assert implicit_subject("what is n?", listed) is None
    assert implicit_subject("what is the mean of the units column?", LISTED) is None
    user = {"role": "user", "content": [{"type": "text", "text": one},
                                        {"type": "text", "text": "who borrowed the most books?"}]}
    # the first call reads it (an attribute or an index), it does not replace it
    assert _code_rule(shape_request(_params([user]), mode="grammar")["grammar"]).startswith(
        'code ::= "\\"" "loans" ("." | "[") ')


@pytest.mark.parametrize("text", [
    "what is the mean rainfall in mm?", "report the total precipitation in mm", "give the distance in km",
    "add a new column using the ratio of fare to distance",
])
def test_a_unit_or_a_connecting_word_is_not_a_result_name(text: str) -> None:
    assert expected_outcomes(text) == []
