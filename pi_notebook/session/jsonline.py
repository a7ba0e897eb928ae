"""One session-file line from any message: JSON that never fails on content.

Tool results carry arbitrary Python objects in ``details`` and arbitrary text (lone
surrogates from undecodable output) in their content; neither may stop a message from
being saved. See docs/design/sessions.md.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["encode_line"]


def _json_fallback(value: Any) -> Any:
    # tool `details` may hold arbitrary Python objects; keep the file valid JSON
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return repr(value)


def encode_line(obj: Any) -> bytes:
    """``obj`` as one line of ASCII JSON, newline included; never raises for content."""
    # ensure_ascii escapes lone surrogates (possible in tool output), so every line is
    # ASCII; anything json cannot take as it is goes through _sanitize instead of failing
    try:
        text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), default=_json_fallback,
                          allow_nan=False)
    except Exception:  # a bad key, a cycle, NaN, a raising __repr__ deep in `details`
        text = json.dumps(_sanitize(obj, 0, set()), ensure_ascii=True, separators=(",", ":"),
                          allow_nan=False)
    return (text + "\n").encode("ascii")


_MAX_DEPTH = 200
_MAX_REPR = 10_000


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__name__}>"
    return text if len(text) <= _MAX_REPR else text[:_MAX_REPR] + "...[cut]"


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return json.dumps(key)
    if isinstance(key, (int, float)):
        return str(key)
    return _safe_repr(key)


def _sanitize(value: Any, depth: int, active: set[int]) -> Any:
    """A JSON-safe copy: what JSON.stringify would keep, never an exception."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if depth > _MAX_DEPTH:
        return "[nested too deep]"
    if id(value) in active:
        return "[circular reference]"
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    active.add(id(value))
    try:
        if isinstance(value, Mapping):
            return {_json_key(k): _sanitize(v, depth + 1, active) for k, v in value.items()}
        if isinstance(value, (list, tuple, set, frozenset)):
            return [_sanitize(v, depth + 1, active) for v in value]
        if hasattr(value, "model_dump"):
            try:
                dumped = value.model_dump()
            except Exception:
                return _safe_repr(value)
            return _sanitize(dumped, depth + 1, active)
        return _safe_repr(value)
    finally:
        active.discard(id(value))
