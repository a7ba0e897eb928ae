"""Provider request retries (spec 5.15): pure asyncio, no HTTP library.

``await retry_provider_request(request, max_retries=0, max_retry_delay_ms=60000, signal=None)``
calls ``await request()`` and retries it while the error is retryable. Wrap **only** the part
of a request up to the response headers: errors in the middle of a stream are never retried.

* Off by default (``max_retries=0``).
* Retryable: an error with a ``status`` attribute (and optional ``headers``): the header
  ``x-should-retry: true`` retries and ``false`` does not; otherwise retry when ``status`` is
  ``None`` (e.g. a failed connect), 408, 409, 429 or >= 500.
* Delay: ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date). A server delay above
  ``max_retry_delay_ms`` (when that cap is > 0) fails at once with :class:`RetryDelayTooLong`:
  ``"Server requested <s>s retry delay (max: <m>s). <original message>"``. Without a server
  delay: ``min(0.5 * 2**attempt, 8)`` seconds times ``1 - random() * 0.25``.
* The sleep is abortable: an abort raises ``AbortError("Request aborted")`` and cancels the timer;
  an error that arrives while the signal is already aborted is re-raised as that AbortError too.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from .abort import AbortError, AbortSignal

__all__ = [
    "retry_provider_request", "RetryDelayTooLong", "is_retryable_error", "server_retry_delay_ms",
    "backoff_delay_ms", "abortable_sleep",
]

T = TypeVar("T")

_RETRYABLE_STATUS = frozenset({408, 409, 429})


class RetryDelayTooLong(Exception):
    """The server asked for a longer wait than ``max_retry_delay_ms`` allows."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


def _lower_headers(headers: Any) -> dict[str, str]:
    if not headers:
        return {}
    items = headers.items() if isinstance(headers, Mapping) or hasattr(headers, "items") else headers
    return {str(k).lower(): str(v) for k, v in items}


def is_retryable_error(error: BaseException) -> bool:
    if isinstance(error, AbortError) or not hasattr(error, "status"):
        return False
    headers = _lower_headers(getattr(error, "headers", None))
    should = headers.get("x-should-retry")
    if should == "true":
        return True
    if should == "false":
        return False
    status = getattr(error, "status", None)
    if status is None:
        return True
    try:
        status = int(status)
    except (TypeError, ValueError):
        return False
    return status in _RETRYABLE_STATUS or status >= 500


def server_retry_delay_ms(headers: Any, now: float | None = None) -> float | None:
    """The delay a server asked for, in milliseconds, or None."""
    h = _lower_headers(headers)
    raw_ms = h.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms)
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = h.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
        if math.isfinite(seconds) and seconds >= 0:
            return seconds * 1000
        return None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, (when.timestamp() - current) * 1000)


def backoff_delay_ms(attempt: int, rand: Callable[[], float] = random.random) -> float:
    return min(0.5 * 2 ** attempt, 8.0) * 1000 * (1 - rand() * 0.25)


def _seconds(ms: float) -> str:
    value = ms / 1000
    return str(int(value)) if value == int(value) else f"{value:g}"


async def abortable_sleep(delay_ms: float, signal: AbortSignal | None = None) -> None:
    """Sleep; an abort (from any thread) ends it with ``AbortError("Request aborted")``."""
    if signal is not None and signal.aborted:
        raise AbortError("Request aborted")
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[bool] = loop.create_future()

    def finish(aborted: bool) -> None:
        if not waiter.done():
            waiter.set_result(aborted)

    timer = loop.call_later(max(delay_ms, 0) / 1000, finish, False)

    def on_abort() -> None:
        try:
            loop.call_soon_threadsafe(finish, True)
        except RuntimeError:
            pass

    remove = signal.add_listener(on_abort) if signal is not None else None
    try:
        aborted = await waiter
    finally:
        timer.cancel()
        if remove is not None:
            remove()
    if aborted:
        raise AbortError("Request aborted")


async def retry_provider_request(
    request: Callable[[], Awaitable[T]],
    *,
    max_retries: int | None = 0,
    max_retry_delay_ms: float | None = 60000,
    signal: AbortSignal | None = None,
) -> T:
    retries = max(0, int(max_retries or 0))
    cap = 60000 if max_retry_delay_ms is None else max_retry_delay_ms
    attempt = 0
    while True:
        try:
            return await request()
        except AbortError:
            raise
        except Exception as error:
            if signal is not None and signal.aborted:
                raise AbortError("Request aborted") from error
            if attempt >= retries or not is_retryable_error(error):
                raise
            server_delay = server_retry_delay_ms(getattr(error, "headers", None))
            if server_delay is not None:
                if cap > 0 and server_delay > cap:
                    raise RetryDelayTooLong(
                        f"Server requested {_seconds(math.ceil(server_delay / 1000) * 1000)}s retry "
                        f"delay (max: {_seconds(cap)}s). {error}",
                        error,
                    ) from error
                delay = server_delay
            else:
                delay = backoff_delay_ms(attempt)
            await abortable_sleep(delay, signal)
            attempt += 1
