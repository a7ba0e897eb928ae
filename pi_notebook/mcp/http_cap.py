"""The one HTTP client of a streamable HTTP server's connection, with every body bounded.

The SDK reads a JSON body whole and parses it, at any size; its SSE streams have a per-event
limit, which ``McpServer`` sets to the same cap (``max_sse_event_size``). Here a response hook
(not a transport: a proxy's transport is covered too) caps every other body at
``transport.MAX_MESSAGE_BYTES``: the body is held until it ends and, past the cap or when its
declared length is over it, replaced by a JSON-RPC error for the request it answers, so the
waiting call ends with "the server's reply was over 8 MB and was dropped". The client asks for
uncompressed bodies and refuses a compressed one: a few KB of gzip can expand past any limit
before a counter sees it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import httpx2  # the SDK's HTTP client
import mcp_types

from .transport import too_large_reason

__all__ = ["TooLarge", "capped_http_client"]


class TooLarge(httpx2.StreamError):
    """A body over the cap: a stream error, which the SDK turns into an error answer."""


class _CappedBody(httpx2.AsyncByteStream):
    """A response body held until it ends (the SDK reads a JSON body whole anyway) and passed
    on only when it is within ``max_bytes``. Over the cap (at once when its declared length is),
    or ``refused``, it is dropped unparsed and replaced by a JSON-RPC error for the request it
    answers: the SDK hands that to the waiting call like any error answer. A body that answers
    no request raises :class:`TooLarge` instead (a stream error, which the SDK expects)."""

    def __init__(self, inner: httpx2.AsyncByteStream, max_bytes: int, declared: int, request_id: int | str | None,
                 refused: str = "") -> None:
        self._inner, self._max_bytes, self._declared = inner, max_bytes, declared
        self._request_id, self._refused = request_id, refused

    async def __aiter__(self) -> AsyncIterator[bytes]:
        problem = self._refused or (too_large_reason(self._max_bytes) if self._declared > self._max_bytes else "")
        held: list[bytes] = []
        seen = 0
        if not problem:
            async for chunk in self._inner:
                seen += len(chunk)
                if seen > self._max_bytes:
                    problem = too_large_reason(self._max_bytes)
                    break
                held.append(chunk)
        if not problem:
            for chunk in held:
                yield chunk
            return
        held.clear()
        if self._request_id is None:
            raise TooLarge(problem)
        yield json.dumps({"jsonrpc": "2.0", "id": self._request_id,
                          "error": {"code": mcp_types.INTERNAL_ERROR, "message": problem}}).encode()

    async def aclose(self) -> None:
        await self._inner.aclose()


def _request_id(request: httpx2.Request) -> int | str | None:
    """The JSON-RPC id of a request we sent (our own small JSON), if it has one."""
    try:
        sent = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):
        return None
    found = sent.get("id") if isinstance(sent, dict) else None
    return found if isinstance(found, (int, str)) and not isinstance(found, bool) else None


def _capping_hook(max_bytes: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    async def cap(response: httpx2.Response) -> None:
        """Every response the client gets, through any transport or proxy (a response hook):
        a body other than an event stream is capped; a compressed body is refused (the client
        asks for none: a small one could expand past the cap before any limit saw it)."""
        encoding = response.headers.get("content-encoding", "").strip().lower()
        event_stream = response.headers.get("content-type", "").lower().startswith("text/event-stream")
        if (event_stream and not encoding) or not isinstance(response.stream, httpx2.AsyncByteStream):
            return
        refused = ""
        if encoding not in ("", "identity"):
            refused = f"the server's reply was compressed ({encoding[:40]}) though the client asked for none"
            del response.headers["content-encoding"]  # not decoded: it is refused unread
        declared = response.headers.get("content-length", "")
        answers = None if event_stream else _request_id(response.request)  # an error is no event
        response.stream = _CappedBody(response.stream, max_bytes, int(declared) if declared.isdigit() else 0,
                                      answers, refused)

    return cap


def capped_http_client(headers: Mapping[str, str], max_bytes: int) -> httpx2.AsyncClient:
    """The one HTTP client a server's connection uses: its headers, redirects followed, no
    read timeout (a call has its own deadline), bodies capped (``_capping_hook``). Event streams
    are bounded per event by the SDK (``max_sse_event_size``)."""
    return httpx2.AsyncClient(headers={**headers, "accept-encoding": "identity"}, follow_redirects=True,
                              timeout=httpx2.Timeout(30, read=None),
                              event_hooks={"response": [_capping_hook(max_bytes)]})
