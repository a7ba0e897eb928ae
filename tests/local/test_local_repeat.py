"""local_repeat: a reply that has fallen into a loop is found by its text and cut.

The end-to-end case (a real HTTP stream from a fake llama-server, the request stopped early)
is in test_shared_server.py; here the detector itself and the event rewrite."""

from __future__ import annotations

import pytest

from pi_notebook.ai.abort import AbortController
from pi_notebook.local.repeat import MIN_REPEATS, MIN_SPAN, WINDOW, StreamTally, cut_loops, loop_start
from pi_notebook.ai.types import (
    AssistantMessage,
    DoneEvent,
    PromptProgress,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    Usage,
)

ROW = "| Stool| Stool| 93.0 |\n"


@pytest.mark.parametrize("text, kept", [
    ("The pivot table is:\n\n" + ROW * 12, "The pivot table is:\n\n" + ROW),
    # a sentence repeated without line breaks
    ("Answer: " + "The total is 42. " * 20, "Answer: The total is 42. "),
    # a two-line block: found as that block, not as one line
    ("x\n" + "a = 1\nb = 2\n" * 30, "x\na = 1\nb = 2\n"),
    # the tail stops mid-copy: still the loop (the block is a rotation)
    ("Top: " + "Widget, Gizmo, " * 20 + "Wid", "Top: Widget, Gizmo, Wid"),
])
def test_a_loop_is_found_and_one_copy_kept(text, kept):
    found = loop_start(text)
    assert found is not None
    end, copies = found
    assert text[:end] == kept
    assert copies >= MIN_REPEATS


@pytest.mark.parametrize("text", [
    "",
    "The total revenue of the south region is 1343.1.",
    # a table with different rows, however alike
    "| city | n |\n|---|---|\n" + "".join(f"| Bath | {n} |\n" for n in range(60)),
    # layout, not a loop: a ruler, blank lines, spaces
    "Results\n" + "-" * 400 + "\n",
    "a\n" + "\n" * 300 + "b",
    "x" + " " * 500,
    # short data that repeats: fewer characters than MIN_SPAN
    "values: " + "0\n" * 30,
    # three copies of a long block: fewer than MIN_REPEATS
    "start " + ("This sentence is long enough to cover the span on its own. " * 3),
    # a list of numbers, and one of small numbers in a column
    "Numbers: " + ", ".join(str(n) for n in range(400)),
    "".join(f"{n * 37 % 101 % 10}\n" for n in range(200)),
    # code with similar lines, and a short line written several times in a row
    "".join(f"df['c{n}'] = df['c{n}'].fillna(0)\n" for n in range(30)),
    "for part in parts:\n" + "    print('-' * 20)\n" * 3 + "    print(part)\n",
    # a table of similar rows: the same values, one column counting
    "| id | month | n |\n|---|---|---|\n" + "".join(f"| {n} | 2025-01 | 7 |\n" for n in range(60)),
    # a table whose rows are the same, a few times (duplicated data shown as it is)
    "| a | b |\n|---|---|\n" + "| x | 1 |\n" * 8,
])
def test_text_without_a_loop_is_left_alone(text):
    assert loop_start(text) is None


@pytest.mark.parametrize("unit", [
    # the 1.5B's repeated "month" after df.info(): a short unit
    "'2025-013d23de11bd', ",
    # two names in turn: the loop's block is the pair (old rule: 10 pairs, 20 names)
    "'2025-013d23de11bd', '2025-013d23de11bd',\n",
    "| Stool| Stool| 93.0 |\n",
    # a long unit: a paragraph of about 200 characters
    ("The dataset has 1,000 rows and 12 columns; the numeric columns are price, quantity and "
     "total, and the month column holds strings that should be parsed as dates before use. "),
])
def test_a_loop_is_cut_after_a_few_copies(unit):
    needed = max(MIN_REPEATS, -(-MIN_SPAN // len(unit)))
    assert needed <= 6
    assert loop_start("Summary of df:\n" + unit * (needed - 1)) is None  # one copy fewer
    text = "Summary of df:\n" + unit * needed
    found = loop_start(text)
    assert found is not None and found[1] == needed
    assert text[:found[0]] == "Summary of df:\n" + unit


def test_a_check_reads_a_bounded_tail_whatever_the_text_before():
    # the loop is judged on at most WINDOW characters: text before them changes nothing
    tail = "Answer: " + "The total is 42. " * 8
    for before in ("", "x" * 10, "".join(f"line {n}\n" for n in range(5000))):
        found = loop_start(before + tail)
        assert found is not None
        assert (before + tail)[:found[0]] == before + "Answer: The total is 42. "
    no_loop = "".join(f"row {n}: {n * 7 % 13}\n" for n in range(20000))
    assert loop_start(no_loop) is None
    assert WINDOW <= 1024


def test_the_span_bound_is_what_separates_data_from_a_loop():
    assert loop_start("v: " + "0\n" * (MIN_SPAN // 2 - 1)) is None
    assert loop_start("v: " + "0\n" * (MIN_SPAN // 2 + 1)) is not None


async def _events(chunks: list[str]):
    message = AssistantMessage(content=[], api="openai-completions", provider="local", model="m",
                               usage=Usage(), stop_reason="stop")
    yield StartEvent(partial=message)
    message.content.append(TextContent(text=""))
    yield TextStartEvent(content_index=0, partial=message)
    for chunk in chunks:
        message.content[0].text += chunk
        yield TextDeltaEvent(content_index=0, delta=chunk, partial=message)
    yield TextEndEvent(content_index=0, content=message.content[0].text, partial=message)
    yield DoneEvent(reason="stop", message=message)


async def test_the_stream_ends_at_the_loop_with_length_and_a_note():
    inner = AbortController()
    events = [e async for e in cut_loops(_events(["Here:\n", *[ROW] * 200]), inner)]
    assert inner.signal.aborted
    assert [e.type for e in events[-2:]] == ["text_end", "done"]
    end, done = events[-2], events[-1]
    assert end.content == "Here:\n" + ROW.rstrip()
    assert done.reason == "length" and done.message.stop_reason == "length"
    assert done.message.content[0].text == end.content
    assert "repeating the same text" in (done.message.error_message or "")
    deltas = [e for e in events if e.type == "text_delta"]
    assert len(deltas) < 30  # stopped near MIN_SPAN, not at the 200th copy
    # the final message is a copy: the aborted request writing on its own does not change it
    first_partial = deltas[0].partial
    first_partial.stop_reason = "aborted"
    assert done.message.stop_reason == "length"


async def test_a_stream_without_a_loop_passes_through_unchanged():
    inner = AbortController()
    chunks = ["The", " total", " is", " 1343.1", "."]
    events = [e async for e in cut_loops(_events(chunks), inner)]
    assert not inner.signal.aborted
    assert [e.type for e in events] == ["start", "text_start", *["text_delta"] * 5, "text_end", "done"]
    assert events[-1].message.content[0].text == "The total is 1343.1."


async def test_a_cut_reply_carries_the_tokens_streamed_and_the_prompt_read():
    # the server's usage comes in its last chunk, which a cut request never sends
    inner = AbortController()
    tally = StreamTally()
    tally.on_progress(PromptProgress(total=792, cache=500, processed=792, time_ms=90))
    unit = "'2025-013d23de11bd', "
    chunks = ["Months: ", *[unit] * 300]
    events = [e async for e in cut_loops(tally.watch(_events(chunks)), inner, tally)]
    done = events[-1]
    assert done.type == "done" and done.reason == "length"
    streamed = len([e for e in events if e.type == "text_delta"])
    assert streamed < 10  # a few copies, not 22 or 300
    usage = done.message.usage
    assert usage.output == streamed  # the tally goes on counting the drained rest
    assert (usage.input, usage.cache_read) == (292, 500)
    assert usage.total_tokens == 792 + streamed


async def test_usage_the_server_sent_is_kept_when_larger():
    inner = AbortController()
    tally = StreamTally()
    message_usage = Usage(input=900, output=50, total_tokens=950)

    async def events():
        async for event in _events(["Here:\n", *[ROW] * 50]):
            if event.type == "start":
                event.partial.usage = message_usage
            yield event

    tally.on_progress(PromptProgress(total=792, cache=0, processed=792, time_ms=90))
    out = [e async for e in cut_loops(tally.watch(events()), inner, tally)]
    usage = out[-1].message.usage
    assert (usage.input, usage.output, usage.total_tokens) == (900, 50, 950)


def _loop_start_by_every_period(text: str):
    """The rule written out plainly (every period tested in turn), to check the fast search."""
    from pi_notebook.local.repeat import MAX_PERIOD
    size = len(text)
    for period in range(1, MAX_PERIOD + 1):
        copies = max(MIN_REPEATS, -(-MIN_SPAN // period))
        if copies * period > size:
            continue
        block = text[size - period:]
        if text[size - copies * period:] != block * copies or not any(c.isalnum() for c in block):
            continue
        while (copies + 1) * period <= size and text[size - (copies + 1) * period:size - copies * period] == block:
            copies += 1
        return size - (copies - 1) * period, copies
    return None


def test_the_search_finds_what_testing_every_period_finds():
    import random
    rng = random.Random(26)
    for _ in range(400):
        alphabet = rng.choice(["ab", "ab \n", "abc12 ,\n", "xyz-|"])
        prefix = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60)))
        unit = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 300)))
        text = prefix + unit * rng.randrange(1, 8) + unit[:rng.randrange(0, len(unit) + 1)]
        for cut in (len(text), len(text) - 1, len(text) // 2):
            assert loop_start(text[:cut]) == _loop_start_by_every_period(text[:cut]), text[:cut]


# --- a loop inside a streamed tool call's code ---------------------------------------------------

PYTHON_TOOL = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
LOOP_LINE = "df['total'] = df['total'].fillna(0)\n"  # the line the model writes over and over
CODE_HEAD = "import pandas as pd\ndf = pd.read_csv('sales.csv')\n"


def _json_call(code: str) -> str:
    import json

    return json.dumps({"name": "python", "arguments": {"code": code}})


def _fenced_call(code: str) -> str:
    return f"```python\n{code}```\n"


async def _through_the_local_stream(reply: str, *, fenced: bool, tally: StreamTally | None = None):
    """``reply`` as llama-server streams it (a few characters a delta) through the local
    provider's own stages: the text-to-call converter, then the loop cut."""
    from pi_notebook.ai.types import ErrorEvent, Tool
    from pi_notebook.local.tool_calls import TextToolCallStream

    partial = AssistantMessage(content=[], api="openai-completions", provider="local", model="m",
                               usage=Usage(), stop_reason="stop")

    inner_abort = AbortController()

    async def inner():
        yield StartEvent(partial=partial)
        for i in range(0, len(reply), 5):
            if inner_abort.signal.aborted:  # the request stopped: the server sends no more
                yield ErrorEvent(reason="aborted", error=partial.model_copy(update={"stop_reason": "aborted"}))
                return
            yield TextDeltaEvent(content_index=0, delta=reply[i:i + 5], partial=partial)
        yield DoneEvent(reason="stop", message=partial.model_copy(update={"stop_reason": "stop"}))

    tool = Tool(name="python", description="Run Python code in the notebook.", parameters=PYTHON_TOOL)
    events = inner() if tally is None else tally.watch(inner())
    converted = TextToolCallStream([tool], fenced=fenced).convert(events)
    out, streamed = [], ""
    async for event in cut_loops(converted, inner_abort, tally):
        out.append(event)
        if event.type == "toolcall_delta":  # the code as it stood when this delta was handed on
            streamed = event.partial.content[event.content_index].arguments.get("code", "")
    return out, inner_abort, streamed


@pytest.mark.parametrize("wrap, fenced", [(_json_call, False), (_fenced_call, True)], ids=["json", "fenced"])
async def test_a_call_whose_code_loops_is_cut_and_never_run(wrap, fenced):
    from pi_notebook.ai.types import ToolCall

    tally = StreamTally()
    events, inner, streamed = await _through_the_local_stream(wrap(CODE_HEAD + LOOP_LINE * 2000),
                                                              fenced=fenced, tally=tally)
    assert inner.signal.aborted
    done = events[-1]
    assert done.type == "done" and done.reason == "length" and done.message.stop_reason == "length"
    # the unfinished call is not in the final message: nothing to run, no call without a result
    assert not any(isinstance(b, ToolCall) for b in done.message.content)
    assert "repeating the same code" in done.message.error_message
    from pi_notebook.local.repeat import CODE_LOOP_NOTE

    assert done.message.error_message == CODE_LOOP_NOTE.format(copies=MIN_REPEATS)
    # cut after a few copies of the line (5 are needed, one check later at most), not 2,000
    assert streamed.count(LOOP_LINE) <= MIN_REPEATS + 2 and streamed.startswith(CODE_HEAD)
    assert done.message.usage.output == tally.output  # completed from the stream's own count


LEGITIMATE_CODE = {
    "a 60-line dict literal with a counting key": "rows = {\n" + "".join(
        f"    'row_{n}': {{'id': {n}, 'region': 'north', 'open': True}},\n" for n in range(60)) + "}\n",
    "400 numbers in a list": "values = [" + ", ".join(str(n) for n in range(400)) + "]\nsum(values)\n",
    "similar lines with different names": "".join(
        f"df['{name}_clean'] = df['{name}'].astype(str).str.strip().str.lower()\n"
        for name in ("region", "city", "country", "product", "category", "channel", "segment",
                     "customer", "supplier", "warehouse", "brand", "colour", "size", "store")),
}


@pytest.mark.parametrize("name", LEGITIMATE_CODE)
@pytest.mark.parametrize("wrap, fenced", [(_json_call, False), (_fenced_call, True)], ids=["json", "fenced"])
async def test_code_that_repeats_legitimately_is_not_cut(name, wrap, fenced):
    code = LEGITIMATE_CODE[name]
    events, inner, _ = await _through_the_local_stream(wrap(code), fenced=fenced)
    assert not inner.signal.aborted, name
    done = events[-1]
    assert done.reason == "toolUse" and done.message.error_message is None
    # (a fenced block's code ends at its last line: no final line break)
    assert [b.arguments["code"].rstrip("\n") for b in done.message.content if b.type == "toolCall"] == [
        code.rstrip("\n")]


async def test_a_looping_text_argument_of_another_tool_is_cut_too():
    """Without a ``code`` argument, the call's longest text argument is the one checked; the
    text before the call stays in the final message."""
    from pi_notebook.ai.types import ToolCall, ToolCallDeltaEvent, ToolCallStartEvent

    async def events():
        message = AssistantMessage(content=[TextContent(text="Querying.")], api="x", provider="local",
                                   model="m", usage=Usage(), stop_reason="stop")
        yield StartEvent(partial=message)
        call = ToolCall(id="q", name="warehouse__query", arguments={"limit": 5, "sql": ""})
        message.content.append(call)
        yield ToolCallStartEvent(content_index=1, partial=message)
        for _ in range(400):
            piece = "SELECT region FROM sales;\n"
            call.arguments = {"limit": 5, "sql": call.arguments["sql"] + piece}
            yield ToolCallDeltaEvent(content_index=1, delta=piece, partial=message)
        yield DoneEvent(reason="toolUse", message=message)

    inner = AbortController()
    out = [e async for e in cut_loops(events(), inner)]
    done = out[-1]
    assert inner.signal.aborted and done.reason == "length"
    assert [b.type for b in done.message.content] == ["text"] and done.message.content[0].text == "Querying."
    assert len([e for e in out if e.type == "toolcall_delta"]) <= 6
