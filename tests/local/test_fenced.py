"""The fenced-block code form (local/fenced.py): the model runs Python by replying with a
```python block. Every program can be written (the grammar admits it inside some fence), and
the call the provider hands on carries the block's text unchanged."""

from __future__ import annotations

import json

import pytest
from test_code_grammar import PROGRAMS, GbnfMatcher
from test_shared_server import fake  # noqa: F401  (the fixture: a fake llama-server, real supervisor)

from pi_notebook.ai import complete
from pi_notebook.ai.types import AssistantMessage, Context, DoneEvent, StartEvent, TextDeltaEvent, Tool, UserMessage
from pi_notebook.local import provider
from pi_notebook.local.fenced import FENCED_INSTRUCTIONS, as_fenced_messages, code_of_block, fence
from pi_notebook.local.tool_calls import TextToolCallStream, retry_start, shape_request, tools_grammar

PYTHON = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
TOOLS = [{"type": "function", "function": {"name": "python", "parameters": PYTHON}}]
# a line of the code that opens with the short fence: only a longer fence can hold it
FENCE_INSIDE = 'doc = """\n```python\nx = 1\n```\n"""\nprint(doc)'
ALL = [*PROGRAMS, FENCE_INSIDE, "s = '`'\nt = '``'\nu = '```'", "x = '''\n`\n``\n'''\nprint(x)"]


def test_the_programs_are_python() -> None:
    for program in ALL:
        compile(program, "<program>", "exec")


@pytest.mark.parametrize("start", [None, "v = ", "df[.["])
def test_the_block_rule_admits_every_program(start: str | None) -> None:
    grammar = GbnfMatcher(tools_grammar(TOOLS, start=start, fenced=True))
    prefix = {"v = ": "v = ", "df[.[": "df."}.get(start or "", "")
    for program in ALL:
        block = fence(prefix + program)
        assert grammar.matches("root", block), program
        assert code_of_block(block) == prefix + program
    assert fence(FENCE_INSIDE).startswith("````python\n")


def test_prose_is_the_answer_and_cannot_open_a_broken_block() -> None:
    grammar = GbnfMatcher(tools_grammar(TOOLS, fenced=True))
    assert grammar.matches("root", "The mean fare is 21.5.\n@mean_fare[21.5]")
    assert not grammar.matches("root", "`print(1)`")
    assert not grammar.matches("root", "```python\nprint(1)\n```\nThe answer.")  # nothing after the block
    assert not grammar.matches("root", "```python\nprint(1)\n")  # never closed
    only_calls = GbnfMatcher(tools_grammar(TOOLS, fenced=True, allow_text=False))
    assert not only_calls.matches("root", "The answer.")


def test_earlier_calls_read_as_the_blocks_the_model_writes() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "python",
                                                         "arguments": json.dumps({"code": FENCE_INSIDE})}}
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "x"}]
    as_fenced_messages(messages)
    assert messages[0]["content"] == "Be brief." + FENCED_INSTRUCTIONS
    assert "tool_calls" not in messages[2] and messages[2]["content"] == fence(FENCE_INSIDE)
    as_fenced_messages(messages)  # once only, for a prompt prefix that stays the same
    assert messages[0]["content"].count(FENCED_INSTRUCTIONS) == 1


def test_the_request_carries_the_form_instead_of_the_schema(monkeypatch) -> None:
    monkeypatch.setenv("PI_NOTEBOOK_LOCAL_CODE", "fenced")
    params = shape_request({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
                            "tools": TOOLS, "max_tokens": 2048}, mode="grammar")
    assert "tools" not in params and "tool_choice" not in params
    assert "block3" in params["grammar"] and "call0" not in params["grammar"]
    assert params["messages"][0]["content"].endswith(FENCED_INSTRUCTIONS)
    # with another tool offered, the calls stay JSON (their schemas are needed)
    other = [*TOOLS, {"type": "function", "function": {"name": "inspect_variable", "parameters": PYTHON}}]
    params = shape_request({"messages": [{"role": "user", "content": "q"}], "tools": other}, mode="grammar")
    assert params["tools"] == other and "call0" in params["grammar"]


def _failed_call(code: str, error: str = "[error] TypeError: unsupported operand") -> list[dict]:
    call = {"id": "c1", "type": "function", "function": {"name": "python", "arguments": json.dumps({"code": code})}}
    return [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": error}]


FAILED = "import pandas as pd\ndf = pd.read_csv('a.csv')\nfor h in ['x']:\n    print(df['p'] / df['n'])\nprint('done')"
TRACEBACK = ("[error] TypeError: unsupported operand type(s) for /: 'str' and 'float'\n\n-----\n"
             "TypeError    Traceback (most recent call last)\nFile <agent-code-1>:4\n      3 for h in ['x']:\n"
             "----> 4     print(df['p'] / df['n'])\n")


def test_the_call_after_an_error_resumes_at_the_line_that_raised_under_the_error(monkeypatch) -> None:
    monkeypatch.setenv("PI_NOTEBOOK_LOCAL_CODE", "fenced")
    start = retry_start(_failed_call(FAILED, TRACEBACK))
    assert start == ("import pandas as pd\ndf = pd.read_csv('a.csv')\nfor h in ['x']:\n"
                     "    # failed: print(df['p'] / df['n'])\n"
                     "    # TypeError: unsupported operand type(s) for /: 'str' and 'float'")
    params = shape_request({"messages": _failed_call(FAILED, TRACEBACK), "tools": TOOLS}, mode="grammar",
                           last_result_failed=True)
    grammar = GbnfMatcher(params["grammar"])
    fixed = start + "\n    print(df['p'].str[:-4].astype(float) / df['n'])\nprint('done')"
    assert grammar.matches("root", fence(fixed))
    # what the model wrote instead, made to write a block: the error itself, or the same code
    assert not grammar.matches("root", fence("TypeError                 Traceback (most recent call last)"))
    assert not grammar.matches("root", fence(FAILED))
    assert not grammar.matches("root", "The code failed.")  # a retry is still required
    # without a failure the first call after the prompt starts freely
    params = shape_request({"messages": _failed_call(FAILED)[:2], "tools": TOOLS}, mode="grammar")
    assert GbnfMatcher(params["grammar"]).matches("root", fence("print(1)"))


def test_a_retry_without_a_line_to_resume_starts_on_the_first_line_or_the_error() -> None:
    syntax = "[error] SyntaxError: invalid syntax (<agent-code-2>, line 1)"
    # the first line raised: nothing ran before it, the block starts with it and the error as comments
    assert retry_start(_failed_call("x = = 1\nprint(x)", syntax)) == (
        "# failed: x = = 1\n# SyntaxError: invalid syntax (<agent-code-2>, line 1)")
    # no line named: the first line of the code, then the error
    assert retry_start(_failed_call("import pandas as pd\nx")) == "import pandas as pd\n# TypeError: unsupported operand"
    # a first line that is no code (a traceback written as code) is not kept
    assert retry_start(_failed_call("TypeError        Traceback (most recent call last)\nx")) == (
        "# TypeError: unsupported operand")
    # a call the checks refused did not run: the failure before it is the one to resume
    refused = {"id": "c2", "type": "function", "function": {"name": "python",
                                                            "arguments": json.dumps({"code": FAILED})}}
    messages = [*_failed_call(FAILED, TRACEBACK), {"role": "assistant", "content": None, "tool_calls": [refused]},
                {"role": "tool", "tool_call_id": "c2", "content": "Not run: this is the same call that already failed"}]
    assert retry_start(messages) == retry_start(_failed_call(FAILED, TRACEBACK))
    # bounded: an error of any length is one comment line of at most 300 characters
    long = retry_start(_failed_call("print(1)", "[error] ValueError: " + "x" * 10_000 + "\nmore"))
    assert long is not None and long.startswith("print(1)\n# ValueError: x")
    comment = long.split("\n")[1]
    assert len(long.split("\n")) == 2 and len(comment) <= 302 and comment.endswith("…")


def test_every_program_can_follow_its_retry_start() -> None:
    for program in ALL:
        for error in ("[error] ValueError: bad 'value'", "[error] E: x (<agent-code-1>, line 2)"):
            start = retry_start(_failed_call(program, error))
            if start is None:
                continue
            grammar = GbnfMatcher(tools_grammar(TOOLS, fenced=True, retry_line=start))
            rest = "\n".join(program.splitlines()[len(start.splitlines()) - 1:])
            assert grammar.matches("root", fence(start + "\n" + rest)), program


async def _replay(text: str) -> AssistantMessage:
    partial = AssistantMessage(content=[], stop_reason="pending")

    async def inner():
        yield StartEvent(partial=partial)
        for i in range(0, len(text), 5):
            yield TextDeltaEvent(content_index=0, delta=text[i:i + 5], partial=partial)
        yield DoneEvent(reason="stop", message=partial.model_copy(update={"stop_reason": "stop"}))

    tool = Tool(name="python", description="run", parameters=PYTHON)
    events = [e async for e in TextToolCallStream([tool], fenced=True).convert(inner())]
    return events[-1].message


async def test_a_reply_without_a_block_is_the_answer() -> None:
    message = await _replay("The answer is 3.\n@n[3]")
    assert message.stop_reason == "stop" and [c.text for c in message.content] == ["The answer is 3.\n@n[3]"]


async def test_every_program_reaches_the_call_unchanged(fake, monkeypatch, tmp_path):  # noqa: F811
    """Through llama-server's wire (the fake serves the reply in pieces): the call's code is the
    program, and the grammar the request carried admits the reply."""
    monkeypatch.setattr(provider, "PACKAGED_MODELS", {**provider.PACKAGED_MODELS, fake.model_id: None})
    monkeypatch.setenv("PI_NOTEBOOK_LOCAL_TOOLCALLS", "grammar")
    monkeypatch.setenv("PI_NOTEBOOK_LOCAL_CODE", "fenced")
    chunks_file = tmp_path / "chunks.json"
    monkeypatch.setenv("FAKE_LLAMA_CHUNKS_FILE", str(chunks_file))
    tool = Tool(name="python", description="Run Python code in the notebook.", parameters=PYTHON)
    for program in ALL:
        reply = fence(program)
        chunks_file.write_text(json.dumps([reply[i:i + 7] for i in range(0, len(reply), 7)]))
        message = await complete(fake.model, Context(system_prompt="Run code.",
                                                     messages=[UserMessage(content="run the step")], tools=[tool]))
        calls = [c for c in message.content if c.type == "toolCall"]
        assert [(c.name, c.arguments) for c in calls] == [("python", {"code": program})], (program, message)
        assert message.stop_reason == "toolUse"
        body = fake.requests()[-1]["body"]
        assert "tools" not in body
        assert GbnfMatcher(body["grammar"]).matches("root", reply), program


async def test_a_block_holding_only_the_answer_form_is_the_answer() -> None:
    # measured on the 1.5B: after an output that showed @top_hotel[Alder], it wrapped the
    # answer in a block like the call before it; as a call that is a SyntaxError, then refusals
    message = await _replay("```python\n@top_hotel[Alder] @nights_std[2.87]\n```")
    assert message.stop_reason == "stop"
    assert [(c.type, getattr(c, "text", None)) for c in message.content] == [
        ("text", "@top_hotel[Alder] @nights_std[2.87]")]
    # with a comment after it (measured: "@mean_price[101.13]  # The average price of the stays is ...")
    message = await _replay("```python\n@mean_price[101.13]  # The average price\n```")
    assert [c.type for c in message.content] == ["text"]
    # a decorator is Python: that block is the call
    code = "import functools\n@functools.cache\ndef f():\n    return 1\nprint(f())"
    message = await _replay(fence("@functools.cache\ndef f():\n    return 1"))
    assert [c.type for c in message.content] == ["toolCall"]
    message = await _replay(fence(code))
    assert [c.arguments for c in message.content if c.type == "toolCall"] == [{"code": code}]


@pytest.mark.parametrize("form", ["json", "fenced"])
def test_after_the_checks_ask_for_the_form_the_answer_ends_in_it(monkeypatch, form: str) -> None:
    from pi_notebook.local.checks import format_correction

    monkeypatch.setenv("PI_NOTEBOOK_LOCAL_CODE", form)
    request = "Which month brought in the most? Answer @top_month[YYYY-MM] and @total[value]."
    check = format_correction(request, "It was July 2025.")
    assert check is not None
    call = {"id": "c1", "type": "function", "function": {"name": "python",
                                                         "arguments": json.dumps({"code": "print(top)"})}}
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": request},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "2025-07 1204.5"},
                {"role": "assistant", "content": "It was July 2025."}, {"role": "user", "content": check}]
    grammar = GbnfMatcher(shape_request({"messages": messages, "tools": TOOLS}, mode="grammar")["grammar"])
    assert grammar.matches("root", "The month was 2025-07.\n@top_month[2025-07] @total[1204.5]")
    assert grammar.matches("root", "@top_month[2025-07] @total[1204.5]")
    assert not grammar.matches("root", "It was July 2025.")  # the answer the check corrected
    assert not grammar.matches("root", "@total[1204.5] @top_month[2025-07]")  # in the order asked
    # a call is still allowed (to show a value no output shows yet), not required
    block = fence("print(top)") if form == "fenced" else json.dumps({"name": "python", "arguments": {"code": "print(top)"}})
    assert grammar.matches("root", block)
    # a check of the answer's values may be answered in prose too, with no tags required
    messages[-1] = {"role": "user", "content": "Check: no output shows \"July\". State only values the output shows."}
    values = GbnfMatcher(shape_request({"messages": messages, "tools": TOOLS}, mode="grammar")["grammar"])
    assert values.matches("root", "The month was 2025-07.") and values.matches("root", block)
    # a check that something the request asked for is missing needs a call to make it
    messages[-1] = {"role": "user", "content": "Check: `top_month` does not exist. Make it."}
    outcome = GbnfMatcher(shape_request({"messages": messages, "tools": TOOLS}, mode="grammar")["grammar"])
    assert not outcome.matches("root", "The month was 2025-07.") and outcome.matches("root", block)


def test_the_comment_is_the_errors_own_line_not_an_output_before_it() -> None:
    error = ("[display 1: image 1 attached (552x433)]\n\n[stdout]\nok\n\n[error] NameError: name 'plt' is "
             "not defined\n\n---\nFile <agent-code-5>:2\n----> 2 plt.show()")
    start = retry_start(_failed_call("df.plot()\nplt.show()", error))
    assert start == "df.plot()\n# failed: plt.show()\n# NameError: name 'plt' is not defined"
