"""AbortController / AbortSignal: cooperative cancellation, as in the web platform.

pi's loop relies on *cooperative* abort: providers turn an aborted signal into an
``aborted`` assistant message and tools poll the signal themselves. ``asyncio``
task cancellation is deliberately not used for this (see the spec, section 7).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["AbortController", "AbortSignal", "AbortError"]


class AbortError(Exception):
    """Raised by :meth:`AbortSignal.throw_if_aborted` and by abortable waits."""

    def __init__(self, message: str = "This operation was aborted") -> None:
        super().__init__(message)


class AbortSignal:
    """Read side of an :class:`AbortController`.

    Listeners run synchronously, in registration order, on the thread that calls
    ``abort()``; a listener that needs the event loop must hop there itself.
    """

    __slots__ = ("_aborted", "_reason", "_listeners")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: Any = None
        self._listeners: list[Callable[[], Any]] = []

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> Any:
        return self._reason

    def add_listener(self, listener: Callable[[], Any]) -> Callable[[], None]:
        """Call ``listener()`` on abort (at once if already aborted). Returns a remover."""
        if self._aborted:
            listener()
            return lambda: None
        self._listeners.append(listener)

        def remove() -> None:
            try:
                self._listeners.remove(listener)
            except ValueError:
                pass

        return remove

    def remove_listener(self, listener: Callable[[], Any]) -> None:
        try:
            self._listeners.remove(listener)
        except ValueError:
            pass

    def throw_if_aborted(self) -> None:
        if self._aborted:
            reason = self._reason
            if isinstance(reason, BaseException):
                raise reason
            raise AbortError(str(reason) if reason is not None else "This operation was aborted")

    def _fire(self, reason: Any) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason if reason is not None else AbortError()
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            try:
                listener()
            except Exception:  # a broken listener must not stop the others
                pass

    @classmethod
    def aborted_signal(cls, reason: Any = None) -> AbortSignal:
        """A signal that is already aborted (``AbortSignal.abort()`` in JS)."""
        signal = cls()
        signal._fire(reason)
        return signal

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self._aborted})"


class AbortController:
    """Owns an :class:`AbortSignal`; ``abort()`` is idempotent and never raises."""

    __slots__ = ("_signal",)

    def __init__(self) -> None:
        self._signal = AbortSignal()

    @property
    def signal(self) -> AbortSignal:
        return self._signal

    def abort(self, reason: Any = None) -> None:
        self._signal._fire(reason)
