"""The repeated-chunk fast path of openai-completions (``ChunkTemplate`` in ``_mapper.py``).

A payload that repeats the last token chunk's text apart from a plain token is mapped without
being parsed. The contract: ``read_body`` gives exactly the events and the message it gives
with the fast path turned off, for any stream; and on an ordinary stream most payloads really
take the fast path (else the equivalence checks would prove nothing).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from pi_notebook.ai.event_stream import AssistantMessageEventStream
from pi_notebook.ai.providers._common import ProviderStreamError, new_output
from pi_notebook.ai.providers.openai_completions import _mapper
from pi_notebook.ai.providers.openai_completions._mapper import (
    ChunkTemplate, CompletionsEventMapper, read_body,
)
from pi_notebook.ai.types import Model

MODEL = Model(id="m", api="openai-completions", provider="openai", base_url="http://127.0.0.1:1/v1")

# Tokens a model streams, including every kind the fast path must leave to the parser.
TOKENS = ["The", " sea", " is", " deep", ",", " fish", " swim", ".", "~", " ", "x" * 300,
          'say "hi"', "back\\slash", "line\nbreak", "tab\there", "caf\u00e9", " \U0001f30a",
          "\u00a0nbsp", "zw\u200dj", "del\x7f", "\u2028sep", "}]}", '"},{"', "\\u0041", ":\"",
          '{"content":"x"}']


class FakeResponse:
    """What ``read_body`` needs of an ``_http.StreamResponse``: the body in given pieces."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    async def iter_bytes(self):
        for piece in self.pieces:
            yield piece


def llama_chunk(delta: dict[str, Any], created: int = 1795998014, finish: str | None = None,
                separators: tuple[str, str] = (",", ":"), ensure_ascii: bool = False,
                **extra: Any) -> dict[str, Any]:
    payload = {"choices": [{"finish_reason": finish, "index": 0, "delta": delta}], "created": created,
               "id": "chatcmpl-1", "model": "m", "object": "chat.completion.chunk", **extra}
    return {"payload": payload, "separators": separators, "ensure_ascii": ensure_ascii}


def body_of(chunks: list[dict[str, Any]], done: bool = True) -> bytes:
    lines = []
    for c in chunks:
        text = json.dumps(c["payload"], separators=c["separators"], ensure_ascii=c["ensure_ascii"])
        lines.append(f"data: {text}\n\n")
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def pieces_of(body: bytes, rng: random.Random | None) -> list[bytes]:
    if rng is None:
        return [body]
    out, at = [], 0
    while at < len(body):
        size = rng.choice([1, 7, 64, 500, 4096])
        out.append(body[at:at + size])
        at += size
    return out


async def run(body_pieces: list[bytes], fast: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list, Any, str]:
    """(events, message, error) of read_body plus the mapper's finish()."""
    with monkeypatch.context() as patch:
        if not fast:
            patch.setattr(ChunkTemplate, "learn", classmethod(lambda cls, data, value, slot: None))
        stream = AssistantMessageEventStream()
        output = new_output(MODEL)
        mapper = CompletionsEventMapper(MODEL, output, stream, {})
        # what a consumer finds on the live message after each read (tool arguments re-parsed)
        seen: list[Any] = []
        flush = mapper.flush

        def flush_and_look() -> None:
            flush()
            seen.append([block.model_dump() for block in output.content])

        patch.setattr(mapper, "flush", flush_and_look)
        error = ""
        try:
            await read_body(FakeResponse(body_pieces), mapper)  # type: ignore[arg-type]
            mapper.finish()
        except ProviderStreamError as exc:
            error = str(exc)
        mapper.flush()
        stream.end()
        events = [e async for e in stream]
    events.append(seen)  # type: ignore[arg-type]  # compared with the events by describe()
    return events, output, error


def describe(events: list, message: Any, error: str) -> Any:
    seen: list[Any] = [events[-1]]  # the live message after each read (see run())
    for e in events[:-1]:
        item = {k: v for k, v in e.__dict__.items() if k != "partial"}
        if "tool_call" in item:
            item["tool_call"] = item["tool_call"].model_dump()
        seen.append((type(e).__name__, item, e.model_fields_set))
    dumped = message.model_dump()
    dumped.pop("timestamp")  # when the run started: not the fast path's business
    return seen, dumped, error


async def assert_same(body: bytes, monkeypatch: pytest.MonkeyPatch, rng: random.Random | None = None) -> None:
    pieces = pieces_of(body, rng)
    fast = describe(*await run(pieces, True, monkeypatch))
    plain = describe(*await run(pieces, False, monkeypatch))
    assert fast == plain


def count_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = _mapper._scan_once

    def counting(data: str, at: int) -> Any:
        calls[0] += 1
        return real(data, at)

    monkeypatch.setattr(_mapper, "_scan_once", counting)
    return calls


def text_chunks(tokens: list[str], **kw: Any) -> list[dict[str, Any]]:
    chunks = [llama_chunk({"role": "assistant", "content": None}, **kw)]
    chunks += [llama_chunk({"content": t}, **kw) for t in tokens]
    chunks.append(llama_chunk({}, finish="stop", **kw))
    return chunks


async def test_an_ordinary_stream_is_mostly_not_parsed_and_maps_the_same(monkeypatch):
    tokens = [TOKENS[i % 8] for i in range(400)]
    body = body_of(text_chunks(tokens))
    calls = count_parses(monkeypatch)
    events, message, error = await run([body], True, monkeypatch)
    assert error == ""
    assert message.content[0].text == "".join(tokens)
    assert [e.delta for e in events[:-1] if e.type == "text_delta"] == tokens
    assert calls[0] < 20  # the first chunks, the template's probe and the finish chunk only
    await assert_same(body, monkeypatch)


@pytest.mark.parametrize("seed", range(40))
async def test_random_streams_map_as_without_the_fast_path(monkeypatch, seed):
    rng = random.Random(seed)
    shape = rng.choice(["llama", "spaced", "ascii", "obfuscated", "ticking", "reasoning", "mixed"])
    chunks: list[dict[str, Any]] = [llama_chunk({"role": "assistant", "content": None})]
    created = 1795998014
    for i in range(rng.randint(1, 120)):
        token = rng.choice(TOKENS)
        kw: dict[str, Any] = {}
        if shape == "spaced":
            kw["separators"] = (", ", ": ")
        elif shape == "ascii":
            kw["ensure_ascii"] = True
        elif shape == "obfuscated":
            kw["obfuscation"] = "x" * rng.randint(1, 12)
        elif shape == "ticking" and rng.random() < 0.1:
            created += 1
        if shape == "ticking":
            kw["created"] = created
        if shape == "reasoning" and i < 30:
            chunks.append(llama_chunk({"content": None, "reasoning_content": token}, **kw))
        elif shape == "mixed" and rng.random() < 0.3:
            delta = rng.choice([{"content": token, "reasoning_content": "r"}, {"content": ""},
                                {"reasoning": token}, {"refusal": token}, {"content": 7},
                                {"role": "assistant", "content": token}])
            chunks.append(llama_chunk(delta, **kw))
        else:
            chunks.append(llama_chunk({"content": token}, **kw))
    chunks.append(llama_chunk({}, finish=rng.choice(["stop", "length", "weird"])))
    await assert_same(body_of(chunks, done=rng.random() < 0.8), monkeypatch, rng)


async def test_the_same_token_in_an_earlier_field_is_not_taken_for_the_token(monkeypatch):
    # the first occurrence of '"content":"The"' is not the delta's: the probe refuses it
    chunks = [llama_chunk({"content": t}, x={"content": "The"}) for t in ["The"] * 3 + [" sea"] * 5]
    payloads = [json.dumps({"x": {"content": "The"}, **c["payload"]}, separators=(",", ":"))
                for c in chunks]
    body = "".join(f"data: {p}\n\n" for p in payloads).encode()
    await assert_same(body, monkeypatch)
    _events, message, _ = await run([body], True, monkeypatch)
    assert message.content[0].text == "The" * 3 + " sea" * 5


async def test_a_chunk_with_the_same_ends_but_other_content_is_parsed(monkeypatch):
    # a token with a quote or escape in the middle of a learned template must go to the parser
    tokens = ["a", "b", '", "injected": "1', "\\u0041", "c\\", "d"]
    payloads = ['{"choices":[{"index":0,"delta":{"content":"' + t + '"}}]}' for t in tokens]
    body = "".join(f"data: {p}\n\n" for p in payloads).encode()
    events, _message, error = await run([body], True, monkeypatch)
    assert "Invalid JSON" in error  # 'c\' escapes the closing quote: not JSON, as without the fast path
    # '", "injected": "1' makes the content empty (and adds a field): no delta, as when parsed
    assert [e.delta for e in events[:-1] if e.type == "text_delta"] == ["a", "b", "A"]
    await assert_same(body, monkeypatch)


async def test_control_characters_still_fail_as_invalid_json(monkeypatch):
    payloads = ['{"choices":[{"index":0,"delta":{"content":"' + t + '"}}]}' for t in ["a", "b", "c\x01"]]
    body = "".join(f"data: {p}\n\n" for p in payloads).encode()
    _events, message, error = await run([body], True, monkeypatch)
    assert "Invalid JSON" in error and message.content[0].text == "ab"
    await assert_same(body, monkeypatch)


def test_learn_refuses_what_it_cannot_prove() -> None:
    def learn(payload: str) -> ChunkTemplate | None:
        value = json.loads(payload)
        slot = ChunkTemplate.candidate(value)
        return None if slot is None else ChunkTemplate.learn(payload, value, slot)

    assert learn('{"choices":[{"index":0,"delta":{"content":"hi"}}]}') is not None
    # more than one effect, a finish reason, usage, another choice, an escaped token
    assert learn('{"choices":[{"index":0,"delta":{"content":"hi","reasoning":"r"}}]}') is None
    assert learn('{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}') is None
    assert learn('{"choices":[{"index":0,"delta":{"content":"hi"}}],"usage":{"a":1}}') is None
    assert learn('{"choices":[{"index":1,"delta":{"content":"hi"}}]}') is None
    assert learn('{"choices":[{"index":0,"delta":{"content":"h\\"i"}}]}') is None
    # the needle first found in another field: the probe changes the wrong value
    assert learn('{"a":"\\"content\\":\\"hi\\"","choices":[{"delta":{"content":"hi"}}]}') is not None
    assert learn('{"b":{"content":"hi"},"choices":[{"delta":{"content":"hi"}}]}') is None


def tool_chunks(args_by_call: list[str], rng: random.Random, interleave: bool) -> list[dict[str, Any]]:
    """Tool calls whose arguments arrive in random fragments (several calls: by index)."""
    chunks: list[dict[str, Any]] = []
    pieces: list[tuple[int, str]] = []
    for index, args in enumerate(args_by_call):
        chunks.append(llama_chunk({"tool_calls": [{"index": index, "id": f"call_{index}", "type": "function",
                                                   "function": {"name": "python", "arguments": ""}}]}))
        at = 0
        while at < len(args):
            size = rng.randint(1, 12)
            pieces.append((index, args[at:at + size]))
            at += size
    if interleave:  # the calls' fragments mixed, each call's in its own order
        by_call = {index: [p for i, p in pieces if i == index] for index in range(len(args_by_call))}
        order = [i for i, _ in pieces]
        rng.shuffle(order)
        pieces = [(index, by_call[index].pop(0)) for index in order]
    for index, piece in pieces:
        call: dict[str, Any] = {"index": index, "function": {"arguments": piece}}
        if rng.random() < 0.05:
            call["function"]["name"] = "python"  # llama-cpp-python repeats the name
        chunks.append(llama_chunk({"tool_calls": [call]}))
    chunks.append(llama_chunk({}, finish="tool_calls"))
    return chunks


CODE = 'import pandas as pd\ndf = pd.read_csv("orders.csv")\nprint(df.head(3))  # a "quoted" word'


@pytest.mark.parametrize("seed", range(30))
async def test_tool_call_fragments_map_as_without_the_fast_path(monkeypatch, seed):
    rng = random.Random(seed)
    calls = [json.dumps({"code": CODE * rng.randint(1, 4)}),
             json.dumps({"path": "notes/plan.md", "content": " ".join(f"line {i}" for i in range(40))})]
    chunks = tool_chunks(calls[: rng.randint(1, 2)], rng, interleave=rng.random() < 0.5)
    await assert_same(body_of(chunks), monkeypatch, rng)


async def test_tool_call_fragments_mostly_skip_the_parser(monkeypatch):
    rng = random.Random(7)
    args = json.dumps({"path": "notes/plan.md", "content": " ".join(f"line {i}" for i in range(300))})
    chunks = tool_chunks([args], rng, interleave=False)
    calls = count_parses(monkeypatch)
    events, message, error = await run([body_of(chunks)], True, monkeypatch)
    assert error == "" and message.content[0].arguments == json.loads(args)
    fragments = [e.delta for e in events[:-1] if e.type == "toolcall_delta"]
    assert "".join(fragments) == args and len(fragments) == len(chunks) - 1  # the start has ""
    assert calls[0] < len(chunks) // 4


async def test_a_second_call_in_the_same_delta_is_not_dropped(monkeypatch):
    # two calls per delta: the second one's (constant, empty) fragment is an event of its own
    chunks = [llama_chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}},
                                          {"index": 1, "id": "b", "function": {"name": "g", "arguments": ""}}]})]
    chunks += [llama_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}},
                                           {"index": 1, "function": {"arguments": ""}}]})
               for piece in ['{"x', '": "', "abc", "def", "ghi", '"}']]
    await assert_same(body_of(chunks), monkeypatch)


async def test_repeated_ids_and_names_in_fragments_change_nothing(monkeypatch):
    # llama-cpp-python repeats the name (and some servers the id) in every fragment
    chunks = [llama_chunk({"tool_calls": [{"index": 0, "id": "a", "type": "function",
                                           "function": {"name": "f", "arguments": piece}}]})
              for piece in ['{"x', '": "', "abc", "def", "ghi", '"}']]
    chunks.append(llama_chunk({}, finish="tool_calls"))
    await assert_same(body_of(chunks), monkeypatch)
    calls = count_parses(monkeypatch)
    await run([body_of(chunks)], True, monkeypatch)
    assert calls[0] == len(chunks) + 1 - 2 + 1  # and [DONE]; "def" and "ghi" unparsed; one probe
