"""A ``data:`` line with an empty value is a valid, empty SSE event: it is skipped, it does
not end the answer with "Invalid JSON in stream event"."""

from __future__ import annotations

import json

from helpers.sse_server import Reply, chunked, scripted_server  # noqa: F401  # the fixture

from pi_notebook.ai.stream import stream as registry_stream
from pi_notebook.ai.types import Context, Model, ModelCost, UserMessage

KEY = "sk-test-FAKE-KEY-0123456789abcdef"


def _model(server, api: str, provider: str) -> Model:
    return Model(id="test-model", name="Test", api=api, provider=provider, base_url=server.url + "/v1",
                 reasoning=False, input=["text"], cost=ModelCost(input=1.0, output=2.0),
                 context_window=128000, max_tokens=4096)


async def _answer(model: Model) -> tuple[str | None, str]:
    s = registry_stream(model, Context(messages=[UserMessage(content="Hi", timestamp=1)]), {"api_key": KEY})
    message = None
    async for event in s:
        message = getattr(event, "message", None) or getattr(event, "error", None) or message
    final = await s.result()
    text = "".join(getattr(b, "text", "") for b in final.content)
    return final.error_message, text


def _completions_chunk(delta: dict, finish: str | None = None) -> str:
    data = {"id": "c1", "object": "chat.completion.chunk", "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(data)}\n\n"


async def test_openai_completions_skips_an_empty_data_event(scripted_server) -> None:
    body = (_completions_chunk({"role": "assistant", "content": "O"}) + "data:\n\n" + "data: \n\n"
            + _completions_chunk({"content": "K"}) + _completions_chunk({}, "stop") + "data:\n\n"
            + "data: [DONE]\n\n")
    scripted_server.push(Reply(chunks=chunked(body, 5)))
    error, text = await _answer(_model(scripted_server, "openai-completions", "openai"))
    assert error is None and text == "OK"


async def test_anthropic_skips_an_empty_data_event(scripted_server) -> None:
    def ev(name: str, data: dict) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    body = (ev("message_start", {"message": {"id": "m1", "usage": {"input_tokens": 1, "output_tokens": 0}}})
            + "event: ping\ndata:\n\n"
            + ev("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            + ev("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "OK"}})
            + "data:\n\n"
            + ev("content_block_stop", {"index": 0})
            + ev("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}})
            + ev("message_stop", {}))
    scripted_server.push(Reply(chunks=chunked(body, 9)))
    error, text = await _answer(_model(scripted_server, "anthropic-messages", "anthropic"))
    assert error is None and text == "OK"
