"""Secret redaction for everything a tool hands to the model, the view or the transcript.

A secret is the *value* of an environment variable whose *name* looks like one (contains
``KEY``, ``TOKEN``, ``SECRET`` or ``PASSWORD``, any case) and that is at least 8 characters
long, or a value registered with ``add_secret`` (an API key passed as an argument). Every
occurrence of such a value, and of its ``repr``/JSON-escaped spellings, becomes ``[redacted]``.

Redaction comes before any cut (``format.cut``/``clip`` redact first and never split a
marker), but other code cuts text too: pandas shortens a long cell to ``head...``, reprlib
a long string to ``head...tail``. So a piece of at least 8 characters of a secret that sits
right against an ellipsis (``...`` or ``…``), the start of a secret before it or its end
after it, is redacted as well.

Lone surrogates (``"\ud800"``, from ``errors="surrogateescape"`` decoding or bad C
extensions) become U+FFFD here: such text cannot be encoded as UTF-8, so it would break
the iopub message, the transcript and the session file.

API:

- ``redact(text) -> str``: replace every known secret in ``text`` (and lone surrogates).
- ``add_secret(value)`` / ``discard_secret(value)``: explicit secrets besides the environment.
- ``redact_data(obj)``: the same, recursively, for the strings of a JSON-like structure
  (dicts, lists, tuples); binary-looking image payloads are skipped by the caller.
- ``split_unsafe_tail(text) -> (safe, held)``: for streaming: ``safe`` can be redacted and
  shown now, ``held`` is a suffix that may be the start of a secret split across two writes
  and must wait for more text (or for the end of the stream). ``strip_unsafe_head(text)`` is
  the mirror image, for text that starts in the middle of a stream.

The matcher is one compiled alternation (longest value first), rebuilt only when the set of
secret values changes. ``os.environ`` is rescanned only when its raw mapping differs from the
copy taken at the last scan (one C-level dict comparison); ``secrets_generation()`` changes
with the set, so caches of redacted text know when to redact again.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any

__all__ = [
    "REDACTED",
    "add_secret",
    "discard_secret",
    "redact",
    "redact_data",
    "scrub",
    "secret_values",
    "secrets_generation",
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
        self.generation = 0  # bumped whenever the set of secrets changes

    def current(self) -> tuple[tuple[str, ...], re.Pattern[str] | None]:
        values = _environ_secrets()
        if _explicit:
            values = tuple(sorted(set(values) | _explicit))
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
                    self.generation += 1
        return self._spellings, self._regex


_env_lock = threading.Lock()
_env_copy: dict[Any, Any] | None = None
_env_secrets: tuple[str, ...] = ()


def _environ_secrets() -> tuple[str, ...]:
    """The secret values of ``os.environ``, rescanned only when the environment changed.

    Decoding and testing every name costs ~10 us a variable (25-45 ms a call at 2,500
    variables, a Kubernetes pod's normal; redaction runs many times a cell). Comparing the
    environment's raw mapping with a copy of it runs in C and costs ~1 us per 100 variables.
    """
    global _env_copy, _env_secrets
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):  # not CPython's os._Environ: scan every time
        return _scan_environ()
    if data == _env_copy:
        return _env_secrets
    with _env_lock:
        copy = dict(data)
        found = _scan_environ()
        _env_copy, _env_secrets = copy, found
    return found


def secrets_generation() -> int:
    """A number that changes whenever the set of redacted secrets changes (for caches of
    redacted text: text recorded before a secret became known is redacted again)."""
    _matcher.current()
    return _matcher.generation


def _scan_environ() -> tuple[str, ...]:
    found = set()
    for name, value in list(os.environ.items()):
        if len(value) >= MIN_SECRET_LEN and _SECRET_NAME.search(name):
            found.add(value)
    return tuple(sorted(found))


_explicit: set[str] = set()


def add_secret(value: str) -> None:
    """Redact ``value`` everywhere from now on (values under 8 characters are ignored)."""
    if isinstance(value, str) and len(value) >= MIN_SECRET_LEN:
        _explicit.add(value)


def discard_secret(value: str) -> None:
    _explicit.discard(value)


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


_SURROGATE = re.compile("[\ud800-\udfff]")
_ELLIPSES = ("...", "\u2026")


def scrub(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (valid for UTF-8 from then on)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def redact(text: str) -> str:
    """Return ``text`` with every secret value replaced by ``[redacted]`` (module doc)."""
    if not text:
        return text
    text = scrub(text)
    spellings, regex = _matcher.current()
    if regex is None:
        return text
    text = regex.sub(REDACTED, text)
    if "..." in text or "\u2026" in text:
        text = _redact_cut_pieces(text, spellings)
    return text


def _redact_cut_pieces(text: str, spellings: tuple[str, ...]) -> str:
    """Redact secret pieces (>= MIN_SECRET_LEN) that touch an ellipsis (module doc)."""
    spans: list[tuple[int, int]] = []
    for secret in spellings:
        # head pieces: a start of the secret running right up to an ellipsis
        start = text.find(secret[:MIN_SECRET_LEN])
        while start != -1:
            k = MIN_SECRET_LEN
            while k < len(secret) and start + k < len(text) and text[start + k] == secret[k]:
                k += 1
            if text.startswith(_ELLIPSES, start + k):
                spans.append((start, start + k))
            start = text.find(secret[:MIN_SECRET_LEN], start + 1)
        # tail pieces: an end of the secret right after an ellipsis
        for mark in _ELLIPSES:
            at = text.find(mark)
            while at != -1:
                begin = at + len(mark)
                for k in range(min(len(secret) - 1, len(text) - begin), MIN_SECRET_LEN - 1, -1):
                    if text.startswith(secret[-k:], begin):
                        spans.append((begin, begin + k))
                        break
                at = text.find(mark, begin)
    if not spans:
        return text
    out, pos = [], 0
    for begin, end in sorted(spans):
        if begin < pos:
            begin = pos
        if end <= begin:
            continue
        out.append(text[pos:begin])
        out.append(REDACTED)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def redact_data(obj: Any) -> Any:
    """Redact all strings inside a JSON-like structure (returns a new structure)."""
    _, regex = _matcher.current()
    if regex is None:
        return _scrub_data(obj)
    return _walk(obj, regex)


def _scrub_data(obj: Any) -> Any:
    if isinstance(obj, str):
        return scrub(obj)
    if isinstance(obj, dict):
        return {_scrub_data(k): _scrub_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_scrub_data(v) for v in obj)
    return obj


def _walk(obj: Any, regex: re.Pattern[str]) -> Any:
    if isinstance(obj, str):
        return redact(obj)
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
