"""A model server that accepts and never answers, or stalls mid-stream, ends the run with a clear error.

``first_byte_timeout_ms`` bounds request-sent -> first body byte (headers included);
``idle_timeout_ms`` bounds each wait between body chunks. Small values here; the defaults
(60 s / 120 s) are checked by patching the module constants.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from helpers.sse_server import DELAY, HANG, Reply, ScriptedServer, sse_body, sse_event

from pi_notebook.agent import AgentContext, AgentLoopConfig, run_agent_loop
from pi_notebook.ai import _http
from pi_notebook.ai._http import RequestAborted, RequestTimeout, open_stream
from pi_notebook.ai.abort import AbortController
from pi_notebook.ai.providers.anthropic import stream_simple_anthropic_messages
from pi_notebook.ai.providers.google import stream_simple_google_generative_ai
from pi_notebook.ai.providers.openai_completions import stream_simple_openai_completions
from pi_notebook.ai.providers.openai_responses import stream_simple_openai_responses
from pi_notebook.ai.types import Context, Model, ModelCost, UserMessage


@pytest.fixture
def server():
    with ScriptedServer() as s:
        yield s


async def read_all(response) -> bytes:
    return b"".join([c async for c in response.iter_bytes()])


# --- the transport ---------------------------------------------------------------------------

async def test_no_headers_at_all_hits_the_first_byte_timeout(server):
    server.push(Reply(header_delay=30, chunks=[b"data: x\n\n"]))
    start = time.monotonic()
    with pytest.raises(RequestTimeout) as info:
        await open_stream("POST", server.url + "/v1", first_byte_timeout_ms=300)
    assert time.monotonic() - start < 10  # far under the 30 s the server would take
    assert info.value.kind == "first_byte"
    assert str(info.value).startswith("The model server sent nothing for 0.3 s (first-byte timeout)")
    assert "127.0.0.1" in str(info.value) and "/v1" not in str(info.value)


async def test_headers_but_no_body_hits_the_first_byte_timeout(server):
    server.push(Reply(chunks=[HANG]))
    async with open_stream("POST", server.url + "/v1", first_byte_timeout_ms=300) as response:
        start = time.monotonic()
        with pytest.raises(RequestTimeout) as info:
            await read_all(response)
    assert time.monotonic() - start < 10  # the server never sends: only the bound ends it
    assert info.value.kind == "first_byte"


async def test_a_stall_after_one_chunk_hits_the_idle_timeout(server):
    server.push(Reply(chunks=[b"data: 1\n\n", HANG]))
    got = []
    async with open_stream("POST", server.url + "/v1", first_byte_timeout_ms=5000,
                           idle_timeout_ms=300) as response:
        with pytest.raises(RequestTimeout) as info:
            async for chunk in response.iter_bytes():
                got.append(chunk)
    assert got == [b"data: 1\n\n"]
    assert info.value.kind == "idle"
    assert "stopped sending for 0.3 s" in str(info.value) and "idle timeout" in str(info.value)


async def test_a_slow_steady_stream_is_not_cut(server):
    # each gap (0.2 s) is under the idle bound and the whole stream (1 s) is over the first-byte bound
    chunks = []
    for i in range(5):
        chunks += [(DELAY, 0.2), f"data: {i}\n\n".encode()]
    server.push(Reply(chunks=chunks))
    async with open_stream("POST", server.url + "/v1", first_byte_timeout_ms=600,
                           idle_timeout_ms=600) as response:
        body = await read_all(response)
    assert body == b"".join(f"data: {i}\n\n".encode() for i in range(5))


async def test_the_defaults_apply_when_no_option_is_given(server, monkeypatch):
    monkeypatch.setattr(_http, "DEFAULT_FIRST_BYTE_TIMEOUT_MS", 200)
    monkeypatch.setattr(_http, "DEFAULT_IDLE_TIMEOUT_MS", 200)
    server.push(Reply(header_delay=30))
    with pytest.raises(RequestTimeout, match="first-byte timeout"):
        await open_stream("POST", server.url + "/v1")
    server.push(Reply(chunks=[b"data: 1\n\n", HANG]))
    async with open_stream("POST", server.url + "/v1") as response:
        with pytest.raises(RequestTimeout, match="idle timeout"):
            await read_all(response)


def test_default_values():
    assert _http.DEFAULT_FIRST_BYTE_TIMEOUT_MS == 60_000
    assert _http.DEFAULT_IDLE_TIMEOUT_MS == 120_000


async def test_zero_turns_a_bound_off(server, monkeypatch):
    monkeypatch.setattr(_http, "DEFAULT_FIRST_BYTE_TIMEOUT_MS", 100)
    server.push(Reply(header_delay=0.5, chunks=[b"data: ok\n\n"]))
    async with open_stream("POST", server.url + "/v1", first_byte_timeout_ms=0) as response:
        assert await read_all(response) == b"data: ok\n\n"


async def test_abort_still_works_while_waiting_for_the_first_byte(server):
    server.push(Reply(header_delay=30))
    controller = AbortController()
    server.on_request = lambda request: controller.abort()  # the client now waits for headers
    start = time.monotonic()
    with pytest.raises(RequestAborted):
        await open_stream("POST", server.url + "/v1", signal=controller.signal,
                          first_byte_timeout_ms=20_000)
    assert time.monotonic() - start < 10
    assert len(server.requests) == 1  # the abort came during the wait, not before the request


async def test_abort_still_works_during_an_idle_wait(server):
    server.push(Reply(chunks=[b"data: 1\n\n", HANG]))
    controller = AbortController()
    async with open_stream("POST", server.url + "/v1", signal=controller.signal,
                           idle_timeout_ms=20_000) as response:
        asyncio.get_running_loop().call_later(0.2, controller.abort)
        start = time.monotonic()
        with pytest.raises(RequestAborted):
            await read_all(response)
    assert time.monotonic() - start < 10  # the server never sends: only the abort ends it
    assert asyncio.current_task().cancelling() == 0  # our cancel did not leak


# --- every provider passes the options through ---------------------------------------------------

def model(api: str, provider: str, base_url: str) -> Model:
    return Model(id="m-1", name="m", api=api, provider=provider, base_url=base_url, reasoning=False,
                 input=["text"], cost=ModelCost(), context_window=100_000, max_tokens=4096)


def first_chunk(api: str) -> bytes:
    if api == "anthropic-messages":
        return sse_event({"type": "message_start", "message": {"id": "m", "content": [], "usage": {
            "input_tokens": 1, "output_tokens": 1}}}, event="message_start").encode()
    if api == "openai-responses":
        return sse_event({"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
                         event="response.created").encode()
    if api == "google-generative-ai":
        return sse_body([{"candidates": [{"content": {"parts": [{"text": "Hel"}]}}]}], done=False)
    return sse_body([{"id": "c", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}], done=False)


PROVIDERS = [
    pytest.param("anthropic-messages", "anthropic", stream_simple_anthropic_messages, id="anthropic"),
    pytest.param("openai-responses", "openai", stream_simple_openai_responses, id="openai-responses"),
    pytest.param("google-generative-ai", "google", stream_simple_google_generative_ai, id="google"),
    pytest.param("openai-completions", "openai", stream_simple_openai_completions, id="openai-completions"),
]


@pytest.mark.parametrize("api,provider,stream_fn", PROVIDERS)
async def test_provider_never_answering_ends_with_a_first_byte_error(server, api, provider, stream_fn):
    # 2 s of silence, well over the 0.3 s bound (and bounded, so a provider that ignores the
    # option fails in 2 s instead of waiting for the default)
    server.push(Reply(header_delay=2))
    start = time.monotonic()
    stream = stream_fn(model(api, provider, server.url), Context(messages=[UserMessage(content="hi")]),
                       {"api_key": "k", "first_byte_timeout_ms": 300, "idle_timeout_ms": 300})
    events = [e async for e in stream]
    message = await stream.result()
    assert time.monotonic() - start < 5
    assert [e.type for e in events] == ["error"]
    assert message.stop_reason == "error"
    assert "first-byte timeout" in message.error_message


@pytest.mark.parametrize("api,provider,stream_fn", PROVIDERS)
async def test_provider_stalling_mid_stream_ends_with_an_idle_error(server, api, provider, stream_fn):
    server.push(Reply(chunks=[first_chunk(api), (DELAY, 2)]))
    start = time.monotonic()
    stream = stream_fn(model(api, provider, server.url), Context(messages=[UserMessage(content="hi")]),
                       {"api_key": "k", "first_byte_timeout_ms": 5000, "idle_timeout_ms": 300})
    events = [e async for e in stream]
    message = await stream.result()
    assert time.monotonic() - start < 5
    assert events[0].type == "start" and events[-1].type == "error"
    assert "idle timeout" in message.error_message


async def test_the_agent_run_ends_with_the_error_instead_of_hanging(server):
    server.push(Reply(chunks=[first_chunk("anthropic-messages"), HANG]))
    events: list = []
    config = AgentLoopConfig(model=model("anthropic-messages", "anthropic", server.url), api_key="k",
                             stream_options={"first_byte_timeout_ms": 5000, "idle_timeout_ms": 300})
    start = time.monotonic()
    messages = await run_agent_loop([UserMessage(content="hi")],
                                    AgentContext(system_prompt="", messages=[], tools=[]),
                                    config, events.append, None, stream_simple_anthropic_messages)
    assert time.monotonic() - start < 5
    assert messages[-1].stop_reason == "error" and "idle timeout" in messages[-1].error_message
    assert events[-1].type == "agent_end"


async def test_abort_during_a_providers_first_byte_wait_ends_the_stream_as_aborted(server):
    server.push(Reply(header_delay=30))
    controller = AbortController()
    stream = stream_simple_anthropic_messages(
        model("anthropic-messages", "anthropic", server.url), Context(messages=[UserMessage(content="hi")]),
        {"api_key": "k", "signal": controller.signal, "first_byte_timeout_ms": 20_000})
    server.on_request = lambda request: controller.abort()  # the client now waits for headers
    start = time.monotonic()
    message = await stream.result()
    assert time.monotonic() - start < 10  # far under the 30 s the server would take
    assert message.stop_reason == "aborted" and message.error_message == "Request was aborted"
    assert len(server.requests) == 1


async def test_a_first_byte_timeout_is_retried_like_a_failed_connect(server):
    server.push(Reply(header_delay=2), Reply(header_delay=2))
    stream = stream_simple_anthropic_messages(
        model("anthropic-messages", "anthropic", server.url), Context(messages=[UserMessage(content="hi")]),
        {"api_key": "k", "first_byte_timeout_ms": 200, "max_retries": 1, "max_retry_delay_ms": 100})
    message = await stream.result()
    assert len(server.requests) == 2
    assert message.stop_reason == "error" and "first-byte timeout" in message.error_message


# --- the bounds cost nothing per chunk ---------------------------------------------------------

async def test_one_watchdog_timer_serves_every_chunk(server, monkeypatch):
    # 300 chunks, each its own HTTP chunk: the first-byte and idle bounds must not schedule a
    # timer per chunk (that was a visible share of every streamed token)
    server.push(Reply(chunks=[f"data: {i}\n\n".encode() for i in range(300)]))
    loop = asyncio.get_running_loop()
    armed = []
    real_call_at = loop.call_at

    def spy(when, callback, *args, **kwargs):
        if getattr(callback, "__self__", None).__class__ is _http._AbortGuard:
            armed.append(when)
        return real_call_at(when, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", spy)
    async with open_stream("POST", server.url + "/v1", first_byte_timeout_ms=60_000,
                           idle_timeout_ms=120_000) as response:
        chunks = [c async for c in response.iter_bytes()]
        guard = response._guard
    assert b"".join(chunks) == b"".join(f"data: {i}\n\n".encode() for i in range(300))
    assert len(chunks) > 10  # the body really came in many reads
    assert len(armed) == 1  # armed once for the request; never re-armed at these bounds
    assert guard._timer is None  # closing the response cancelled it


async def test_time_the_consumer_spends_between_chunks_is_not_idle_time(server):
    # the idle bound covers each wait for the network, not the caller's own work between chunks
    server.push(Reply(chunks=[b"data: 1\n\n", b"data: 2\n\n", b"data: 3\n\n"]))
    got = []
    async with open_stream("POST", server.url + "/v1", first_byte_timeout_ms=5000,
                           idle_timeout_ms=200) as response:
        async for chunk in response.iter_bytes():
            got.append(chunk)
            await asyncio.sleep(0.5)
    assert b"".join(got) == b"data: 1\n\ndata: 2\n\ndata: 3\n\n"


async def test_a_shorter_idle_bound_than_the_first_byte_bound_still_fires(server):
    # the watchdog armed for the first byte (20 s) moves to the earlier idle due time
    server.push(Reply(chunks=[b"data: 1\n\n", HANG]))
    start = time.monotonic()
    async with open_stream("POST", server.url + "/v1", first_byte_timeout_ms=20_000,
                           idle_timeout_ms=300) as response:
        with pytest.raises(RequestTimeout) as info:
            await read_all(response)
    assert time.monotonic() - start < 10
    assert info.value.kind == "idle"
