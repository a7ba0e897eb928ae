"""A compact summary of the user's namespace for the start of each prompt.

``namespace_summary(user_ns, token_budget=400, recent=(), hidden=None) -> str`` lists what the
agent needs to know without a tool call: names, types, shapes, DataFrame columns and dtypes,
short scalar values. It is built on every prompt, so it must be cheap and bounded on any
namespace:

- no ``repr`` of anything but short scalars (ints up to 64 bits, floats, bools, dates, short
  strings that do not look like credentials); no ``len`` or attribute access on objects of
  unknown types (a lazy proxy could compute, or raise, on access); shapes and dtypes only for
  the array libraries named in ``_ARRAY_MODULES``; no per-row work (``DataFrame.shape`` and
  ``.dtypes`` are per-column metadata);
- lines are formatted in priority order and formatting stops when the token budget is spent,
  so 5,000 variables cost one cheap classification each and a few dozen formatted lines;
- left out: modules, private names (``_x``), IPython's ``In``/``Out``/``exit``/``quit``/
  ``get_ipython`` and whatever the shell lists in ``user_ns_hidden``, functions and classes
  imported from libraries; functions and classes defined in the notebook are listed on one
  line by name;
- order: names in ``recent`` first (the names recent cells assigned, newest first; see
  ``ExecutionHistory.recent_names``), then data (DataFrames, Series, arrays), then the rest,
  newest definitions first;
- secrets: values are shown only for short scalars, never for a name that looks like a
  credential (``key``, ``token``, ``password``...) or a string that looks like a token, and
  every line is redacted (tools/trust/redact.py) before it is counted against the budget.

The token count uses the project's estimator (``ai/options.py``: characters / 4).

``read_listed_variables(context) -> ListedVariables`` reads the listing back from a prompt's
context (the small model's intent reader, local/intent.py, works from it): the printed form and
its reading live here together, so the reader never depends on the wording.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ...ai.options import estimate_text_tokens
from ..trust.credentials import credential_name, hidden_value, looks_like_credential
from ..trust.credentials import redact_all as redact

__all__ = ["namespace_summary", "assigned_summary", "DEFAULT_TIME_BUDGET_S", "DEFAULT_TOKEN_BUDGET",
           "ListedVariable", "ListedVariables", "read_listed_variables"]

DEFAULT_TOKEN_BUDGET = 400
DEFAULT_TIME_BUDGET_S = 0.05  # the whole summary; a prompt must not wait on the user's objects
_SLOW_S = 0.05  # one line slower than this: listed by name only from then on
_slow: set[Any] = set()  # user types (or ids of library objects) that were slow to describe
_INTERNAL = frozenset({"In", "Out", "exit", "quit", "get_ipython"})
_ARRAY_MODULES = frozenset({"numpy", "pandas", "polars", "torch", "tensorflow", "jax", "jaxlib",
                            "xarray", "cupy", "dask", "scipy", "pyarrow"})
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9_\-.+/=:]{16,}")
_MAX_STR = 40
_MAX_COLUMNS = 30
_MAX_NAME = 60
_SCALARS = (bool, int, float, complex, type(None))
_DATES = (_dt.date, _dt.datetime, _dt.time, _dt.timedelta)
_CONTAINERS = (list, tuple, dict, set, frozenset, str, bytes, bytearray, range)
_DATA, _OTHER, _CODE = 0, 1, 2
_PLAIN = frozenset({int, float, complex, bool, str, bytes, list, tuple, dict, set, frozenset,
                    type(None), range, bytearray})
_CODE_PREFIX = "defined here: "
_FOOTER_RESERVE = 90  # room for the "... N more" line
_HEADER = "Notebook variables ({count}):"
_HEADER_LINE = re.compile("^" + re.escape(_HEADER).replace(r"\{count\}", r"\d+") + "$", re.MULTILINE)
_LISTED_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*): (.*)$")
_LISTED_COLUMNS = re.compile(r"\(([^()]*)\)\s*$")


@dataclass(frozen=True)
class ListedVariable:
    """One line of the listing: ``df: DataFrame 24 x 4 (month: str, region: str)``."""

    name: str
    kind: str  # the first word of the description: "DataFrame", "Series", "int", "polars", ...
    columns: tuple[str, ...] = ()  # a DataFrame's listed columns (the first _MAX_COLUMNS)


@dataclass(frozen=True)
class ListedVariables:
    """The variables a namespace summary listed, in its order."""

    variables: tuple[ListedVariable, ...] = ()

    @property
    def names(self) -> list[str]:
        return [v.name for v in self.variables]

    @property
    def columns(self) -> list[str]:
        """The columns of every listed DataFrame (pandas or polars)."""
        return [c for v in self.variables for c in v.columns]

    @property
    def frames(self) -> list[str]:
        """The pandas DataFrames listed."""
        return [v.name for v in self.variables if v.kind == "DataFrame"]


def read_listed_variables(context: str) -> ListedVariables:
    """The listing a namespace summary put into ``context`` (empty when there is none): the
    lines after its header, up to the first blank line (the summary is one paragraph)."""
    header = _HEADER_LINE.search(context)
    if header is None:
        return ListedVariables()
    listed: list[ListedVariable] = []
    for line in context[header.end():].split("\n\n", 1)[0].splitlines():
        match = _LISTED_LINE.match(line)
        if match is None:
            continue
        name, description = match.groups()
        kind = description.split(" ", 1)[0]
        columns: tuple[str, ...] = ()
        part = _LISTED_COLUMNS.search(description)
        if part and "DataFrame" in description:
            columns = tuple(p.split(":", 1)[0].strip() for p in part.group(1).split(",") if ":" in p)
        listed.append(ListedVariable(name, kind, columns))
    return ListedVariables(tuple(listed))


def namespace_summary(user_ns: Mapping[str, Any], token_budget: int = DEFAULT_TOKEN_BUDGET,
                      recent: Iterable[str] = (), hidden: Mapping[str, Any] | None = None,
                      time_budget_s: float = DEFAULT_TIME_BUDGET_S) -> str:
    """The budgeted summary text (``""`` when there is nothing to show)."""
    items = list(user_ns.items())  # a snapshot: agent code may assign while we read
    hidden = hidden or {}
    data: list[tuple[str, Any]] = []
    other: list[tuple[str, Any]] = []
    code: list[tuple[str, Any]] = []
    by_name: dict[str, Any] = {}
    for name, value in reversed(items):  # newest definitions first
        try:
            kind = _classify(name, value, hidden)
        except Exception:  # an object whose __class__ lies and raises: list it by name
            kind = _OTHER
        if kind is None:
            continue
        if kind == _CODE:
            code.append((name, value))
            continue
        by_name[name] = value
        (data if kind == _DATA else other).append((name, value))
    first = [n for n in dict.fromkeys(recent) if n in by_name]
    first_set = set(first)
    ordered = [(n, by_name[n]) for n in first]
    ordered += [kv for kv in data if kv[0] not in first_set]
    ordered += [kv for kv in other if kv[0] not in first_set]
    total = len(ordered) + len(code)
    if not total:
        return ""

    budget_chars = max(0, token_budget) * 4 - _FOOTER_RESERVE
    header = _HEADER.format(count=total)
    lines = [header]
    room = budget_chars - len(header) - 1
    clock = _Clock(time_budget_s)
    shown = _take(lines, clock.lines(ordered), room)
    room -= sum(len(line) + 1 for line in lines[1:])
    code_shown = 0
    if code and shown == len(ordered):
        labels: list[str] = []
        code_shown = _take(labels, (_code_label(n, v) for n, v in code), room - len(_CODE_PREFIX), sep=2)
        if labels:
            lines.append(_CODE_PREFIX + ", ".join(labels))
    left = total - shown - code_shown
    if left:
        lines.append(f"... {left} more (list_variables lists all, inspect_variable shows one)")
    # Redact the whole as well: a secret containing a newline could span two entries.
    text = redact("\n".join(lines))
    while estimate_text_tokens(text) > token_budget and len(lines) > 2:
        del lines[-2]  # the line before the footer; the count in the footer stays a lower bound
        text = redact("\n".join(lines))
    return text if estimate_text_tokens(text) <= token_budget else ""


def assigned_summary(code: str, user_ns: Mapping[str, Any], max_names: int = 3,
                     max_chars: int = 1500) -> list[str]:
    """What each plain name the code's last top-level statement assigns now holds: its bounded
    value text (a DataFrame's shape, dtypes and first rows; no full ``repr`` of big objects),
    or only its summary line for a name or string that may be a credential. For a call whose
    code ends in ``x = ...`` and shows nothing: the model learns what ``x`` is without another
    call (measured on the 0.5B: told only "no output", it described a table it had not seen)."""
    import ast

    from .history import bounded_value_text

    try:
        body = ast.parse(code).body
    except (SyntaxError, ValueError):
        return []
    if not body:
        return []
    last = body[-1]
    targets: list[ast.expr] = []
    if isinstance(last, ast.Assign):
        targets = list(last.targets)
    elif isinstance(last, (ast.AugAssign, ast.AnnAssign)):
        targets = [last.target]
    names: list[str] = []
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and node.id not in names and not node.id.startswith("_"):
                names.append(node.id)
    lines = []
    for name in names[:max_names]:
        if name not in user_ns:
            continue
        value = user_ns[name]
        if credential_name(name) or issubclass(type(value), (str, bytes)):
            lines.append(redact(_line(name, value))[:400])  # a length, never the text
        else:
            lines.append(f"{name} =\n" + redact(bounded_value_text(value))[:max_chars])
    return lines


class _Clock:
    """The summary's time budget. Nothing here calls user code on purpose (no ``len``/``repr``
    of subclasses that override them, ``type()`` instead of ``__class__``), but pandas/array
    metadata of a subclass can still be a slow property: each line is timed, a type that took
    longer than ``_SLOW_S`` is remembered and listed by name only from then on, and once the
    total budget is spent no further line is formatted (the footer counts what is left)."""

    def __init__(self, budget_s: float) -> None:
        self.deadline = time.perf_counter() + budget_s

    def lines(self, items: list[tuple[str, Any]]) -> Iterator[str]:
        for name, value in items:
            if time.perf_counter() > self.deadline:
                return
            cls = type(value)
            # the library's own types are never slow as such: remember the object, not its type
            key: Any = id(value) if _root(cls) in _ARRAY_MODULES else cls
            if key in _slow:
                yield f"{_short_name(name)}: {_type_name(value)} (slow to describe; skipped)"
                continue
            start = time.perf_counter()
            line = _line(name, value)
            if time.perf_counter() - start > _SLOW_S:
                if len(_slow) > 1000:
                    _slow.clear()
                _slow.add(key)
                line = f"{_short_name(name)}: {_type_name(value)} (slow to describe; skipped)"
            yield line


def _short_name(name: str) -> str:
    return name if len(name) <= _MAX_NAME else name[:_MAX_NAME] + "..."


def _take(out: list[str], candidates: Iterator[str], room: int, sep: int = 1) -> int:
    """Append redacted candidates to ``out`` while they fit in ``room`` characters (each costs its
    length plus ``sep``); returns how many were taken.

    Redaction reads the environment on every call, so candidates are formatted until the raw
    text is full and redacted in one pass; secrets are at least as long as most of their
    replacement, the final check trims the few lines a longer replacement pushes over.
    """
    raw: list[str] = []
    used = 0
    for line in candidates:
        line = line.replace("\n", "\\n")  # one line per entry, whatever a column name holds
        if used + len(line) + sep > room:
            break
        raw.append(line)
        used += len(line) + sep
    if not raw:
        return 0
    redacted = redact("\n".join(raw)).split("\n")
    if len(redacted) != len(raw):  # a secret spanned two entries: redact them one by one
        redacted = [redact(line) for line in raw]
    used = 0
    taken = 0
    for line in redacted:
        if used + len(line) + sep > room:
            break
        out.append(line)
        used += len(line) + sep
        taken += 1
    return taken


def _classify(name: str, value: Any, hidden: Mapping[str, Any]) -> int | None:
    if name.startswith("_") or name in _INTERNAL:
        return None
    if name in hidden and hidden[name] is value:
        return None
    if type(value) in _PLAIN:  # the bulk of a big namespace: decided without attribute lookups
        return _OTHER
    if issubclass(type(value), types.ModuleType):
        return None
    if issubclass(type(value), (types.FunctionType, type)):
        # defined in a cell (module __main__) or imported: only the former is the user's
        return _CODE if getattr(value, "__module__", None) == "__main__" else None
    if issubclass(type(value), (types.BuiltinFunctionType, types.MethodType)):
        return None
    if _root(type(value)) in _ARRAY_MODULES:
        return _DATA
    return _OTHER


def _module(cls: type) -> str:
    module = getattr(cls, "__module__", None)
    return module if isinstance(module, str) else ""


def _root(cls: type) -> str:
    return _module(cls).split(".", 1)[0]


def _code_label(name: str, value: Any) -> str:
    name = name[:_MAX_NAME]
    if issubclass(type(value), type):
        return f"class {name}"
    code = getattr(value, "__code__", None)
    if code is None:
        return f"{name}()"
    args = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    if code.co_flags & 0x04:
        args.append("*" + code.co_varnames[len(args)])
    text = ", ".join(args)
    return f"{name}({text[:60]}{'...' if len(text) > 60 else ''})"


def _type_name(value: Any) -> str:
    cls = type(value)
    module = _module(cls)
    if module in ("builtins", "__main__"):
        return cls.__name__
    root = module.split(".", 1)[0]
    if root in ("pandas", "numpy", "polars"):
        return cls.__name__
    return f"{root}.{cls.__name__}"


def _line(name: str, value: Any) -> str:
    label = name if len(name) <= _MAX_NAME else name[:_MAX_NAME] + "..."
    try:
        return f"{label}: {_describe(name, value)}"
    except Exception as exc:  # an object whose metadata raises must not break the prompt
        return f"{label}: {_type_name(value)} (could not describe: {type(exc).__name__})"


def _describe(name: str, value: Any) -> str:
    cls = type(value)
    root = _root(cls)
    type_name = _type_name(value)
    if root == "pandas" and cls.__name__ == "DataFrame":
        return _pandas_frame(value)
    if root == "pandas" and cls.__name__ == "Series":
        rows = len(value.index)
        series_name = f" name {_label(value.name)!r}" if value.name is not None else ""
        return f"Series len {rows:,} {value.dtype}{series_name}"
    if root == "polars" and cls.__name__ == "DataFrame":
        rows, cols = value.shape
        schema = list(value.schema.items())
        return f"polars DataFrame {rows:,} x {cols} ({_columns(schema, cols)})"
    if root in _ARRAY_MODULES:
        shape = getattr(value, "shape", None)
        dtype = getattr(value, "dtype", None)
        if getattr(value, "ndim", None) == 0 and root == "numpy":
            return f"{type_name} = {str(value)[:_MAX_STR]}"
        parts = [type_name]
        if isinstance(shape, tuple):
            parts.append("shape " + " x ".join(str(n) for n in shape))
        if dtype is not None:
            parts.append(str(dtype))
        return " ".join(parts)
    if issubclass(cls, _SCALARS):
        return f"{type_name}{_scalar(name, value)}"
    if issubclass(cls, _DATES):
        return f"{type_name} = {str(value)[:_MAX_STR]}"
    if issubclass(cls, str):
        if not _builtin_method(cls, str, "__len__"):
            return f"{type_name} (str subclass)"
        if looks_like_credential(value, name):
            return hidden_value(value) if cls is str else f"{type_name} ({_CREDENTIAL})"
        shown = _short_str(name, value)
        return f"str len {len(value)}" + (f" = {shown}" if shown else "")
    if issubclass(cls, (bytes, bytearray)) and looks_like_credential(value, name):
        return f"{type_name} ({_CREDENTIAL})"
    if issubclass(cls, _CONTAINERS):
        base = next(b for b in _CONTAINERS if issubclass(cls, b))
        if not _builtin_method(cls, base, "__len__"):
            return type_name  # a user-defined __len__ may compute, sleep or raise
        return f"{type_name} len {len(value):,}"
    return type_name


def _scalar(name: str, value: Any) -> str:
    if credential_name(name):
        return " (value hidden)"
    cls = type(value)
    base = next((b for b in _SCALARS if issubclass(cls, b)), None)
    if base is not None and cls is not base and not _builtin_method(cls, base, "__repr__"):
        return ""  # a subclass's own __repr__ is user code: not run for the summary
    if issubclass(cls, int) and cls is not bool and int.bit_length(value) > 64:
        return f" ({int.bit_length(value)} bits)"  # str() of a huge int is quadratic
    text = repr(value)
    return f" = {text}" if len(text) <= _MAX_STR else ""


def _short_str(name: str, value: str) -> str | None:
    if len(value) > _MAX_STR or credential_name(name):
        return None
    if _TOKEN_LIKE.fullmatch(value) and any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
        return None  # looks like an API key or a token
    return repr(value)


_CREDENTIAL = "looks like a credential; value not shown"


def _builtin_method(cls: type, base: type, method: str) -> bool:
    """``cls`` inherits ``method`` from ``base`` unchanged (no user code runs when we call it)."""
    return getattr(cls, method, None) is getattr(base, method, None)


def _label(value: Any) -> str:
    """A column/index/Series name as shown: redacted first, then cut to ``_MAX_STR``."""
    from ..output.format import clip

    return clip(redact(str(value)), _MAX_STR)


def _pandas_frame(df: Any) -> str:
    rows, cols = len(df.index), len(df.columns)
    dtypes = df.dtypes  # per-column metadata, no data is touched
    shown = list(zip(df.columns[:_MAX_COLUMNS], dtypes.iloc[:_MAX_COLUMNS], strict=False))
    text = f"DataFrame {rows:,} x {cols} ({_columns(shown, cols)})"
    index = df.index
    if type(index).__name__ != "RangeIndex":
        text += f" index {type(index).__name__}"
        if index.name is not None:
            text += f" {_label(index.name)!r}"
    return text


def _columns(pairs: list[tuple[Any, Any]], total: int) -> str:
    parts = [f"{_label(col)}: {dtype}" for col, dtype in pairs[:_MAX_COLUMNS]]
    if total > len(parts):
        parts.append(f"+{total - len(parts)} more columns")
    return ", ".join(parts)
