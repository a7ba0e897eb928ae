"""Where captured output goes during one execution of agent code.

``OutputSink`` receives the writes and displays of the routed capture (on any thread), keeps
the whole text for the result (``HeadTail``: first and last ``cap`` characters of a long
stream), and forwards the view's updates:

- stream text is coalesced to at most one update per ``interval`` (a first write goes out at
  once), redacted, and a possible start of a secret is held back until the next write shows
  whether it completes one (``redact.split_unsafe_tail``);
- the live text per stream stops (with a note) after the detail cap, so a runaway print loop
  cannot flood the view;
- displays go out at once (after any pending text, to keep the order), with redacted text;
- callbacks always run on the loop thread (writes from other threads hop with
  ``call_soon_threadsafe``), and an exception in a callback never reaches the code that printed.

The sink also keeps the *timeline* for the call's details: stream text and displays in the
order they came (consecutive writes of one stream merged), each stream's first ``cap``
characters in place and, if it ran longer, its last ``cap`` characters after a note at the
end (``outputs()``, typed records of ``updates.py``, redacted). Image displays beyond
``max_images`` are not kept or sent (counted in ``images_dropped``).

``redact_bundle(data)`` redacts a mimebundle (text types; base64 images are left alone).
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ..trust.redact import MIN_SECRET_LEN, REDACTED, redact, redact_data, scrub, split_unsafe_tail, strip_unsafe_head
from ..output.updates import DisplayOutput, StreamName, StreamOutput, ToolOutput

__all__ = ["HeadTail", "OutputSink", "redact_bundle"]

_BINARY_MIMES = frozenset(("image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"))
_MAX_DISPLAYS = 50


class HeadTail:
    """Keeps the first and last ``cap`` characters of a long stream, and the total length.

    Amortised O(len(text)) per ``add``: the tail is a deque of chunks trimmed from the left.
    """

    def __init__(self, cap: int) -> None:
        self.cap = max(cap, 1)
        self.head: list[str] = []
        self.head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.total = 0

    def add(self, text: str) -> None:
        self.total += len(text)
        if self.head_len < self.cap:
            take = text[: self.cap - self.head_len]
            self.head.append(take)
            self.head_len += len(take)
            text = text[len(take):]
        if not text:
            return
        self._tail.append(text)
        self._tail_len += len(text)
        while self._tail_len - len(self._tail[0]) >= self.cap:
            self._tail_len -= len(self._tail.popleft())

    @property
    def tail(self) -> str:
        joined = "".join(self._tail)
        return joined[-self.cap:] if len(joined) > self.cap else joined

    def text(self) -> str:
        """The kept text, redacted; a secret cut by the dropped middle leaves no fragment."""
        head, tail = "".join(self.head), self.tail
        dropped = self.total - len(head) - len(tail)
        if dropped > 0:
            safe_head, _ = split_unsafe_tail(redact(head))
            safe_tail = strip_unsafe_head(redact(tail))
            return safe_head + f"\n[... {dropped} characters not kept ...]\n" + safe_tail
        return redact(head + tail)


def redact_bundle(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mime, value in data.items():
        if isinstance(value, bytes):
            value = base64.b64encode(value).decode("ascii")  # what ipykernel would send
            out[mime] = value if mime in _BINARY_MIMES else redact(value)
        elif mime in _BINARY_MIMES:
            out[mime] = value
        else:
            out[mime] = redact_data(value)
    return out


class OutputSink:
    """Receives captured writes (any thread), keeps the full text, emits coalesced updates."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_stream: Callable[[StreamName, str], Any] | None,
        on_display: Callable[[dict, dict], Any] | None,
        interval: float,
        detail_cap: int,
        max_images: int | None = None,
    ) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._on_stream = on_stream
        self._on_display = on_display
        self._interval = interval
        self._lock = threading.RLock()
        self._raw = {"stdout": HeadTail(detail_cap), "stderr": HeadTail(detail_cap)}
        # The live view gets at most this much per stream; the result keeps head and tail.
        self._live_cap = max(detail_cap, 1)
        self._live_sent = {"stdout": 0, "stderr": 0}
        self._pending: list[tuple[str, str]] = []  # (name, text) not yet emitted
        self._held = {"stdout": "", "stderr": ""}  # possible secret prefixes
        self._last_flush = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._hop_scheduled = False
        self.displays: list[dict[str, Any]] = []
        self.displays_dropped = 0
        self.max_images = max_images
        self.images_kept = 0
        self.images_dropped = 0
        # [kind, name or bundle, parts]; stream entries hold their text parts
        self._timeline: list[list[Any]] = []
        self._timeline_len = {"stdout": 0, "stderr": 0}
        # drained, not sent live yet: ["text", name, text] and ["display", bundle] in order
        self._undelivered: list[list[Any]] = []
        self.closed = False

    # Called by the capture proxies for every write, on whatever thread the code wrote from:
    # only an append here; the text is processed in flush().
    def stream(self, name: StreamName, text: str) -> None:
        with self._lock:
            self._pending.append((name, text))
        if threading.get_ident() == self._loop_thread:
            self._schedule()
        elif not self._hop_scheduled:
            self._hop_scheduled = True
            self._hop(self._schedule_from_hop)

    def _schedule_from_hop(self) -> None:
        self._hop_scheduled = False
        self._schedule()

    def display(self, data: dict, metadata: dict) -> None:
        bundle = {"data": redact_bundle(data), "metadata": redact_data(metadata)}
        is_image = any(m in _BINARY_MIMES for m in bundle["data"])
        with self._lock:
            if is_image and self.max_images is not None and self.images_kept >= self.max_images:
                self.images_dropped += 1
                return
            self.images_kept += is_image
            self._drain_locked()  # text written before the display stays before it
            if len(self.displays) < _MAX_DISPLAYS:
                self.displays.append(bundle)
                self._timeline.append(["display", bundle, None])
            else:
                self.displays_dropped += 1
            if self._on_display is not None:
                self._undelivered.append(["display", bundle])
        if self._on_display is None or self.closed:
            return
        if threading.get_ident() == self._loop_thread:
            self.flush()
        else:
            self._hop(self.flush)

    def _hop(self, fn: Callable[..., Any], *args: Any) -> None:
        # From a thread the code started: the view is updated on the loop. A closed loop
        # must not turn the thread's print() into an error; the text is kept regardless.
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass

    def _schedule(self) -> None:
        if self.closed:
            return
        now = time.monotonic()
        if now - self._last_flush >= self._interval:
            self.flush()
        elif self._timer is None:
            self._timer = self._loop.call_later(self._interval - (now - self._last_flush), self.flush)

    def _drain(self) -> list[list[str]]:
        """Move pending writes into the kept text; returns them merged per stream run."""
        with self._lock:
            return self._drain_locked()

    def _drain_locked(self) -> list[list[str]]:
        with self._lock:
            pending, self._pending = self._pending, []
        # Parts are joined once per run: `+=` on a list item copies the string every time,
        # quadratic for the many small writes a worker thread piles up between flushes.
        runs: list[tuple[str, list[str]]] = []
        for name, text in pending:
            if runs and runs[-1][0] == name:
                runs[-1][1].append(text)
            else:
                runs.append((name, [text]))
        merged = [[name, scrub("".join(parts))] for name, parts in runs]
        for name, text in merged:
            self._raw[name].add(text)
            room = self._raw[name].cap - self._timeline_len[name]
            if room > 0:
                take = text[:room]
                self._timeline_len[name] += len(take)
                last = self._timeline[-1] if self._timeline else None
                if last is not None and last[0] == "stream" and last[1] == name:
                    last[2].append(take)
                else:
                    self._timeline.append(["stream", name, [take]])
        self._undelivered.extend(["text", name, text] for name, text in merged)
        return merged

    def flush(self, final: bool = False) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._last_flush = time.monotonic()
        with self._lock:
            self._drain_locked()
            items, self._undelivered = self._undelivered, []
        if self.closed:
            return
        for item in items:
            if item[0] == "display":
                # Text held back as a possible secret start cannot continue past a display.
                self._release_held()
                if self._on_display is not None:
                    _safe_call(self._on_display, item[1]["data"], item[1]["metadata"])
                continue
            _, name, text = item
            if self._on_stream is None:
                continue
            safe, self._held[name] = split_unsafe_tail(redact(self._held[name] + text))
            if safe:
                self._send_live(name, safe)
        if final:
            self._release_held()

    def _release_held(self) -> None:
        """Send held text: it is a proper start of a secret, so one of >= 8 characters is
        shown as the marker, never as the fragment."""
        for name in ("stdout", "stderr"):
            held, self._held[name] = self._held[name], ""
            if held and self._on_stream is not None:
                self._send_live(name, REDACTED if len(held) >= MIN_SECRET_LEN else held)

    def _send_live(self, name: StreamName, text: str) -> None:
        assert self._on_stream is not None
        sent = self._live_sent[name]
        if sent >= self._live_cap:
            return
        if sent + len(text) >= self._live_cap:
            # Cut before a secret's start so no fragment of it shows.
            text, _ = split_unsafe_tail(text[: self._live_cap - sent])
            text += "\n[... more output not shown live; the result keeps its head and tail ...]\n"
            self._live_sent[name] = self._live_cap
        else:
            self._live_sent[name] = sent + len(text)
        _safe_call(self._on_stream, name, text)

    def close(self) -> None:
        self.flush(final=True)
        self.closed = True

    def outputs(self) -> list[ToolOutput]:
        """The timeline as typed, redacted records (see the module docstring)."""
        with self._lock:
            self._drain_locked()
            timeline = [list(e) for e in self._timeline]
        out: list[ToolOutput] = []
        last_of: dict[str, int] = {}
        for kind, key, parts in timeline:
            if kind == "display":
                out.append(DisplayOutput(data=key["data"], metadata=key["metadata"]))
            else:
                last_of[key] = len(out)
                out.append(StreamOutput(name=key, text=redact("".join(parts))))
        for name in ("stdout", "stderr"):
            ht = self._raw[name]
            dropped = ht.total - ht.head_len - len(ht.tail)
            if ht.total <= ht.head_len:
                continue
            if name in last_of:  # the kept head may end with the start of a secret
                i = last_of[name]
                record = out[i]
                assert isinstance(record, StreamOutput)
                out[i] = StreamOutput(name=record.name, text=split_unsafe_tail(record.text)[0])
            tail = strip_unsafe_head(redact(ht.tail))
            note = f"\n[... {dropped} characters not kept ...]\n" if dropped > 0 else ""
            out.append(StreamOutput(name=name, text=note + tail))
        return out

    def text(self, name: StreamName) -> tuple[str, int]:
        """The kept (redacted) text of a stream and its full length."""
        self._drain()
        ht = self._raw[name]
        return ht.text(), ht.total


def _safe_call(fn: Callable[..., Any], *args: Any) -> None:
    # A broken view must not break the tool code that happens to be printing.
    try:
        fn(*args)
    except Exception:
        pass
