"""What the model sees of an execution: text cut to budgets, values by preference, images.

Everything here works on data that is already redacted (see ``redact.py``); the functions
that look at live objects (``value_text``) are called by the runner while the object exists.

- ``strip_ansi(text)`` / ``terminal_text(text)``: drop ANSI escapes; also resolve carriage
  returns the way a terminal would (progress bars).
- ``cut(text, budget)``: head + tail within ``budget`` characters and a note of what was cut;
  ``clip(text, limit)``: the head only, with ``…``. Both redact *before* cutting, never split
  a ``[redacted]`` marker, and drop a possible start (end) of a secret at the cut.
- ``bundle_text(data)``: the model text of a mimebundle, by preference ``text/llm+plain`` >
  ``text/markdown`` > ``text/latex`` > ``application/json`` > ``text/plain``; never HTML/JS.
- ``value_text(obj, data)``: like ``bundle_text`` but ``_repr_llm_`` first and a summary for
  pandas DataFrames/Series (shape, dtypes, 5 rows).
- ``image_size`` / ``prepare_image``: from ``images.py`` (header checks, then a downscale).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .images import image_size, prepare_image
from ..trust.redact import REDACTED, redact, split_unsafe_tail, strip_unsafe_head

__all__ = [
    "bundle_text",
    "clip",
    "cut",
    "image_size",
    "prepare_image",
    "strip_ansi",
    "terminal_text",
    "value_text",
]

TEXT_PREFERENCE = ("text/llm+plain", "text/markdown", "text/latex", "application/json", "text/plain")

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def terminal_text(text: str) -> str:
    """ANSI-stripped text with ``\\r`` rewrites resolved (keeps the last state of a line)."""
    text = strip_ansi(text)
    if "\r" not in text:
        return text
    lines = []
    for line in text.split("\n"):
        if "\r" in line:
            # "\r\n" line endings leave an empty last part: keep the last non-empty one.
            line = next((p for p in reversed(line.split("\r")) if p), "")
        lines.append(line)
    return "\n".join(lines)


def _marker_safe(text: str, at: int, forward: bool) -> int:
    """Move the cut position ``at`` out of a ``[redacted]`` marker it would split."""
    lo = max(0, at - len(REDACTED) + 1)
    found = text.find(REDACTED, lo, at + len(REDACTED) - 1)
    while found != -1 and found < at:
        if found + len(REDACTED) > at:
            return found + len(REDACTED) if forward else found
        found = text.find(REDACTED, found + 1, at + len(REDACTED) - 1)
    return at


def cut(text: str, budget: int) -> str:
    """Keep ``text`` within ``budget`` characters: head + note + tail (redacted first)."""
    text = redact(text)
    if budget <= 0 or len(text) <= budget:
        return text
    head_end = _marker_safe(text, (budget * 2) // 3, forward=False)
    tail_start = _marker_safe(text, len(text) - (budget - (budget * 2) // 3), forward=True)
    head, _ = split_unsafe_tail(text[:head_end])
    tail = strip_unsafe_head(text[tail_start:])
    middle = text[len(head):len(text) - len(tail)]
    note = f"\n[... {len(middle)} characters ({middle.count(chr(10))} line breaks) cut ...]\n"
    return head + note + tail


def clip(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text`` (redacted first), ``…`` if cut."""
    text = redact(text)
    if limit <= 0 or len(text) <= limit:
        return text
    head, _ = split_unsafe_tail(text[:_marker_safe(text, limit - 1, forward=False)])
    return head + "\u2026"


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return "".join(value)  # nbformat multiline strings
    return json.dumps(value, indent=1, default=str, ensure_ascii=False)


def bundle_text(data: dict[str, Any]) -> str | None:
    """The best text representation of a mimebundle for the model, or None."""
    for mime in TEXT_PREFERENCE:
        if mime in data and data[mime] not in (None, ""):
            return _as_text(data[mime])
    return None


def _is_pandas(obj: Any, name: str) -> bool:
    cls = type(obj)
    return cls.__name__ == name and cls.__module__.split(".")[0] == "pandas"


# Short results are shown whole: cut to five, ``describe()`` lost its max and a sum per month
# its best month (measured: both models then answered with the std as the maximum).
_ALL_VALUES = 24
_ALL_ROWS = 12


def dataframe_summary(df: Any) -> str:
    rows, cols = df.shape
    lines = [f"DataFrame: {rows} rows x {cols} columns", "dtypes:"]
    dtypes = df.dtypes
    shown = list(dtypes.items())[:50]
    width = max((len(str(k)) for k, _ in shown), default=0)
    lines += [f"  {k!s:<{width}}  {v}" for k, v in shown]
    if len(dtypes) > len(shown):
        lines.append(f"  ... {len(dtypes) - len(shown)} more columns")
    if rows <= _ALL_ROWS:
        lines += ["rows:", df.to_string(max_cols=20, max_colwidth=60)]
    else:
        lines += [f"first 5 and last 3 of {rows} rows:",
                  df.head(5).to_string(max_cols=20, max_colwidth=60),
                  "...", df.tail(3).to_string(max_cols=20, max_colwidth=60, header=False)]
    return "\n".join(lines)


def series_summary(series: Any) -> str:
    n = len(series)
    lines = [f"Series {series.name!r}: length {n}, dtype {series.dtype}"]
    if n <= _ALL_VALUES:
        lines += ["values:", series.to_string()]
    else:
        lines += [f"first 10 and last 5 of {n} values:", series.head(10).to_string(), "...",
                  series.tail(5).to_string()]
    return "\n".join(lines)


def value_text(obj: Any, data: dict[str, Any]) -> str | None:
    """Model text for a live value: ``_repr_llm_`` > DataFrame summary > ``bundle_text``."""
    repr_llm = getattr(type(obj), "_repr_llm_", None)
    if callable(repr_llm):
        text = repr_llm(obj)
        if isinstance(text, str):
            return text
    if "text/llm+plain" not in data:
        if _is_pandas(obj, "DataFrame"):
            return dataframe_summary(obj)
        if _is_pandas(obj, "Series"):
            return series_summary(obj)
    return bundle_text(data)
