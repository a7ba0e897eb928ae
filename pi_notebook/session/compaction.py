"""Keep the context inside the model's window: a ``transform_context`` hook.

``make_context_compactor(context_window, ...)`` returns ``async (messages, signal)
-> messages``. When the estimate (ai.options: characters / 4, images ~1200 tokens, plus
a few tokens of framing per message) exceeds the budget (the window minus the answer's
room, a margin, and the system prompt and tools: ``budget_reserve``,
``overhead_tokens``) it shrinks a *copy* of the history:

0. Oversize: a message larger than half the budget is cut, head and tail kept
   around a marker (``fit.cut_oversize``).
1. Outputs: the content of the oldest tool results is replaced by a short note,
   oldest first, until the estimate fits. The result messages stay, so every
   tool call keeps its result.
2. Summary: if that is not enough, the oldest messages are replaced by one user
   message holding a summary (``summarize(messages) -> str``, async; the default
   is extractive, and a failed summariser falls back to it). The summarised range
   ends only where no tool call is separated from its result, and never includes
   the last user message.
3. Guarantee: ``fit.fit_to_budget`` drops the oldest turns with a note and cuts the
   largest messages; if nothing fits, ``ContextBudgetError`` is raised and no
   request is sent. What the hook returns always fits the budget (estimated).

A stable prefix: providers cache the prompt they read last (llama-server reuses its
processed tokens up to the first byte that differs; cloud prompt caches match on prefixes), so
a compaction that moved its cut point or rewrote its summary on every request would have the
whole prompt read again each time. Two rules keep the prompt's start unchanged between
compactions:

- hysteresis: when the history must shrink, stages 1 and 2 aim at a low-water mark
  (``low_water`` of the budget, half by default), not at the budget, so that the next
  requests have room to append to it;
- the compacted history is kept: the next call whose messages start with the same messages
  gets exactly the same compacted objects, followed by what was appended since; it is
  compacted again only when that no longer fits the budget.

Summaries are cached by the identity of the messages they replace, and a longer
range reuses the summary of its cached prefix, so the model is not asked again
for the same history on every turn. A later compaction summarises the kept history,
earlier summary included (a rolling summary). See docs/design/sessions.md.
"""
from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..ai.options import (
    CHARS_PER_TOKEN,
    context_safety_tokens,
    estimate_message_chars,
    estimate_message_tokens,
    last_assistant_usage,
)
from ..ai.types import TextContent, ToolResultMessage, Usage, UserMessage, get_field
from .fit import (
    MESSAGE_OVERHEAD_TOKENS, ContextBudgetError, cut_oversize, cut_points, fit_to_budget,
)

__all__ = ["CompactionInfo", "ContextBudgetError", "make_context_compactor", "budget_reserve",
           "context_overhead_tokens", "estimate_message_tokens",
           "estimate_tokens", "extractive_summary", "make_model_summarizer",
           "DROPPED_OUTPUT_NOTE"]

DROPPED_OUTPUT_NOTE = "[output dropped to fit the context window: {chars} chars]"
SUMMARY_PREFIX = "[Summary of {count} earlier messages, condensed to fit the context window]\n\n"
_SUMMARY_PREFIX_RE = re.compile(r"\[Summary of (\d+) earlier messages, condensed to fit the context "
                                r"window\]\n\n")
SUMMARY_CUT_NOTE = "[the start of this summary was cut]\n"
# where a compaction aims, as a share of the budget: the room left is what the next requests
# append to an unchanged prompt prefix before the history must shrink again
DEFAULT_LOW_WATER = 0.5
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
    cut_messages: int = 0
    cut_chars: int = 0
    dropped_messages: int = 0

    def describe(self) -> str:
        parts = []
        if self.dropped_outputs:
            parts.append(f"dropped {self.dropped_outputs} old tool output"
                         f"{'s' if self.dropped_outputs != 1 else ''} ({self.dropped_chars} chars)")
        if self.summarized_messages:
            parts.append(f"summarized {self.summarized_messages} earlier messages")
        if self.dropped_messages:
            parts.append(f"dropped the {self.dropped_messages} oldest messages")
        if self.cut_messages:
            parts.append(f"cut {self.cut_messages} oversize message"
                         f"{'s' if self.cut_messages != 1 else ''} ({self.cut_chars} chars)")
        text = "; ".join(parts) or "nothing to compact"
        text += f": ~{self.tokens_before} -> ~{self.tokens_after} of {self.context_window} tokens"
        if not self.fits:
            text += " (still over budget)"
        return text


# --- estimate --------------------------------------------------------------------------------
#
# The package's one estimate (ai/options.py), so that compaction and the providers' max-tokens
# clamp agree on what fits.

def estimate_tokens(messages: Sequence[Any], images: bool = True) -> int:
    return sum(estimate_message_tokens(m, images) for m in messages)


# how far a provider's count may exceed the estimate before it is no longer believed
_MAX_OBSERVED_RATIO = 2.0


def observed_ratio(messages: Sequence[Any], overhead: int, images: bool = True) -> float:
    """Real prompt tokens per estimated token, from the newest usage that still describes the
    start of ``messages`` (1.0 without one; never below 1, at most 2). Code and numbers take
    more tokens than chars/4 says: a history the estimate calls full-but-fitting would leave the
    answer less room than the reserve promised, since the max-tokens clamp counts the usage."""
    found = last_assistant_usage(list(messages))
    if found is None:
        return 1.0
    usage, index = found
    real = sum(get_field(usage, name, default=0) or 0 for name in ("input", "cache_read", "cache_write"))
    estimated = estimate_tokens(messages[:index], images) + overhead
    if real <= 0 or estimated <= 0:
        return 1.0
    return min(_MAX_OBSERVED_RATIO, max(1.0, real / estimated))


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
        earlier = previous_summary(message)
        if earlier is not None:  # a rolling summary keeps what the last one said
            lines.append(earlier[1])
        elif role == "user":
            lines.append(f"- user: {_short(_own_words(message), 300)}")
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


def _own_words(message: Any) -> str:
    """A user message's last text block: what the person wrote (a prompt's notebook-context
    note travels as a block before it, session/prompt_notes.py, and is stale once summarised)."""
    content = get_field(message, "content")
    if isinstance(content, str):
        return content
    texts = [get_field(b, "text") or "" for b in content or [] if get_field(b, "type") == "text"]
    return texts[-1] if texts else ""


def previous_summary(message: Any) -> tuple[int, str] | None:
    """(how many messages it replaced, its text) when ``message`` is a summary this module
    wrote, else None."""
    if get_field(message, "role") != "user":
        return None
    text = _plain_text(message)
    match = _SUMMARY_PREFIX_RE.match(text)
    return (int(match.group(1)), text[match.end():]) if match else None


# --- a summary written by the model ------------------------------------------------------------

SUMMARY_SYSTEM_PROMPT = (
    "You condense the early part of a data-analysis conversation between a user and an "
    "assistant that runs Python in a Jupyter kernel, so that the assistant can continue the "
    "work without it. Keep: the user's goals and constraints, decisions made, variables, "
    "data frames, files and functions that now exist in the kernel (with their meaning), "
    "results and numbers that were reported, and open questions. Drop chatter and raw "
    "output. Write terse bullet points, no preamble."
)


def _transcript(messages: list[Any], output_chars: int = 1500,
                max_chars: int | None = None) -> str:
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
    if max_chars is None or sum(len(p) + 2 for p in parts) <= max_chars:
        return "\n\n".join(parts)
    # too long for the summary request itself: the newest messages are summarised, the
    # oldest are named as left out (the summary tells the model they are gone)
    kept: list[str] = []
    used = len(OMITTED_NOTE) + 16
    for part in reversed(parts):
        room = max_chars - used
        if len(part) + 2 > room:
            if not kept and room > 200:  # one huge message: keep its head
                kept.append(part[: room - 40] + " ... [cut]")
            break
        kept.append(part)
        used += len(part) + 2
    omitted = len(parts) - len(kept)
    return "\n\n".join([OMITTED_NOTE.format(count=omitted), *reversed(kept)])


OMITTED_NOTE = "[{count} older messages left out: too long to summarise in one request]"
# the summary request: a modest answer, and a conservative characters-per-token ratio for
# the transcript (code and JSON tokenise densely)
_SUMMARY_MAX_OUTPUT = 4096
_SUMMARY_CHARS_PER_TOKEN = 3
_SUMMARY_SAFETY_TOKENS = 4096 + 256  # the max-tokens clamp's margin, and the prompt's frame


def _summary_request_chars(model: Any, max_output: int) -> int | None:
    """How many transcript characters fit in ``model``'s window, or None (no window)."""
    window = get_field(model, "context_window", "contextWindow") or 0
    if window <= 0:
        return None
    tokens = (window - max_output - _SUMMARY_SAFETY_TOKENS
              - len(SUMMARY_SYSTEM_PROMPT) // _SUMMARY_CHARS_PER_TOKEN)
    return max(0, tokens) * _SUMMARY_CHARS_PER_TOKEN


def make_model_summarizer(model: Any, complete_fn: Callable[..., Awaitable[Any]] | None = None,
                          options: Mapping[str, Any] | None = None) -> Summarizer:
    """A ``summarize`` callable that asks ``model`` for the summary.

    ``complete_fn(model, context, options)`` defaults to ``complete_simple``. A failed
    request raises, and the compactor then falls back to the extractive summary. The
    request never exceeds ``model``'s window: a transcript too long for it keeps its
    newest messages and names how many older ones were left out.
    """

    async def summarize(messages: list[Any]) -> str:
        from ..ai.stream import complete_simple
        from ..ai.types import Context

        fn = complete_fn or complete_simple
        request_options = dict(options or {})
        model_max = get_field(model, "max_tokens", "maxTokens") or 0
        request_options.setdefault(
            "max_tokens", min(model_max, _SUMMARY_MAX_OUTPUT) if model_max > 0 else _SUMMARY_MAX_OUTPUT)
        max_chars = _summary_request_chars(model, request_options["max_tokens"])
        if max_chars is not None and max_chars < 2000:
            # the request would overflow the window by itself: the compactor's extract
            raise RuntimeError("the model's context window is too small for a summary request")
        prompt = ("Summarize this conversation so far:\n\n<conversation>\n"
                  f"{_transcript(messages, max_chars=max_chars)}\n</conversation>")
        context = Context(system_prompt=SUMMARY_SYSTEM_PROMPT,
                          messages=[UserMessage(content=prompt)])
        reply = await fn(model, context, request_options)
        if get_field(reply, "stop_reason") in ("error", "aborted"):
            raise RuntimeError(get_field(reply, "error_message") or "summary request failed")
        text = _plain_text(reply).strip()
        if not text:
            raise RuntimeError("the model returned an empty summary")
        return text

    return summarize


# --- the compactor -----------------------------------------------------------------------------

_cut_points = cut_points  # the pair-safe boundaries, shared with fit.py


def budget_reserve(context_window: int, max_output_tokens: int | None = None) -> int:
    """Tokens kept free of history: the answer (the model's max output, at most half
    the window) and the margin the max-tokens clamp keeps for estimate error
    (``context_safety_tokens``), so that a history compaction let through still leaves the
    clamp the whole answer. Without a max output: a quarter of the window, at most 16384."""
    if max_output_tokens is None or max_output_tokens <= 0:
        return min(16384, context_window // 4)
    return min(max_output_tokens, context_window // 2) + context_safety_tokens(context_window)


def context_overhead_tokens(system_prompt: str | None, tools: Any) -> int:
    """The estimate of what every request carries besides the messages (for
    ``overhead_tokens``): the system prompt and the tool schemas."""
    from ..ai.options import estimate_context_tokens

    return estimate_context_tokens(
        {"messages": [], "system_prompt": system_prompt or "", "tools": list(tools or [])}).tokens


def _without_usage(messages: list[Any]) -> list[Any]:
    """Copies of the assistant messages without their usage: after compaction a reported
    usage describes a history that is no longer sent, and the max-tokens clamp would
    read it as the size of this request (an answer squeezed to a token after a load)."""
    result = list(messages)
    for i, message in enumerate(result):
        usage = get_field(message, "usage")
        if (get_field(message, "role") == "assistant" and usage is not None
                and hasattr(message, "model_copy") and any(
                    (get_field(usage, f) or 0) for f in ("input", "output", "cache_read", "cache_write"))):
            result[i] = message.model_copy(update={"usage": Usage()})
    return result


def make_context_compactor(
    context_window: int,
    summarize: Summarizer | None = None,
    reserve_tokens: int | None = None,
    on_compaction: Callable[[CompactionInfo], Any] | None = None,
    summary_tokens: int | None = None,
    *,
    max_output_tokens: int | None = None,
    overhead_tokens: int | Callable[[], int] | None = None,
    images: bool = True,
    low_water: float = DEFAULT_LOW_WATER,
) -> Callable[..., Awaitable[list[Any]]]:
    """A ``transform_context`` hook whose result always fits the window (estimated).

    The budget for the messages is the window minus ``reserve_tokens`` (default:
    ``budget_reserve(context_window, max_output_tokens)``) minus ``overhead_tokens``
    (the system prompt and the tool schemas, an int or a callable asked on every call,
    since both can change between requests). Each message also counts
    ``MESSAGE_OVERHEAD_TOKENS`` of framing. ``images=False`` (a model without image input)
    counts an image as the placeholder text the model receives instead. When the provider's
    usage shows the estimate running low (:func:`observed_ratio`), the budget shrinks by as much. ``summary_tokens`` (default: an eighth of
    the budget, at most 2048) caps a summary's size. ``low_water`` (0 < x <= 1) is the share
    of the budget a compaction aims at; its result is kept and reused as the start of the
    following requests (the module docstring's stable prefix).

    Past the two stages of the module docstring, ``fit.fit_to_budget`` drops the
    oldest turns and cuts oversize messages; when nothing can make the history fit,
    ``ContextBudgetError`` is raised and no request is sent.
    """
    if context_window <= 0:
        raise ValueError("context_window must be positive")
    reserve = (reserve_tokens if reserve_tokens is not None
               else budget_reserve(context_window, max_output_tokens))
    budget = context_window - reserve
    if budget <= 0:
        raise ValueError(f"reserve_tokens ({reserve}) leaves no room in a {context_window}-token window")
    if not 0 < low_water <= 1:
        raise ValueError(f"low_water must be in (0, 1], not {low_water}")

    def window_budget() -> tuple[int, int]:
        """(tokens the messages may take, the system prompt and tools' estimate)."""
        overhead = overhead_tokens() if callable(overhead_tokens) else (overhead_tokens or 0)
        return context_window - reserve - max(0, overhead), max(0, overhead)

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
        extract = summarizer is extractive_summary
        head = ""
        try:
            text = await summarizer(to_summarize)
        except Exception as exc:  # a failed model call must not fail the turn
            head = f"(model summary failed: {type(exc).__name__}; extract follows)\n"
            text = await extractive_summary(to_summarize)
            extract = True
        # the whole summary message, prefix included, stays within summary_cap
        limit = summary_cap * CHARS_PER_TOKEN - len(SUMMARY_PREFIX) - 8 - len(head)
        if len(text) > limit and (extract or previous_summary(to_summarize[0]) is not None):
            # an extract (one line per message, oldest first) or a rolling summary grows at its
            # end: the oldest part gives way
            text = SUMMARY_CUT_NOTE + text[len(text) - (limit - len(SUMMARY_CUT_NOTE)):]
        elif len(text) > limit:
            text = text[: limit - 20] + "\n[summary cut]"
        text = head + text
        cache[key] = (list(originals), text)
        while len(cache) > _SUMMARY_CACHE_SIZE:  # dicts keep insertion order: drop the oldest
            del cache[next(iter(cache))]
        return text

    def size(message: Any) -> int:
        return estimate_message_tokens(message, images)

    # the last compaction: the messages it was given, and what it returned for them
    kept: list[tuple[list[Any], list[Any]]] = []

    def carried(messages: list[Any]) -> list[Any]:
        """``messages`` with the last compaction's result in place of the messages it was
        given, when they still start this conversation (else the last compaction is forgotten:
        the history was replaced, loaded or undone)."""
        if not kept:
            return messages
        given, result = kept[0]
        n = len(given)
        if len(messages) >= n and all(a is b or a == b for a, b in zip(given, messages[:n], strict=True)):
            return [*result, *messages[n:]]
        kept.clear()
        return messages

    async def compact(messages: list[Any], signal: Any = None) -> list[Any]:
        given = messages
        messages = carried(given)
        whole_budget, overhead = window_budget()
        ratio = observed_ratio(messages, overhead, images)
        if ratio > 1.0:  # the window in estimated tokens is smaller than its size
            whole_budget = int((whole_budget + overhead) / ratio) - overhead
        # stages 1 and 2 count every message's framing up front; fit_to_budget counts exactly
        budget = whole_budget - MESSAGE_OVERHEAD_TOKENS * len(messages)
        tokens_before = estimate_tokens(messages, images)
        if tokens_before <= budget:
            return messages
        result = await shrink(messages, signal, whole_budget, overhead, tokens_before)
        kept[:] = [(list(given), result)]
        return list(result)

    async def shrink(messages: list[Any], signal: Any, whole_budget: int, overhead: int,
                     tokens_before: int) -> list[Any]:
        # stages 1 and 2 aim at the low-water mark, so the requests that follow append to this
        # result instead of shrinking the history again (each shrink changes the prompt's start)
        full_budget = whole_budget - MESSAGE_OVERHEAD_TOKENS * len(messages)
        budget = (int(whole_budget * low_water) if low_water < 1 else whole_budget) \
            - MESSAGE_OVERHEAD_TOKENS * len(messages)
        if whole_budget <= 0:
            raise ContextBudgetError(
                f"the system prompt and tools (~{overhead} tokens) leave no room for the "
                f"conversation in the model's {context_window}-token window (reserve {reserve}); "
                "nothing was sent")
        result = list(messages)
        info = CompactionInfo(context_window=context_window, budget=whole_budget,
                              tokens_before=tokens_before, tokens_after=tokens_before)
        # 0. a message larger than half the budget can never fit with its neighbours:
        # cut it (head and tail kept) before anything else is given up for it
        result, info.cut_messages, info.cut_chars = cut_oversize(
            result, max(1, whole_budget // 2), size)
        sizes = [size(m) for m in result]
        total = sum(sizes)
        last_user = max((i for i, m in enumerate(result) if get_field(m, "role") == "user"), default=-1)

        # 1. drop old tool outputs, oldest first; those of the prompt being answered only as far
        # as the whole budget needs (the model has yet to read them)
        for i, message in enumerate(result):
            if total <= (budget if i < last_user else full_budget):
                break
            if not isinstance(message, ToolResultMessage):
                continue
            chars = estimate_message_chars(message, images)
            note = DROPPED_OUTPUT_NOTE.format(chars=chars)
            if chars <= len(note):
                continue
            result[i] = message.model_copy(update={"content": [TextContent(text=note)]})
            new_size = size(result[i])
            total += new_size - sizes[i]
            sizes[i] = new_size
            info.dropped_outputs += 1
            info.dropped_chars += chars

        # 2. summarise the oldest messages, as few as needed (not once aborted: the
        # request will not be sent, but what is returned still fits)
        aborted = signal is not None and getattr(signal, "aborted", False)
        if total > budget and last_user > 0 and not aborted:
            points = _cut_points(result, last_user)
            if points:
                chosen = next((p for p in points if total - sum(sizes[:p]) + summary_cap <= budget),
                              points[-1])
                replaced = result[:chosen]
                text = await summarize_range(list(messages[:chosen]), replaced)
                earlier = previous_summary(replaced[0])
                count = len(replaced) + (earlier[0] - 1 if earlier is not None else 0)
                summary = UserMessage(
                    content=[TextContent(text=SUMMARY_PREFIX.format(count=count) + text)],
                    timestamp=get_field(replaced[-1], "timestamp") or 0,
                )
                result = [summary, *result[chosen:]]
                total = estimate_tokens(result, images)
                info.summarized_messages = len(replaced)
                info.summary = text

        # 3. the guarantee: drop the oldest turns, cut further, or raise (nothing sent)
        result, report = fit_to_budget(
            _without_usage(result), whole_budget, size,
            describe_budget=f" (window {context_window}, reserve {reserve}, system prompt and "
                            f"tools ~{overhead})")
        info.dropped_messages = report.dropped_messages
        info.cut_messages += report.cut_messages
        info.cut_chars += report.cut_chars
        info.tokens_after = report.tokens
        info.fits = report.tokens <= whole_budget
        if on_compaction is not None and (info.dropped_outputs or info.summarized_messages
                                          or info.dropped_messages or info.cut_messages
                                          or not info.fits):
            outcome = on_compaction(info)
            if inspect.isawaitable(outcome):
                await outcome
        return result

    return compact
