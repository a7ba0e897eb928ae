"""Secret redaction for everything a tool hands to the model, the view or the transcript.

A secret is the *value* of an environment variable whose *name* looks like one (contains
``KEY``, ``TOKEN``, ``SECRET`` or ``PASSWORD``, any case) and that is at least 8 characters
long. Every occurrence of such a value, and of its ``repr``/JSON-escaped spellings, becomes
``[redacted]``.

API:

- ``redact(text) -> str``: replace every known secret in ``text``.
- ``redact_data(obj)``: the same, recursively, for the strings of a JSON-like structure
  (dicts, lists, tuples); binary-looking image payloads are skipped by the caller.
- ``split_unsafe_tail(text) -> (safe, held)``: for streaming: ``safe`` can be redacted and
  shown now, ``held`` is a suffix that may be the start of a secret split across two writes
  and must wait for more text (or for the end of the stream). ``strip_unsafe_head(text)`` is
  the mirror image, for text that starts in the middle of a stream.

The matcher is one compiled alternation (longest value first), rebuilt only when the set of
secret values in ``os.environ`` changes; the check costs one pass over ``os.environ``.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any

__all__ = [
    "REDACTED",
    "redact",
    "redact_data",
    "secret_values",
    "split_unsafe_tail",
    "strip_unsafe_head",
]

REDACTED = "[redacted]"
MIN_SECRET_LEN = 8
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)


class _Matcher:
    """Caches the compiled alternation for one snapshot of the secret values."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: tuple[str, ...] = ()
        self._spellings: tuple[str, ...] = ()
        self._regex: re.Pattern[str] | None = None

    def current(self) -> tuple[tuple[str, ...], re.Pattern[str] | None]:
        values = _scan_environ()
        if values != self._values:
            with self._lock:
                if values != self._values:
                    spellings = _spellings(values)
                    # Longest first, so a secret that contains another is replaced whole.
                    ordered = sorted(spellings, key=len, reverse=True)
                    self._regex = (
                        re.compile("|".join(re.escape(s) for s in ordered)) if ordered else None
                    )
                    self._spellings = tuple(ordered)
                    self._values = values
        return self._spellings, self._regex


def _scan_environ() -> tuple[str, ...]:
    found = set()
    for name, value in list(os.environ.items()):
        if len(value) >= MIN_SECRET_LEN and _SECRET_NAME.search(name):
            found.add(value)
    return tuple(sorted(found))


def _spellings(values: tuple[str, ...]) -> set[str]:
    """The value itself plus the forms it takes inside a repr() or a JSON string."""
    out: set[str] = set()
    for value in values:
        out.add(value)
        for escaped in (repr(value)[1:-1], json.dumps(value)[1:-1]):
            if len(escaped) >= MIN_SECRET_LEN:
                out.add(escaped)
    return out


_matcher = _Matcher()


def secret_values() -> tuple[str, ...]:
    """The spellings currently redacted (for tests and diagnostics; never print them)."""
    return _matcher.current()[0]


def redact(text: str) -> str:
    """Return ``text`` with every secret value replaced by ``[redacted]``."""
    if not text:
        return text
    _, regex = _matcher.current()
    if regex is None:
        return text
    return regex.sub(REDACTED, text)


def redact_data(obj: Any) -> Any:
    """Redact all strings inside a JSON-like structure (returns a new structure)."""
    _, regex = _matcher.current()
    if regex is None:
        return obj
    return _walk(obj, regex)


def _walk(obj: Any, regex: re.Pattern[str]) -> Any:
    if isinstance(obj, str):
        return regex.sub(REDACTED, obj)
    if isinstance(obj, dict):
        return {_walk(k, regex): _walk(v, regex) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_walk(v, regex) for v in obj)
    return obj


def split_unsafe_tail(text: str) -> tuple[str, str]:
    """Split ``text`` into (safe, held).

    ``held`` is the longest suffix of ``text`` that is a proper prefix of a secret spelling:
    those characters might complete a secret with the next write, so a stream must not show
    them yet. Without secrets (the usual case) nothing is held.
    """
    spellings, _ = _matcher.current()
    if not spellings or not text:
        return text, ""
    hold = 0
    for secret in spellings:
        # Only suffixes longer than what we already hold can change the answer.
        for k in range(min(len(secret) - 1, len(text)), hold, -1):
            if text.endswith(secret[:k]):
                hold = k
                break
    if hold == 0:
        return text, ""
    return text[:-hold], text[-hold:]


def strip_unsafe_head(text: str) -> str:
    """Drop the longest prefix of ``text`` that is a proper suffix of a secret spelling.

    For text that starts in the middle of a stream (the kept tail of a long output): its first
    characters may be the end of a secret whose start was dropped.
    """
    spellings, _ = _matcher.current()
    cut_at = 0
    for secret in spellings:
        for k in range(min(len(secret) - 1, len(text)), cut_at, -1):
            if text.startswith(secret[-k:]):
                cut_at = k
                break
    return text[cut_at:]
