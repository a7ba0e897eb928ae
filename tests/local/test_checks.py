"""The small model's run checks (local/checks.py): the outcome a request names is checked
against the namespace and corrected once, answers state only values a result showed, an
identical failing call is not run again, and a path nobody wrote is not read. Scripted
model (faux provider), real Agent loop, a dict as the namespace."""

from __future__ import annotations

import asyncio
from typing import Any

import pandas as pd
import pytest

from pi_notebook.agent import Agent, tool
from pi_notebook.ai.providers.faux import faux_assistant_message, faux_tool_call, register_faux_provider
from pi_notebook.magics.config import DEFAULT_SYSTEM_PROMPT
from pi_notebook.local.checks import RunChecks, read_paths
from pi_notebook.local.apply import apply_model_profile

SALES = pd.DataFrame({"product": ["Widget", "Gizmo", "Gadget", "Doohickey"], "units": [40, 31, 25, 3]})


def _run(prompt: str, steps: list[Any], ns: dict[str, Any], monkeypatch: pytest.MonkeyPatch
         ) -> tuple[Agent, list[str]]:
    """Run ``prompt`` with the small profile on the faux model; returns the agent and the code
    the python tool really executed."""
    monkeypatch.setenv("PI_NOTEBOOK_SMALL_PROFILE", "1")
    executed: list[str] = []

    @tool
    def python(code: str) -> str:
        """Run code in the notebook."""
        executed.append(code)
        result = eval(code, ns) if "=" not in code.replace("==", "") else exec(code, ns)
        return "" if result is None else str(result)

    faux = register_faux_provider()
    try:
        faux.set_responses(steps)
        agent = Agent(initial_state={"tools": [python], "model": faux.get_model()})
        apply_model_profile(agent, DEFAULT_SYSTEM_PROMPT, [python], user_ns=ns,
                            default_system_prompt=DEFAULT_SYSTEM_PROMPT)
        asyncio.run(agent.prompt(prompt))
    finally:
        faux.unregister()
    return agent, executed


def _users(agent: Agent) -> list[str]:
    out = []
    for m in agent.state.messages:
        if m.role == "user":
            c = m.content
            out.append(c if isinstance(c, str) else " ".join(getattr(b, "text", "") for b in c))
    return out


def _call(code: str) -> Any:
    return faux_assistant_message(faux_tool_call("python", {"code": code}), stop_reason="toolUse")


def test_a_missing_named_result_gets_one_precise_corrective_turn(monkeypatch):
    ns = {"pd": pd, "sales": SALES}
    agent, executed = _run("put the top 3 products by units in top3", [
        _call("sales.nlargest(3, 'units')"),            # shows the rows, assigns nothing
        faux_assistant_message("Here are the top 3 products."),
        _call("top3 = sales.nlargest(3, 'units')"),     # the corrected turn
        faux_assistant_message("Done."),
    ], ns, monkeypatch)
    checks = [u for u in _users(agent) if u.startswith("Check: ")]
    assert checks == ["Check: `top3` does not exist. Assign the result to `top3`."]
    assert list(ns["top3"]["product"]) == ["Widget", "Gizmo", "Gadget"]
    assert executed[-1].startswith("top3 = ")


def test_the_corrective_turn_says_what_the_code_made_instead(monkeypatch):
    ns = {"pd": pd, "sales": SALES}
    agent, _ = _run("I need top3 to hold the three best sellers", [
        _call("top_3 = sales.nlargest(3, 'units')"),
        faux_assistant_message("Stored."),
        _call("top3 = top_3"),
        faux_assistant_message("Stored in top3."),
    ], ns, monkeypatch)
    assert "Check: `top3` does not exist. The code made `top_3` instead." in " ".join(_users(agent))


def test_no_corrective_turn_when_the_named_result_exists(monkeypatch):
    ns = {"pd": pd, "sales": SALES}
    agent, executed = _run("put the top 3 products by units in top3", [
        _call("top3 = sales.nlargest(3, 'units')"),
        faux_assistant_message("The top 3 are in top3."),
    ], ns, monkeypatch)
    assert not [u for u in _users(agent) if u.startswith("Check: ")]
    assert len([m for m in agent.state.messages if m.role == "assistant"]) == 2
    assert len(executed) == 1


def test_a_result_that_already_existed_must_be_replaced_by_the_run(monkeypatch):
    ns = {"pd": pd, "sales": SALES, "top3": "old"}
    agent, _ = _run("make a DataFrame top3 with the 3 best sellers", [
        _call("sales.nlargest(3, 'units')"),
        faux_assistant_message("Here they are."),
        _call("top3 = sales.nlargest(3, 'units')"),
        faux_assistant_message("Done."),
    ], ns, monkeypatch)
    assert "Check: `top3` was not changed. Assign the result to `top3`." in _users(agent)
    assert isinstance(ns["top3"], pd.DataFrame)


def test_only_one_outcome_correction_per_prompt(monkeypatch):
    ns = {"pd": pd, "sales": SALES}
    agent, _ = _run("put the top 3 in top3", [
        _call("sales.head(3)"),
        faux_assistant_message("Here."),
        _call("sales.head(3)"),            # ignores the correction
        faux_assistant_message("Here again."),
    ], ns, monkeypatch)
    assert sum(u.startswith("Check: ") for u in _users(agent)) == 1
    assert agent.state.messages[-1].role == "assistant"  # the run ended with the model's answer


def test_an_answer_naming_values_no_result_showed_is_flagged_and_corrected(monkeypatch):
    ns = {"pd": pd, "sales": SALES}
    agent, _ = _run("which 3 products sold the most units?", [
        _call("sales.nlargest(3, 'unit')['product']"),   # KeyError
        _call("sales.nlargest(3, 'units')['product'].tolist()"),
        faux_assistant_message("The top products are Apple, Banana and Orange, with 12 units."),
        faux_assistant_message("The top products are Widget, Gizmo and Gadget."),
    ], ns, monkeypatch)
    checks = [u for u in _users(agent) if u.startswith("Check: ")]
    assert len(checks) == 1
    assert '"Apple", "Banana", "Orange", "12"' in checks[0]
    assert '"Widget"' not in checks[0]


def test_a_name_opening_the_answer_after_failed_code_is_flagged(monkeypatch):
    # measured on the 0.5B (held-out h_top_customer): four SyntaxErrors, then "John spent the
    # most in total." A sentence's first word is capitalised anyway; a name there is a value too.
    ns = {"pd": pd, "sales": SALES}
    agent, _ = _run("which product sold the most units?", [
        _call("sales.nlargest(1, 'units')['product']}}"),   # SyntaxError
        faux_assistant_message("Walter sold the most units."),  # no such product
        faux_assistant_message("Unfortunately the code failed, so I do not know."),
    ], ns, monkeypatch)
    checks = [u for u in _users(agent) if u.startswith("Check: ")]
    assert len(checks) == 1 and '"Walter"' in checks[0] and "The code failed" in checks[0]
    assert agent.state.messages[-1].role == "assistant"


def test_an_answer_from_the_results_is_not_flagged(monkeypatch):
    ns = {"pd": pd, "sales": SALES}
    agent, _ = _run("which product sold the most units?", [
        _call("sales.loc[sales.units.idxmax(), ['product', 'units']].tolist()"),
        faux_assistant_message("Widget sold the most, with 40 units."),
    ], ns, monkeypatch)
    assert not [u for u in _users(agent) if u.startswith("Check: ")]


def test_a_label_from_the_data_is_a_value_even_in_lowercase(monkeypatch):
    # the data's own categories count as stated values, so "gizmo" needs a result that shows it
    ns = {"pd": pd, "sales": SALES.assign(product=SALES["product"].str.lower())}
    agent, _ = _run("which product sold the fewest units?", [
        _call("sales.units.min()"),
        faux_assistant_message("The product gizmo sold the fewest."),
        faux_assistant_message("The fewest units sold were 3."),
    ], ns, monkeypatch)
    checks = [u for u in _users(agent) if u.startswith("Check: ")]
    assert len(checks) == 1 and '"gizmo"' in checks[0]


def test_an_identical_failing_call_is_not_run_again(monkeypatch):
    ns = {"pd": pd, "sales": SALES}
    agent, executed = _run("what is the mean price?", [
        _call("sales['price'].mean()"),
        _call("sales['price'].mean()"),      # the same call: not run
        _call("sales['units'].mean()"),      # another approach: runs
        faux_assistant_message("There is no price column; the mean of units is 24.75."),
    ], ns, monkeypatch)
    assert executed == ["sales['price'].mean()", "sales['units'].mean()"]
    results = [m for m in agent.state.messages if m.role == "toolResult"]
    assert results[0].is_error and results[1].is_error
    assert "Not run: this is the same call that already failed" in results[1].content[0].text
    assert "'price'" in results[1].content[0].text  # what the first run said


def test_a_different_call_after_a_failure_runs():
    checks = RunChecks({}, steer=lambda m: None)
    from types import SimpleNamespace

    from pi_notebook.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage
    first = ToolCall(id="a", name="python", arguments={"code": "x = 1/0"})
    messages = [UserMessage(content="go"),
                AssistantMessage(content=[first], api="x", provider="x", model="x", usage=Usage(),
                                 stop_reason="toolUse"),
                ToolResultMessage(tool_call_id="a", tool_name="python", is_error=True,
                                  content=[TextContent(text="[error] ZeroDivisionError: division by zero")])]
    same = ToolCall(id="b", name="python", arguments={"code": "x = 1/0\n"})
    other = ToolCall(id="c", name="python", arguments={"code": "x = 1/1"})
    ctx = SimpleNamespace(context=SimpleNamespace(messages=messages))
    assert checks.before_tool_call(SimpleNamespace(tool_call=same, **vars(ctx))).block
    assert checks.before_tool_call(SimpleNamespace(tool_call=other, **vars(ctx))) is None


def test_a_path_nobody_wrote_is_not_read_when_the_data_is_there(monkeypatch):
    ns = {"pd": pd, "df": SALES, "In": ["", "df = make_sales()"]}
    agent, executed = _run("how many rows does df have?", [
        _call("df = pd.read_csv('data.csv')"),
        _call("len(df)"),
        faux_assistant_message("df has 4 rows."),
    ], ns, monkeypatch)
    assert executed == ["len(df)"]
    blocked = next(m for m in agent.state.messages if m.role == "toolResult")
    assert "no message or cell names the file 'data.csv'" in blocked.content[0].text
    assert "`df`" in blocked.content[0].text
    assert ns["df"] is SALES  # nothing replaced the user's data


def test_a_path_the_user_wrote_is_read():
    checks = RunChecks({"In": ["", "orders = pd.read_csv('bench/data/orders.csv')"]}, steer=lambda m: None)
    from types import SimpleNamespace

    from pi_notebook.ai.types import ToolCall, UserMessage
    ctx = SimpleNamespace(context=SimpleNamespace(messages=[UserMessage(content="load shop/x.csv into x")]))
    for code, blocked in [("x = pd.read_csv('shop/x.csv')", False),
                          ("o = pd.read_csv('bench/data/orders.csv')", False),   # an earlier cell wrote it
                          ("x = pd.read_csv('x.csv')", True),                    # shortened: not as written
                          ("df.to_csv('out.csv')", False)]:                      # writing is not reading
        result = checks.before_tool_call(SimpleNamespace(
            tool_call=ToolCall(id="1", name="python", arguments={"code": code}), **vars(ctx)))
        assert (result is not None and result.block) is blocked, code


def test_read_paths_finds_the_files_code_reads():
    code = ("import json\nd = pd.read_csv('a/b.csv')\nwith open('c.json') as f: j = json.load(f)\n"
            "open('out.txt', 'w').write('x')\np = pd.read_parquet(path)\nnp.load('arr.npy')")
    assert read_paths(code) == ["a/b.csv", "c.json", "arr.npy"]
    assert read_paths("this is not python (") == []
    # code with a syntax error still names the file it would read once fixed
    assert read_paths("df = pd.read_csv('data.csv')\nprint(f'{df[\"x\"]')") == ["data.csv"]


def test_an_answer_still_unsupported_after_the_correction_ends_with_what_is_known(monkeypatch):
    from pi_notebook.local.tool_calls import shape_request

    ns = {"pd": pd, "sales": SALES}
    agent, _ = _run("which product sold the most units?", [
        _call("sales.nlargest(1, 'unit')"),                     # KeyError
        faux_assistant_message("The best seller is Apple."),
        _call("sales.nlargest(1, 'unitz')"),                    # KeyError again
        faux_assistant_message("It is Apple."),                 # the check's quote grounds nothing
        faux_assistant_message("The code failed ('unitz'), so I do not know the answer."),
    ], ns, monkeypatch)
    checks = [u for u in _users(agent) if u.startswith("Check: ")]
    assert len(checks) == 2
    assert checks[1] == ('Check: no output shows "Apple" again. Reply exactly: The code failed '
                         "('unitz'), so I do not know the answer.")
    # the provider makes that the reply, word for word
    messages = [{"role": "user", "content": "which product sold the most units?"},
                {"role": "assistant", "content": "It is Apple."}, {"role": "user", "content": checks[1]}]
    params = shape_request({"messages": messages, "tools": [{"type": "function", "function": {
        "name": "python", "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}}]},
        mode="grammar")
    assert params["grammar"] == 'root ::= "The code failed (\'unitz\'), so I do not know the answer."\n'
    assert agent.state.messages[-1].role == "assistant"


# --- a literal the model printed is not a result ----------------------------------------------

def _checked_answer(code: str, output: str, answer: str, ns: dict[str, Any]) -> str | None:
    """The correction RunChecks gives for ``answer`` after one call of ``code`` that output
    ``output`` (no Agent: the messages as the loop would hold them)."""
    from pi_notebook.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage

    def assistant(*blocks: Any, stop: str) -> AssistantMessage:
        return AssistantMessage(content=list(blocks), api="x", provider="x", model="x", usage=Usage(),
                                stop_reason=stop)  # type: ignore[arg-type]  # a test's literal

    messages = [UserMessage(content="what's the product people order most often?"),
                assistant(ToolCall(id="a", name="python", arguments={"code": code}), stop="toolUse"),
                ToolResultMessage(tool_call_id="a", tool_name="python", content=[TextContent(text=output)]),
                assistant(TextContent(text=answer), stop="stop")]
    return RunChecks(ns, steer=lambda m: None).correction(messages)


@pytest.mark.parametrize("code", [
    "print('apple')",
    "top = 'apple'\nprint(top)",
    "print(f'The most ordered product is {\"apple\"}')",
    "'apple'",
])
def test_a_value_the_models_own_literal_printed_does_not_ground_the_answer(code):
    ns = {"pd": pd, "sales": SALES}
    output = "apple" if "most ordered" not in code else "The most ordered product is apple"
    correction = _checked_answer(code, output, "The product ordered most often is apple.", ns)
    assert correction is not None and '"apple"' in correction, code


def test_a_value_computed_from_the_data_still_grounds_the_answer():
    ns = {"pd": pd, "sales": SALES}
    # the literal parts of the print are cut, the computed value stays
    code = "print('The best seller is', sales.loc[sales.units.idxmax(), 'product'])"
    assert _checked_answer(code, "The best seller is Widget", "The best seller is Widget.", ns) is None
    # a number the code computed survives cutting a literal that is part of it (3 in 31)
    assert _checked_answer("print(3)\nsales.units.tolist()", "3\n[40, 31, 25, 3]",
                           "The second value is 31.", {"pd": pd, "sales": SALES}) is None


def test_printed_literals_and_cutting_them():
    from pi_notebook.local.checks import printed_literals, without_literals

    assert printed_literals("x = 'apple'\nprint(x, 42)\ndf.groupby('region').sum()\nprint(', ')") == [
        "apple", "42"]
    assert printed_literals("print('pear'") == ["pear"]  # does not parse: every string
    assert without_literals("apple 42 142 4.2 42.5", ["apple", "42"]).split() == ["142", "4.2", "42.5"]


# --- a blocked call sent again ends the request honestly ---------------------------------------

def test_a_blocked_call_sent_again_ends_the_request_with_what_is_known(monkeypatch):
    from pi_notebook.local.tool_calls import FORCED_REPLY_MARK

    ns = {"pd": pd, "orders": SALES, "In": ["", "orders = load()"]}
    agent, executed = _run("which product sold the most units?", [
        _call("orders = pd.read_csv('orders.csv')"),    # a file nobody named: not run
        _call("orders = pd.read_csv('orders.csv')"),    # the same call again: not run, request ends
        faux_assistant_message("The code was not run (no message or cell names the file "
                               "'orders.csv'), so I do not know the answer."),
        _call("orders = pd.read_csv('orders.csv')"),    # never reached
    ], ns, monkeypatch)
    assert executed == []
    checks = [u for u in _users(agent) if u.startswith("Check: ")]
    assert len(checks) == 1 and FORCED_REPLY_MARK in checks[0]
    assert checks[0].endswith("Reply exactly: The code was not run (no message or cell names the file "
                              "'orders.csv'), so I do not know the answer.")
    results = [m for m in agent.state.messages if m.role == "toolResult"]
    assert len(results) == 2 and all(r.is_error for r in results)
    assert "already not run" in results[1].content[0].text
    assert agent.state.messages[-1].role == "assistant" and agent.state.messages[-1].stop_reason == "stop"
    assert ns["orders"] is SALES


def test_a_failed_call_repeated_once_is_blocked_and_a_third_time_ends_the_request(monkeypatch):
    ns = {"pd": pd, "sales": SALES}
    agent, executed = _run("what is the mean price?", [
        _call("sales['price'].mean()"),      # KeyError
        _call("sales['price'].mean()"),      # blocked: the same failing call
        _call("sales['price'].mean()"),      # sent again after the block: the request ends
        faux_assistant_message("The code failed (KeyError: 'price'), so I do not know the answer."),
    ], ns, monkeypatch)
    assert executed == ["sales['price'].mean()"]
    checks = [u for u in _users(agent) if u.startswith("Check: ")]
    assert len(checks) == 1 and "Reply exactly: The code failed (" in checks[0] and "price" in checks[0]
    assert agent.state.messages[-1].role == "assistant"


def test_when_every_call_failed_the_contexts_sample_rows_ground_nothing():
    # h_first_date: every read was blocked, the answer's month and digits were found in the
    # namespace summary's dates, so the forced honest ending never came
    from pi_notebook.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage

    context = TextContent(text="[Notebook context]\norders: DataFrame 36 x 7\n  date 2024-01-03, 2024-01-05")
    typed = TextContent(text="when was the first order placed?")

    def run(result: str, is_error: bool) -> str | None:
        messages = [UserMessage(content=[context, typed]),
                    AssistantMessage(content=[ToolCall(id="a", name="python", arguments={
                        "code": "orders['date'].min()"})], api="x", provider="x", model="x", usage=Usage(),
                        stop_reason="toolUse"),
                    ToolResultMessage(tool_call_id="a", tool_name="python", is_error=is_error,
                                      content=[TextContent(text=result)]),
                    AssistantMessage(content=[TextContent(text="The first order was placed on January 3.")],
                                     api="x", provider="x", model="x", usage=Usage(), stop_reason="stop")]
        return RunChecks({"orders": SALES}, steer=lambda m: None).correction(messages)

    flagged = run("Not run: no message or cell names the file 'orders.csv'.", True)
    assert flagged is not None and '"January"' in flagged and '"3"' in flagged
    assert run("'2024-01-03'", False) is None   # a result shows it


def test_a_blocked_path_names_the_file_the_request_wrote(monkeypatch):
    ns = {"pd": pd}
    agent, executed = _run("load notebooks/data/sales.csv into a DataFrame called df", [
        _call("df = pd.read_csv('data/sales.csv')"),     # shortened: not as written
        faux_assistant_message("I could not load it."),
    ], ns, monkeypatch)
    assert executed == []
    blocked = next(m for m in agent.state.messages if m.role == "toolResult")
    assert ("The request names 'notebooks/data/sales.csv': use that path, exactly as written."
            in blocked.content[0].text)


def test_when_every_call_failed_a_tracebacks_line_numbers_ground_nothing():
    from pi_notebook.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage

    traceback = ("[error] AttributeError: 'str' object has no attribute 'name'\n\n-----\n"
                 "File <agent-code-1>:1\n----> 1 loans.groupby('branch').size().idxmin().name")
    messages = [UserMessage(content="which branch has the fewest loans?"),
                AssistantMessage(content=[ToolCall(id="a", name="python", arguments={
                    "code": "loans.groupby('branch').size().idxmin().name"})], api="x", provider="x", model="x",
                    usage=Usage(), stop_reason="toolUse"),
                ToolResultMessage(tool_call_id="a", tool_name="python", is_error=True,
                                  content=[TextContent(text=traceback)]),
                AssistantMessage(content=[TextContent(text="The branch with the fewest loans is branch 1.")],
                                 api="x", provider="x", model="x", usage=Usage(), stop_reason="stop")]
    correction = RunChecks({"loans": SALES}, steer=lambda m: None).correction(messages)
    assert correction is not None and '"1"' in correction


def test_the_honest_ending_names_the_error_without_where_in_the_agents_code():
    from pi_notebook.local.checks import _what_is_known
    from pi_notebook.ai.types import TextContent, ToolResultMessage

    failed = ToolResultMessage(tool_call_id="a", tool_name="python", is_error=True, content=[TextContent(
        text="[error] SyntaxError: '{' was never closed (<agent-code-2>, line 1)\n\n----")])
    assert _what_is_known([failed]) == "The code failed (SyntaxError: '{' was never closed), so I do not know the answer."


def test_ipythons_bookkeeping_names_ground_no_digit():
    from pi_notebook.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage

    messages = [UserMessage(content="which branch has the fewest loans?"),
                AssistantMessage(content=[ToolCall(id="a", name="python", arguments={"code": "loans.x"})],
                                 api="x", provider="x", model="x", usage=Usage(), stop_reason="toolUse"),
                ToolResultMessage(tool_call_id="a", tool_name="python", is_error=True,
                                  content=[TextContent(text="[error] AttributeError: no attribute 'x'")]),
                AssistantMessage(content=[TextContent(text="The fewest loans are in branch 1.")],
                                 api="x", provider="x", model="x", usage=Usage(), stop_reason="stop")]
    ns = {"loans": SALES, "_i1": "loans = load()", "_1": 3, "In": ["", "loans = load()"]}
    correction = RunChecks(ns, steer=lambda m: None).correction(messages)
    assert correction is not None and '"1"' in correction


def test_an_answer_without_the_form_the_question_states_gets_one_corrective_turn(monkeypatch):
    ns = {"pd": pd, "sales": SALES}
    agent, _ = _run("What is the mean of units? End your answer with @mean_units[value].", [
        _call("sales['units'].mean()"),
        faux_assistant_message("The mean of units is 24.75."),        # right value, no form
        faux_assistant_message("The mean is 24.75. @mean_units[24.75]"),
    ], ns, monkeypatch)
    checks = [u for u in _users(agent) if u.startswith("Check: ")]
    assert len(checks) == 1 and "@mean_units[value]" in checks[0], checks
    assert agent.state.messages[-1].content[0].text.endswith("@mean_units[24.75]")


def test_an_answer_in_the_form_asked_is_left_alone(monkeypatch):
    ns = {"pd": pd, "sales": SALES}
    agent, _ = _run("Which product sold most units, and how many? Answer @top[name] @units[count].", [
        _call("sales.loc[sales['units'].idxmax()]"),
        faux_assistant_message("Widget sold the most: @top[Widget] @units[40]"),
    ], ns, monkeypatch)
    assert not [u for u in _users(agent) if u.startswith("Check: ")]


def test_a_tagged_value_no_output_shows_is_not_presented_after_failed_calls(monkeypatch):
    ns = {"pd": pd, "sales": SALES}
    agent, _ = _run("What is the mean price? End with @mean_price[value].", [
        _call("sales['price'].mean()"),                                # KeyError: no price
        faux_assistant_message("The mean price is 12.0. @mean_price[12.0]"),
        faux_assistant_message("The mean price is 12.0. @mean_price[12.0]"),
        faux_assistant_message("The code failed, so I do not know the answer."),
    ], ns, monkeypatch)
    checks = [u for u in _users(agent) if u.startswith("Check: ")]
    assert checks and '"12.0"' in checks[0] and "@mean_price" not in " ".join(checks), checks
    # no format correction asks for a value nothing computed
    assert not any("the question asks for the answer as" in c for c in checks)


def test_a_stated_form_is_not_a_result_name():
    from pi_notebook.local.intent import expected_outcomes, requested_format

    text = "Load trips.csv and give the mean fare. End your answer with @mean_fare[value]."
    assert requested_format(text) == ["mean_fare"]
    assert all(o.name != "mean_fare" for o in expected_outcomes(text))


def _failed_run(results: list[tuple[str, bool]], answer: str, prompt: str) -> str | None:
    """The correction for ``answer`` after python calls with these (output, is_error) results."""
    from pi_notebook.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage

    messages: list[Any] = [UserMessage(content=prompt)]
    for i, (output, is_error) in enumerate(results):
        messages += [AssistantMessage(content=[ToolCall(id=f"c{i}", name="python", arguments={
                         "code": f"trips = pd.read_csv('bench/data/trips.csv')\nstep{i}(trips)"})],
                         api="x", provider="x", model="x", usage=Usage(), stop_reason="toolUse"),
                     ToolResultMessage(tool_call_id=f"c{i}", tool_name="python", is_error=is_error,
                                       content=[TextContent(text=output)])]
    messages.append(AssistantMessage(content=[TextContent(text=answer)], api="x", provider="x", model="x",
                                     usage=Usage(), stop_reason="stop"))
    return RunChecks({"pd": pd}, steer=lambda m: None).correction(messages)


FARE_ERROR = ("[error] ValueError: could not convert string to float: '$16.94'\n\n-----\n"
              "File <agent-code-2>:2\n----> 2 trips['fare'].astype(float).mean()")
MEAN_FARE = "Load bench/data/trips.csv and give the mean fare. End with @mean_fare[value]."


@pytest.mark.parametrize("first_ok", [False, True])
def test_a_tagged_value_only_an_error_message_shows_is_not_a_result(first_ok):
    # the value the error quotes (one row's fare) presented as the computed mean, after the code
    # that was to compute it failed; a call that ran before it (loading) shows no such value
    loaded = ("(120, 9)", False) if first_ok else ("[error] NameError: name 'pd' is not defined", True)
    correction = _failed_run([loaded, (FARE_ERROR, True)],
                             "The mean fare is 16.94. @mean_fare[16.94]", MEAN_FARE)
    assert correction is not None and '"16.94"' in correction, correction
    # saying what failed, quoting the error, presents nothing as a result (after a call that ran,
    # the answer is still asked for the form once)
    honest = _failed_run([loaded, (FARE_ERROR, True)], "The code failed (ValueError: could not convert "
                         "string to float: '$16.94'), so I do not know the mean fare.", MEAN_FARE)
    assert honest is None or not honest.startswith("Check: no output shows"), honest


def test_a_tagged_value_from_the_questions_own_example_is_not_a_result():
    prompt = ("On which day of the week were the most trips taken in bench/data/trips.csv? Answer as "
              "@weekday[name], e.g. @weekday[Monday].")
    failed = [("[error] KeyError: 'weekday'", True)]
    correction = _failed_run(failed, "Most trips were taken on Monday. @weekday[Monday]", prompt)
    assert correction is not None and '"Monday"' in correction, correction
    shown = [("Tuesday      22\nMonday       19\nName: count, dtype: int64", False)]
    assert _failed_run(shown, "Most trips were taken on Tuesday. @weekday[Tuesday]", prompt) is None
    assert _failed_run([("mean 21.4963", False)], "The mean fare is 21.50. @mean_fare[21.50]", MEAN_FARE) is None


def test_a_whole_number_is_not_grounded_by_its_digits_without_the_zeros():
    # measured on the 1.5B (fenced form): after a TypeError it ran the bare literal `10` and
    # answered "There are 10 stays"; "10" was taken as grounded by the "1" of "<agent-code-1>"
    from pi_notebook.local.tool_calls import ungrounded_values

    assert ungrounded_values("There are 10 stays.", ["File <agent-code-1>:3"]) == ["10"]
    assert ungrounded_values("There are 300 stays.", ["3 rows"]) == ["300"]
    assert ungrounded_values("The mean is 21.50.", ["21.5"]) == []      # a decimal's zeros still go
    assert ungrounded_values("There are 10 stays.", ["n = 10"]) == []


def test_after_failed_calls_an_error_grounds_only_what_quotes_it():
    from pi_notebook.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage

    error = ("[error] ValueError: could not convert string to float: '101.12 EUR'\n\n-----\n"
             "File <agent-code-1>:3")

    def run(answer: str) -> str | None:
        messages = [UserMessage(content="what is the average price?"),
                    AssistantMessage(content=[ToolCall(id="a", name="python", arguments={
                        "code": "stays['price'].astype(float).mean()"})], api="x", provider="x", model="x",
                        usage=Usage(), stop_reason="toolUse"),
                    ToolResultMessage(tool_call_id="a", tool_name="python", is_error=True,
                                      content=[TextContent(text=error)]),
                    AssistantMessage(content=[TextContent(text=answer)], api="x", provider="x", model="x",
                                     usage=Usage(), stop_reason="stop")]
        return RunChecks({"stays": SALES}, steer=lambda m: None).correction(messages)

    # the value taken from the error message is presented as the result: flagged
    flagged = run("The average price is 101.12 EUR.")
    assert flagged is not None and '"101.12"' in flagged
    # quoting the error is honest, in full, without its name, or the bracketed value
    assert run("The code failed (ValueError: could not convert string to float: '101.12 EUR'), "
               "so I do not know the answer.") is None
    assert run("It failed: could not convert string to float: '101.12 EUR'.") is None
    assert run("The prices are text such as '101.12 EUR', so the conversion failed.") is None


def test_without_error_quotes_leaves_other_text():
    from pi_notebook.local.checks import without_error_quotes

    error = "KeyError: 'regoin'"
    assert "12.5" in without_error_quotes("The total is 12.5 ('regoin' is no column).", [error])
    assert "regoin" not in without_error_quotes("The column 'regoin' does not exist.", [error])


# --- a chart's words are an output --------------------------------------------------------------

def test_a_month_only_on_a_charts_axis_is_grounded_a_value_on_no_output_is_not():
    """The python tool's own result for a chart (a text-only model): the month the answer names
    is a tick label of the figure, and nowhere else."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from helpers.shell import get_shell, names_kept, routed
    from pi_notebook.tools.python.python_tool import PythonToolSettings, result_content, run_code

    shell = get_shell()
    sales = pd.DataFrame({"month": ["Jan", "Feb", "Mar", "Apr", "May", "Jun"], "total": [3, 5, 2, 7, 9, 4]})
    code = ("import matplotlib.pyplot as plt\n"
            "totals = sales.groupby('month', sort=False)['total'].sum()\n"
            "plt.bar(totals.index, totals.values)\nplt.title('Monthly totals');")

    async def run() -> str:
        shell.user_ns["sales"] = sales
        with routed():
            result = await run_code(shell, code)
        content = result_content(result, PythonToolSettings(model_accepts_images=False))
        return "\n".join(c.text for c in content if getattr(c, "type", "") == "text")

    with names_kept(shell):
        output = asyncio.run(run())
    assert "May" in output and "image, not shown" in output
    ns = {"pd": pd, "sales": sales}
    assert _checked_answer(code, output, "The highest month is May.", ns) is None
    correction = _checked_answer(code, output, "The highest month is July.", ns)
    assert correction is not None and 'no output shows "July"' in correction


def test_a_value_an_earlier_request_printed_grounds_a_follow_ups_answer():
    from pi_notebook.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage

    def turn(call_id: str, code: str, shown: str, is_error: bool = False) -> list:
        return [AssistantMessage(content=[ToolCall(id=call_id, name="python", arguments={"code": code})],
                                 api="x", provider="x", model="x", usage=Usage(), stop_reason="toolUse"),
                ToolResultMessage(tool_call_id=call_id, tool_name="python", is_error=is_error,
                                  content=[TextContent(text=shown)])]

    def answer(text: str) -> AssistantMessage:
        return AssistantMessage(content=[TextContent(text=text)], api="x", provider="x", model="x",
                                usage=Usage(), stop_reason="stop")

    first = [UserMessage(content="which region had the higher total?"),
             *turn("a", "sales.groupby('region')['revenue'].sum().idxmax()", "'north'"),
             answer("The north region.")]
    follow = [UserMessage(content="by how much, in percent?"),
              *turn("b", "t = sales.groupby('region')['revenue'].sum()\nt.max() / t.min() * 100 - 100", "19.7")]
    regions = pd.DataFrame({"region": ["north", "south"], "revenue": [1608.1, 1343.1]})
    checks = RunChecks({"sales": regions}, steer=lambda m: None)
    assert checks.correction([*first, *follow, answer("The north region had 19.7 % more.")]) is None
    # a value no output of the conversation showed is still flagged
    flagged = checks.correction([*first, *follow, answer("The south region had 19.7 % more.")])
    assert flagged is not None and '"south"' in flagged
    # an earlier output that was an error grounds nothing
    failed = [UserMessage(content="which region?"), *turn("c", "sales.groupby('regoin')", "[error] KeyError: 'north'", True),
              answer("I do not know.")]
    assert checks.correction([*failed, *follow, answer("The north region had 19.7 % more.")]) is not None


def test_a_figure_shown_to_a_text_only_model_counts_as_shown():
    # the embedded model is sent no image: the figure is in the call's display outputs only
    # (measured: "No figure was shown" under a chart the card showed)
    from pi_notebook.ai.types import ImageContent, TextContent, ToolResultMessage
    from pi_notebook.local.checks import _has_figure
    from pi_notebook.tools.output.updates import DisplayOutput, PythonCallDetails, StreamOutput

    def result(details: object, content: list | None = None) -> ToolResultMessage:
        return ToolResultMessage(tool_call_id="a", tool_name="python", is_error=False,
                                 content=content or [TextContent(text="[display 1: image/png image, not shown]")],
                                 details=details)

    figure = DisplayOutput(data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
    assert _has_figure([result(PythonCallDetails(outputs=[figure]))])
    assert _has_figure([result({"outputs": [{"kind": "display", "data": {"image/png": "x"}}]})])  # a loaded session
    assert _has_figure([result(None, [ImageContent(data="eA==", mime_type="image/png")])])  # sent to the model
    text_only = PythonCallDetails(outputs=[StreamOutput(name="stdout", text="hi"),
                                           DisplayOutput(data={"text/plain": "<Axes>"})])
    assert not _has_figure([result(text_only)]) and not _has_figure([result(None)])
