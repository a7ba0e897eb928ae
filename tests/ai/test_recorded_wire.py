"""Every recorded real provider stream, replayed through its adapter with several chunk splittings.

The streams and error bodies in ``data/recorded-wire/<api>/`` come from the official SDKs' test
suites, pydantic-ai's VCR cassettes and vercel/ai's fixtures; each has a ``.source.json`` sidecar
naming its origin. What the stream says (text, thinking, tool calls and their arguments, usage,
stop reason) is read by the independent reader in ``wire_oracle.py`` and compared with what the
adapter produced.

Splittings: ``whole`` goes through the real local HTTP server (real framing); ``lines``,
``bytes`` (one byte per chunk; seeded random 1-16 byte chunks for streams over 64 KB) and
``random`` (seeded 1-300 byte chunks) go through a stand-in for ``_http.open_stream`` so that the
adapter sees exactly those chunks.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from helpers.sse_server import Reply, ScriptedServer
from wire_oracle import CUT, EXPECT, split_events

from pi_notebook.ai import _http
from pi_notebook.ai.providers.anthropic import stream_anthropic_messages
from pi_notebook.ai.providers.google import stream_google_generative_ai
from pi_notebook.ai.providers.openai_completions import stream_openai_completions
from pi_notebook.ai.providers.openai_responses import stream_openai_responses
from pi_notebook.ai.types import Context, Model, ModelCost, UserMessage, arguments_incomplete

ROOT = Path(__file__).parent / "data" / "recorded-wire"
STREAMS = sorted(ROOT.glob("*/*.sse"))
ERROR_BODIES = sorted(ROOT.glob("*/http_errors/*.body"))
SPLITS = ("whole", "lines", "bytes", "random")

ADAPTERS = {"anthropic-messages": stream_anthropic_messages,
            "google-generative-ai": stream_google_generative_ai,
            "openai-responses": stream_openai_responses,
            "openai-completions": stream_openai_completions}
PROVIDERS = {"anthropic-messages": "anthropic", "google-generative-ai": "google",
             "openai-responses": "openai", "openai-completions": "openai"}

# Known adapter gaps (strict xfail: a test fails once its gap is closed). None today.
COMPLETIONS_GAPS: dict[str, str] = {}


def _sidecar(path: Path) -> dict[str, Any]:
    return json.loads(path.with_name(path.name.rsplit(".", 1)[0] + ".source.json").read_text())


def _model(api: str, base_url: str, model_id: str = "recorded-model") -> Model:
    return Model(id=model_id, name=model_id, api=api, provider=PROVIDERS[api], base_url=base_url,
                 reasoning=True, input=["text"], cost=ModelCost(), context_window=200_000,
                 max_tokens=8192)


def split(body: bytes, how: str) -> list[bytes]:
    if how == "whole":
        return [body]
    if how == "lines":
        return [line for line in body.splitlines(keepends=True)]
    rng = random.Random(len(body))
    if how == "bytes" and len(body) <= 64_000:
        return [body[i:i + 1] for i in range(len(body))]
    top = 16 if how == "bytes" else 300
    chunks, i = [], 0
    while i < len(body):
        n = rng.randint(1, top)
        chunks.append(body[i:i + n])
        i += n
    return chunks


class _FakeResponse:
    """What ``_http.open_stream`` returns, serving a fixed list of chunks."""

    status = 200
    url = "http://recorded.invalid/"

    def __init__(self, chunks: list[bytes]) -> None:
        self.headers = {"content-type": "text/event-stream"}
        self._chunks = chunks

    async def iter_bytes(self):
        for chunk in self._chunks:
            yield chunk

    async def read_text(self) -> str:
        return b"".join(self._chunks).decode()

    async def aclose(self) -> None:
        pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc: Any) -> None:
        pass

    def __await__(self):
        async def itself():
            return self
        return itself().__await__()


async def _replay(api: str, body: bytes, how: str, monkeypatch, model_id: str = "recorded-model"):
    if how == "whole":
        with ScriptedServer() as server:
            server.push(Reply(chunks=[body]))
            stream = ADAPTERS[api](_model(api, server.url, model_id),
                                   Context(messages=[UserMessage(content="hi")]), {"api_key": "k"})
            events = [e async for e in stream]
            return events, await stream.result()
    chunks = split(body, how)
    monkeypatch.setattr(_http, "open_stream", lambda *a, **k: _FakeResponse(chunks))
    stream = ADAPTERS[api](_model(api, "http://recorded.invalid", model_id),
                           Context(messages=[UserMessage(content="hi")]), {"api_key": "k"})
    events = [e async for e in stream]
    return events, await stream.result()


def _observed(message) -> dict[str, Any]:
    text = "".join(b.text for b in message.content if b.type == "text")
    thinking = "".join(b.thinking for b in message.content if b.type == "thinking" and not b.redacted)
    calls = [(b.name, CUT if arguments_incomplete(b) else b.arguments)
             for b in message.content if b.type == "toolCall"]
    ids = [b.id for b in message.content if b.type == "toolCall"]
    return {"text": text, "thinking": thinking, "tool_calls": calls, "tool_ids": ids}


def _signatures(api: str, message) -> list[Any]:
    """What the adapter kept to replay each thinking block (or Gemini call) on the next turn."""
    if api == "google-generative-ai":
        return [("call", b.thought_signature) for b in message.content if b.type == "toolCall"]
    thinking = [b for b in message.content if b.type == "thinking"]
    if api == "openai-responses":
        return [json.loads(b.thinking_signature) for b in thinking]
    if api == "anthropic-messages":
        return [b.thinking_signature for b in thinking]
    return []


def _params(paths: list[Path]):
    out = []
    for path in paths:
        api = path.parent.name
        marks = []
        if api == "openai-completions" and path.name in COMPLETIONS_GAPS:
            marks.append(pytest.mark.xfail(strict=True, reason=COMPLETIONS_GAPS[path.name]))
        for how in SPLITS:
            out.append(pytest.param(path, how, id=f"{api}/{path.stem}/{how}", marks=marks))
    return out


@pytest.mark.parametrize("path,how", _params(STREAMS))
async def test_recorded_stream_replays_as_it_says(path: Path, how: str, monkeypatch):
    api = path.parent.name
    body = path.read_bytes()
    expected = EXPECT[api](split_events(body))
    events, message = await _replay(api, body, how, monkeypatch,
                                    _sidecar(path).get("recorded_request_model") or "recorded-model")
    seen = _observed(message)

    assert events[-1].type in ("done", "error")
    assert [e.type for e in events].count("done") + [e.type for e in events].count("error") == 1
    if expected.refusal:
        # either shape surfaces it: the refusal as the answer's text, or as the error message
        assert message.stop_reason in ("stop", "error")
        assert expected.refusal in seen["text"] + (message.error_message or "")
        seen["text"] = seen["text"].replace(expected.refusal, "", 1)
    else:
        assert message.stop_reason == expected.stop_reason, message.error_message
        if expected.error_contains is not None:
            assert expected.error_contains in (message.error_message or "")
        elif message.stop_reason != "error":
            assert message.error_message is None
    assert seen["text"] == expected.text
    assert seen["thinking"] == expected.thinking
    assert seen["tool_calls"] == expected.tool_calls
    if expected.tool_ids is not None:
        assert seen["tool_ids"] == expected.tool_ids
    if api != "openai-completions":
        assert _signatures(api, message) == expected.signatures
    if expected.input is not None:
        assert message.usage.input == expected.input
        assert message.usage.output == expected.output
        assert message.usage.cache_read == expected.cache_read


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_every_splitting_gives_the_same_message(path: Path, monkeypatch):
    api = path.parent.name
    body = path.read_bytes()
    dumps = []
    for how in SPLITS:
        _, message = await _replay(api, body, how, monkeypatch)
        dump = message.model_dump()
        dump.pop("timestamp", None)
        if api == "google-generative-ai":  # Gemini sends no call ids: ours are generated per run
            for block in dump["content"]:
                block.pop("id", None)
        dumps.append(dump)
    assert all(d == dumps[0] for d in dumps[1:])


def _error_message_of(body: dict[str, Any]) -> str:
    error = body["error"]
    raw = (error.get("metadata") or {}).get("raw")
    return raw or error["message"]


@pytest.mark.parametrize("path", ERROR_BODIES, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
async def test_recorded_error_body_becomes_a_clear_error(path: Path):
    api = path.parent.parent.name
    sidecar = _sidecar(path)
    body = path.read_bytes()
    with ScriptedServer() as server:
        server.push(Reply(status=sidecar["status"], chunks=[body],
                          content_type=sidecar.get("content_type", "application/json")))
        stream = ADAPTERS[api](_model(api, server.url), Context(messages=[UserMessage(content="hi")]),
                               {"api_key": "k", "max_retries": 0})
        events = [e async for e in stream]
        message = await stream.result()
    assert [e.type for e in events] == ["error"]
    assert message.stop_reason == "error"
    assert str(sidecar["status"]) in message.error_message
    assert _error_message_of(json.loads(body)) in message.error_message


def test_every_fixture_has_its_sidecar_and_they_are_all_here():
    assert len(STREAMS) == 73
    assert len(ERROR_BODIES) == 8
    for path in [*STREAMS, *ERROR_BODIES]:
        sidecar = _sidecar(path)
        assert sidecar["api"] == (path.parent.name if path.suffix == ".sse" else path.parent.parent.name)
        assert sidecar["source_repo"] and sidecar["source_path"]
