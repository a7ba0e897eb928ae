"""An incremental Server-Sent Events decoder: bytes in, events out, no I/O.

    decoder = SSEDecoder()
    async for chunk in response.iter_bytes():
        for event in decoder.feed(chunk):
            ...event.event, event.data, event.id...
    decoder.flush()                   # at EOF: [] (an event lacking its blank line is dropped)

Chunks may split anywhere: inside a UTF-8 sequence, between ``\\r`` and ``\\n``, inside a field
name. Lines end with CRLF, LF or CR; ``:`` lines are comments; ``data`` lines of one event are
joined with ``\\n``; an event with no data line is not dispatched; a field name without a colon
is the whole line with an empty value; one space after the colon is dropped; ``retry`` takes
ASCII digits only; an ``id`` containing NUL is ignored; one leading BOM is skipped; and at end of
stream an event that never got its blank line is discarded (the WHATWG event-stream rules, to
the letter: a truncated stream must not pass for a complete last event). ``event`` defaults to
``"message"``; ``id`` is the last event id seen (it persists across events). Invalid UTF-8 is
replaced with U+FFFD rather than failing the stream.

``SSEDecoder(data_only=True)`` yields just the ``data`` strings (for APIs such as Chat
Completions that ignore event names), saving an object per event on the hot path.

This is the per-token hot path of every adapter, so it works on whole chunks with ``str.split``
and keeps per-line work to a prefix test.
"""

from __future__ import annotations

import codecs
from typing import Any

__all__ = ["SSEEvent", "SSEDecoder"]


class SSEEvent:
    __slots__ = ("event", "data", "id", "retry")

    def __init__(self, event: str, data: str, id: str | None = None, retry: int | None = None) -> None:
        self.event = event
        self.data = data
        self.id = id
        self.retry = retry

    def __repr__(self) -> str:
        return f"SSEEvent(event={self.event!r}, data={self.data!r}, id={self.id!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, SSEEvent) and self.event == other.event and self.data == other.data
                and self.id == other.id and self.retry == other.retry)


class SSEDecoder:
    __slots__ = ("_utf8", "_parts", "_skip_lf", "_started", "_data", "_event", "_id", "_retry",
                 "_data_only")

    def __init__(self, data_only: bool = False) -> None:
        self._data_only = data_only
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._parts: list[str] = []       # pieces of the current, unterminated line
        self._skip_lf = False             # the last chunk ended in "\r": a leading "\n" belongs to it
        self._started = False             # BOM check done
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None

    @property
    def last_event_id(self) -> str | None:
        return self._id

    def feed(self, chunk: bytes) -> list[Any]:
        text = self._utf8.decode(chunk)
        if not text:
            return []
        return self._feed_text(text)

    def feed_text(self, text: str) -> list[Any]:
        """Feed already-decoded text (same rules as :meth:`feed`)."""
        return self._feed_text(text) if text else []

    def flush(self) -> list[Any]:
        """End of stream: the events completed by the last bytes; pending data is discarded.

        A last line without its line end is still a line, but the event it belongs to has
        no blank line after it, so (as the standard says) it is not dispatched.
        """
        text = self._utf8.decode(b"", True)  # a UTF-8 sequence cut at the end: U+FFFD
        events = self._feed_text(text) if text else []
        self._parts = []
        self._data.clear()
        self._event = ""
        return events

    # -- internals -----------------------------------------------------------------------
    def _feed_text(self, text: str) -> list[Any]:
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text[:1] == "\n":
                text = text[1:]
        if "\r" in text:
            if text[-1] == "\r":
                self._skip_lf = True
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        events: list[Any] = []
        if "\n" not in text:
            if text:
                self._parts.append(text)
            return events
        lines = text.split("\n")
        if self._parts:
            self._parts.append(lines[0])
            lines[0] = "".join(self._parts)
            self._parts = []
        tail = lines.pop()
        if tail:
            self._parts.append(tail)
        data = self._data
        data_only = self._data_only
        for line in lines:
            if not line:
                if data:
                    joined = data[0] if len(data) == 1 else "\n".join(data)
                    events.append(joined if data_only else
                                  SSEEvent(self._event or "message", joined, self._id, self._retry))
                    data.clear()
                self._event = ""
            elif line[:6] == "data: ":
                data.append(line[6:])
            else:
                self._line(line, events)
        return events

    def _line(self, line: str, events: list[Any]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line[0] == ":":
            return
        name, sep, value = line.partition(":")
        if sep and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        # any other field is ignored, as the standard says

    def _dispatch(self, events: list[Any]) -> None:
        data = self._data
        if data:
            joined = "\n".join(data)
            events.append(joined if self._data_only else
                          SSEEvent(self._event or "message", joined, self._id, self._retry))
            data.clear()
        self._event = ""
