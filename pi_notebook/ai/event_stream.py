"""EventStream: an async queue of events with a final result (spec section 1.9).

Rules kept from pi: pushes after the stream is done are ignored; the completing
event is still delivered to the consumer; ``end()`` without a result and without a
completing event leaves ``result()`` pending forever.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["EventStream", "AssistantMessageEventStream", "create_assistant_message_event_stream"]

_UNSET: Any = object()


class EventStream(Generic[T, R]):
    _plain_iteration = True  # iteration yields the queue as is (see take_queued)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "take_queued" not in cls.__dict__ and (
                cls.__aiter__ is not EventStream.__aiter__ or cls._iterate is not EventStream._iterate):
            cls._plain_iteration = False

    def __init__(
        self,
        is_complete: Callable[[T], bool],
        extract_result: Callable[[T], R],
    ) -> None:
        self._is_complete = is_complete
        self._extract_result = extract_result
        self._queue: deque[T] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = False
        self._result: Any = _UNSET
        self._result_future: asyncio.Future[R] | None = None
        self._error: BaseException | None = None

    # -- producer side ---------------------------------------------------------------
    def push(self, event: T) -> None:
        if self._done:
            return
        if self._is_complete(event):
            self._done = True
            self._set_result(self._extract_result(event))
        self._queue.append(event)
        self._wake()

    def push_many(self, events: list[T]) -> None:
        """``push()`` each event in order, waking the consumer once.

        Not in pi: a provider that maps a whole network read at a time hands its events over
        in one call (the consumer cannot run before the provider yields anyway).
        """
        if self._done or not events:
            return
        is_complete = self._is_complete
        queue = self._queue
        for event in events:
            if is_complete(event):
                self._done = True
                self._set_result(self._extract_result(event))
                queue.append(event)
                break
            queue.append(event)
        self._wake()

    def end(self, result: Any = _UNSET) -> None:
        self._done = True
        if result is not _UNSET and result is not None:
            self._set_result(result)
        self._wake()

    def fail(self, error: BaseException) -> None:
        """End the stream so that iteration raises ``error`` once queued events are drained.

        Not in pi: used by ``agent_loop()`` so that a raising loop never leaves its
        consumer hanging (docs/design/architecture.md, "Semantics").
        """
        if self._done and self._error is None and not self._queue and self._result is not _UNSET:
            return
        self._done = True
        self._error = error
        if self._result is _UNSET and self._result_future is not None and not self._result_future.done():
            self._result_future.set_exception(error)
        elif self._result is _UNSET:
            self._result = _Failure(error)
        self._wake()

    # -- consumer side ---------------------------------------------------------------
    def __aiter__(self) -> AsyncIterator[T]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[T]:
        # The per-event path: one deque test and popleft; the queue is never replaced (see
        # take_queued), so it is looked up once.
        queue = self._queue
        popleft = queue.popleft
        loop = asyncio.get_running_loop()
        while True:
            while queue:
                yield popleft()
            if self._done:
                if self._error is not None:
                    raise self._error
                return
            waiter = self._waiter = loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None

    async def result(self) -> R:
        if self._result is not _UNSET:
            if isinstance(self._result, _Failure):
                raise self._result.error
            return self._result
        if self._result_future is None:
            self._result_future = asyncio.get_running_loop().create_future()
        return await asyncio.shield(self._result_future)

    def take_queued(self) -> Sequence[T]:
        """Remove and return the events queued now, in order, without waiting (often none).

        Not in pi: exactly what iteration would yield next, handed over at once. A consumer
        that must not pay an async-generator step per event (the agent loop, once per
        streamed delta) takes what is ready this way and iterates only to wait for more and
        for the end of the stream (or its error). In a subclass with its own iteration (and
        no ``take_queued`` of its own) nothing is ever ready here, so iteration decides.
        """
        queue = self._queue
        if not queue or not self._plain_iteration:
            return ()
        ready = tuple(queue)
        queue.clear()  # cleared in place: an iteration in progress holds this deque
        return ready

    @property
    def done(self) -> bool:
        return self._done

    # -- internals -------------------------------------------------------------------
    def _set_result(self, value: R) -> None:
        if self._result is not _UNSET:
            return
        self._result = value
        if self._result_future is not None and not self._result_future.done():
            self._result_future.set_result(value)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _Failure:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _assistant_complete(event: Any) -> bool:
    return event.type in ("done", "error")


def _assistant_result(event: Any) -> Any:
    return event.message if event.type == "done" else event.error


class AssistantMessageEventStream(EventStream[Any, Any]):
    """Completes on ``done`` (result: ``message``) or ``error`` (result: ``error``)."""

    def __init__(self) -> None:
        super().__init__(_assistant_complete, _assistant_result)

    def push_many(self, events: list[Any]) -> None:
        """``EventStream.push_many`` with the completion test inlined (once per streamed delta)."""
        if self._done or not events:
            return
        queue = self._queue
        for event in events:
            if event.type in _TERMINAL:
                self._done = True
                self._set_result(_assistant_result(event))
                queue.append(event)
                break
            queue.append(event)
        self._wake()


_TERMINAL = frozenset(("done", "error"))


def create_assistant_message_event_stream() -> AssistantMessageEventStream:
    return AssistantMessageEventStream()
