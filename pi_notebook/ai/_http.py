"""The HTTP transport shared by every wire-API adapter. The only module that imports httpx.

Adapters never touch httpx; they use this small, stable API:

``open_stream(method, url, *, headers=None, json_body=None, content=None, signal=None,
timeout_ms=None, first_byte_timeout_ms=None, idle_timeout_ms=None, secrets=())``
    Send a request and return once the response **headers** have arrived. The result is
    usable both ways::

        async with open_stream("POST", url, headers=h, json_body=body, signal=signal) as response:
            ...
        response = await open_stream(...)      # e.g. inside retry_provider_request(...)
        try: ... finally: await response.aclose()

    * ``json_body`` is serialised compactly as UTF-8 (``Content-Type: application/json``);
      text with lone surrogates falls back to ASCII escapes instead of failing to encode.
    * A non-2xx status raises :class:`HttpStatusError` *after* reading the body (truncated to
      4000 characters with ``"... [truncated N chars]"``); the response is closed for you.
    * ``secrets`` (e.g. ``(api_key,)``) are replaced by ``"***"`` in any error text built here,
      in case a server echoes them back.
    * ``timeout_ms`` bounds connecting and each wait for data at the socket level; the default
      is 30 s to connect and 10 minutes between bytes (what the official SDKs allow).
    * ``first_byte_timeout_ms`` (default 60 s) bounds the time from sending the request to the
      first byte of the body, headers included: a server that accepts the connection and never
      answers. ``idle_timeout_ms`` (default 120 s) bounds each wait between two body chunks: a
      stream that stalls mid-answer. Either raises :class:`RequestTimeout` with a message that
      says which one fired; ``0`` turns a bound off. They are the stream options of the same
      names (docs/design/wire-trust.md).

``StreamResponse``
    ``status: int``, ``headers: dict[str, str]`` (lower-cased names), ``url: str``;
    ``async for chunk in response.iter_bytes()`` (decoded content: gzip etc. undone);
    ``await response.read_text()``; ``await response.aclose()`` (idempotent).

Errors (all carry a message that is safe to show: host only, never the path, query or a key):

* :class:`HttpStatusError` (``status``, ``headers``, ``body``; message ``"<status>: <body>"``
  or ``"<status> status code (no body)"``),
* :class:`ConnectionFailed` (``host``; ``status`` is ``None`` and ``headers`` ``{}``, so
  :func:`retry_provider_request` treats a failed connect as retryable, as pi does),
  with the subclass :class:`RequestTimeout` (``kind``: ``"connect"``, ``"read"``,
  ``"first_byte"`` or ``"idle"``),
* :class:`RequestAborted`, a subclass of :class:`~pi_notebook.ai.abort.AbortError` with the text
  ``"Request was aborted"``: the signal fired before or during the request or the read.

Abort: an ``AbortSignal`` listener hops onto the event loop (abort may be called from another
thread) and cancels the read that is blocked *inside this module*, so an abort during a stalled
stream returns at once; the cancellation is converted to :class:`RequestAborted` and never leaks
as ``CancelledError``.

Connections: one shared ``httpx.AsyncClient`` per running event loop (keep-alive reuse across
requests; a client is bound to the loop it was created on). :func:`aclose_clients` closes the
current loop's client (tests, kernel shutdown).

``retry_provider_request`` lives in :mod:`pi_notebook.ai._retry` and is re-exported here.
"""

from __future__ import annotations

import asyncio
import json
import platform
import weakref
from collections.abc import AsyncIterator, Generator, Iterable, Mapping
from typing import Any

import httpx

from ._retry import retry_provider_request
from .abort import AbortError, AbortSignal

__all__ = [
    "open_stream", "StreamResponse", "HttpError", "HttpStatusError", "ConnectionFailed",
    "RequestTimeout", "RequestAborted", "retry_provider_request", "get_client", "aclose_clients",
    "default_user_agent", "truncate_body", "redact", "encode_json_body",
]

BODY_LIMIT = 4000
DEFAULT_FIRST_BYTE_TIMEOUT_MS = 60_000
DEFAULT_IDLE_TIMEOUT_MS = 120_000
_DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=30.0)
_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=30.0)


# --- errors ------------------------------------------------------------------------------

class HttpError(Exception):
    """Base of the transport errors raised here (not of :class:`RequestAborted`)."""

    status: int | None = None
    headers: dict[str, str]

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.headers = {}


class HttpStatusError(HttpError):
    """A non-2xx response. ``body`` is the (truncated, redacted) response text."""

    def __init__(self, status: int, headers: Mapping[str, str], body: str, message: str | None = None
                 ) -> None:
        if message is None:
            message = f"{status}: {body}" if body else f"{status} status code (no body)"
        super().__init__(message)
        self.status = status
        self.headers = dict(headers)
        self.body = body


class ConnectionFailed(HttpError):
    """Could not connect, or the connection broke while reading (``reading``). Names the
    host only."""

    def __init__(self, message: str, host: str, *, reading: bool = False) -> None:
        super().__init__(message)
        self.host = host
        self.reading = reading


class RequestTimeout(ConnectionFailed):
    """Connecting or waiting for data took longer than the timeout."""

    def __init__(self, message: str, host: str, kind: str = "read") -> None:
        super().__init__(message, host)
        self.kind = kind


def _seconds(ms: float) -> str:
    return f"{ms / 1000:g} s"


def _first_byte_timeout(host: str, ms: float) -> RequestTimeout:
    return RequestTimeout(
        f"The model server sent nothing for {_seconds(ms)} (first-byte timeout): {host} accepted "
        "the request but did not start answering. Try again later, or raise the limit if this "
        "model is slow to start: `%config AgentMagics.first_byte_timeout = <seconds>` in a "
        "notebook (0: no limit), the first_byte_timeout_ms option in Python.", host, "first_byte")


def _idle_timeout(host: str, ms: float) -> RequestTimeout:
    return RequestTimeout(
        f"The model server stopped sending for {_seconds(ms)} in the middle of its answer (idle "
        f"timeout): {host} went quiet and the stream was ended. Try again, or raise the limit if "
        "this model pauses that long: `%config AgentMagics.idle_timeout = <seconds>` in a "
        "notebook (0: no limit), the idle_timeout_ms option in Python.", host, "idle")


def _bound(ms: int | float | None, default: int) -> float | None:
    """A timeout option in ms -> seconds for asyncio, ``None`` when turned off (0 or less)."""
    if ms is None:
        ms = default
    return ms / 1000 if ms > 0 else None


class RequestAborted(AbortError):
    """The caller's AbortSignal fired; the request or the read was stopped."""

    def __init__(self, message: str = "Request was aborted") -> None:
        super().__init__(message)


# --- helpers -----------------------------------------------------------------------------

def default_user_agent() -> str:
    """``pi (<platform> <release>; <arch>)``, the User-Agent pi's adapters send."""
    return f"pi ({platform.system().lower()} {platform.release()}; {platform.machine()})"


def truncate_body(text: str, limit: int = BODY_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [truncated {len(text) - limit} chars]"


def redact(text: str, secrets: Iterable[str | None]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, "***")
    return text


def encode_json_body(body: Any) -> bytes:
    """Compact UTF-8 JSON. Lone surrogates cannot be UTF-8, so such text goes as ASCII escapes."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _host_of(url: httpx.URL | str) -> str:
    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
        host = parsed.host or "?"
        return f"{host}:{parsed.port}" if parsed.port else host
    except Exception:  # an unparsable URL must not leak through the message either
        return "?"


def _describe(exc: BaseException) -> str:
    # httpx often wraps an OSError with an empty message; the cause says what happened.
    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen).strip()
        if text:
            return text
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__


def _map_transport_error(exc: httpx.HTTPError, host: str, reading: bool, secrets: Iterable[str | None]
                         ) -> HttpError:
    detail = redact(_describe(exc), secrets)
    if isinstance(exc, httpx.TimeoutException):
        what = "waiting for data from" if reading else "connecting to"
        return RequestTimeout(f"Request timed out {what} {host}: {detail}", host,
                              "read" if reading else "connect")
    if reading:
        return ConnectionFailed(f"Connection to {host} lost while reading the response: {detail}", host,
                                reading=True)
    return ConnectionFailed(f"Connection error: could not reach {host}: {detail}", host)


# --- the shared client -------------------------------------------------------------------

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def get_client() -> httpx.AsyncClient:
    """The running loop's shared client (created on first use)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        client = httpx.AsyncClient(timeout=_DEFAULT_TIMEOUT, limits=_LIMITS, follow_redirects=True)
        _clients[loop] = client
    return client


async def aclose_clients() -> None:
    """Close the running loop's shared client (a new one is made on the next request)."""
    loop = asyncio.get_running_loop()
    client = _clients.pop(loop, None)
    if client is not None:
        await client.aclose()


# --- abort plumbing ----------------------------------------------------------------------

class _AbortGuard:
    """Turns an AbortSignal, or a deadline passing, into cancellation of the one await that is
    blocked in this module.

    Only the awaits bracketed by ``enter()``/``leave()`` are ever cancelled, so neither lands in
    the caller's own code; the resulting CancelledError is converted by ``absorb()``. (A timer
    plus cancel rather than ``asyncio.timeout``, which Python 3.10 lacks.)

    The deadlines cost nothing per chunk: one watchdog timer per response, never cancelled
    between waits. ``enter(due)`` only records when the current wait must end; the watchdog,
    when it fires, compares the clock with the wait that is blocked *now* and either cancels it
    or moves itself to that wait's due time. So a body streaming thousands of chunks re-arms the
    timer about once per bound, instead of allocating, scheduling and cancelling a timer per
    chunk (which made the asyncio timer heap a visible share of every streamed token).
    """

    __slots__ = ("signal", "loop", "task", "blocked", "fired", "timed_out", "due", "_timer",
                 "_timer_at", "_remove")

    def __init__(self, signal: AbortSignal | None) -> None:
        self.signal = signal
        self.loop = asyncio.get_running_loop()
        self.task: asyncio.Task[Any] | None = None
        self.blocked = False
        self.fired = False
        self.timed_out = False
        self.due: float | None = None        # loop time the blocked wait must end by
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0                 # when _timer fires (valid while it is set)
        self._remove = signal.add_listener(self._on_abort) if signal is not None else None

    def _on_abort(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self._cancel_blocked)
        except RuntimeError:  # loop already closed: nothing left to interrupt
            pass

    def _cancel_blocked(self) -> None:
        task = self.task
        if self.blocked and task is not None and not task.done() and not self.fired:
            self.fired = True
            task.cancel()

    def _arm(self, when: float) -> None:
        self._timer_at = when
        self._timer = self.loop.call_at(when, self._on_watchdog)

    def _on_watchdog(self) -> None:
        self._timer = None
        due = self.due
        if not self.blocked or due is None or self.fired:
            return  # nothing is waiting under a bound: the next enter() arms again
        if self.loop.time() < due:
            self._arm(due)  # the wait it was set for ended; a later one is blocked now
            return
        task = self.task
        if task is not None and not task.done():
            self.fired = self.timed_out = True
            task.cancel()

    def enter(self, due: float | None = None) -> None:
        """Start a guarded await; ``due`` (loop time) bounds it."""
        if self.signal is not None and self.signal.aborted:
            raise RequestAborted()
        self.task = asyncio.current_task()
        self.due = due
        self.blocked = True
        if due is not None:
            timer = self._timer
            if timer is None:
                self._arm(due)
            elif self._timer_at > due:  # a shorter bound than the armed one (rare: once, if at all)
                timer.cancel()
                self._arm(due)

    def leave(self) -> None:
        # The watchdog stays armed: it checks what is blocked when it fires (see the class doc).
        self.blocked = False

    def absorb(self, exc: asyncio.CancelledError) -> RequestAborted | None:
        """If ``exc`` is our own cancellation: the RequestAborted to raise, or ``None`` when the
        deadline passed (the caller raises its timeout). Anyone else's cancellation re-raises."""
        if not self.fired:
            raise exc
        task = self.task
        uncancel = getattr(task, "uncancel", None)  # 3.11+: undo our cancel() so outer code is unaffected
        if uncancel is not None:
            uncancel()
        if self.timed_out:
            self.fired = self.timed_out = False
            return None
        return RequestAborted()

    def detach(self) -> None:
        if self._remove is not None:
            self._remove()
            self._remove = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


# --- the response ------------------------------------------------------------------------

class StreamResponse:
    """An open streaming response (headers received, body not yet read)."""

    def __init__(self, response: httpx.Response, guard: _AbortGuard, host: str,
                 secrets: tuple[str | None, ...], first_byte_deadline: float | None = None,
                 first_byte_ms: float = 0, idle_s: float | None = None) -> None:
        self._response = response
        self._guard = guard
        self._host = host
        self._secrets = secrets
        self._closed = False
        # The first chunk shares the deadline that started when the request was sent; every
        # later wait gets the idle bound afresh.
        self._first_byte_deadline = first_byte_deadline
        self._first_byte_ms = first_byte_ms
        self._idle_s = idle_s
        self.status: int = response.status_code
        self.headers: dict[str, str] = {k.lower(): v for k, v in response.headers.items()}

    @property
    def url(self) -> str:
        """The final URL without its query (made on demand: URL objects are slow to copy)."""
        return str(self._response.url.copy_with(query=None))

    async def iter_bytes(self) -> AsyncIterator[bytes]:
        """Decoded body chunks as they arrive (sizes are whatever the network delivers)."""
        guard = self._guard
        enter = guard.enter
        iterator = self._response.aiter_bytes().__aiter__()
        next_chunk = iterator.__anext__
        clock = guard.loop.time
        idle_s = self._idle_s
        try:
            while True:
                # Per chunk: one clock read and a few attribute writes (the guard's watchdog
                # timer is armed once, not per chunk).
                first = self._first_byte_deadline is not None
                if first:
                    enter(self._first_byte_deadline)
                    self._first_byte_deadline = None
                else:
                    enter(None if idle_s is None else clock() + idle_s)
                try:
                    chunk = await next_chunk()
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError as exc:
                    raise (guard.absorb(exc)
                           or (_first_byte_timeout(self._host, self._first_byte_ms) if first
                               else _idle_timeout(self._host, (idle_s or 0) * 1000))) from None
                except httpx.HTTPError as exc:
                    raise _map_transport_error(exc, self._host, True, self._secrets) from None
                finally:
                    guard.blocked = False  # guard.leave(), inlined on the per-chunk path
                if chunk:
                    yield chunk
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:
                    pass

    async def read_text(self, max_bytes: int = 1 << 20) -> str:
        """The rest of the body as text (at most ``max_bytes``; decoded leniently)."""
        parts: list[bytes] = []
        size = 0
        async for chunk in self.iter_bytes():
            parts.append(chunk)
            size += len(chunk)
            if size >= max_bytes:
                break
        return b"".join(parts).decode(self._response.encoding or "utf-8", errors="replace")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._guard.detach()
        try:
            await self._response.aclose()
        except Exception:  # closing a broken connection must not mask the real error
            pass

    async def __aenter__(self) -> StreamResponse:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


class _OpenStream:
    """Awaitable *and* async context manager returned by :func:`open_stream`."""

    __slots__ = ("_args", "_response")

    def __init__(self, args: dict[str, Any]) -> None:
        self._args = args
        self._response: StreamResponse | None = None

    def __await__(self) -> Generator[Any, None, StreamResponse]:
        return _open(**self._args).__await__()

    async def __aenter__(self) -> StreamResponse:
        self._response = await _open(**self._args)
        return self._response

    async def __aexit__(self, *exc_info: Any) -> None:
        if self._response is not None:
            await self._response.aclose()


def open_stream(method: str, url: str, *, headers: Mapping[str, str] | None = None,
                json_body: Any = None, content: bytes | None = None,
                signal: AbortSignal | None = None, timeout_ms: int | float | None = None,
                first_byte_timeout_ms: int | float | None = None,
                idle_timeout_ms: int | float | None = None,
                secrets: Iterable[str | None] = ()) -> _OpenStream:
    """Start a request; see the module docstring."""
    return _OpenStream(dict(method=method, url=url, headers=headers, json_body=json_body,
                            content=content, signal=signal, timeout_ms=timeout_ms,
                            first_byte_timeout_ms=first_byte_timeout_ms,
                            idle_timeout_ms=idle_timeout_ms, secrets=tuple(secrets)))


async def _open(method: str, url: str, headers: Mapping[str, str] | None, json_body: Any,
                content: bytes | None, signal: AbortSignal | None, timeout_ms: int | float | None,
                first_byte_timeout_ms: int | float | None, idle_timeout_ms: int | float | None,
                secrets: tuple[str | None, ...]) -> StreamResponse:
    if signal is not None and signal.aborted:
        raise RequestAborted()
    request_headers: dict[str, str] = {}
    if json_body is not None:
        content = encode_json_body(json_body)
        request_headers["content-type"] = "application/json"
    if headers:
        request_headers.update({k: v for k, v in headers.items() if v is not None})
    timeout = _DEFAULT_TIMEOUT if timeout_ms is None else httpx.Timeout(max(timeout_ms, 1) / 1000)
    client = get_client()
    try:
        request = client.build_request(method, url, headers=request_headers, content=content,
                                       timeout=timeout)
    except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError) as exc:
        raise ConnectionFailed(f"Invalid request URL (check the base URL): {_describe(exc)}",
                               _host_of(url)) from None
    host = _host_of(request.url)  # the URL parsed once, by build_request
    first_byte_s = _bound(first_byte_timeout_ms, DEFAULT_FIRST_BYTE_TIMEOUT_MS)
    idle_s = _bound(idle_timeout_ms, DEFAULT_IDLE_TIMEOUT_MS)
    loop = asyncio.get_running_loop()
    deadline = None if first_byte_s is None else loop.time() + first_byte_s
    guard = _AbortGuard(signal)
    try:
        guard.enter(deadline)
        try:
            response = await client.send(request, stream=True)
        except asyncio.CancelledError as exc:
            raise guard.absorb(exc) or _first_byte_timeout(host, (first_byte_s or 0) * 1000) from None
        except httpx.UnsupportedProtocol as exc:
            raise ConnectionFailed(f"Invalid request URL (check the base URL): {_describe(exc)}", host) from None
        except httpx.HTTPError as exc:
            raise _map_transport_error(exc, host, False, secrets) from None
        finally:
            guard.leave()
    except BaseException:
        guard.detach()
        raise
    stream = StreamResponse(response, guard, host, secrets, deadline, (first_byte_s or 0) * 1000,
                            idle_s)
    if 200 <= response.status_code < 300:
        return stream
    try:
        text = await stream.read_text()
    except HttpError:  # the error body itself broke off: report the status anyway
        text = ""
    finally:
        await stream.aclose()
    raise HttpStatusError(response.status_code, stream.headers, truncate_body(redact(text, secrets)))
