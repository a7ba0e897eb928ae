"""A one-line hint for a missing key: "did you mean 'region' (a column of df)?".

Python suggests close names for a NameError or an AttributeError, pandas suggests nothing for
``df.groupby('regoin')`` or ``df['revenu']``: the error is a bare ``KeyError: 'regoin'``. A
model asked to fix it (measured on the 0.5B: three times the same failing line) and a user
reading the tool card both need the one fact the traceback lacks: which keys exist. The hint
looks only at DataFrame columns (metadata, no rows) and dict keys of the user namespace,
through ``difflib``; it says nothing when nothing is close.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Mapping
from typing import Any

from .redact import redact

__all__ = ["key_error_hint"]

_MAX_CANDIDATES = 5000  # keys looked at in all; a namespace of huge dicts costs no more than this


def _missing_key(evalue: str) -> str | None:
    try:
        key = ast.literal_eval(evalue.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return key if isinstance(key, str) and key else None


def _keys(value: Any) -> list[str] | None:
    cls = type(value)
    if cls.__module__.split(".")[0] == "pandas" and cls.__name__ == "DataFrame":
        return [c for c in value.columns[:_MAX_CANDIDATES] if isinstance(c, str)]
    if isinstance(value, dict):
        return [k for k in list(value)[:_MAX_CANDIDATES] if isinstance(k, str)]
    return None


def key_error_hint(ename: str, evalue: str, user_ns: Mapping[str, Any]) -> str | None:
    """``did you mean 'region' (a column of df)?`` for a KeyError on a near-miss key, else None."""
    if ename != "KeyError":
        return None
    key = _missing_key(evalue)
    if key is None:
        return None
    seen = 0
    for name, value in list(user_ns.items()):
        if name.startswith("_") or seen >= _MAX_CANDIDATES:
            continue
        try:
            keys = _keys(value)
        except Exception:  # a lying object must not break the error report
            continue
        if not keys or key in keys:
            continue
        seen += len(keys)
        close = difflib.get_close_matches(key, keys, n=1, cutoff=0.75)
        if close:
            where = "a key of" if isinstance(value, dict) else "a column of"
            return redact(f"did you mean {close[0]!r} ({where} {name})?")
    return None
