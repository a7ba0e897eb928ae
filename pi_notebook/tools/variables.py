"""Tools that let the model look at the user's variables without running code.

- ``list_variables``: one line per user variable: name, type, shape or length, short repr.
  Skips modules, private names (``_x``), IPython internals (``In``, ``Out``, ``exit``,
  ``quit``, ``get_ipython``) and names the shell hides (``user_ns_hidden``).
- ``inspect_variable(name)``: pandas DataFrame: shape, dtypes, ``describe()``, ``head()``;
  numpy array: shape, dtype, min/max/mean/std (numeric); anything else: type and a truncated
  repr. Every text is redacted.

``make_variable_tools(shell, settings=None) -> list[AgentTool]``.
"""

from __future__ import annotations

import reprlib
import types
from typing import Any

from ..agent.types import AgentTool, AgentToolResult
from ..ai.types import TextContent
from .format import cut, dataframe_summary, series_summary
from .redact import redact

__all__ = ["describe_variable", "list_user_variables", "make_variable_tools"]

_INTERNAL = frozenset({"In", "Out", "exit", "quit", "get_ipython"})
_MAX_LISTED = 200
_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = _short.maxtuple = _short.maxdict = _short.maxset = 6
_long = reprlib.Repr()  # inspect_variable: bounded even for huge containers
_long.maxstring = _long.maxother = 4000
_long.maxlist = _long.maxtuple = _long.maxdict = _long.maxset = _long.maxdeque = 100
_long.maxlevel = 4


def _type_name(obj: Any) -> str:
    cls = type(obj)
    module = cls.__module__
    if module in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{module.split('.')[0]}.{cls.__qualname__}"


def _shape(obj: Any) -> str:
    shape = getattr(obj, "shape", None)
    if isinstance(shape, tuple):
        return "shape " + "x".join(str(n) for n in shape)
    if isinstance(obj, (str, bytes, list, tuple, dict, set, frozenset)):
        return f"len {len(obj)}"
    return ""


def _safe_repr(obj: Any) -> str:
    try:
        text = _short.repr(obj)
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}>"
    return " ".join(text.split())[:100]


def _visible(shell: Any) -> list[tuple[str, Any]]:
    hidden = getattr(shell, "user_ns_hidden", {}) or {}
    out = []
    for name, value in list(shell.user_ns.items()):
        if name.startswith("_") or name in _INTERNAL:
            continue
        if name in hidden and hidden[name] is value:
            continue
        if isinstance(value, types.ModuleType):
            continue
        out.append((name, value))
    return out


def list_user_variables(shell: Any) -> str:
    rows = []
    for name, value in sorted(_visible(shell), key=lambda kv: kv[0].lower()):
        parts = [name, _type_name(value)]
        shape = _shape(value)
        if shape:
            parts.append(shape)
        rows.append(" | ".join(parts) + " | " + _safe_repr(value))
    if not rows:
        return "No user variables defined."
    extra = len(rows) - _MAX_LISTED
    rows = rows[:_MAX_LISTED]
    if extra > 0:
        rows.append(f"... {extra} more variables")
    return redact("name | type | shape/len | value\n" + "\n".join(rows))


def _is_pandas(obj: Any, name: str) -> bool:
    cls = type(obj)
    return cls.__name__ == name and cls.__module__.split(".")[0] == "pandas"


def _is_ndarray(obj: Any) -> bool:
    cls = type(obj)
    return cls.__name__ == "ndarray" and cls.__module__.split(".")[0] == "numpy"


def describe_variable(value: Any, name: str, budget: int = 6000) -> str:
    if _is_pandas(value, "DataFrame"):
        text = dataframe_summary(value)
        try:
            text += "\ndescribe():\n" + value.describe(include="all").to_string(max_cols=20)
        except Exception as exc:  # describe() fails on some exotic frames
            text += f"\ndescribe() failed: {type(exc).__name__}: {exc}"
    elif _is_pandas(value, "Series"):
        text = series_summary(value)
        try:
            text += "\ndescribe():\n" + value.describe().to_string()
        except Exception as exc:
            text += f"\ndescribe() failed: {type(exc).__name__}: {exc}"
    elif _is_ndarray(value):
        text = f"numpy.ndarray: shape {value.shape}, dtype {value.dtype}, size {value.size}"
        if value.size and value.dtype.kind in "biuf":
            import numpy as np

            finite = value[np.isfinite(value)] if value.dtype.kind == "f" else value
            if finite.size:
                text += (f"\nmin {finite.min().item()!r}, max {finite.max().item()!r}, "
                         f"mean {finite.mean().item():.6g}, std {finite.std().item():.6g}")
            if finite.size != value.size:
                text += f"\nnon-finite values: {value.size - finite.size}"
        text += "\n" + repr(value)
    else:
        text = f"{_type_name(value)}"
        shape = _shape(value)
        if shape:
            text += f", {shape}"
        try:
            text += "\n" + _long.repr(value)
        except Exception as exc:
            text += f"\n<repr failed: {type(exc).__name__}: {exc}>"
    return redact(cut(f"{name}: {text}", budget))


def make_variable_tools(shell: Any, settings: Any = None) -> list[AgentTool]:
    budget = int(getattr(settings, "max_output_chars", 6000) or 6000)

    async def list_variables(tool_call_id: str, params: Any, signal: Any = None,
                             on_update: Any = None) -> AgentToolResult:
        text = list_user_variables(shell)
        return AgentToolResult(content=[TextContent(text=cut(text, budget))], details={"text": text})

    async def inspect_variable(tool_call_id: str, params: Any, signal: Any = None,
                               on_update: Any = None) -> AgentToolResult:
        name = params.get("name") if isinstance(params, dict) else getattr(params, "name", None)
        if not isinstance(name, str) or not name:
            raise ValueError("inspect_variable needs a 'name' string argument")
        if name not in shell.user_ns:
            raise ValueError(f"No variable named {name!r} in the user namespace. "
                             "Use list_variables to see what exists.")
        text = describe_variable(shell.user_ns[name], name, budget)
        return AgentToolResult(content=[TextContent(text=text)], details={"name": name, "text": text})

    return [
        AgentTool(
            name="list_variables",
            label="Variables",
            description="List the user's notebook variables: name, type, shape or length, short value.",
            parameters={"type": "object", "properties": {}},
            execute=list_variables,
        ),
        AgentTool(
            name="inspect_variable",
            label="Inspect",
            description=("Describe one notebook variable: DataFrames (dtypes, describe, head), "
                         "arrays (shape, dtype, stats), other objects (truncated repr)."),
            parameters={
                "type": "object",
                "properties": {"name": {"type": "string", "description": "The variable name."}},
                "required": ["name"],
            },
            execute=inspect_variable,
        ),
    ]
