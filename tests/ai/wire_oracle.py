"""What a recorded provider stream says, read independently of the adapters.

Each ``expect_<api>(events)`` takes the stream's events as ``(event_name, json)`` pairs and
returns an :class:`Expected`: the text and thinking the model produced, its tool calls with
their arguments, the usage in pi's terms and the pi stop reason. These readers are
deliberately naive (whole stream at once, no incremental state, the provider's documented
field meanings) so that an adapter bug cannot hide in shared code.

The event splitter here is a plain whole-body reading of the SSE framing; the adapters use the
incremental decoder in ``pi_notebook/ai/_sse.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Expected:
    text: str = ""
    thinking: str = ""
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, args or CUT)
    stop_reason: str = "stop"
    error_contains: str | None = None
    refusal: str = ""  # a refusal the user and the model must see (as text or as the error)
    input: int | None = None
    output: int | None = None
    cache_read: int | None = None
    tool_ids: list[str] | None = None      # None: the wire sends no ids (ours are generated)
    signatures: list[Any] = field(default_factory=list)  # per thinking block, in order


CUT = object()  # the arguments' JSON never completed


def split_events(body: bytes) -> list[tuple[str, Any]]:
    """Whole-body SSE reading: blocks separated by blank lines; complete blocks only."""
    text = body.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    blocks = text.split("\n\n")
    blocks.pop()  # after the last blank line: an unterminated event, discarded (WHATWG)
    events = []
    for block in blocks:
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith(":") or not line:
                continue
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "event":
                name = value
            elif key == "data":
                data.append(value)
        if data:
            joined = "\n".join(data)
            events.append((name, joined if joined == "[DONE]" else json.loads(joined)))
    return events


def _args(raw: str) -> Any:
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return CUT


# --- anthropic-messages --------------------------------------------------------------------

def expect_anthropic(events: list[tuple[str, Any]]) -> Expected:
    out = Expected()
    blocks: dict[int, dict[str, Any]] = {}
    order: list[dict[str, Any]] = []
    for _, data in events:
        kind = data.get("type")
        if kind == "message_start":
            usage = data["message"].get("usage") or {}
            out.input = usage.get("input_tokens") or 0
            out.output = usage.get("output_tokens") or 0
            out.cache_read = usage.get("cache_read_input_tokens") or 0
        elif kind == "content_block_start":
            block = dict(data["content_block"])
            block["_raw"] = ""
            blocks[data["index"]] = block
            order.append(block)
        elif kind == "content_block_delta":
            block, delta = blocks[data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta["type"] == "input_json_delta":
                block["_raw"] += delta["partial_json"]
            elif delta["type"] == "signature_delta":
                block["signature"] = block.get("signature", "") + delta["signature"]
        elif kind == "message_delta":
            reason = data["delta"].get("stop_reason")
            if reason:
                out.stop_reason = {"end_turn": "stop", "max_tokens": "length", "tool_use": "toolUse",
                                   "pause_turn": "stop", "stop_sequence": "stop"}.get(reason, "error")
                if reason == "refusal":
                    details = data["delta"].get("stop_details") or {}
                    out.error_contains = details.get("explanation") or "refused"
            usage = data.get("usage") or {}
            for ours, theirs in (("input", "input_tokens"), ("output", "output_tokens"),
                                 ("cache_read", "cache_read_input_tokens")):
                if usage.get(theirs) is not None:
                    setattr(out, ours, usage[theirs])
    out.tool_ids = []
    for block in order:
        if block["type"] == "text":
            out.text += block.get("text", "")
        elif block["type"] == "thinking":
            out.thinking += block.get("thinking", "")
            out.signatures.append(block.get("signature", ""))
        elif block["type"] == "redacted_thinking":
            out.signatures.append(block["data"])
        elif block["type"] == "tool_use":
            out.tool_ids.append(block["id"])
            out.tool_calls.append((block["name"], _args(block["_raw"]) if block["_raw"]
                                   else block.get("input") or {}))
    return out


# --- google-generative-ai ------------------------------------------------------------------

def expect_google(events: list[tuple[str, Any]]) -> Expected:
    out = Expected()
    reason = None
    for _, data in events:
        for candidate in data.get("candidates") or []:
            for part in (candidate.get("content") or {}).get("parts") or []:
                if "functionCall" in part:
                    call = part["functionCall"]
                    out.tool_calls.append((call["name"], call.get("args") or {}))
                    out.signatures.append(("call", part.get("thoughtSignature")))
                elif "text" in part:
                    if part.get("thought"):
                        out.thinking += part["text"]
                    else:
                        out.text += part["text"]
            reason = candidate.get("finishReason") or reason
        usage = data.get("usageMetadata")
        if usage:
            cached = usage.get("cachedContentTokenCount") or 0
            out.input = (usage.get("promptTokenCount") or 0) - cached
            out.output = (usage.get("candidatesTokenCount") or 0) + (usage.get("thoughtsTokenCount") or 0)
            out.cache_read = cached
    out.stop_reason = {"STOP": "stop", "MAX_TOKENS": "length"}.get(reason or "", "error")
    if out.tool_calls and out.stop_reason == "stop":
        out.stop_reason = "toolUse"
    return out


# --- openai-responses ----------------------------------------------------------------------

def expect_responses(events: list[tuple[str, Any]]) -> Expected:
    out = Expected()
    for name, data in events:
        kind = data.get("type", name)
        if kind == "response.output_item.done":
            item = data["item"]
            if item["type"] == "message":
                out.text += "".join(part.get("text") if part["type"] == "output_text"
                                    else part.get("refusal", "") for part in item.get("content") or [])
            elif item["type"] == "reasoning":
                out.thinking += "\n\n".join(s["text"] for s in item.get("summary") or [])
                out.signatures.append(item)  # replayed whole on the next turn
            elif item["type"] == "function_call":
                out.tool_calls.append((item["name"], _args(item.get("arguments") or "")))
                out.tool_ids = (out.tool_ids or []) + [f"{item['call_id']}|{item['id']}"]
        elif kind == "error":
            out.stop_reason = "error"
            out.error_contains = data.get("message")
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            response = data["response"]
            usage = response.get("usage") or {}
            if usage:
                cached = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
                out.input = (usage.get("input_tokens") or 0) - cached
                out.output = usage.get("output_tokens") or 0
                out.cache_read = cached
            if kind == "response.failed":
                out.stop_reason = "error"
                out.error_contains = out.error_contains or ((response.get("error") or {}).get("message"))
            elif kind == "response.incomplete":
                out.stop_reason = "length"
            elif out.tool_calls:
                out.stop_reason = "toolUse"
    return out


# --- openai-completions --------------------------------------------------------------------

def expect_completions(events: list[tuple[str, Any]]) -> Expected:
    out = Expected()
    calls: dict[int, dict[str, str]] = {}
    reason = None
    for _, data in events:
        if data == "[DONE]":
            break
        if data.get("error"):
            out.stop_reason = "error"
            out.error_contains = data["error"].get("message")
        usage = data.get("usage") or (data.get("x_groq") or {}).get("usage")
        if usage:
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            out.input = (usage.get("prompt_tokens") or 0) - cached
            out.output = usage.get("completion_tokens") or 0
            out.cache_read = cached
        for choice in data.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue  # n > 1: pi keeps the first choice
            delta = choice.get("delta") or {}
            out.text += delta.get("content") or ""
            out.refusal += delta.get("refusal") or ""
            for key in ("reasoning_content", "reasoning"):
                if delta.get(key):
                    out.thinking += delta[key]
                    break
            for call in delta.get("tool_calls") or []:
                entry = calls.setdefault(call.get("index", 0), {"name": "", "args": "", "id": ""})
                entry["id"] = entry["id"] or call.get("id") or ""
                function = call.get("function") or {}
                entry["name"] += function.get("name") or ""
                entry["args"] += function.get("arguments") or ""
            reason = choice.get("finish_reason") or reason
    out.tool_calls = [(c["name"], _args(c["args"])) for _, c in sorted(calls.items())]
    out.tool_ids = [c["id"] for _, c in sorted(calls.items())]
    if out.stop_reason != "error":
        out.stop_reason = {"stop": "stop", "length": "length", "tool_calls": "toolUse",
                           "function_call": "toolUse"}.get(reason or "stop", "error")
    return out


EXPECT = {"anthropic-messages": expect_anthropic, "google-generative-ai": expect_google,
          "openai-responses": expect_responses, "openai-completions": expect_completions}
