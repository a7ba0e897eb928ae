"""Every message from an MCP server is bounded before work proportional to it: the stdio reader's
work is linear and keeps at most one message under the cap; a reply over the cap is dropped as it
streams and the call waiting for it gets a clear error, on stdio, on SSE event streams and on JSON
bodies alike; the connection stays up for the next call; a reply just under the cap arrives whole.
Real SDK servers (tests/mcp/big_server.py)."""

from __future__ import annotations

import json
import re
import sys

import pytest
from mcp_helpers import BIG_SERVER, http_server

from pi_notebook.mcp import transport
from pi_notebook.mcp.config import ServerConfig
from pi_notebook.mcp.http_cap import capped_http_client
from pi_notebook.mcp.server import McpCallError, McpServer
from pi_notebook.mcp.transport import LineSplitter, Oversize, reply_id

pytestmark = pytest.mark.timeout(180)

MIB = 1024 * 1024
BIG = ServerConfig(name="big", command=sys.executable, args=[str(BIG_SERVER)])
ENVELOPE = 200  # bytes of JSON-RPC and CallToolResult around a text result, at most


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_NOTEBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def splitters(monkeypatch):
    """Every LineSplitter the stdio transport makes (to read what it kept)."""
    made: list[LineSplitter] = []

    class Recorded(LineSplitter):
        def __init__(self, max_bytes: int) -> None:
            super().__init__(max_bytes)
            made.append(self)

    monkeypatch.setattr(transport, "LineSplitter", Recorded)
    return made


def _feed(splitter: LineSplitter, data: bytes, size: int) -> list[bytes | Oversize]:
    out: list[bytes | Oversize] = []
    for at in range(0, len(data), size):
        out.extend(splitter.feed(data[at:at + size]))
    return out


def test_many_messages_in_one_chunk_and_one_message_over_many_chunks():
    messages = [json.dumps({"jsonrpc": "2.0", "id": i, "result": {"n": "é" * i}}).encode() for i in range(50)]
    data = b"\n".join(messages) + b"\n"
    assert LineSplitter(MIB).feed(data) == messages
    for size in (1, 3, 7, 64):
        assert _feed(LineSplitter(MIB), data, size) == messages, size
    partial = LineSplitter(MIB)
    assert partial.feed(b'{"a": 1}\n{"b"') == [b'{"a": 1}']
    assert partial.feed(b": 2}") == []
    assert partial.feed(b"\n") == [b'{"b": 2}']


def test_a_line_over_the_cap_is_counted_not_kept_and_the_next_one_arrives():
    cap = 4 * MIB
    line = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"' + b"x" * (50 * 10**6) + b'"}]}}'
    splitter = LineSplitter(cap)
    out = _feed(splitter, line + b'\n{"jsonrpc":"2.0","id":8,"result":{}}\n', 65536)
    assert len(out) == 2 and isinstance(out[0], Oversize) and out[1] == b'{"jsonrpc":"2.0","id":8,"result":{}}'
    assert out[0].size == len(line)
    assert splitter.kept <= cap  # never more than one message under the cap copied
    assert reply_id(out[0]) == 7
    just_under = b"y" * cap
    assert LineSplitter(cap).feed(just_under + b"\n") == [just_under]
    assert isinstance(LineSplitter(cap).feed(just_under + b"y\n")[0], Oversize)


@pytest.mark.parametrize("head, tail, waiting, expected", [
    (b'{"jsonrpc":"2.0","id":"a-1","result":{"content":[', b'"}]}}', (), "a-1"),  # the SDK's order
    (b'{"result":{"content":[{"text":"xx', b'"}]},"id":12}', (), 12),  # the id written last
    (b'{"pad":"xxxx', b'xxxx"}', (5,), 5),  # no id at either end: the one request waiting
    (b'{"pad":"xxxx', b'xxxx"}', (5, 6), None),  # ... and no guess between two
    (b'{"jsonrpc":"2.0","id":true,"result":{', b'}}', (), None),
    (b'{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{', b'}}', (3,), None),  # a request
    (b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"', b'"}}', (3,), None),
])
def test_a_dropped_message_answers_its_request_only_when_it_is_a_reply(head, tail, waiting, expected):
    assert reply_id(Oversize(size=10**8, head=head, tail=tail), waiting) == expected


BURIED = r'''
import json, sys
SIZE = int(sys.argv[1])
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "buried", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("bury", "small")]}
    elif msg["params"]["name"] == "bury":  # the id between two halves of padding: neither end shows it
        half = "x" * (SIZE // 2)
        sys.stdout.write('{"pad":"%s","id":%s,"jsonrpc":"2.0","result":{"content":[]},"more":"%s"}\n'
                         % (half, json.dumps(msg["id"]), half))
        sys.stdout.flush()
        continue
    else:
        result = {"content": [{"type": "text", "text": "small"}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
'''


async def test_stdio_a_reply_with_its_id_buried_mid_message_still_ends_the_call(cache, monkeypatch, tmp_path):
    monkeypatch.setattr(transport, "MAX_MESSAGE_BYTES", MIB)
    script = tmp_path / "buried.py"
    script.write_text(BURIED)
    server = McpServer(ServerConfig(name="buried", command=sys.executable, args=[str(script), str(3 * MIB)]))
    await server.start()
    try:
        assert server.state == "connected", server.reason
        with pytest.raises(McpCallError, match="over 1 MB and was dropped"):
            await server.call("bury", {}, timeout_s=60)  # before: no answer until the timeout
        assert (await server.call("small", {}, timeout_s=30)).content[0].text == "small"
    finally:
        await server.stop()


async def test_stdio_a_reply_over_the_cap_is_an_error_and_the_server_goes_on(cache, monkeypatch, splitters):
    monkeypatch.setattr(transport, "MAX_MESSAGE_BYTES", MIB)
    server = McpServer(BIG)
    await server.start()
    try:
        assert server.state == "connected", server.reason
        pid = (await server.call("pid", {}, timeout_s=30)).content[0].text
        with pytest.raises(McpCallError, match=r"^the server's reply was over 1 MB and was dropped$"):
            await server.call("big", {"size": 5 * 10**6}, timeout_s=60)
        assert not server.crashed
        whole = await server.call("big", {"size": MIB - ENVELOPE}, timeout_s=60)
        assert len(whole.content[0].text) == MIB - ENVELOPE
        assert (await server.call("pid", {}, timeout_s=30)).content[0].text == pid  # the same process
        assert max(s.kept for s in splitters) <= 2 * MIB
        assert "dropped a message of" in server.log_tail()
    finally:
        await server.stop()


async def test_stdio_50_mb_reply_at_the_real_cap(cache, splitters):
    server = McpServer(BIG)
    await server.start()
    try:
        with pytest.raises(McpCallError, match="over 8 MB and was dropped"):
            await server.call("big", {"size": 50 * 10**6}, timeout_s=120)
        assert (await server.call("echo", {"text": "next"}, timeout_s=30)).content[0].text == "next"
        assert max(s.kept for s in splitters) <= transport.MAX_MESSAGE_BYTES
    finally:
        await server.stop()


@pytest.mark.parametrize("mode", ["http", "http-json"])
async def test_http_a_reply_over_the_cap_is_an_error_and_the_session_goes_on(cache, monkeypatch, mode):
    monkeypatch.setattr(transport, "MAX_MESSAGE_BYTES", 2 * MIB)
    with http_server(mode, BIG_SERVER) as url:
        server = McpServer(ServerConfig(name="web", transport="http", url=url))
        await server.start()
        try:
            assert server.state == "connected", server.reason
            with pytest.raises(McpCallError, match=r"^the server's reply was over 2 MB and was dropped$"):
                await server.call("big", {"size": 5 * 10**6}, timeout_s=60)
            assert not server.crashed
            whole = await server.call("big", {"size": 2 * MIB - 2 * ENVELOPE}, timeout_s=60)
            assert len(whole.content[0].text) == 2 * MIB - 2 * ENVELOPE
            assert (await server.call("echo", {"text": "next"}, timeout_s=30)).content[0].text == "next"
        finally:
            await server.stop()


@pytest.mark.parametrize("headers, body, expected", [
    ({"content-type": "application/json"}, b"x" * 5000, "over 0.00390625 MB"),  # no declared length: counted
    ({"content-type": "application/json", "content-length": "99999999"}, b"{}", "over"),  # declared
    ({"content-type": "application/json", "content-encoding": "gzip"}, b"\x1f\x8b", r"compressed \(gzip\)"),
    ({"content-type": "text/event-stream", "content-encoding": "gzip"}, b"\x1f\x8b", r"compressed \(gzip\)"),
    ({"content-type": "application/json"}, b"x" * 4000, None),  # under the cap: whole
    ({"content-type": "text/event-stream"}, b"x" * 5000, None),  # event streams: the SDK's per-event cap
])
@pytest.mark.parametrize("request_id", [None, 41])
async def test_http_bodies_are_capped_and_compressed_ones_refused_before_decoding(headers, body, expected, request_id):
    """A body over the cap answering a request becomes a JSON-RPC error for its id; one that
    answers none (or an event stream, where an error is no event) raises a stream error."""
    import httpx2

    def answer(request):
        return httpx2.Response(200, headers=headers, stream=httpx2.ByteStream(body))

    client = capped_http_client({"X-Test": "1"}, 4096)
    client._transport = httpx2.MockTransport(answer)  # the hook, not the transport, does the capping
    sent = {"jsonrpc": "2.0", "method": "tools/call", **({"id": request_id} if request_id is not None else {})}
    async with client, client.stream("POST", "http://mcp.invalid/mcp", json=sent) as response:
        assert response.request.headers["accept-encoding"] == "identity"
        if expected is None:
            assert await response.aread() == body
        elif request_id is None or "event-stream" in headers["content-type"]:
            with pytest.raises(httpx2.StreamError, match=expected):
                await response.aread()
        else:
            error = json.loads(await response.aread())
            assert error["id"] == request_id and error["error"]["code"] == -32603, error
            assert re.search(expected, error["error"]["message"]), error
