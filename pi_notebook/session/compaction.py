"""Keep the context inside the model's window: a ``transform_context`` hook.

``make_context_compactor(context_window, ...)`` returns ``async (messages, signal)
-> messages``. When the estimate (ai.options: characters / 4, images ~1200 tokens) exceeds the
budget (window minus ``reserve_tokens`` for the system prompt, tools and the
answer) it shrinks a *copy* of the history, in two stages:

1. Outputs: the content of the oldest tool results is replaced by a short note,
   oldest first, until the estimate fits. The result messages stay, so every
   tool call keeps its result.
2. Summary: if that is not enough, the oldest messages are replaced by one user
   message holding a summary (``summarize(messages) -> str``, async; the default
   is extractive). The summarised range ends only where no tool call is
   separated from its result, and never includes the last user message.

Summaries are cached by the identity of the messages they replace, and a longer
range reuses the summary of its cached prefix, so the model is not asked again
for the same history on every turn.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..ai.options import CHARS_PER_TOKEN, estimate_message_chars, estimate_message_tokens
from ..ai.types import TextContent, ToolResultMessage, UserMessage, get_field

__all__ = ["CompactionInfo", "make_context_compactor", "estimate_message_tokens",
           "estimate_tokens", "extractive_summary", "make_model_summarizer",
           "DROPPED_OUTPUT_NOTE"]

DROPPED_OUTPUT_NOTE = "[output dropped to fit the context window: {chars} chars]"
SUMMARY_PREFIX = "[Summary of {count} earlier messages, condensed to fit the context window]\n\n"
_SUMMARY_CACHE_SIZE = 4  # only the newest summaries are ever extended

Summarizer = Callable[[list[Any]], Awaitable[str]]


@dataclass
class CompactionInfo:
    """What one compaction did (passed to ``on_compaction``)."""

    context_window: int
    budget: int
    tokens_before: int
    tokens_after: int
    dropped_outputs: int = 0
    dropped_chars: int = 0
    summarized_messages: int = 0
    summary: str | None = None
    fits: bool = True

    def describe(self) -> str:
        parts = []
        if self.dropped_outputs:
            parts.append(f"dropped {self.dropped_outputs} old tool output"
                         f"{'s' if self.dropped_outputs != 1 else ''} ({self.dropped_chars} chars)")
        if self.summarized_messages:
            parts.append(f"summarized {self.summarized_messages} earlier messages")
        text = "; ".join(parts) or "nothing to compact"
        text += f": ~{self.tokens_before} -> ~{self.tokens_after} of {self.context_window} tokens"
        if not self.fits:
            text += " (still over budget)"
        return text


# --- estimate --------------------------------------------------------------------------------
#
# The package's one estimate (ai/options.py), so that compaction and the providers' max-tokens
# clamp agree on what fits.

def estimate_tokens(messages: Sequence[Any]) -> int:
    return sum(estimate_message_tokens(m) for m in messages)


# --- default summary -------------------------------------------------------------------------

def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _plain_text(message: Any) -> str:
    content = get_field(message, "content")
    if isinstance(content, str):
        return content
    return " ".join(get_field(b, "text") or "" for b in content or [] if get_field(b, "type") == "text")


async def extractive_summary(messages: list[Any]) -> str:
    """One line per message: who said what (shortened), which tools were called."""
    lines = []
    for message in messages:
        role = get_field(message, "role")
        if role == "user":
            lines.append(f"- user: {_short(_plain_text(message), 300)}")
        elif role == "assistant":
            text = _short(_plain_text(message), 300)
            calls = [
                f"{get_field(b, 'name')}({_short(json.dumps(get_field(b, 'arguments') or {}, default=str), 120)})"
                for b in get_field(message, "content") or [] if get_field(b, "type") == "toolCall"
            ]
            line = f"- assistant: {text}" if text else "- assistant:"
            if calls:
                line += " called " + ", ".join(calls)
            lines.append(line)
        elif role == "toolResult":
            status = "error" if get_field(message, "is_error", "isError") else "result"
            lines.append(f"- {get_field(message, 'tool_name', 'toolName')} {status}: "
                         f"{_short(_plain_text(message), 160)}")
    return "\n".join(lines)


# --- a summary written by the model ------------------------------------------------------------

SUMMARY_SYSTEM_PROMPT = (
    "You condense the early part of a data-analysis conversation between a user and an "
    "assistant that runs Python in a Jupyter kernel, so that the assistant can continue the "
    "work without it. Keep: the user's goals and constraints, decisions made, variables, "
    "data frames, files and functions that now exist in the kernel (with their meaning), "
    "results and numbers that were reported, and open questions. Drop chatter and raw "
    "output. Write terse bullet points, no preamble."
)


def _transcript(messages: list[Any], output_chars: int = 1500) -> str:
    parts = []
    for message in messages:
        role = get_field(message, "role")
        if role == "toolResult":
            text = _plain_text(message)
            if len(text) > output_chars:
                text = text[:output_chars] + f" ... [{len(text) - output_chars} chars cut]"
            parts.append(f"[{get_field(message, 'tool_name', 'toolName')} output]\n{text}")
        elif role == "assistant":
            lines = [_plain_text(message)]
            for block in get_field(message, "content") or []:
                if get_field(block, "type") == "toolCall":
                    args = get_field(block, "arguments") or {}
                    body = args["code"] if isinstance(args.get("code"), str) else json.dumps(args, default=str)
                    lines.append(f"[calls {get_field(block, 'name')}]\n{body}")
            parts.append("[assistant]\n" + "\n".join(line for line in lines if line))
        elif role == "user":
            parts.append(f"[user]\n{_plain_text(message)}")
    return "\n\n".join(parts)


def make_model_summarizer(model: Any, complete_fn: Callable[..., Awaitable[Any]] | None = None,
                          options: Mapping[str, Any] | None = None) -> Summarizer:
    """A ``summarize`` callable that asks ``model`` for the summary.

    ``complete_fn(model, context, options)`` defaults to ``complete_simple``. A failed
    request raises, and the compactor then falls back to the extractive summary.
    """

    async def summarize(messages: list[Any]) -> str:
        from ..ai.stream import complete_simple
        from ..ai.types import Context

        fn = complete_fn or complete_simple
        prompt = ("Summarize this conversation so far:\n\n<conversation>\n"
                  f"{_transcript(messages)}\n</conversation>")
        context = Context(system_prompt=SUMMARY_SYSTEM_PROMPT,
                          messages=[UserMessage(content=prompt)])
        reply = await fn(model, context, dict(options or {}))
        if get_field(reply, "stop_reason") in ("error", "aborted"):
            raise RuntimeError(get_field(reply, "error_message") or "summary request failed")
        text = _plain_text(reply).strip()
        if not text:
            raise RuntimeError("the model returned an empty summary")
        return text

    return summarize


# --- the compactor -----------------------------------------------------------------------------

def _cut_points(messages: Sequence[Any], limit: int) -> list[int]:
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


def make_context_compactor(
    context_window: int,
    summarize: Summarizer | None = None,
    reserve_tokens: int | None = None,
    on_compaction: Callable[[CompactionInfo], Any] | None = None,
    summary_tokens: int | None = None,
) -> Callable[..., Awaitable[list[Any]]]:
    """A ``transform_context`` hook that keeps the estimate within the window.

    ``reserve_tokens`` (default: a quarter of the window, at most 16384) is kept
    free for the system prompt, the tool schemas and the answer; ``summary_tokens``
    (default: an eighth of the budget, at most 2048) caps a summary's size.
    """
    if context_window <= 0:
        raise ValueError("context_window must be positive")
    reserve = reserve_tokens if reserve_tokens is not None else min(16384, context_window // 4)
    budget = context_window - reserve
    if budget <= 0:
        raise ValueError(f"reserve_tokens ({reserve}) leaves no room in a {context_window}-token window")
    summary_cap = summary_tokens if summary_tokens is not None else max(64, min(2048, budget // 8))
    summarizer: Summarizer = summarize or extractive_summary
    # key: ids of the summarised messages; value: (the messages, kept alive so ids
    # stay unique, and the summary text)
    cache: dict[tuple[int, ...], tuple[list[Any], str]] = {}

    async def summarize_range(originals: list[Any], replaced: list[Any]) -> str:
        # keyed on the caller's message objects: stage 1 makes fresh copies every call
        key = tuple(id(m) for m in originals)
        if key in cache:
            return cache[key][1]
        prefix_len = max((len(k) for k in cache if len(k) < len(key) and key[: len(k)] == k),
                         default=0)
        if prefix_len:
            earlier = UserMessage(content=[TextContent(text=cache[key[:prefix_len]][1])])
            to_summarize = [earlier, *replaced[prefix_len:]]
        else:
            to_summarize = list(replaced)
        try:
            text = await summarizer(to_summarize)
        except Exception as exc:  # a failed model call must not fail the turn
            text = (f"(model summary failed: {type(exc).__name__}; extract follows)\n"
                    + await extractive_summary(to_summarize))
        # the whole summary message, prefix included, stays within summary_cap
        limit = summary_cap * CHARS_PER_TOKEN - len(SUMMARY_PREFIX) - 8
        if len(text) > limit:
            text = text[: limit - 20] + "\n[summary cut]"
        cache[key] = (list(originals), text)
        while len(cache) > _SUMMARY_CACHE_SIZE:  # dicts keep insertion order: drop the oldest
            del cache[next(iter(cache))]
        return text

    async def compact(messages: list[Any], signal: Any = None) -> list[Any]:
        tokens_before = estimate_tokens(messages)
        if tokens_before <= budget:
            return messages
        result = list(messages)
        sizes = [estimate_message_tokens(m) for m in result]
        total = tokens_before
        info = CompactionInfo(context_window=context_window, budget=budget,
                              tokens_before=tokens_before, tokens_after=tokens_before)
        last_user = max((i for i, m in enumerate(result) if get_field(m, "role") == "user"), default=-1)

        # 1. drop old tool outputs, oldest first
        for i, message in enumerate(result):
            if total <= budget:
                break
            if not isinstance(message, ToolResultMessage):
                continue
            chars = estimate_message_chars(message)
            note = DROPPED_OUTPUT_NOTE.format(chars=chars)
            if chars <= len(note):
                continue
            result[i] = message.model_copy(update={"content": [TextContent(text=note)]})
            new_size = estimate_message_tokens(result[i])
            total += new_size - sizes[i]
            sizes[i] = new_size
            info.dropped_outputs += 1
            info.dropped_chars += chars

        # 2. summarise the oldest messages, as few as needed
        if total > budget and last_user > 0:
            points = _cut_points(result, last_user)
            if points:
                chosen = next((p for p in points if total - sum(sizes[:p]) + summary_cap <= budget),
                              points[-1])
                replaced = result[:chosen]
                if signal is not None and getattr(signal, "aborted", False):
                    return messages
                text = await summarize_range(list(messages[:chosen]), replaced)
                summary = UserMessage(
                    content=[TextContent(text=SUMMARY_PREFIX.format(count=len(replaced)) + text)],
                    timestamp=get_field(replaced[-1], "timestamp") or 0,
                )
                result = [summary, *result[chosen:]]
                total = estimate_tokens(result)
                info.summarized_messages = len(replaced)
                info.summary = text

        info.tokens_after = total
        info.fits = total <= budget
        if on_compaction is not None and (info.dropped_outputs or info.summarized_messages or not info.fits):
            outcome = on_compaction(info)
            if inspect.isawaitable(outcome):
                await outcome
        return result

    return compact
