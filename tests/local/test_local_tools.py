"""Tool calls of the embedded model without a model: the request shape, the grammar, and the
parsing/recovery of streamed replies (local/tool_calls.py). No server needed."""

from __future__ import annotations

import json

import pytest

from pi_notebook.agent import AgentTool
from pi_notebook.local.tool_calls import (
    NOTE_PREFIX,
    TOOLCALL_FAILURE_HINT,
    TextToolCallStream,
    friendly_error,
    shape_request,
    tools_grammar,
)
from pi_notebook.ai.types import AssistantMessage, DoneEvent, ErrorEvent, StartEvent, TextDeltaEvent, ToolCall

PYTHON = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
INSPECT = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
OPENAI_TOOLS = [{"type": "function", "function": {"name": "python", "parameters": PYTHON}},
                {"type": "function", "function": {"name": "inspect_variable", "parameters": INSPECT}}]


async def _noop(*_args):
    raise AssertionError("not run")


def _tools() -> list[AgentTool]:
    return [AgentTool(name="python", label="Python", description="run code", parameters=PYTHON, execute=_noop),
            AgentTool(name="inspect_variable", label="Inspect", description="inspect", parameters=INSPECT,
                      execute=_noop)]


async def _replay(chunks: list[str], *, error: str | None = None, stop: str = "stop") -> list:
    partial = AssistantMessage(content=[], stop_reason="pending")

    async def inner():
        yield StartEvent(partial=partial)
        for chunk in chunks:
            yield TextDeltaEvent(content_index=0, delta=chunk, partial=partial)
        if error is not None:
            yield ErrorEvent(reason="error", error=partial.model_copy(
                update={"stop_reason": "error", "error_message": error}))
        else:
            yield DoneEvent(reason=stop, message=partial.model_copy(update={"stop_reason": stop}))

    return [e async for e in TextToolCallStream(_tools()).convert(inner())]


def _split(text: str, size: int = 7) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


# --- the reply ------------------------------------------------------------------------------

async def test_the_call_is_named_as_soon_as_its_name_can_only_be_one_tool():
    names = []
    partial = AssistantMessage(content=[], stop_reason="pending")

    async def inner():
        yield StartEvent(partial=partial)
        for chunk in ('{"name": "py', 'th', 'on", "arguments": {"code": "x', '"}}'):
            yield TextDeltaEvent(content_index=0, delta=chunk, partial=partial)
        yield DoneEvent(reason="stop", message=partial.model_copy(update={"stop_reason": "stop"}))

    async for event in TextToolCallStream(_tools()).convert(inner()):
        if event.type == "toolcall_delta":
            names.append(event.partial.content[event.content_index].name)
    # '{"name": "py' can only be python: the card names it before the name is written out
    assert names == ["python"] * 4


async def test_a_reply_cut_inside_the_name_names_the_tool_it_was_writing():
    events = await _replay(['{"name": "insp'], error="Connection to 127.0.0.1:1 lost while reading the response")
    block = next(b for b in events[-1].error.content if b.type == "toolCall")
    assert block.name == "inspect_variable"
    events = await _replay(['{"na'], error="lost")  # no name at all: the placeholder the card calls a cut call
    assert next(b for b in events[-1].error.content if b.type == "toolCall").name == "invalid_tool_call"
    # the reply was cut (aborted, lost): no note says the model could not form a call
    assert not any(TOOLCALL_FAILURE_HINT in getattr(b, "text", "") for b in events[-1].error.content)

async def test_a_json_reply_streams_as_a_tool_call():
    reply = json.dumps({"name": "python", "arguments": {"code": "print(len(df))"}})
    events = await _replay(_split(reply))
    kinds = [e.type for e in events]
    assert kinds[0] == "start" and kinds[1] == "toolcall_start" and "toolcall_delta" in kinds
    assert "text_delta" not in kinds
    end = next(e for e in events if e.type == "toolcall_end")
    assert end.tool_call.name == "python" and end.tool_call.arguments == {"code": "print(len(df))"}
    assert end.tool_call.id
    done = events[-1]
    assert done.type == "done" and done.reason == "toolUse"
    assert [b.type for b in done.message.content] == ["toolCall"]


async def test_prose_streams_as_text_and_stops():
    events = await _replay(_split("df has 24 rows."))
    assert [e.type for e in events if e.type.startswith("text")][:2] == ["text_start", "text_delta"]
    assert events[-1].type == "done" and events[-1].reason == "stop"
    assert events[-1].message.content[0].text == "df has 24 rows."


async def test_unknown_name_with_code_argument_is_recovered_visibly():
    reply = json.dumps({"name": "plot_bar_chart_of_totals", "arguments": {"code": "totals.plot.bar()"}})
    events = await _replay(_split(reply))
    done = events[-1]
    assert done.reason == "toolUse"
    note, call = done.message.content
    assert note.type == "text" and note.text.startswith(NOTE_PREFIX)
    assert "plot_bar_chart_of_totals" in note.text and "`python`" in note.text
    assert isinstance(call, ToolCall) and call.name == "python"
    assert call.arguments == {"code": "totals.plot.bar()"}
    end = next(e for e in events if e.type == "toolcall_end")
    assert end.content_index == 1 and end.tool_call is call


async def test_unrecoverable_call_keeps_its_name_for_a_tool_error_and_says_what_to_try():
    reply = json.dumps({"name": "mean", "arguments": {"column": "x"}})
    done = (await _replay(_split(reply)))[-1]
    note, call = done.message.content
    assert call.name == "mean" and call.arguments == {"column": "x"}  # the loop answers "Tool mean not found"
    assert done.reason == "toolUse"
    assert TOOLCALL_FAILURE_HINT in note.text


async def test_broken_json_still_becomes_a_call_the_agent_can_reject():
    done = (await _replay(['{"name": "python", "arguments": {"code": "x = ']))[-1]
    call = done.message.content[-1]
    assert call.type == "toolCall" and call.name == "python"
    assert done.reason == "toolUse"


async def test_server_parser_message_is_replaced_by_what_to_try():
    events = await _replay([], error="The model produced output that does not match the expected "
                                     "peg-native format")
    err = events[-1]
    assert err.type == "error"
    assert "peg-native" not in err.error.error_message
    assert TOOLCALL_FAILURE_HINT in err.error.error_message
    assert friendly_error("HTTP 500: other") == "HTTP 500: other"


# --- the request ----------------------------------------------------------------------------

def _params(messages: list[dict]) -> dict:
    return {"model": "m", "messages": messages, "tools": json.loads(json.dumps(OPENAI_TOOLS)), "stream": True}


def test_first_turn_requires_a_valid_call():
    params = shape_request(_params([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]),
                           mode="grammar")
    assert params["tool_choice"] == "none"  # the template still lists the tools
    grammar = params["grammar"]
    root = grammar.splitlines()[0]
    assert root == "root ::= call0 | call1"  # no prose before the notebook was asked
    assert '"\\"python\\""' in grammar and '"\\"inspect_variable\\""' in grammar
    assert '"\\"code\\""' in grammar


def test_after_a_result_prose_or_a_call_then_only_prose():
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "python", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "1", "content": "24"}
    one = shape_request(_params([{"role": "user", "content": "q"}, call, result]), mode="grammar")
    assert one["grammar"].splitlines()[0] == "root ::= call0 | call1 | text"
    three = shape_request(_params([{"role": "user", "content": "q"}, *([call, result] * 3)]), mode="grammar")
    assert three["grammar"].splitlines()[0] == "root ::= text"


def test_notes_never_reach_the_model_and_server_mode_is_untouched():
    note = {"role": "assistant", "content": f"{NOTE_PREFIX}recovered", "tool_calls": []}
    params = shape_request(_params([{"role": "user", "content": "q"}, note]), mode="parse")
    assert params["messages"][1]["content"] == ""
    assert "grammar" not in params and params["tool_choice"] == "none"
    server = shape_request(_params([{"role": "user", "content": "q"}]), mode="server")
    assert "tool_choice" not in server and "grammar" not in server


def test_grammar_without_tools_properties_allows_any_object():
    grammar = tools_grammar([{"type": "function", "function": {"name": "free"}}])
    assert 'call0 ::= ' in grammar and "object" in grammar.split("call0 ::= ")[1].splitlines()[0]


def test_numbers_come_from_results_not_from_errors():
    from pi_notebook.local.tool_calls import grounded_numbers

    messages = [{"role": "user", "content": "which month had the highest revenue?"},
                {"role": "tool", "content": "[stdout]\n1445.25\n\n[error] KeyError: 'x'\nFile base.py:3823\n"
                                            "[elapsed 0.01 s]"},
                {"role": "tool", "content": "[error] SyntaxError (line 4)\n\n[elapsed 0.02 s]"}]
    numbers = grounded_numbers(messages)
    assert {"1445.25", "1445.2", "1445", "1445.3"} & set(numbers) and "3823" not in numbers and "4" not in numbers
    assert "0.01" not in numbers  # (the elapsed time follows the error part: not a result either)


def test_the_answer_after_the_last_allowed_call_is_short():
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "python", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "1", "content": "[error] SyntaxError"}
    params = _params([{"role": "user", "content": "q"}, *([call, result] * 3)])
    params["max_tokens"] = 2048
    shaped = shape_request(params, mode="grammar")
    assert shaped["grammar"].splitlines()[0] == "root ::= text" and shaped["max_tokens"] == 200
    first = _params([{"role": "user", "content": "q"}])
    first["max_tokens"] = 2048
    assert shape_request(first, mode="grammar")["max_tokens"] == 2048  # a reply that may call: as asked


# --- values an answer states (names, labels, dates, numbers) -------------------------------

from pi_notebook.local.tool_calls import stated_values, ungrounded_values  # noqa: E402


def test_an_answer_naming_values_absent_from_every_result_is_flagged() -> None:
    results = ["[error] KeyError: 'prise' (did you mean 'price'?)"]
    assert ungrounded_values("The top products are Apple, Banana and Orange.", results) == [
        "Apple", "Banana", "Orange"]
    assert ungrounded_values("The mean price is 12.5.", results) == ["12.5"]
    assert ungrounded_values("The first order was on 2024-03-07.", ["2024-03-05"]) == ["2024-03-07"]
    assert ungrounded_values("The column `prize` is missing.", results) == ["prize"]


def test_a_name_opening_a_sentence_is_a_stated_value() -> None:
    # measured on the 0.5B: every call failed with a SyntaxError, then "John spent the most"
    failed = ["SyntaxError: unmatched '}'"]
    assert ungrounded_values("John spent the most in total.", failed) == ["John"]
    assert ungrounded_values("The code failed. Widget sold the most units.", failed) == ["Widget"]
    assert ungrounded_values("April had the highest revenue.", ["2025-06 289.4"]) == ["April"]
    # grounded when a result shows it, whatever its case there
    assert ungrounded_values("Widget sold the most units.", ["product\nwidget 40"]) == []


@pytest.mark.parametrize("answer", [
    "Unfortunately, the code failed with a SyntaxError.",
    "Based on the output, the code failed.",
    "Here is what went wrong: the code failed.",
    "Sorry, I could not compute it. Note that the code failed.",
    "Grouping by region failed. Looking at the error, the column is missing.",
    "Overall the code failed. Therefore nothing is known.",
])
def test_ordinary_sentence_openings_are_not_values(answer: str) -> None:
    assert ungrounded_values(answer, ["SyntaxError"]) == []


def test_values_a_result_shows_are_grounded() -> None:
    out = ["product\nWidget    40\nGizmo     31\nGadget    25", "mean 1445.2345", "2024-03-05"]
    assert ungrounded_values("The top products are Widget, Gizmo and Gadget.", out) == []
    assert ungrounded_values("The mean is 1,445.23, first seen on 2024-03-05.", out) == []
    # quoting the error is honest: it is in a result
    assert ungrounded_values("The code failed: there is no column 'prise'.",
                             ["[error] KeyError: 'prise'"]) == []
    # prose capitals: a sentence's first word, DataFrame; a month is grounded by a date in it
    assert ungrounded_values("The DataFrame has rows from March. It is ready.", ["2025-03 12"]) == []


def test_a_month_or_a_glued_number_no_result_shows_is_flagged() -> None:
    out = ["month\n2025-06    289.4\n2025-05    250.0"]
    assert ungrounded_values("The best month is June, with 289.4.", out) == []
    # (measured on the 0.5B: "April, and the revenue was $1,24,4,4", digits glued from allowed numbers)
    assert ungrounded_values("The best month is April, and the revenue was $1,24,4,4.", out) == [
        "April", "1,24,4,4"]
    assert ungrounded_values("The counts are 11, 10, 10, and 5.", ["Bath 10 Bristol 11 Leeds 5"]) == []


def test_lowercase_labels_of_the_data_count_as_values() -> None:
    labels = ["north", "south", "region"]
    assert stated_values("The best region is south.", labels) == ["region", "south"]
    assert ungrounded_values("The best region is south.", ["north 5"], labels) == ["region", "south"]
    assert ungrounded_values("The best region is south.", ["region\nsouth 9"], labels) == []


async def test_the_calls_end_leaked_into_the_code_is_cut_when_that_makes_it_parse():
    # measured on the 0.5B: the escaped quote the grammar allows inside code, where the closing
    # one was meant, and the end of the call after it
    leaked = json.dumps({"name": "python", "arguments": {
        "code": "loans = pd.read_csv('bench/data/loans.csv')\nprint(loans.sum())\"})}uff. "}})
    events = await _replay(_split(leaked))
    call = events[-1].message.content[-1]
    assert call.arguments["code"] == "loans = pd.read_csv('bench/data/loans.csv')\nprint(loans.sum())"


def test_code_that_parses_or_cannot_be_mended_runs_as_written():
    from pi_notebook.local.tool_calls import repair_call_tail

    assert repair_call_tail("d = {\"a\": \"b\"}") is None              # parses: untouched
    assert repair_call_tail("try:\n    x = 1\"}}") is None             # cut, still no parse
    assert repair_call_tail("print(x)\"\")}uff.") == "print(x)"


def test_braces_leaked_in_place_of_closing_brackets_are_mended():
    from pi_notebook.local.tool_calls import repair_call_tail

    # measured on the 1.5B (the quickstart asked in plain words) and on the 0.5B
    code = "m = df.groupby('month')['revenue'].sum()\nprint(m.index[m.values.argmax()]}"
    assert repair_call_tail(code) == "m = df.groupby('month')['revenue'].sum()\nprint(m.index[m.values.argmax()])"
    assert repair_call_tail("t = df['units'] * df['price'] / df['region']}}") == \
        "t = df['units'] * df['price'] / df['region']"
    assert repair_call_tail("d = {'a': 1}}") == "d = {'a': 1}"            # one brace was real
    # brackets inside strings are not counted; a brace the code needs is not cut
    assert repair_call_tail("print('(', len(x)}") == "print('(', len(x))"
    assert repair_call_tail("d = {'a': 1") is None
    assert repair_call_tail("print(x]}") is None                          # mismatched: as written


def test_corrections_allow_more_calls_but_a_prompt_at_most_twice_the_budget():
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "python", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "1", "content": "24"}
    check = {"role": "user", "content": "Check: `x` does not exist. Assign the result to `x`."}
    first = [{"role": "user", "content": "q"}, *([call, result] * 3), {"role": "assistant", "content": "a"}]
    after_one = shape_request(_params([*first, check]), mode="grammar")
    assert after_one["grammar"].splitlines()[0] == "root ::= call0 | call1"   # a call again
    after_two = shape_request(_params([*first, check, *([call, result] * 3),
                                       {"role": "assistant", "content": "b"}, check]), mode="grammar")
    assert after_two["grammar"].splitlines()[0] == "root ::= text"            # 6 calls: prose only
    # a new prompt of the user starts a new budget
    again = shape_request(_params([*first, check, *([call, result] * 3), {"role": "user", "content": "q2"}]),
                          mode="grammar")
    assert again["grammar"].splitlines()[0] == "root ::= call0 | call1"


async def test_text_before_a_call_the_server_parsed_ends_as_its_own_block():
    # mode "server" (a GGUF outside the packaged ones): the server streams prose, then a call it
    # parsed itself; the prose was left open and the reply failed on an assertion
    from pi_notebook.ai.types import ToolCallEndEvent

    partial = AssistantMessage(content=[], stop_reason="pending")
    call = ToolCall(id="s1", name="python", arguments={"code": "print(1)"})

    async def inner():
        yield StartEvent(partial=partial)
        for chunk in ("Let me ", "check."):
            yield TextDeltaEvent(content_index=0, delta=chunk, partial=partial)
        yield ToolCallEndEvent(content_index=1, tool_call=call, partial=partial)
        yield TextDeltaEvent(content_index=2, delta="Done.", partial=partial)
        yield DoneEvent(reason="toolUse", message=partial.model_copy(update={"stop_reason": "toolUse"}))

    events = [e async for e in TextToolCallStream(_tools()).convert(inner())]
    kinds = [e.type for e in events]
    assert kinds.index("text_end") < kinds.index("toolcall_start")
    done = events[-1]
    assert done.type == "done" and done.reason == "toolUse"
    assert [(b.type, getattr(b, "text", None)) for b in done.message.content] == [
        ("text", "Let me check."), ("toolCall", None), ("text", "Done.")]
