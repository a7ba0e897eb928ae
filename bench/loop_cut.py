"""Work per delta of the loop check (``local/repeat.py``) on a reply without a loop.

A reply of table rows and prose is streamed delta by delta into ``loop_start`` at the
cadence ``cut_loops`` checks it (every ``CHECK_EVERY`` characters or at a line break). In
one run it times

* ``loop_start``: the search for the periods a loop could have;
* the rule written out: every period up to ``MAX_PERIOD`` tested with its copies built
  (what the search replaces, and what the tests check it against);

for 2,048 and 8,192 deltas. It prints microseconds a delta and the search's time over the
rule's (lower is better); then one check of the whole 8k reply over one of the whole 2k
reply (about 1: the check's work does not grow with the reply); then a tool call: a JSON
call of about 2,000 deltas whose code has no loop, through the local provider's converter with
the loop check after it over the converter alone (the check's share of a streamed call).

    PYTHONPATH=. python bench/loop_cut.py
"""

from __future__ import annotations

import time
import timeit
from collections.abc import AsyncIterator, Callable

import asyncio
import json

from pi_notebook.ai.abort import AbortController
from pi_notebook.ai.types import AssistantMessage, AssistantMessageEvent, DoneEvent, StartEvent, TextDeltaEvent, Tool, Usage
from pi_notebook.local.repeat import CHECK_EVERY, MAX_PERIOD, MIN_REPEATS, MIN_SPAN, cut_loops, loop_start
from pi_notebook.local.tool_calls import TextToolCallStream


def every_period(text: str) -> tuple[int, int] | None:
    size = len(text)
    for period in range(1, min(MAX_PERIOD, size // MIN_REPEATS) + 1):
        copies = max(MIN_REPEATS, -(-MIN_SPAN // period))
        block = text[size - period:]
        if copies * period <= size and text.endswith(block * copies) and any(c.isalnum() for c in block):
            return size - (copies - 1) * period, copies
    return None


def deltas(count: int) -> list[str]:
    names = ("price", "total", "quantity")
    return [f"| row {n} | {n * 37 % 101} | {names[n % 3]} |\n" if n % 5 == 0 else f" word{n * 7 % 53}"
            for n in range(count)]


def per_delta_us(check: Callable[[str], object], words: list[str]) -> float:
    best = float("inf")
    for _ in range(3):
        text, checked = "", 0
        start = time.perf_counter()
        for word in words:
            text += word
            if len(text) - checked >= CHECK_EVERY or "\n" in word:
                checked = len(text)
                if check(text) is not None:
                    raise SystemExit("the bench text must hold no loop")
        best = min(best, time.perf_counter() - start)
    return best / len(words) * 1e6


def main() -> None:
    results = {}
    for count in (2048, 8192):
        words = deltas(count)
        results[count] = (per_delta_us(loop_start, words), per_delta_us(every_period, words))
        search, rule = results[count]
        print(f"{count:5d} deltas: search {search:6.1f} us/delta, every period {rule:6.1f} us/delta, "
              f"ratio {search / rule:.3f}")
    whole = {count: "".join(deltas(count)) for count in (2048, 8192)}
    one = {count: min(timeit.repeat(lambda t=text: loop_start(t), number=500, repeat=3))
           for count, text in whole.items()}
    print(f"one check, 8k reply / 2k reply: {one[8192] / one[2048]:.2f} (about 1: bounded)")
    call = json.dumps({"name": "python", "arguments": {"code": "".join(deltas(600))}})
    pieces = [call[i:i + 4] for i in range(0, len(call), 4)]
    plain, checked = (best_of_3(pieces, check) for check in (False, True))
    print(f"tool call, {len(pieces)} deltas: converter {plain / len(pieces) * 1e6:6.1f} us/delta, "
          f"with the loop check {checked / len(pieces) * 1e6:6.1f} us/delta, ratio {checked / plain:.3f}")


def best_of_3(pieces: list[str], check: bool) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        asyncio.run(stream_call(pieces, check))
        times.append(time.perf_counter() - start)
    return min(times)


async def stream_call(pieces: list[str], check: bool) -> None:
    partial = AssistantMessage(content=[], api="x", provider="x", model="x", usage=Usage(), stop_reason="stop")

    async def inner() -> AsyncIterator[AssistantMessageEvent]:
        yield StartEvent(partial=partial)
        for piece in pieces:
            yield TextDeltaEvent(content_index=0, delta=piece, partial=partial)
        yield DoneEvent(reason="stop", message=partial)

    tool = Tool(name="python", description="run", parameters={"type": "object", "properties": {"code": {"type": "string"}}})
    events = TextToolCallStream([tool]).convert(inner())
    async for event in (cut_loops(events, AbortController()) if check else events):
        if event.type == "done" and event.reason != "toolUse":
            raise SystemExit("the bench call must hold no loop")


if __name__ == "__main__":
    main()
