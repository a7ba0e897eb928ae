"""Cutting a reply that has fallen into a loop (the embedded models' degenerate repetition).

A small model decoding greedily can lock into repeating one stretch of text, a table row or
a sentence, until the output limit: on the 2-core machine that is 2,048 tokens, 1.5 minutes
of the 0.5B and about 4 of the 1.5B, for a reply nobody can use (`docs/design/local-model.md`,
"A reply caught in a loop is cut"). Sampling penalties (llama.cpp's repeat/DRY samplers) would
also bend the code the model writes, where repeating a name is right; so the loop is caught in
the stream instead.

The check is on the text itself, not on phrasings: the reply's tail is one block of at most
``MAX_PERIOD`` characters repeated back to back, at least ``MIN_REPEATS`` times and over at
least ``MIN_SPAN`` characters, and the block holds a letter or a digit (a ruler of dashes or
a run of blank lines is layout, not a loop). The reply keeps the text before the
loop and one copy of the block, and ends with stop reason ``length`` and a note saying why.
Its usage is the stream's own count (:class:`StreamTally`): the server's arrives only in the
last chunk, which a stopped request never sends.

A tool call streams the same way and loops the same way (the model writes one line of code
over and over inside the call's JSON, or inside a fenced block, which streams as the python
call: ``fenced.py``). Its code so far (the ``code`` argument, else its longest text argument,
as the stream's partial message holds it) is checked by the same rule at the same cadence.
A call caught in a loop was never finished, so it is not run: the message ends without it
(the text before it stays), stop reason ``length``, with :data:`CODE_LOOP_NOTE`; the
transcript keeps no call without a result.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..ai.abort import AbortController
from ..ai.models import calculate_cost
from ..ai.types import (
    AssistantMessageEvent,
    DoneEvent,
    Model,
    PromptProgress,
    TextContent,
    TextEndEvent,
    ToolCall,
    Usage,
    usage_total_tokens,
)

__all__ = ["MAX_PERIOD", "MIN_REPEATS", "MIN_SPAN", "loop_start", "cut_loops", "CODE_LOOP_NOTE", "LOOP_NOTE",
           "StreamTally"]

MAX_PERIOD = 256  # the longest repeated block looked for (characters)
MIN_REPEATS = 4  # copies back to back before it counts as a loop
MIN_SPAN = 120  # characters the copies cover together (short runs such as "0\n0\n0\n" are data)
CHECK_EVERY = 16  # characters of new text between two checks
# the most text one check reads: the copies of the longest block, or of a short one over MIN_SPAN
WINDOW = max(MAX_PERIOD * MIN_REPEATS, MIN_SPAN + MAX_PERIOD)
_KEY = 8  # the tail's characters searched for to find a period (shorter periods: each tested)

LOOP_NOTE = ("The reply was cut off: the model kept repeating the same text ({copies} copies), "
             "so it was stopped early; the repeats are left out.")
CODE_LOOP_NOTE = ("The reply was cut off: the model kept repeating the same code ({copies} copies) "
                  "in a tool call, so it was stopped early; the unfinished call was not run.")


def _needed(period: int) -> int:
    """Copies of a block of ``period`` characters that make a loop."""
    return max(MIN_REPEATS, -(-MIN_SPAN // period))


def loop_start(text: str) -> tuple[int, int] | None:
    """``(end of the first copy, copies)`` when ``text`` ends in a loop, else None.

    The shortest period wins, so a loop of a two-line block is found as that block rather
    than as two copies of a longer one. A check reads at most :data:`WINDOW` characters of the
    tail whatever the text's length (it runs every few deltas), and it looks only at the
    periods a loop could have: the text's last :data:`_KEY` characters occur again that far
    back (found by ``str.rfind``, in C), so ordinary text costs a search or two, not a test
    of every period."""
    size = len(text)
    for period in range(1, min(_KEY, size // MIN_REPEATS + 1)):
        found = _loop_of(text, size, period)
        if found is not None:
            return found
    if size < 2 * _KEY:
        return None
    key = text[size - _KEY:]
    low = max(0, size - _KEY - MAX_PERIOD)
    end = size - _KEY  # an earlier copy of the key ends here at the latest (period >= _KEY)
    while True:
        at = text.rfind(key, low, end)
        if at < 0:
            return None
        found = _loop_of(text, size, size - _KEY - at)
        if found is not None:
            return found
        end = at + _KEY - 1


def _loop_of(text: str, size: int, period: int) -> tuple[int, int] | None:
    """:func:`loop_start` for one period: its copies back to back at the tail are the tail
    equal to itself shifted by ``period``."""
    copies = _needed(period)
    span = copies * period
    if span > size:
        return None
    start = size - span
    if text[start + period:] != text[start:size - period]:
        return None
    if not any(ch.isalnum() for ch in text[size - period:]):
        return None  # a ruler of dashes or a run of blank lines is layout
    # how far back the loop goes: read once, when the loop is cut
    while start - period >= 0 and text[start - period:start] == text[start:start + period]:
        start -= period
        copies += 1
    return size - (copies - 1) * period, copies


class StreamTally:
    """What the server has done for a request so far, for a reply cut before the server's
    own usage arrives (it comes in the last chunk, which a cut request never sends).

    ``output``: the content deltas the server streamed, counted before any rewriting of the
    stream; llama-server sends one chunk per generated token, so this is the tokens produced
    (a token held back as half a character comes with the next one: a count at most a few
    low). ``prompt``/``cache``: the prompt's tokens and those reused from the server's cache,
    from its last ``prompt_progress`` (the ``on_progress`` stream option)."""

    def __init__(self) -> None:
        self.output = 0
        self.prompt = 0
        self.cache = 0

    def on_progress(self, progress: PromptProgress) -> None:
        self.prompt, self.cache = progress.total, progress.cache

    async def watch(self, events: AsyncIterator[AssistantMessageEvent]
                    ) -> AsyncIterator[AssistantMessageEvent]:
        async for event in events:
            if event.type in ("text_delta", "thinking_delta", "toolcall_delta"):
                self.output += 1
            yield event

    def fill(self, usage: Usage, model: Model | None = None) -> None:
        """Counts the server has not reported yet (or reported only in part, mid-stream) are
        taken from the tally."""
        usage.output = max(usage.output, self.output)
        if self.prompt > usage.input + usage.cache_read + usage.cache_write:
            usage.cache_read = min(self.cache, self.prompt)
            usage.input = self.prompt - usage.cache_read
            usage.cache_write = 0
        usage.total_tokens = 0
        usage.total_tokens = usage_total_tokens(usage)
        if model is not None:
            calculate_cost(model, usage)


def _call_text(block: object) -> str:
    """The text of a streaming call that can loop: its ``code``, else its longest text argument."""
    if not isinstance(block, ToolCall):
        return ""
    code = block.arguments.get("code")
    if isinstance(code, str):
        return code
    return max((v for v in block.arguments.values() if isinstance(v, str)), key=len, default="")


async def cut_loops(events: AsyncIterator[AssistantMessageEvent], inner: AbortController,
                    tally: StreamTally | None = None, model: Model | None = None,
                    ) -> AsyncIterator[AssistantMessageEvent]:
    """``events`` until a text block or a tool call's code ends in a loop; then the message is
    done (``length``, with :data:`LOOP_NOTE` or :data:`CODE_LOOP_NOTE` as its
    ``error_message``, its usage completed from ``tally``): a text block is closed with the
    text before the repeats, a tool call is left out with everything after it. The request is
    aborted through ``inner`` (its remaining events are read and dropped, so the request's own
    clean-up runs)."""
    checked: dict[int, int] = {}
    cut = False
    async for event in events:
        if cut:
            continue  # draining the aborted request
        if event.type == "text_delta" or event.type == "toolcall_delta":
            index = event.content_index
            # the stream's partial message holds the block so far (text appended in place,
            # a call's arguments parsed again as they grow)
            live = event.partial.content[index] if index < len(event.partial.content) else None
            is_call = event.type == "toolcall_delta"
            text = _call_text(live) if is_call else live.text if isinstance(live, TextContent) else ""
            grown = len(text) - checked.get(index, 0)
            if grown < CHECK_EVERY and (grown <= 0 or "\n" not in text[len(text) - grown:]):
                yield event
                continue
            checked[index] = len(text)
            found = loop_start(text)
            if found is not None:
                yield event
                end, copies = found
                # a copy: the aborted request goes on writing its own message (stop reason
                # "aborted") while it is drained, and this one has been handed on as final
                message = event.partial.model_copy(deep=True)
                if is_call:
                    del message.content[index:]  # never finished: not run, not in the transcript
                    note = CODE_LOOP_NOTE
                else:
                    kept = text[:end].rstrip()
                    del message.content[index + 1:]
                    block = message.content[index] if index < len(message.content) else None
                    if isinstance(block, TextContent):
                        block.text = kept
                    yield TextEndEvent(content_index=index, content=kept, partial=message)
                    note = LOOP_NOTE
                if tally is not None:
                    tally.fill(message.usage, model)
                message.stop_reason = "length"
                message.error_message = note.format(copies=copies)
                yield DoneEvent(reason="length", message=message)
                cut = True
                inner.abort()
                continue
        yield event
