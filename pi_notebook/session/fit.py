"""The last word of compaction: whatever is sent fits the budget, or nothing is sent.

``compaction.py`` first drops old tool outputs and summarises old turns; those stages
can fall short (a summary that failed, one tool result larger than the window, a
turn of thousands of calls). The functions here finish the job without asking any
model, in this order (docs/design/sessions.md):

1. ``cut_oversize``: a message larger than its share of the budget is cut, keeping
   its head and tail around a marker (text, thinking, string tool-call arguments;
   images become a note). Tool-call ids stay, so every call keeps its result.
2. ``fit_to_budget``: the oldest whole segments (a run of messages that no tool
   call/result pair crosses) are dropped, with a note the model can read; then the
   largest remaining messages are cut further; if even that cannot fit,
   ``ContextBudgetError`` is raised so that no oversize request is ever sent.

Sizes come from the caller's estimator (``size(message) -> tokens``), so this module
agrees with whatever estimate compaction uses.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..ai.types import TextContent, UserMessage, get_field

__all__ = ["ContextBudgetError", "FitReport", "MESSAGE_OVERHEAD_TOKENS", "CUT_MARKER",
           "DROPPED_MESSAGES_NOTE", "cut_points", "cut_message", "cut_oversize", "fit_to_budget"]

# Each message costs tokens the estimate does not see: role framing, separators and the
# tool-call id a call and its result both carry (ids alone are often ~10 tokens).
MESSAGE_OVERHEAD_TOKENS = 8
CUT_MARKER = "\n[... {chars} chars cut to fit the context window ...]\n"
IMAGE_DROPPED_NOTE = "[image dropped to fit the context window]"
DROPPED_MESSAGES_NOTE = ("[Context note: {count} earlier messages of this conversation were "
                         "dropped to fit the model's context window.]")
_CHARS_PER_TOKEN = 4
_MAX_CUT_ROUNDS = 12
_IMAGE_CHARS = 4800  # what an image is counted as, for the report

Size = Callable[[Any], int]


class ContextBudgetError(ValueError):
    """Even the newest turn, cut to markers, does not fit the budget: not sent."""


@dataclass
class FitReport:
    tokens: int
    dropped_messages: int = 0
    cut_messages: int = 0
    cut_chars: int = 0


# --- pair-safe boundaries ----------------------------------------------------------------------

def cut_points(messages: Sequence[Any], limit: int) -> list[int]:
    """Indices ``i`` in 1..limit where ``messages[:i]`` can be replaced without
    separating any tool call from its result."""
    call_index: dict[str, int] = {}
    blocked = [0] * (len(messages) + 2)
    for i, message in enumerate(messages):
        role = get_field(message, "role")
        if role == "assistant":
            for block in get_field(message, "content") or []:
                if get_field(block, "type") == "toolCall":
                    call_index[get_field(block, "id")] = i
        elif role == "toolResult":
            c = call_index.get(get_field(message, "tool_call_id", "toolCallId"))
            if c is not None and c < i:
                # cutting at any position in (c, i] would split the pair
                blocked[c + 1] += 1
                blocked[i + 1] -= 1
    points = []
    running = 0
    for i in range(len(messages) + 1):
        running += blocked[i]
        if 1 <= i <= limit and running == 0 and (
            i == len(messages) or get_field(messages[i], "role") != "toolResult"
        ):
            points.append(i)
    return points


# --- cutting one message -------------------------------------------------------------------------

def _cut_text(text: str, keep: int) -> tuple[str, int]:
    """``text`` cut to about ``keep`` characters: two thirds head, one third tail."""
    if len(text) <= keep + len(CUT_MARKER) + 8:
        return text, 0
    keep = max(0, keep)
    head = keep * 2 // 3
    tail = keep - head
    removed = len(text) - head - tail
    return text[:head] + CUT_MARKER.format(chars=removed) + (text[-tail:] if tail else ""), removed


def _copy(message: Any, **update: Any) -> Any:
    if hasattr(message, "model_copy"):
        return message.model_copy(update=update)
    return {**message, **update}


def _cut_block(block: Any, keep: int) -> tuple[Any, int]:
    kind = get_field(block, "type")
    if kind in ("text", "thinking"):
        text = get_field(block, kind) or ""
        new, removed = _cut_text(text, keep)
        return (_copy(block, **{kind: new}) if removed else block), removed
    if kind == "toolCall":
        arguments = get_field(block, "arguments") or {}
        if not isinstance(arguments, dict):
            return block, 0
        removed_total = 0
        new_args = {}
        for name, value in arguments.items():
            if isinstance(value, str):
                value, removed = _cut_text(value, keep)
                removed_total += removed
            new_args[name] = value
        return (_copy(block, arguments=new_args) if removed_total else block), removed_total
    return block, 0


def cut_message(message: Any, target: int, size: Size) -> tuple[Any, int]:
    """A copy of ``message`` whose estimate is at most ``target`` tokens where cutting
    its text can get there; returns it and the characters removed."""
    if size(message) <= target:
        return message, 0
    content = get_field(message, "content")
    if isinstance(content, str):
        blocks: list[Any] = [TextContent(text=content)]
        was_str = True
    else:
        blocks = list(content or [])
        was_str = False
    # images first: ~1200 tokens each and nothing to keep a head or tail of
    images = sum(1 for b in blocks if get_field(b, "type") == "image")
    if images:
        blocks = [TextContent(text=IMAGE_DROPPED_NOTE) if get_field(b, "type") == "image" else b
                  for b in blocks]
    lengths = [_block_chars(b) for b in blocks]
    keep = max(lengths, default=0)  # one cap for every block: the longest lose the most
    candidate, removed = _rebuild(message, blocks, was_str), 0
    for _ in range(_MAX_CUT_ROUNDS):
        excess = size(candidate) - target
        if excess <= 0 or keep == 0:
            break
        long_blocks = max(1, sum(1 for n in lengths if n > keep // 2))
        keep = max(0, keep - max(16, excess * _CHARS_PER_TOKEN // long_blocks + 1))
        cut_blocks, removed = [], 0
        for block in blocks:
            new, chars = _cut_block(block, keep)
            cut_blocks.append(new)
            removed += chars
        candidate = _rebuild(message, cut_blocks, was_str)
    if images and candidate is not message:
        removed += images * _IMAGE_CHARS
    return candidate, removed


def _block_chars(block: Any) -> int:
    kind = get_field(block, "type")
    if kind in ("text", "thinking"):
        return len(get_field(block, kind) or "")
    if kind == "toolCall":
        arguments = get_field(block, "arguments") or {}
        if isinstance(arguments, dict):
            return max((len(v) for v in arguments.values() if isinstance(v, str)), default=0)
    return 0


def _rebuild(message: Any, blocks: list[Any], was_str: bool) -> Any:
    if was_str and len(blocks) == 1 and get_field(blocks[0], "type") == "text":
        return _copy(message, content=get_field(blocks[0], "text"))
    return _copy(message, content=blocks)


def cut_oversize(messages: list[Any], cap: int, size: Size) -> tuple[list[Any], int, int]:
    """Every message above ``cap`` tokens cut down to it: (messages, how many, chars)."""
    result = list(messages)
    count = chars = 0
    for i, message in enumerate(result):
        if size(message) > cap:
            result[i], removed = cut_message(message, cap, size)
            if removed:
                count += 1
                chars += removed
    return result, count, chars


# --- the guarantee -------------------------------------------------------------------------------

def _total(messages: Sequence[Any], size: Size) -> int:
    return sum(size(m) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def _add_note(messages: list[Any], dropped: int) -> list[Any]:
    """Tell the model what is missing: in the newest user message (so no two user
    messages follow each other), else as a user message in front."""
    note = DROPPED_MESSAGES_NOTE.format(count=dropped)
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if get_field(message, "role") == "user":
            content = get_field(message, "content")
            blocks = ([TextContent(text=content)] if isinstance(content, str)
                      else list(content or []))
            result = list(messages)
            result[i] = _copy(message, content=[TextContent(text=note), *blocks])
            return result
    return [UserMessage(content=[TextContent(text=note)]), *messages]


def fit_to_budget(messages: list[Any], budget: int, size: Size,
                  describe_budget: str = "") -> tuple[list[Any], FitReport]:
    """``messages`` made to fit ``budget`` tokens (message framing included) by dropping
    the oldest segments, then cutting the largest messages; raises
    ``ContextBudgetError`` when even that is not enough."""
    total = _total(messages, size)
    report = FitReport(tokens=total)
    if total <= budget:
        return messages, report
    result = list(messages)

    # 1. the oldest segments go, except the newest user message's and the last one
    bounds = [0, *cut_points(result, len(result))]
    if bounds[-1] != len(result):
        bounds.append(len(result))
    segments = [(a, b) for a, b in itertools.pairwise(bounds) if b > a]
    last_user = max((i for i, m in enumerate(result) if get_field(m, "role") == "user"),
                    default=-1)
    protected = {len(segments) - 1} | {k for k, (a, b) in enumerate(segments) if a <= last_user < b}
    note_cost = len(DROPPED_MESSAGES_NOTE) // _CHARS_PER_TOKEN + 8 + MESSAGE_OVERHEAD_TOKENS
    dropped: set[int] = set()
    for k, (a, b) in enumerate(segments):
        if total + (note_cost if dropped or k not in protected else 0) <= budget:
            break
        if k in protected:
            continue
        total -= sum(size(m) + MESSAGE_OVERHEAD_TOKENS for m in result[a:b])
        dropped.update(range(a, b))
    if dropped:
        result = [m for i, m in enumerate(result) if i not in dropped]
        result = _add_note(result, len(dropped))
        report.dropped_messages = len(dropped)
        total = _total(result, size)

    # 2. the largest remaining messages are cut, more each round
    rounds = 0
    while total > budget and rounds < 4 * len(result) + 8:
        rounds += 1
        sizes = [size(m) for m in result]
        largest = max(range(len(result)), key=sizes.__getitem__)
        target = max(0, sizes[largest] - (total - budget))
        new, removed = cut_message(result[largest], target, size)
        if not removed:
            break  # nothing left to cut in the largest message
        result[largest] = new
        report.cut_messages += 1
        report.cut_chars += removed
        total = _total(result, size)

    report.tokens = total
    if total > budget:
        raise ContextBudgetError(
            f"the conversation does not fit the model's context window even after compaction: "
            f"~{total} tokens for a budget of {budget}{describe_budget}; nothing was sent. "
            "Start a new conversation (%agent reset) or use a model with a larger window.")
    return result, report
