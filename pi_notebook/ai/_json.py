"""Streaming tool-call JSON (spec 5.11): repair, then partial parsing that never raises.

Providers call :func:`parse_streaming_json` on the *accumulated* argument text at every
tool-call delta, so the work per call must stay close to C speed. Three stages, as in pi:

1. ``json.loads`` (with :func:`repair_json` when it fails and the repair changes the text);
2. a partial parse of the text (:func:`parse_partial_json`);
3. a partial parse of the repaired text;

and ``{}`` when all of them fail.

The partial stage is a Python port of the algorithm of npm ``partial-json`` 0.1.7, which
pi uses. String literals go through the C scanner of the ``json`` module (a regular
expression in the rare malformed cases) and numbers through a regex, so a long string
value costs one C-level scan, not a Python step per character. The PyPI package
``partial-json-parser`` implements the same idea but differs from npm on exactly the
cases pi's tests pin down: ``{"a": 123.`` (npm drops the key, the package keeps 123),
``[1, 2.`` (npm ``[1]``), ``1E`` with a capital E, trailing text after a complete value,
and an invalid escape inside an unterminated string. Its fast path also re-copies the
prefix at every escaped quote, which is quadratic on code-carrying arguments. Hence
the port; ``tests/ai/test_json.py`` checks it against results of the npm library itself.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]  # the C scanner; typeshed omits it
from typing import Any

__all__ = ["parse_streaming_json", "parse_json_with_repair", "repair_json", "parse_partial_json",
           "PartialJSONError", "MalformedJSONError"]


class PartialJSONError(ValueError):
    """The text ends before a value that the parser cannot complete (npm ``PartialJSON``)."""


class MalformedJSONError(ValueError):
    """The text is not JSON, complete or not (npm ``MalformedJSON``)."""


# --- repair (pi utils/json-parse.ts repairJson) ----------------------------------------

_CONTROL_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Inside a string literal: the run of characters repair leaves alone (plain characters and
# valid escapes), matched in C so that only actual problems cost a Python step.
_STRING_OK_RUN = re.compile(r'(?:[^"\\\x00-\x1f]+|\\["\\/bfnrtu])*')


def _escape_control(char: str) -> str:
    return _CONTROL_ESCAPES.get(char) or f"\\u{ord(char):04x}"


def repair_json(text: str) -> str:
    """Escape raw control characters and lone backslashes inside string literals.

    Outside strings nothing changes. Returns ``text`` itself when nothing needed repair.
    """
    pieces: list[str] = []
    last = 0  # text[last:] has not been copied to pieces yet
    pos = 0
    length = len(text)
    while True:
        quote = text.find('"', pos)  # outside a string only a quote matters
        if quote < 0:
            break
        pos = quote + 1
        while True:  # inside a string literal
            at = _STRING_OK_RUN.match(text, pos).end()  # type: ignore[union-attr]  # matches ""
            if at >= length:
                pos = length
                break
            char = text[at]
            if char == '"':
                pos = at + 1
                break
            pieces.append(text[last:at])
            # a backslash before an invalid escape letter (or at the end) is doubled;
            # a raw control character is escaped
            pieces.append("\\\\" if char == "\\" else _escape_control(char))
            last = pos = at + 1
        if pos >= length:
            break
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def parse_json_with_repair(text: str) -> Any:
    """``json.loads``; on failure parse the repaired text if repair changed it, else re-raise."""
    try:
        return _strict_loads(text)
    except ValueError as exc:
        if _repair_cannot_help(text, exc):
            raise
        repaired = repair_json(text)
        if repaired is text or repaired == text:
            raise
        return _strict_loads(repaired)


def _repair_cannot_help(text: str, exc: ValueError) -> bool:
    """Shortcut for the streaming hot path, same result as repairing and failing again.

    The decoder reads left to right, so every string literal before the error position
    is already valid. If the failure is a string that simply runs to the end of the text,
    or no string starts after the error position, repair could change at most a trailing
    backslash and the repaired text would still be incomplete.
    """
    if not isinstance(exc, json.JSONDecodeError):
        return False
    if exc.msg.startswith("Unterminated string"):
        return True
    return text.find('"', exc.pos) < 0


def _reject_constant(name: str) -> Any:
    # JSON.parse rejects NaN / Infinity; Python's json accepts them unless told not to.
    raise ValueError(f"Unexpected token {name}")


def _strict_loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


# --- partial parse (port of npm partial-json 0.1.7, Allow.ALL) -------------------------

# JS String.prototype.trim() whitespace (differs from str.strip(): no \x1c-\x1f, adds BOM).
_JS_TRIM = "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008" \
           "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_BLANK = " \n\r\t"
_STRING_BODY = re.compile(r'[^"\\]*(?:\\[\s\S][^"\\]*)*')
_NUMBER_END = re.compile(r"[,\]}]")
_LITERALS = (
    ("null", None, 0), ("true", True, 0), ("false", False, 0),
    ("Infinity", float("inf"), 0), ("-Infinity", float("-inf"), 1), ("NaN", float("nan"), 0),
)


class _PartialParser:
    __slots__ = ("s", "n", "i")

    def __init__(self, text: str) -> None:
        self.s = text
        self.n = len(text)
        self.i = 0

    def _blank(self) -> None:
        s, n, i = self.s, self.n, self.i
        while i < n and s[i] in _BLANK:
            i += 1
        self.i = i

    def _substring(self, start: int, end: int) -> str:
        # JS substring(): negative bounds become 0 and swapped bounds are swapped back.
        start, end = max(start, 0), max(end, 0)
        if start > end:
            start, end = end, start
        return self.s[start:end]

    def any(self) -> Any:
        self._blank()
        s, n, i = self.s, self.n, self.i
        if i >= n:
            raise PartialJSONError(f"Unexpected end of input at position {i}")
        char = s[i]
        if char == '"':
            return self.string()
        if char == "{":
            return self.object()
        if char == "[":
            return self.array()
        rest = n - i
        for literal, value, min_rest in _LITERALS:
            size = len(literal)
            if s.startswith(literal, i) or (min_rest < rest < size and literal.startswith(s[i:])):
                self.i = i + size
                return value
        return self.number()

    def string(self) -> str:
        s, n, start = self.s, self.n, self.i
        if s[start] == '"':
            # Fast path: the C string scanner. A valid terminated literal decodes exactly
            # as JSON.parse would; "Unterminated" means the text ends inside a clean
            # literal (at most a dangling backslash). Anything else takes the exact path.
            try:
                value, self.i = _scanstring(s, start + 1, True)
                return value
            except json.JSONDecodeError as exc:
                if exc.msg.startswith("Unterminated string"):
                    self.i = n
                    escape = (n - len(s.rstrip("\\"))) % 2
                    return _strict_loads(s[start:n - escape] + '"')
        end = _STRING_BODY.match(s, start + 1).end()  # type: ignore[union-attr]  # matches ""
        if end < n and s[end] == '"':
            self.i = end + 1
            try:
                return _strict_loads(s[start:end + 1])
            except ValueError as exc:
                raise MalformedJSONError(f"{exc} at position {self.i}") from None
        # Unterminated: the regex stops before a lone trailing backslash (a dangling escape).
        self.i = n
        escape = 1 if end < n else 0
        try:
            return _strict_loads(s[start:n - escape] + '"')
        except ValueError:
            # e.g. a half-written \u00 escape: cut back to the last backslash (npm does
            # this over the whole text, so a backslash elsewhere yields garbage -> error).
            return _strict_loads(self._substring(start, s.rfind("\\")) + '"')

    def object(self) -> dict[str, Any]:
        self.i += 1
        self._blank()
        result: dict[str, Any] = {}
        s, n = self.s, self.n
        try:
            while self.i >= n or s[self.i] != "}":
                self._blank()
                if self.i >= n:
                    return result
                key = self.string()
                self._blank()
                self.i += 1  # the colon, unchecked as in npm
                try:
                    value = self.any()
                except Exception:  # npm catches everything here
                    return result
                result[key] = value
                self._blank()
                if self.i < n and s[self.i] == ",":
                    self.i += 1
        except Exception:  # as npm does
            return result
        self.i += 1
        return result

    def array(self) -> list[Any]:
        self.i += 1
        result: list[Any] = []
        s, n = self.s, self.n
        try:
            while self.i >= n or s[self.i] != "]":
                result.append(self.any())
                self._blank()
                if self.i < n and s[self.i] == ",":
                    self.i += 1
        except Exception:  # as npm does
            return result
        self.i += 1
        return result

    def number(self) -> Any:
        s, n = self.s, self.n
        if self.i == 0:
            if s == "-":
                raise MalformedJSONError("Not sure what '-' is")
            try:
                return _strict_loads(s)
            except ValueError as exc:
                try:
                    return _strict_loads(self._substring(0, s.rfind("e")))
                except ValueError:
                    pass
                raise MalformedJSONError(str(exc)) from None
        start = self.i
        i = start + 1 if s[start] == "-" else start
        match = _NUMBER_END.search(s, i)
        self.i = i = match.start() if match else n
        token = s[start:i]
        try:
            return _strict_loads(token)
        except ValueError:
            if token == "-":
                raise PartialJSONError("Not sure what '-' is") from None
            try:
                # "1e" -> "1". The cut is at the last "e" of the *whole* text, so "1." or
                # "1E" (no later lowercase e) gives garbage and the key is dropped.
                return _strict_loads(self._substring(start, s.rfind("e")))
            except ValueError as exc:
                raise MalformedJSONError(str(exc)) from None


def parse_partial_json(text: str) -> Any:
    """Parse possibly incomplete JSON the way npm ``partial-json`` 0.1.7 does.

    Raises :class:`PartialJSONError` / :class:`MalformedJSONError` (both ``ValueError``)
    when nothing sensible can be recovered.
    """
    trimmed = text.strip(_JS_TRIM)
    if not trimmed:
        raise MalformedJSONError(f"{text!r} is empty")
    return _PartialParser(trimmed).any()


def parse_streaming_json(text: str | None) -> dict[str, Any]:
    """Best-effort parse of a streamed tool-call argument text. Never raises.

    Always returns a dict: empty or whitespace text, unparsable text, ``null`` and
    non-object results (pi would pass a top-level array or number through; tool
    arguments are objects by contract) all give ``{}``.
    """
    if not text or text.isspace():
        return {}
    try:
        result = parse_json_with_repair(text)
    except (ValueError, RecursionError):
        try:
            result = parse_partial_json(text)
        except (ValueError, RecursionError):
            try:
                result = parse_partial_json(repair_json(text))
            except (ValueError, RecursionError):
                return {}
    return result if isinstance(result, dict) else {}
