"""The shared transport (_http) and the retry helper (_retry), against a real local server."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from helpers.sse_server import DELAY, HANG, RESET, Reply, chunked, scripted_server  # noqa: F401

from pi_notebook.ai import _http, _retry
from pi_notebook.ai._http import (
    ConnectionFailed, HttpStatusError, RequestAborted, RequestTimeout, open_stream,
)
from pi_notebook.ai._retry import (
    RetryDelayTooLong, backoff_delay_ms, is_retryable_error, retry_provider_request,
    server_retry_delay_ms,
)
from pi_notebook.ai.abort import AbortController, AbortError

KEY = "sk-test-KEY-must-never-appear-0123456789"


async def read_all(response: _http.StreamResponse) -> bytes:
    return b"".join([chunk async for chunk in response.iter_bytes()])


# --- open_stream --------------------------------------------------------------------------

async def test_stream_round_trip_and_recorded_request(scripted_server):
    scripted_server.push(Reply(headers={"X-Request-Id": "r1"}, chunks=[b"data: 1\n\n", b"data: 2\n\n"]))
    async with open_stream("POST", scripted_server.url + "/v1/chat/completions?x=1",
                           headers={"Authorization": f"Bearer {KEY}", "X-Drop": None},
                           json_body={"text": "héllo"}) as response:
        assert response.status == 200
        assert response.headers["x-request-id"] == "r1"
        assert response.url.endswith("/v1/chat/completions")  # no query string kept
        assert await read_all(response) == b"data: 1\n\ndata: 2\n\n"
    request = scripted_server.requests[0]
    assert request.method == "POST" and request.path == "/v1/chat/completions?x=1"
    assert request.headers["content-type"] == "application/json"
    assert "x-drop" not in request.headers
    assert request.json == {"text": "héllo"}
    assert request.body == '{"text":"héllo"}'.encode()


async def test_connections_are_reused_across_requests(scripted_server):
    for _ in range(3):
        scripted_server.push(Reply(chunks=[b"data: x\n\n"]))
    for _ in range(3):
        async with open_stream("GET", scripted_server.url + "/s") as response:
            await read_all(response)
    assert len(scripted_server.requests) == 3
    assert scripted_server.connections == 1
    assert _http.get_client() is _http.get_client()


async def test_await_form_then_aclose(scripted_server):
    scripted_server.push(Reply(chunks=[b"abc"]))
    response = await open_stream("GET", scripted_server.url)
    try:
        assert await response.read_text() == "abc"
    finally:
        await response.aclose()
        await response.aclose()  # idempotent


@pytest.mark.parametrize("status", [400, 401, 403, 404, 429, 500, 503])
async def test_status_errors_carry_status_headers_and_body(scripted_server, status):
    body = {"error": {"message": f"boom {status} (key {KEY})", "type": "invalid_request_error"}}
    scripted_server.push(Reply.json(status, body, headers={"Retry-After": "3"}))
    with pytest.raises(HttpStatusError) as info:
        await open_stream("POST", scripted_server.url + "/v1/chat/completions",
                          headers={"Authorization": f"Bearer {KEY}"}, json_body={}, secrets=(KEY,))
    err = info.value
    assert err.status == status
    assert err.headers["retry-after"] == "3"
    assert str(err).startswith(f"{status}: ")
    assert f"boom {status}" in str(err) and f"boom {status}" in err.body
    assert KEY not in str(err) and KEY not in err.body
    assert "***" in err.body


async def test_status_error_without_body_and_truncation(scripted_server):
    scripted_server.push(Reply(status=502, chunks=[], content_type="text/plain"))
    with pytest.raises(HttpStatusError, match=r"^502 status code \(no body\)$"):
        await open_stream("GET", scripted_server.url)
    scripted_server.push(Reply(status=500, chunks=["x" * 5000], content_type="text/plain"))
    with pytest.raises(HttpStatusError) as info:
        await open_stream("GET", scripted_server.url)
    assert info.value.body == "x" * 4000 + "... [truncated 1000 chars]"


async def test_connection_refused_names_host_only():
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ConnectionFailed) as info:
        await open_stream("POST", f"http://127.0.0.1:{port}/v1/secret-path?key={KEY}", json_body={})
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and info.value.host == f"127.0.0.1:{port}"
    assert KEY not in message and "secret-path" not in message
    assert info.value.status is None and is_retryable_error(info.value)


async def test_reset_mid_stream_is_a_connection_error(scripted_server):
    scripted_server.push(Reply(chunks=[b"data: first\n\n", RESET]))
    got = []
    with pytest.raises(ConnectionFailed, match="lost while reading"):
        async with open_stream("GET", scripted_server.url) as response:
            async for chunk in response.iter_bytes():
                got.append(chunk)
    assert got == [b"data: first\n\n"]


async def test_abort_before_request_sends_nothing(scripted_server):
    controller = AbortController()
    controller.abort()
    with pytest.raises(RequestAborted, match="Request was aborted"):
        await open_stream("GET", scripted_server.url, signal=controller.signal)
    assert scripted_server.requests == []


async def test_abort_while_waiting_for_headers(scripted_server):
    scripted_server.push(Reply(header_delay=30, chunks=[b"late"]))
    controller = AbortController()
    scripted_server.on_request = lambda request: controller.abort()  # the client waits for headers
    with pytest.raises(RequestAborted):
        await open_stream("GET", scripted_server.url, signal=controller.signal)
    assert len(scripted_server.requests) == 1
    assert getattr(asyncio.current_task(), "cancelling", lambda: 0)() == 0


async def test_abort_from_another_thread_unblocks_a_stalled_read(scripted_server):
    scripted_server.push(Reply(chunks=[b"data: 1\n\n", HANG]))
    controller = AbortController()
    got = []
    with pytest.raises(RequestAborted):
        async with open_stream("GET", scripted_server.url, signal=controller.signal) as response:
            async for chunk in response.iter_bytes():
                got.append(chunk)
                threading.Timer(0.1, controller.abort).start()
    assert got == [b"data: 1\n\n"]
    # our own cancellation was absorbed: the task can keep awaiting normally
    assert getattr(asyncio.current_task(), "cancelling", lambda: 0)() == 0
    await asyncio.sleep(0)


async def test_outer_cancellation_is_not_swallowed(scripted_server):
    scripted_server.push(Reply(chunks=[HANG]))

    async def reader():
        async with open_stream("GET", scripted_server.url, signal=AbortController().signal) as r:
            await read_all(r)

    task = asyncio.ensure_future(reader())
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_idle_timeout(scripted_server):
    scripted_server.push(Reply(chunks=[b"data: 1\n\n", HANG]))
    with pytest.raises(RequestTimeout, match="timed out"):
        async with open_stream("GET", scripted_server.url, timeout_ms=150) as response:
            await read_all(response)


def test_json_body_with_lone_surrogate_still_encodes():
    body = _http.encode_json_body({"t": "bad \ud800 text"})
    assert json.loads(body) == {"t": "bad \ud800 text"}


def test_network_guard_blocks_non_loopback_hosts():
    with pytest.raises(OSError, match="must not use the network"):
        socket.create_connection(("203.0.113.7", 443), timeout=1)
    with pytest.raises(httpx.ConnectError, match="must not use the network"):
        httpx.get("https://api.openai.com/v1/models")


async def test_network_guard_message_reaches_our_errors():
    with pytest.raises(ConnectionFailed, match="must not use the network"):
        await open_stream("POST", "https://api.openai.com/v1/chat/completions", json_body={})


# --- retry_provider_request (items 114, 129) ----------------------------------------------

class FakeStatusError(Exception):
    def __init__(self, status, headers=None, message="failed"):
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


def test_retryable_classification():
    assert is_retryable_error(FakeStatusError(429))
    assert is_retryable_error(FakeStatusError(500)) and is_retryable_error(FakeStatusError(503))
    assert is_retryable_error(FakeStatusError(408)) and is_retryable_error(FakeStatusError(409))
    assert is_retryable_error(FakeStatusError(None))
    assert not is_retryable_error(FakeStatusError(400)) and not is_retryable_error(FakeStatusError(401))
    assert is_retryable_error(FakeStatusError(400, {"X-Should-Retry": "true"}))
    assert not is_retryable_error(FakeStatusError(503, {"x-should-retry": "false"}))
    assert not is_retryable_error(ValueError("no status"))
    assert not is_retryable_error(AbortError())


def test_server_delay_headers():
    assert server_retry_delay_ms({"retry-after-ms": "250"}) == 250
    assert server_retry_delay_ms({"Retry-After": "2"}) == 2000
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    date = format_datetime(now + timedelta(seconds=7), usegmt=True)
    assert server_retry_delay_ms({"retry-after": date}, now=now.timestamp()) == 7000
    assert server_retry_delay_ms({"retry-after": "soon"}) is None
    assert server_retry_delay_ms({}) is None


def test_backoff_schedule_and_jitter():
    assert [backoff_delay_ms(i, lambda: 0.0) for i in range(6)] == [500, 1000, 2000, 4000, 8000, 8000]
    assert backoff_delay_ms(0, lambda: 1.0) == 375


async def test_no_retry_by_default():
    calls = []

    async def request():
        calls.append(1)
        raise FakeStatusError(503)

    with pytest.raises(FakeStatusError):
        await retry_provider_request(request)
    assert len(calls) == 1


async def test_retries_until_success_with_server_delay(monkeypatch):
    delays = []

    async def fake_sleep(ms, signal=None):
        delays.append(ms)

    monkeypatch.setattr(_retry, "abortable_sleep", fake_sleep)
    outcomes = [FakeStatusError(429, {"retry-after-ms": "20"}), FakeStatusError(500), "ok"]

    async def request():
        item = outcomes.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    assert await retry_provider_request(request, max_retries=3) == "ok"
    assert delays[0] == 20 and 750 <= delays[1] <= 1000  # server delay, then backoff of attempt 1
    assert outcomes == []


async def test_stops_after_max_retries_and_respects_should_retry_false(monkeypatch):
    async def fake_sleep(ms, signal=None):
        pass

    monkeypatch.setattr(_retry, "abortable_sleep", fake_sleep)
    calls = []

    async def failing():
        calls.append(1)
        raise FakeStatusError(500)

    with pytest.raises(FakeStatusError):
        await retry_provider_request(failing, max_retries=2)
    assert len(calls) == 3
    calls.clear()

    async def refused():
        calls.append(1)
        raise FakeStatusError(503, {"x-should-retry": "false"})

    with pytest.raises(FakeStatusError):
        await retry_provider_request(refused, max_retries=5)
    assert len(calls) == 1


async def test_server_delay_above_cap_fails_with_original_message():
    async def request():
        raise FakeStatusError(429, {"retry-after": "5"}, message="429: slow down")

    with pytest.raises(RetryDelayTooLong) as info:
        await retry_provider_request(request, max_retries=3, max_retry_delay_ms=1000)
    assert str(info.value) == "Server requested 5s retry delay (max: 1s). 429: slow down"


async def test_cap_zero_means_no_cap(monkeypatch):
    delays = []

    async def fake_sleep(ms, signal=None):
        delays.append(ms)

    monkeypatch.setattr(_retry, "abortable_sleep", fake_sleep)
    outcomes = [FakeStatusError(429, {"retry-after": "120"}), "ok"]

    async def request():
        item = outcomes.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    assert await retry_provider_request(request, max_retries=1, max_retry_delay_ms=0) == "ok"
    assert delays == [120000]


async def test_abort_during_retry_sleep_clears_the_timer(monkeypatch):
    loop = asyncio.get_running_loop()
    handles = []
    real_call_later = loop.call_later

    def spy(delay, callback, *args, **kw):
        handle = real_call_later(delay, callback, *args, **kw)
        if delay >= 10:
            handles.append(handle)
        return handle

    monkeypatch.setattr(loop, "call_later", spy)
    controller = AbortController()
    calls = []

    async def request():
        calls.append(1)
        raise FakeStatusError(503, {"retry-after": "30"})

    real_call_later(0.05, controller.abort)
    with pytest.raises(AbortError, match="^Request aborted$"):
        await retry_provider_request(request, max_retries=3, signal=controller.signal)
    assert len(calls) == 1
    assert len(handles) == 1 and handles[0].cancelled()


async def test_error_after_abort_is_an_abort_error():
    controller = AbortController()

    async def request():
        controller.abort()
        raise FakeStatusError(500)

    with pytest.raises(AbortError, match="Request aborted"):
        await retry_provider_request(request, max_retries=3, signal=controller.signal)


async def test_retry_against_the_real_server(scripted_server):
    scripted_server.push(
        Reply.json(503, {"error": "busy"}, headers={"retry-after-ms": "10"}),
        Reply.json(429, {"error": "slow"}, headers={"retry-after-ms": "10"}),
        Reply(chunks=[b"data: ok\n\n"]),
    )
    response = await retry_provider_request(
        lambda: open_stream("POST", scripted_server.url, json_body={"n": 1}), max_retries=2)
    async with response:
        assert await read_all(response) == b"data: ok\n\n"
    assert len(scripted_server.requests) == 3
    assert all(r.json == {"n": 1} for r in scripted_server.requests)


async def test_real_server_retry_after_above_cap(scripted_server):
    scripted_server.push(Reply.json(429, {"error": {"message": "rate limited"}},
                                    headers={"retry-after": "90"}))
    with pytest.raises(RetryDelayTooLong) as info:
        await retry_provider_request(lambda: open_stream("GET", scripted_server.url), max_retries=2)
    assert str(info.value).startswith("Server requested 90s retry delay (max: 60s). 429: ")
    assert "rate limited" in str(info.value)


def test_chunked_helper_splits_anywhere():
    assert chunked(b"abcdef", 4) == [b"abcd", b"ef"]
    assert chunked("é", 1) == [b"\xc3", b"\xa9"]
    assert DELAY == "delay"


@pytest.mark.parametrize("url", ["localhost:8080/v1/chat/completions", "ftp://127.0.0.1/v1"])
async def test_invalid_urls_say_so(url):
    with pytest.raises(ConnectionFailed, match=r"^Invalid request URL \(check the base URL\): "):
        await open_stream("POST", url, json_body={})
