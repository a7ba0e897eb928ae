"""The Chat Completions stream: parsed ``chat.completion.chunk`` payloads onto the live
partial message, and the body reader that feeds them (spec 5.6.4).

One text block and one thinking block per message; tool calls keyed by ``index`` (else
``id``), the first id wins; every ``*_end`` event comes when the stream finishes, in content
order. ``delta.refusal`` (an OpenAI refusal) is text: the user and, on the next turn, the
model see it, as with the Responses API's refusal parts.

Per-token work is O(token): text is appended in place, each SSE payload is parsed once, and
the events of one network read are handed to the stream together, after the tool-call
arguments that grew in that read have been re-parsed (consumers only run between reads, so
they always see the best-effort parse of everything received, as pi's per-fragment re-parse
gives).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from ... import _http
from ..._fast import append_delta, delta_event
from ..._json import parse_final_arguments, parse_streaming_json
from ..._sse import SSEDecoder
from ...abort import AbortError
from ...event_stream import AssistantMessageEventStream
from ...models import calculate_cost
from ...types import (
    AssistantMessage,
    Model,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCall,
    mark_arguments_incomplete,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    PromptProgress,
    Usage,
    usage_total_tokens,
)
from .._common import EventMapper, ProviderStreamError
from ._request import REASONING_FIELDS, dumps

__all__ = ["CompletionsEventMapper", "read_body", "parse_payload"]

_log = logging.getLogger(__name__)

_scan_once = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # CPython's C scanner, not in the stubs


def parse_payload(data: str) -> Any:
    """One ``data:`` payload as JSON; ProviderStreamError (with a preview) when it is not."""
    # The C scanner parses one JSON value without json.loads' Python-level wrapper; when it
    # consumes the whole payload the result is exactly json.loads(data). Anything else goes
    # through json.loads, which accepts surrounding whitespace or raises the real error.
    try:
        value, end = _scan_once(data, 0)
        if end == len(data):
            return value
    except (StopIteration, ValueError):
        pass
    try:
        return json.loads(data)
    except ValueError as exc:
        preview = data if len(data) <= 200 else data[:200] + "..."
        raise ProviderStreamError(f"Invalid JSON in stream event: {exc}: {preview}") from None


def _stream_error_message(error: Any) -> str:
    if isinstance(error, Mapping):
        message = error.get("message")
        text = message if isinstance(message, str) and message else dumps(error)
        metadata = error.get("metadata")
        raw = metadata.get("raw") if isinstance(metadata, Mapping) else None
        if isinstance(raw, str) and raw and raw not in text:
            text = f"{text}\n{raw}"
        return text
    return error if isinstance(error, str) else dumps(error)


class _ToolState:
    __slots__ = ("block", "index", "parts", "dirty")

    def __init__(self, block: ToolCall, index: int) -> None:
        self.block = block
        self.index = index
        self.parts: list[str] = []   # the raw argument JSON received so far, in pieces
        self.dirty = False

    @property
    def scratch(self) -> str:
        parts = self.parts
        if len(parts) > 1:
            parts[:] = ["".join(parts)]
        return parts[0] if parts else ""


# --- the repeated-chunk fast path ---------------------------------------------------------
#
# A server streams one chunk per token, and the chunks of one answer are the same text apart
# from the token: ``{"choices":[{"index":0,"delta":{"content":"<token>"}...}],"id":...}`` (or a
# reasoning field, or ``"tool_calls":[{"index":0,"function":{"arguments":"<token>"}}]``). Once
# such a payload has been parsed and mapped, ``ChunkTemplate`` remembers the text before and
# after the token; a later payload with the same two ends and a *plain* middle (no ``"``, no
# ``\``, no control character: a JSON string body that is its own value) would parse to the
# same object with only that string changed, so it is mapped without parsing: one append and
# its ``*_delta`` event, exactly what ``chunk()`` does with the parsed object (for a tool call:
# the fragment kept and the call marked for the once-per-read re-parse, as tool_call() does).
#
# Why this is exact: the JSON lexer reads the prefix the same way whatever follows, and a plain
# middle cannot end a string or start an escape, so everything after it is read as before. The
# template is kept only after a probe (the token with ``~`` appended, which is a syntax error
# anywhere outside a string) parses to the learned object with that one field changed: that
# proves the middle is the whole value of that field. Anything else (another shape, escapes,
# a non-printable character) takes the ordinary path, which also learns a new template when
# the ends change (a ``created`` timestamp ticking over) within a small budget, so a server
# whose every chunk differs (OpenAI's ``obfuscation`` padding) costs a few attempts per answer.

_DELTA_EFFECT_KEYS = ("content", "refusal", *REASONING_FIELDS, "tool_calls", "reasoning_details")
"""The delta fields ``chunk()`` acts on (any other key, ``role`` for one, is ignored)."""
_TEMPLATE_FIELDS = frozenset(("content", *REASONING_FIELDS))


def _token_slot(value: Any) -> tuple[str, dict[str, Any], str] | None:
    """``(kind, holder, key)`` when mapping ``value`` does nothing but append ``holder[key]``, a
    non-empty string: no usage, no error, no finish reason, choice 0, one delta field with a
    value. ``kind`` is ``content`` (text), a reasoning field (thinking) or ``tool_calls``: the
    arguments of the one call of the delta, which has an int ``index`` (its id and name, if
    repeated, change nothing once the call has them: tool_call() keeps the first)."""
    if type(value) is not dict or value.get("usage") or value.get("error"):
        return None
    choices = value.get("choices")
    if type(choices) is not list or not choices:
        return None
    choice = choices[0]
    if (type(choice) is not dict or choice.get("index") or choice.get("usage")
            or choice.get("finish_reason")):
        return None
    delta = choice.get("delta")
    if type(delta) is not dict:
        return None
    found = None
    for key in _DELTA_EFFECT_KEYS:
        if delta.get(key):
            if found is not None:
                return None
            found = key
    if found in _TEMPLATE_FIELDS:
        return (found, delta, found) if type(delta[found]) is str else None
    if found != "tool_calls":
        return None
    calls = delta["tool_calls"]
    if type(calls) is not list or len(calls) != 1:
        return None
    call = calls[0]
    if type(call) is not dict or type(call.get("index")) is not int:
        return None
    function = call.get("function")
    if type(function) is not dict:
        return None
    return ("tool_calls", function, "arguments") if type(function.get("arguments")) is str else None


def _plain(text: str) -> bool:
    """A JSON string body whose value is itself (``isprintable`` also refuses more than the
    control characters JSON forbids: those take the ordinary path, which is never wrong)."""
    return '"' not in text and "\\" not in text and text.isprintable()


class ChunkTemplate:
    """The two ends of a repeated payload around its token (see the comment above)."""

    __slots__ = ("prefix", "suffix", "start", "stop", "min_length", "kind", "tool_index")

    def __init__(self, prefix: str, suffix: str, kind: str, tool_index: int = -1) -> None:
        self.prefix = prefix
        self.suffix = suffix
        self.start = len(prefix)
        self.stop = -len(suffix)  # the suffix is never empty: it starts with the closing quote
        self.min_length = len(prefix) + len(suffix)  # a longer payload has a non-empty token
        self.kind = kind              # what _token_slot found: content, a reasoning field, tool_calls
        self.tool_index = tool_index  # the tool call's "index" (tool_calls only)

    @staticmethod
    def candidate(value: Any) -> tuple[str, dict[str, Any], str] | None:
        """``_token_slot(value)`` when its token is plain (and not empty): a payload worth a probe."""
        slot = _token_slot(value)
        if slot is None:
            return None
        token = slot[1][slot[2]]
        return slot if token and _plain(token) else None

    @classmethod
    def learn(cls, data: str, value: Any, slot: tuple[str, dict[str, Any], str]) -> ChunkTemplate | None:
        """A template from a payload ``data`` that parsed to ``value`` (already mapped), whose
        ``candidate()`` is ``slot``; ``None`` when the probe does not confirm it."""
        kind, holder, key = slot
        token = holder[key]
        for colon in ('":"', '": "'):
            needle = '"' + key + colon + token + '"'
            at = data.find(needle)
            if at >= 0:
                break
        else:
            return None
        start = at + len(needle) - len(token) - 1
        prefix, suffix = data[:start], data[start + len(token):]
        probe = token + "~"
        try:
            probed, end = _scan_once(prefix + probe + suffix, 0)
        except (StopIteration, ValueError):
            return None
        probed_slot = _token_slot(probed) if end == len(prefix) + len(probe) + len(suffix) else None
        if probed_slot is None or probed_slot[0] != kind:
            return None
        # The probe changed one string; put the token back: equal again only if that string
        # was this slot's value.
        probed_slot[1][key] = token
        if probed != value:
            return None
        if kind != "tool_calls":
            return cls(prefix, suffix, kind)
        return cls(prefix, suffix, kind, value["choices"][0]["delta"]["tool_calls"][0]["index"])


class CompletionsEventMapper(EventMapper):
    """Maps parsed chunks onto the live ``output`` message and emits our events.

    Unlike the base class it keeps the raw JSON of a streaming tool call as a list of
    fragments (joined once per read, never copied per fragment) in a ``_ToolState``.
    """

    def __init__(self, model: Model, output: AssistantMessage, stream: AssistantMessageEventStream,
                 compat: Mapping[str, Any], on_progress: Callable[[PromptProgress], object] | None = None
                 ) -> None:
        super().__init__(model, output, stream)
        self.compat = compat
        self.on_progress = on_progress
        self.content = output.content
        self.text_block: TextContent | None = None
        self.text_index = -1
        self.thinking_block: ThinkingContent | None = None
        self.thinking_index = -1
        self.tools_by_index: dict[int, _ToolState] = {}
        self.tools_by_id: dict[str, _ToolState] = {}
        self.tool_states: list[_ToolState] = []
        self.dirty: list[_ToolState] = []
        self.reasoning_details: list[dict[str, Any]] | None = None
        self.finish_seen = False
        self.need_id = True
        self.need_model = True
        self.need_meta = True

    # one parsed SSE payload
    def chunk(self, chunk: Any) -> None:
        if type(chunk) is not dict:
            return
        get = chunk.get
        usage = get("usage")
        if usage:
            self.usage(usage)  # first: a chunk that reports an error still bills its tokens
        error = get("error")
        if error:
            raise ProviderStreamError(_stream_error_message(error))
        progress = get("prompt_progress")
        if progress is not None:
            self.prompt_progress(progress)
        if self.need_meta:
            self._meta(chunk)
        choices = get("choices")
        if not choices or type(choices) is not list:
            return
        choice = choices[0]
        if type(choice) is not dict:
            return
        if choice.get("index"):  # n > 1: the answer is choice 0, as in pi; the others are dropped
            choice = next((c for c in choices if type(c) is dict and not c.get("index")), None)
            if choice is None:
                return
        if not usage:
            choice_usage = choice.get("usage")
            if choice_usage:
                self.usage(choice_usage)
        finish = choice.get("finish_reason")
        if finish:
            self.finish_reason(finish)
        delta = choice.get("delta")
        if not delta or type(delta) is not dict:
            return
        if len(delta) == 1:
            # The common token: {"content": "..."} alone (OpenAI, llama.cpp, vLLM, Ollama).
            # This is text() inlined: it runs once per token.
            text = delta.get("content")
            if type(text) is str:
                block = self.text_block
                if text and block is not None:
                    self._emit(append_delta(block, "text", text, TextDeltaEvent, "text_delta",
                                            self.text_index, self.output))
                elif text:
                    self.text(text)
                return
            calls = delta.get("tool_calls")
            if type(calls) is list:  # the other common token: one tool-call fragment
                for call in calls:
                    if type(call) is dict:
                        self.tool_call(call)
                return
        self.delta(delta)

    def prompt_progress(self, value: Any) -> None:
        """llama-server's ``prompt_progress`` (``return_progress``: chunks without choices while
        the prompt is read) for the ``on_progress`` option; a malformed one is ignored."""
        if self.on_progress is None or type(value) is not dict:
            return
        fields = [value.get(name) for name in ("total", "cache", "processed", "time_ms")]
        numbers = [v for v in fields if type(v) is int]
        if len(numbers) != len(fields):
            return
        try:
            self.on_progress(PromptProgress(*numbers))
        except Exception:  # a listener's failure must not fail the request
            _log.debug("pi_notebook: on_progress failed", exc_info=True)

    def _meta(self, chunk: dict[str, Any]) -> None:
        if self.need_id:
            cid = chunk.get("id")
            if cid:
                self.output.response_id = str(cid)
                self.need_id = False
        if self.need_model:
            cmodel = chunk.get("model")
            if cmodel:
                self.need_model = False
                if cmodel != self.model.id:
                    self.output.response_model = str(cmodel)
        self.need_meta = self.need_id or self.need_model

    def delta(self, delta: dict[str, Any]) -> None:
        """Any delta: pi's fixed order is content, reasoning, tool calls, reasoning details."""
        text = delta.get("content")
        if text and type(text) is str:
            self.text(text)
        refusal = delta.get("refusal")
        if refusal and type(refusal) is str:
            self.text(refusal)  # an OpenAI refusal: the answer the user and the model see
        for field in REASONING_FIELDS:
            reasoning = delta.get(field)
            if reasoning and type(reasoning) is str:
                self.thinking(reasoning, field)
                break
        tool_calls = delta.get("tool_calls")
        if tool_calls and type(tool_calls) is list:
            for call in tool_calls:
                if type(call) is dict:
                    self.tool_call(call)
        details = delta.get("reasoning_details")
        if details and type(details) is list:
            self.add_reasoning_details(details)

    def text(self, delta: str) -> None:
        block = self.text_block
        if block is None:
            block = self.text_block = TextContent(text="")
            self.text_index = len(self.content)
            self.content.append(block)
            self._emit(TextStartEvent(content_index=self.text_index, partial=self.output))
        self._emit(append_delta(block, "text", delta, TextDeltaEvent, "text_delta", self.text_index,
                                self.output))

    def template_target(self, template: ChunkTemplate) -> tuple[Any, str, Any, str, int, _ToolState | None]:
        """Where a token of ``template`` goes: ``(block, block field, event class, event type,
        content index)`` for ``append_delta``, or for a tool call's arguments its ``_ToolState``
        last (and the content index). The template was learned from a mapped token of that
        kind, so the block or the call exists."""
        kind = template.kind
        if kind == "content":
            assert self.text_block is not None
            return self.text_block, "text", TextDeltaEvent, "text_delta", self.text_index, None
        if kind == "tool_calls":
            state = self.tools_by_index[template.tool_index]
            return None, "", None, "", state.index, state
        assert self.thinking_block is not None
        return (self.thinking_block, "thinking", ThinkingDeltaEvent, "thinking_delta",
                self.thinking_index, None)

    def _ensure_thinking(self, field: str) -> ThinkingContent:
        block = self.thinking_block
        if block is None:
            block = self.thinking_block = ThinkingContent(thinking="", thinking_signature=field)
            self.thinking_index = len(self.content)
            self.content.append(block)
            self._emit(ThinkingStartEvent(content_index=self.thinking_index, partial=self.output))
        return block

    def thinking(self, delta: str, field: str) -> None:
        block = self._ensure_thinking(field)
        self._emit(append_delta(block, "thinking", delta, ThinkingDeltaEvent, "thinking_delta",
                                self.thinking_index, self.output))

    def tool_call(self, call: dict[str, Any]) -> None:
        index: Any = call.get("index")
        call_id = call.get("id")
        function = call.get("function")
        if type(function) is not dict:
            function = {}
        state: _ToolState | None = None
        by_index = type(index) is int
        if by_index:
            state = self.tools_by_index.get(index)
        elif call_id:
            state = self.tools_by_id.get(call_id)
        name = function.get("name")
        if state is None:
            block = ToolCall(id=str(call_id) if call_id else "", name=name if isinstance(name, str) else "",
                             arguments={})
            state = _ToolState(block, len(self.content))
            self.content.append(block)
            self.tool_states.append(state)
            if by_index:
                self.tools_by_index[index] = state
            if call_id:
                self.tools_by_id[call_id] = state
            self._emit(ToolCallStartEvent(content_index=state.index, partial=self.output))
        else:
            block = state.block
            # Fill in late ids and names, but never replace them: some servers repeat the name
            # in every delta (llama-cpp-python) or change the id mid-stream; the first one wins.
            if call_id and not block.id:
                block.id = str(call_id)
                self.tools_by_id.setdefault(call_id, state)
            if name and isinstance(name, str) and not block.name:
                block.name = name
        fragment = function.get("arguments")
        if fragment is None:
            fragment = ""
        elif type(fragment) is not str:
            fragment = dumps(fragment)
        if fragment:
            state.parts.append(fragment)  # joined once per read, not copied per fragment
            if not state.dirty:
                state.dirty = True
                self.dirty.append(state)
        self._emit(delta_event(ToolCallDeltaEvent, "toolcall_delta", state.index, fragment, self.output))

    def flush(self) -> None:
        """Re-parse the tool calls that grew, then hand over the events of this read."""
        if self.dirty:
            self.parse_arguments()
        if self.events:
            self.stream.push_many(self.events)
            self.events.clear()

    def parse_arguments(self) -> None:
        """Re-parse the arguments of the tool calls that grew since the last call.

        pi re-parses after every fragment. Here it happens once per network read, before
        control returns to the event loop: consumers run only then, and the partial is live,
        so every event they see still finds the best-effort parse of all JSON received so far
        (rule 9) while a read carrying many fragments costs one parse instead of one per fragment.
        """
        for state in self.dirty:
            state.dirty = False
            state.block.arguments = _as_arguments(parse_streaming_json(state.scratch))
        self.dirty.clear()

    def add_reasoning_details(self, details: list[Any]) -> None:
        collected = self.reasoning_details
        if collected is None:
            collected = self.reasoning_details = []
        for item in details:
            if type(item) is not dict or not isinstance(item.get("type"), str):
                continue
            last = collected[-1] if collected else None
            kind = item["type"]
            if (last is not None and last.get("type") == kind
                    and kind in ("reasoning.text", "reasoning.summary")
                    and last.get("index", 0) == item.get("index", 0)):
                key = "text" if kind == "reasoning.text" else "summary"
                last[key] = (last.get(key) or "") + (item.get(key) or "")
                if item.get("signature"):
                    last["signature"] = item["signature"]
            else:
                collected.append(dict(item))

    def usage(self, raw: Any) -> None:
        if type(raw) is not dict:
            return
        details = raw.get("prompt_tokens_details")
        details = details if type(details) is dict else {}
        cache_read = details.get("cached_tokens")
        if cache_read is None:
            cache_read = raw.get("prompt_cache_hit_tokens")
        if cache_read is None:
            cache_read = raw.get("cached_tokens")
        cache_read = _int(cache_read)
        cache_write = _int(details.get("cache_write_tokens"))
        prompt = _int(raw.get("prompt_tokens"))
        output_tokens = _int(raw.get("completion_tokens"))
        completion_details = raw.get("completion_tokens_details")
        reasoning = _int(completion_details.get("reasoning_tokens")) if type(completion_details) is dict else 0
        input_tokens = max(0, prompt - cache_read - cache_write)
        usage = Usage(input=input_tokens, output=output_tokens, cache_read=cache_read,
                      cache_write=cache_write, reasoning=reasoning)
        usage.total_tokens = usage_total_tokens(usage)
        calculate_cost(self.model, usage)
        self.output.usage = usage

    def finish_reason(self, reason: Any) -> None:
        reason = str(reason)
        self.finish_seen = True
        output = self.output
        output.raw_stop_reason = reason
        if reason in ("stop", "end"):
            output.stop_reason = "stop"
        elif reason == "length":
            output.stop_reason = "length"
        elif reason in ("tool_calls", "function_call"):
            output.stop_reason = "toolUse"
        else:
            output.stop_reason = "error"
            output.error_message = f"Provider finish_reason: {reason}"

    def end_blocks(self) -> None:
        """Finish every block in content order (all ``_end`` events come last)."""
        if self.reasoning_details:
            thinking = self._ensure_thinking("reasoning_details")
            thinking.thinking_signature = dumps(self.reasoning_details)
        tools = {id(s.block): s for s in self.tool_states}
        for index, block in enumerate(self.content):
            if isinstance(block, TextContent):
                self._emit(TextEndEvent(content_index=index, content=block.text, partial=self.output))
            elif isinstance(block, ThinkingContent):
                self._emit(ThinkingEndEvent(content_index=index, content=block.thinking,
                                           partial=self.output))
            elif isinstance(block, ToolCall):
                state = tools.get(id(block))
                if state is not None and state.scratch:
                    # Chat Completions never says a call is finished: argument text that is not
                    # strict JSON for an object was cut or repaired, and the loop must not run it
                    # (docs/design/wire-trust.md).
                    arguments, complete = parse_final_arguments(state.scratch)
                    block.arguments = arguments
                    if not complete:
                        mark_arguments_incomplete(block)
                self._emit(ToolCallEndEvent(content_index=index, tool_call=block, partial=self.output))
        self.flush()

    def finish(self) -> None:
        """End every block; raise when the stream did not end with a usable finish reason."""
        self.end_blocks()
        output = self.output
        if not self.finish_seen and self.compat.get("supportsFinishReason") is False:
            output.stop_reason = "toolUse" if self.tool_states else "stop"
        if output.stop_reason == "error":
            raise ProviderStreamError(output.error_message or "Provider returned an error stop")
        if output.stop_reason == "pending":
            raise ProviderStreamError("Stream ended without finish_reason")


def _int(value: Any) -> int:
    if value is None or isinstance(value, bool):
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _as_arguments(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


async def read_body(response: _http.StreamResponse, mapper: CompletionsEventMapper) -> None:
    """Decode the SSE body onto ``mapper`` until ``[DONE]`` (or the end of the body).

    The shared skeleton's SSE loop, specialised for the per-token path: data-only decoding,
    each payload parsed inline (or, when it repeats the last token chunk's shape, not parsed
    at all: ``ChunkTemplate``), and ``[DONE]`` ends the message at once (the rest of the body
    is drained, not decoded).
    """
    decoder = SSEDecoder(data_only=True)
    handle = mapper.chunk
    scan = _scan_once
    chunks = response.iter_bytes()
    # The template in use, unpacked into locals for the per-token test (see ChunkTemplate).
    t_prefix = t_suffix = ""
    t_start = t_stop = 0
    t_min = sys.maxsize  # no payload is longer: off until a template is learned
    t_block: Any = None
    t_attr = t_kind = ""
    t_cls: Any = None
    t_index = 0
    t_state: _ToolState | None = None
    hits = looks = probes = 0
    emit = mapper._emit
    dirty = mapper.dirty
    output = mapper.output
    try:
        async for raw in chunks:
            for data in decoder.feed(raw):
                fits = False
                if len(data) > t_min and data.startswith(t_prefix) and data.endswith(t_suffix):
                    token = data[t_start:t_stop]
                    if '"' not in token and "\\" not in token and token.isprintable():
                        # chunk()'s append (text(), thinking() or tool_call()), inlined: once per token
                        if t_state is None:
                            emit(append_delta(t_block, t_attr, token, t_cls, t_kind, t_index, output))
                        else:
                            t_state.parts.append(token)
                            if not t_state.dirty:
                                t_state.dirty = True
                                dirty.append(t_state)
                            emit(delta_event(ToolCallDeltaEvent, "toolcall_delta", t_index, token, output))
                        hits += 1
                        continue
                    fits = True  # the template still fits: only this token needs the parser
                # parse_payload, inlined: this loop runs once per token
                try:
                    value, end = scan(data, 0)
                    if end != len(data):
                        value = parse_payload(data)
                except (StopIteration, ValueError):
                    if data == "[DONE]":
                        await _drain(chunks)
                        return
                    if not data.strip():  # "data:" with no value: a valid, empty event
                        continue
                    value = parse_payload(data)
                handle(value)
                # Another shape: learn it, within budgets per answer that grow with the hits
                # (a look costs a few dict reads, a probe a parse).
                if not fits and looks <= 64 + hits:
                    looks += 1
                    slot = ChunkTemplate.candidate(value)
                    template = None
                    if slot is not None and probes <= 4 + hits // 16:
                        probes += 1
                        template = ChunkTemplate.learn(data, value, slot)
                    if template is not None:
                        t_prefix, t_suffix, t_start, t_stop, t_min = (
                            template.prefix, template.suffix, template.start, template.stop,
                            template.min_length)
                        t_block, t_attr, t_cls, t_kind, t_index, t_state = mapper.template_target(template)
            mapper.flush()
        for data in decoder.flush():
            if data == "[DONE]":
                return
            if data.strip():
                handle(parse_payload(data))
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]  # an async generator (iter_bytes)


async def _drain(chunks: AsyncIterator[bytes], timeout: float = 2.0) -> None:
    """Read the (normally empty) rest of the body after ``[DONE]``.

    Ending the HTTP response cleanly is what lets the connection go back to the pool; a
    server that keeps the stream open after ``[DONE]`` only costs this bounded wait.
    """
    async def rest() -> None:
        async for _ in chunks:
            pass

    try:
        if _timeout_scope is not None:  # 3.11+: no extra task per request
            async with _timeout_scope(timeout):
                await rest()
        else:
            await asyncio.wait_for(rest(), timeout)
    except (asyncio.TimeoutError, _http.HttpError, AbortError):
        pass  # the message is complete; an abort is still seen by the caller's signal check


_timeout_scope = getattr(asyncio, "timeout", None)
