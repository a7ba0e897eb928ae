"""Provider error text (spec 5.3) and context-overflow detection (spec 5.15).

Ports of pi ``utils/error-body.ts`` and ``utils/overflow.ts``. Error bodies are shown to
the user as text only; nothing here renders them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .types import get_field

__all__ = [
    "MAX_PROVIDER_ERROR_BODY_CHARS", "NormalizedProviderError", "normalize_provider_error",
    "format_provider_error", "describe_provider_error", "truncate_error_text", "is_context_overflow",
    "is_recoverable_length", "OVERFLOW_PATTERNS", "connection_lost_text", "embedded_server_lost_text",
    "TECHNICAL_DETAIL",
]

MAX_PROVIDER_ERROR_BODY_CHARS = 4000
_TRUNCATED = re.compile(r"\.\.\. \[truncated \d+ chars\]\Z")


def truncate_error_text(text: str, max_chars: int = MAX_PROVIDER_ERROR_BODY_CHARS) -> str:
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}... [truncated {len(text) - max_chars} chars]"


def _safe_json(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _body_text(body: str | None) -> str | None:
    if body is None:
        return None
    trimmed = body.strip()
    if not trimmed:
        return None
    if _TRUNCATED.search(trimmed) and len(trimmed) <= MAX_PROVIDER_ERROR_BODY_CHARS + 40:
        return trimmed  # already cut by us
    return truncate_error_text(trimmed)


@dataclass(frozen=True)
class NormalizedProviderError:
    message: str
    status: int | None = None
    body: str | None = None
    """Trimmed and truncated to 4000 characters."""
    message_carries_body: bool = True
    """The message already contains the body (nothing to add)."""

    def format(self, prefix: str | None = None) -> str:
        if self.message_carries_body or self.status is None or self.body is None:
            if prefix is not None and self.status is not None:
                return f"{prefix} ({self.status}): {self.message}"
            return self.message
        if prefix is not None:
            return f"{prefix} ({self.status}): {self.body}"
        return f"{self.status}: {self.body}"


def _status_of(error: Any) -> int | None:
    for name in ("status_code", "statusCode", "status"):
        value = getattr(error, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    response = getattr(error, "response", None)
    value = getattr(response, "status_code", None)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _plain_non_empty_dict(value: Any) -> bool:
    return type(value) is dict and len(value) > 0  # a subclass instance is not a parsed body


def _raw_body_of(error: Any) -> str | None:
    body = getattr(error, "body", None)
    if isinstance(body, str):
        return body
    parsed = getattr(error, "error", None)
    if _plain_non_empty_dict(parsed):
        return _safe_json(parsed)
    if _plain_non_empty_dict(body):
        return _safe_json(body)
    response = getattr(error, "response", None)
    if response is not None:
        try:
            text = getattr(response, "text", None)  # httpx raises if a streamed body was not read
        except Exception:
            return None
        if isinstance(text, str):
            return text
    return None


def normalize_provider_error(error: Any) -> NormalizedProviderError:
    """Probe an exception for an HTTP status and body.

    Status: ``status_code``, ``statusCode``, ``status``, then ``response.status_code``.
    Body: a string ``body``, a plain non-empty dict ``error`` (JSON), a plain dict
    ``body``, then a read ``response.text``. Anything that is not an exception becomes
    its JSON text as the message.
    """
    if not isinstance(error, BaseException):
        return NormalizedProviderError(message=error if isinstance(error, str) else _safe_json(error))
    message = str(error) or type(error).__name__
    status = _status_of(error)
    body = _body_text(_raw_body_of(error))
    carries = body is None or body in message
    return NormalizedProviderError(message=message, status=status, body=body, message_carries_body=carries)


def format_provider_error(status: Any, body: str | None = None, message: str | None = None,
                          prefix: str | None = None) -> str:
    """pi's display text for a provider error. Two call forms:

    * ``format_provider_error(status, body, message, prefix=None)``;
    * ``format_provider_error(error_or_normalized, prefix=None)`` (pi's own shape): an
      exception is normalised first, and the second positional argument is the prefix.

    The result is the message when it already holds the body (or status or body is
    unknown), with ``"<prefix> (<status>): "`` in front when both are given; otherwise
    ``"<status>: <body>"`` or ``"<prefix> (<status>): <body>"``, the body cut at 4000 chars.
    """
    if isinstance(status, (BaseException, NormalizedProviderError)):
        norm = status if isinstance(status, NormalizedProviderError) else normalize_provider_error(status)
        return norm.format(prefix if prefix is not None else body)
    if message is None:
        raise TypeError("format_provider_error(status, body, message): message is required")
    text = _body_text(body)
    carries = text is None or text in message
    return NormalizedProviderError(message, status, text, carries).format(prefix)


def describe_provider_error(error: Any, prefix: str | None = None) -> str:
    """``normalize_provider_error`` then format: what adapters put in ``error_message``."""
    return normalize_provider_error(error).format(prefix)


# --- a connection that dropped mid-answer -----------------------------------------------------
# What happened and what to do come first, in the user's words; the transport's own text
# (host, "incomplete chunked read") follows after this marker, for whoever needs it.
TECHNICAL_DETAIL = "Technical detail: "
_LOOPBACK = ("127.", "localhost", "[::1]", "::1", "0.0.0.0")


def connection_lost_text(host: str, technical: str) -> str:
    """A response cut because the connection dropped: a server on this machine that went
    away, or a connection to a provider that broke."""
    if host.startswith(_LOOPBACK):
        what = (f"The model server on this machine ({host}) stopped while answering. Check that it "
                "is still running, then run the request again.")
    else:
        what = (f"The connection to the model provider ({host}) dropped while it was answering. "
                "Run the request again to retry.")
    return f"{what} {TECHNICAL_DETAIL}{technical}"


def embedded_server_lost_text(message: str) -> str:
    """``connection_lost_text`` for the embedded llama-server, which pi_notebook itself
    starts again with the next request: said so instead of "check that it is running"."""
    _, marker, technical = message.partition(TECHNICAL_DETAIL)
    if not marker or not message.startswith("The model server on this machine"):
        return message
    return ("The local model server stopped while answering; it starts again with the next "
            f"request, so run the request again. {TECHNICAL_DETAIL}{technical}")


# --- context overflow -------------------------------------------------------------------------

OVERFLOW_PATTERNS = [re.compile(p, re.IGNORECASE) for p in (
    r"prompt is too long",  # Anthropic
    r"request_too_large",  # Anthropic 413
    r"input is too long for requested model",  # Bedrock
    r"exceeds the context window",  # OpenAI
    r"exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))",  # LiteLLM & co
    r"input token count.*exceeds the maximum",  # Gemini
    r"maximum prompt length is \d+",  # xAI
    r"reduce the length of the messages",  # Groq
    r"maximum context length is \d+ tokens",  # OpenRouter
    r"exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?",  # OpenRouter/Poolside
    r"input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",  # Together
    r"exceeds the limit of \d+",  # GitHub Copilot
    r"exceeds the available context size",  # llama.cpp server
    r"greater than the context length",  # LM Studio
    r"context window exceeds limit",  # MiniMax
    r"exceeded model token limit",  # Kimi
    r"too large for model with \d+ maximum context length",  # Mistral
    r"prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",  # DS4
    r"model_context_window_exceeded",  # z.ai
    r"prompt too long; exceeded (?:max )?context length",  # Ollama
    r"range of input length should be",  # DashScope / Qwen
    r"context[_ ]length[_ ]exceeded",
    r"too many tokens",
    r"token limit exceeded",
    r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)",  # Cerebras
)]

_NOT_OVERFLOW = [re.compile(p, re.IGNORECASE) for p in (
    r"^(Throttling error|Service unavailable):",  # Bedrock
    r"rate limit",
    r"too many requests",
)]


def is_context_overflow(message: Any, context_window: int | None = None) -> bool:
    """Did this assistant message fail because the context was too long?

    ``message`` is an AssistantMessage (or its dict), or just an error text. True for an
    ``error`` whose text matches a provider overflow pattern and no rate-limit pattern; for
    a ``stop`` whose input + cache read exceeds ``context_window`` (silent overflow); for a
    ``length`` stop with no output and input + cache read filling 99% of the window.
    """
    if isinstance(message, str):
        stop_reason, error_message, usage = "error", message, None
    else:
        stop_reason = get_field(message, "stop_reason", "stopReason")
        error_message = get_field(message, "error_message", "errorMessage")
        usage = get_field(message, "usage")
    if (stop_reason == "error" and error_message
            and not any(p.search(error_message) for p in _NOT_OVERFLOW)
            and any(p.search(error_message) for p in OVERFLOW_PATTERNS)):
        return True
    if not context_window or usage is None:
        return False
    input_tokens = (get_field(usage, "input") or 0) + (get_field(usage, "cache_read", "cacheRead") or 0)
    if stop_reason == "stop" and input_tokens > context_window:
        return True
    if stop_reason == "length" and (get_field(usage, "output") or 0) == 0:
        return input_tokens >= context_window * 0.99
    return False


def is_recoverable_length(message: Any, desired_max_output: int) -> bool:
    """A ``length`` stop below the intended output limit (context pressure, not the cap)."""
    usage = get_field(message, "usage")
    output = (get_field(usage, "output") or 0) if usage is not None else 0
    return (get_field(message, "stop_reason", "stopReason") == "length" and desired_max_output > 0
            and output < desired_max_output)
