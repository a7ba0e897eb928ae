"""Simple-stream options (spec 5.4, pi ``api/simple-options.ts`` and ``utils/estimate.ts``).

Options are plain dicts with snake_case keys: ``signal, api_key, headers, temperature,
max_tokens, reasoning, thinking_budgets, session_id, cache_retention, on_payload,
on_response, max_retries, max_retry_delay_ms, timeout_ms, first_byte_timeout_ms,
idle_timeout_ms, tool_choice, sampling_params, env`` (plus ``transport`` and ``metadata``, passed through).

Messages may be pydantic models (snake_case attributes) or pi-JSON dicts (camelCase).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .env import get_provider_env_value
from .transform import TOOL_IMAGE_PLACEHOLDER, USER_IMAGE_PLACEHOLDER
from .types import Model, get_field, usage_total_tokens

__all__ = [
    "DEFAULT_THINKING_BUDGETS", "MIN_ANSWER_TOKENS", "CONTEXT_SAFETY_TOKENS", "ContextEstimate",
    "ThinkingAdjustment", "CHARS_PER_TOKEN", "estimate_context_tokens", "estimate_message_tokens",
    "estimate_message_chars", "estimate_text_tokens", "text_length",
    "calculate_context_tokens", "clamp_max_tokens_to_context", "context_safety_tokens",
    "last_assistant_usage", "build_base_options", "clamp_reasoning",
    "thinking_budget_for_level", "clamp_thinking_budget_to_answer_room", "adjust_max_tokens_for_thinking",
    "resolve_cache_retention",
]

CHARS_PER_TOKEN = 4
ESTIMATED_IMAGE_CHARS = 4800
# what stands in for an image sent to a model without image input (the longer placeholder)
ESTIMATED_OMITTED_IMAGE_CHARS = max(len(USER_IMAGE_PLACEHOLDER), len(TOOL_IMAGE_PLACEHOLDER))
CONTEXT_SAFETY_TOKENS = 4096
MIN_MAX_TOKENS = 1
MIN_ANSWER_TOKENS = 1024
"""Tokens always left for the answer when a thinking budget shares the response ceiling."""

DEFAULT_THINKING_BUDGETS: dict[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}


@dataclass(frozen=True)
class ContextEstimate:
    tokens: int
    """Estimated total context tokens."""
    usage_tokens: int
    """Tokens reported by the most recent applicable assistant usage (0 if none)."""
    trailing_tokens: int
    """Estimated tokens after that usage (everything, without one)."""
    last_usage_index: int | None
    """Index of the message whose usage was used, or None."""


class ThinkingAdjustment(NamedTuple):
    max_tokens: int
    thinking_budget: int


# --- reading messages of either shape -----------------------------------------------------------



def _compact_json(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default)
    except (TypeError, ValueError):
        return "[unserializable]"


def _json_default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    raise TypeError


def calculate_context_tokens(usage: Any) -> int:
    """``totalTokens``, or the sum of its parts when the provider left it 0."""
    return usage_total_tokens(usage)


# --- the token estimate ---------------------------------------------------------------------------
#
# The package's one estimate of "how many tokens is this": compaction (session/compaction.py),
# the max-tokens clamp of every provider (clamp_max_tokens_to_context) and the faux provider's
# usage all count with these functions, so they agree on what fits.

def text_length(text: str) -> int:
    """The length of ``text`` as pi (JavaScript) counts it: UTF-16 code units.

    ``surrogatepass``: a model may send a lone surrogate (``"\\ud800"`` in its JSON); it is
    one code unit, and counting it must not raise, or every later request of the
    conversation would fail in this estimate."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


def estimate_text_tokens(text: str) -> int:
    """chars/4 rounded up (chars in UTF-16 code units)."""
    return math.ceil(text_length(text) / CHARS_PER_TOKEN)


def _text(block: Any, name: str) -> int:
    return text_length(get_field(block, name, default="") or "")


def _content_chars(content: Any, images: bool) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return text_length(content)
    chars = 0
    for block in content:
        if get_field(block, "type") == "text":
            chars += _text(block, "text")
        else:
            chars += ESTIMATED_IMAGE_CHARS if images else ESTIMATED_OMITTED_IMAGE_CHARS
    return chars


def estimate_message_chars(message: Any, images: bool = True) -> int:
    """The characters ``estimate_message_tokens`` counts: the text of user and tool-result
    content (an image counts as 4800, or as the one-line placeholder a model without image
    input gets instead: ``images=False``), the text, thinking and tool calls (name + compact
    JSON arguments) of an assistant message."""
    content = get_field(message, "content")
    if get_field(message, "role") != "assistant":
        return _content_chars(content, images)
    chars = 0
    for block in content or []:
        kind = get_field(block, "type")
        if kind == "text":
            chars += _text(block, "text")
        elif kind == "thinking":
            chars += _text(block, "thinking")
        else:
            chars += _text(block, "name") + text_length(_compact_json(get_field(block, "arguments", default={})))
    return chars


def estimate_message_tokens(message: Any, images: bool = True) -> int:
    """chars/4 rounded up; an image counts as 4800 characters (``images=False``: as the
    placeholder text that replaces it for a model without image input)."""
    return math.ceil(estimate_message_chars(message, images) / CHARS_PER_TOKEN)


def last_assistant_usage(messages: list[Any]) -> tuple[Any, int] | None:
    """The usage that still describes the start of ``messages`` and the index of its assistant
    message (see :func:`estimate_context_tokens`), or None."""
    latest_prefix = -math.inf
    found = None
    for index, message in enumerate(messages):
        timestamp = get_field(message, "timestamp", default=0) or 0
        if get_field(message, "role") == "assistant":
            # A newer message inserted before this response (a compaction summary, say)
            # means its usage no longer describes the prefix.
            usage = get_field(message, "usage")
            if (timestamp >= latest_prefix and usage is not None
                    and get_field(message, "stop_reason", "stopReason") not in ("aborted", "error")
                    and calculate_context_tokens(usage) > 0):
                found = (usage, index)
        latest_prefix = max(latest_prefix, timestamp)
    return found


def _estimate_tools(tools: Any) -> int:
    if not tools:
        return 0
    dumped = []
    for tool in tools:
        if isinstance(tool, Mapping):
            dumped.append(dict(tool))
        else:
            entry = {"name": getattr(tool, "name", ""), "description": getattr(tool, "description", ""),
                     "parameters": getattr(tool, "parameters", None)}
            label = getattr(tool, "label", None)
            if label:
                entry["label"] = label
            dumped.append(entry)
    return estimate_text_tokens(_compact_json(dumped))


def estimate_context_tokens(context: Any, images: bool = True) -> ContextEstimate:
    """Estimate the context size in tokens (a Context, a context dict, or a message list).

    With an applicable assistant usage (newest assistant message that is not error or
    aborted, has non-zero usage, and has no newer message before it), that usage plus
    estimates of the messages after it (and of tools those added); otherwise message
    estimates plus the system prompt plus the tool definitions. ``images=False``: images
    count as the placeholder a model without image input receives.
    """
    if isinstance(context, list):
        messages, system_prompt, tools, whole = context, None, None, False
    else:
        messages = list(get_field(context, "messages", default=[]) or [])
        system_prompt = get_field(context, "system_prompt", "systemPrompt")
        tools = get_field(context, "tools")
        whole = True
    found = last_assistant_usage(messages)
    if found is not None:
        usage, index = found
        usage_tokens = calculate_context_tokens(usage)
        trailing = sum(estimate_message_tokens(m, images) for m in messages[index + 1:])
        if whole and tools:
            added: set[str] = set()
            for message in messages[index + 1:]:
                if get_field(message, "role") == "toolResult":
                    added.update(get_field(message, "added_tool_names", "addedToolNames") or [])
            extra = _estimate_tools([t for t in tools if get_field(t, "name") in added])
            trailing += extra
        return ContextEstimate(usage_tokens + trailing, usage_tokens, trailing, index)
    tokens = sum(estimate_message_tokens(m, images) for m in messages)
    if whole:
        tokens += (estimate_text_tokens(system_prompt) if system_prompt else 0) + _estimate_tools(tools)
    return ContextEstimate(tokens, 0, tokens, None)


# --- max tokens, budgets --------------------------------------------------------------------------

def context_safety_tokens(context_window: int) -> int:
    """Tokens of a window kept free for the estimate's error: pi's 4096, at most an eighth of the
    window. pi sizes the margin for windows of 100k and more; taken whole from an 8k window it
    leaves the answer half the room compaction kept for it, and a 4k window none at all.
    Windows of 32,768 tokens and more get pi's margin exactly."""
    return min(CONTEXT_SAFETY_TOKENS, max(0, context_window) // 8)


def clamp_max_tokens_to_context(model: Model, context: Any, max_tokens: int) -> int:
    """``min(max_tokens, max(1, window - estimate - margin))`` (:func:`context_safety_tokens`;
    images counted only for a model that takes them); ``max(1, max_tokens)`` without a window."""
    if model.context_window <= 0:
        return max(MIN_MAX_TOKENS, max_tokens)
    estimate = estimate_context_tokens(context, images="image" in (model.input or ())).tokens
    available = model.context_window - estimate - context_safety_tokens(model.context_window)
    return min(max_tokens, max(MIN_MAX_TOKENS, available))


def build_base_options(model: Model, context: Any, options: Mapping[str, Any] | None = None,
                       api_key: str | None = None) -> dict[str, Any]:
    """The common stream options of a simple call, with ``max_tokens`` clamped to the context."""
    opts = dict(options or {})
    sampling = None
    if model.sampling_params or opts.get("sampling_params"):
        sampling = {**(model.sampling_params or {}), **(opts.get("sampling_params") or {})}
    requested = opts.get("max_tokens")
    if requested is None:
        requested = model.max_tokens
    return {
        "temperature": opts.get("temperature"),
        "sampling_params": sampling,
        "max_tokens": clamp_max_tokens_to_context(model, context, requested),
        "signal": opts.get("signal"),
        "api_key": api_key or opts.get("api_key"),
        "transport": opts.get("transport"),
        "cache_retention": opts.get("cache_retention"),
        "session_id": opts.get("session_id"),
        "headers": opts.get("headers"),
        "on_payload": opts.get("on_payload"),
        "on_response": opts.get("on_response"),
        "on_progress": opts.get("on_progress"),
        "timeout_ms": opts.get("timeout_ms"),
        "first_byte_timeout_ms": opts.get("first_byte_timeout_ms"),
        "idle_timeout_ms": opts.get("idle_timeout_ms"),
        "max_retries": opts.get("max_retries"),
        "max_retry_delay_ms": opts.get("max_retry_delay_ms"),
        "metadata": opts.get("metadata"),
        "env": opts.get("env"),
    }


def clamp_reasoning(level: str | None) -> str | None:
    """``xhigh`` and ``max`` fall back to ``high`` for budget-based APIs."""
    return "high" if level in ("xhigh", "max") else level


def thinking_budget_for_level(level: str, custom_budgets: Mapping[str, int | None] | None = None) -> int:
    budgets = dict(DEFAULT_THINKING_BUDGETS)
    budgets.update({k: v for k, v in (custom_budgets or {}).items() if v is not None})
    return budgets[clamp_reasoning(level) or level]  # (clamp_reasoning gives None only for None)


def clamp_thinking_budget_to_answer_room(thinking_budget: int, ceiling: int) -> int:
    """Keep at least 1024 tokens of the response ceiling for the answer."""
    return min(thinking_budget, max(0, ceiling - MIN_ANSWER_TOKENS))


def adjust_max_tokens_for_thinking(base_max_tokens: int | None, model_max_tokens: int, level: str,
                                   budgets: Mapping[str, int | None] | None = None) -> ThinkingAdjustment:
    """``max_tokens = min(base + budget, model max)`` (model max when no caller cap);
    the budget shrinks to leave answer room when it would fill the ceiling."""
    budget = thinking_budget_for_level(level, budgets)
    max_tokens = model_max_tokens if base_max_tokens is None else min(base_max_tokens + budget, model_max_tokens)
    if max_tokens <= budget:
        budget = clamp_thinking_budget_to_answer_room(budget, max_tokens)
    return ThinkingAdjustment(max_tokens, budget)


def resolve_cache_retention(options: Mapping[str, Any] | None = None) -> str:
    """``options["cache_retention"]``, else ``"long"`` when ``PI_CACHE_RETENTION=long``, else ``"short"``."""
    opts = options or {}
    if opts.get("cache_retention"):
        return opts["cache_retention"]
    if get_provider_env_value("PI_CACHE_RETENTION", opts.get("env")) == "long":
        return "long"
    return "short"
