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
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..ai.abort import AbortController
from ..ai.types import AssistantMessageEvent, DoneEvent, TextContent, TextEndEvent

__all__ = ["MAX_PERIOD", "MIN_REPEATS", "MIN_SPAN", "loop_start", "cut_loops", "LOOP_NOTE"]

MAX_PERIOD = 256  # the longest repeated block looked for (characters)
MIN_REPEATS = 10  # copies back to back before it counts as a loop
MIN_SPAN = 240  # characters the copies cover together (short runs such as "0\n0\n0\n" are data)
CHECK_EVERY = 32  # characters of new text between two checks

LOOP_NOTE = ("The reply was cut off: the model kept repeating the same text ({copies} copies), "
             "so it was stopped early; the repeats are left out.")


def loop_start(text: str) -> tuple[int, int] | None:
    """``(end of the first copy, copies)`` when ``text`` ends in a loop, else None.

    The shortest period wins, so a loop of a two-line block is found as that block rather
    than as two copies of a longer one."""
    size = len(text)
    for period in range(1, min(MAX_PERIOD, size // MIN_REPEATS) + 1):
        block = text[size - period:]
        copies = max(MIN_REPEATS, -(-MIN_SPAN // period))
        if copies * period > size or not text.endswith(block * copies):
            continue
        if not any(ch.isalnum() for ch in block):
            continue
        while (copies + 1) * period <= size and text[size - (copies + 1) * period:size - copies * period] == block:
            copies += 1
        return size - (copies - 1) * period, copies
    return None


async def cut_loops(events: AsyncIterator[AssistantMessageEvent], inner: AbortController
                    ) -> AsyncIterator[AssistantMessageEvent]:
    """``events`` until a text block ends in a loop; then that block is closed with the text
    before the repeats, the message is done (``length``, with :data:`LOOP_NOTE` as its
    ``error_message``), and the request is aborted through ``inner`` (its remaining events are
    read and dropped, so the request's own clean-up runs)."""
    checked: dict[int, int] = {}
    cut = False
    async for event in events:
        if cut:
            continue  # draining the aborted request
        if event.type == "text_delta":
            index = event.content_index
            # the stream's partial message holds the block's text so far (appended in place)
            live = event.partial.content[index] if index < len(event.partial.content) else None
            text = live.text if isinstance(live, TextContent) else ""
            if len(text) - checked.get(index, 0) < CHECK_EVERY and "\n" not in event.delta:
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
                kept = text[:end].rstrip()
                del message.content[index + 1:]
                block = message.content[index] if index < len(message.content) else None
                if isinstance(block, TextContent):
                    block.text = kept
                yield TextEndEvent(content_index=index, content=kept, partial=message)
                message.stop_reason = "length"
                message.error_message = LOOP_NOTE.format(copies=copies)
                yield DoneEvent(reason="length", message=message)
                cut = True
                inner.abort()
                continue
        yield event
