"""``@tool``: turn a typed Python function into an :class:`AgentTool`.

::

    @tool
    def add(a: int, b: Annotated[int, "the second term"] = 1) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b

The parameters become a pydantic model (``AgentTool.parameters_model``) whose JSON
schema is what the model sees. Per-parameter descriptions come from
``Annotated[x, "text"]``, ``Annotated[x, Field(description=...)]`` or an ``Args:``
(Google) / ``Parameters`` (NumPy) section of the docstring; the tool description is
the docstring's first paragraph. Parameters named ``signal`` (the run's
:class:`AbortSignal`) and ``on_update`` (the partial-result callback) are injected
when declared and are not part of the schema.

Return values: an :class:`AgentToolResult` is used as is; a string becomes one text
block; a content block (or a list of them) becomes the content; anything else is
sent as JSON when it serialises, else as its ``repr()`` (and kept in ``details``
when it is JSON data). Raise to report a failure (the loop turns the exception
message into an error result); ``AgentToolResult(is_error=True)`` works too.

Where sync functions run
------------------------
A sync tool function runs **on the event-loop thread**, by default. Notebook code,
pandas, matplotlib and most libraries are not thread-safe, and in a notebook the
tool usually touches the same objects the user's cells do; running it in a worker
thread behind the user's back would race with them. The price is that a slow sync
tool blocks the loop (and the live UI) while it runs: for blocking I/O or long pure
computations that touch no shared state, opt in with ``@tool(thread=True)``, which
runs the function through ``asyncio.to_thread`` (``on_update`` is then hopped back to
the loop thread). Async functions always run on the loop.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
import typing
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from ..ai.types import ImageContent, TextContent
from .types import AgentTool, AgentToolResult, ExecutionMode

__all__ = ["tool", "parse_docstring", "to_tool_result"]

_INJECTED = ("signal", "on_update")


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    label: str | None = None,
    description: str | None = None,
    execution_mode: ExecutionMode | None = None,
    thread: bool = False,
) -> Any:
    """Decorator: ``@tool`` or ``@tool(name=..., label=..., execution_mode=..., thread=...)``.

    Returns an :class:`AgentTool` (the original function stays reachable as
    ``.function``). See the module docstring for the rules.
    """
    def build(f: Callable[..., Any]) -> AgentTool:
        return _build_tool(f, name=name, label=label, description=description,
                           execution_mode=execution_mode, thread=thread)

    if fn is None:
        return build
    if not callable(fn):
        raise TypeError(f"@tool expects a function, got {type(fn).__name__}")
    return build(fn)


def _pascal(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[_\W]+", name) if part)


def _build_tool(fn: Callable[..., Any], *, name: str | None, label: str | None,
                description: str | None, execution_mode: ExecutionMode | None,
                thread: bool) -> AgentTool:
    tool_name = name or getattr(fn, "__name__", None)
    if not tool_name or tool_name == "<lambda>":
        raise ValueError("@tool needs a name for this callable: use @tool(name=...)")
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as error:  # an unresolvable forward reference
        raise TypeError(f"@tool {tool_name!r}: cannot resolve type hints: {error}") from error
    summary, param_docs = parse_docstring(inspect.getdoc(fn) or "")

    fields: dict[str, Any] = {}
    positional_only: list[str] = []
    injected: set[str] = set()
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"@tool {tool_name!r}: *args/**kwargs cannot be described to a model")
        if param.name in _INJECTED:
            injected.add(param.name)
            continue
        if param.kind == param.POSITIONAL_ONLY:
            positional_only.append(param.name)
        annotation, text = _split_annotation(hints.get(param.name, Any))
        text = text or param_docs.get(param.name)
        default = param.default
        if isinstance(default, FieldInfo):
            if text and not default.description:
                default.description = text
            fields[param.name] = (annotation, default)
        else:
            value = ... if default is param.empty else default
            fields[param.name] = (annotation, Field(value, description=text) if text else value)

    params_model: type[BaseModel] = create_model(
        f"{_pascal(tool_name)}Params",
        __config__=ConfigDict(protected_namespaces=(), arbitrary_types_allowed=True),
        **fields,
    )
    params_model.__doc__ = None  # keep the schema free of BaseModel's docstring

    is_async = inspect.iscoroutinefunction(fn)

    async def execute(tool_call_id: str, params: Any, signal: Any = None,
                      on_update: Callable[[AgentToolResult], None] | None = None) -> AgentToolResult:
        kwargs = _kwargs_from_params(params, params_model)
        if "signal" in injected:
            kwargs["signal"] = signal
        if "on_update" in injected:
            kwargs["on_update"] = on_update
        args = [kwargs.pop(n) for n in positional_only]
        if is_async:
            value = await fn(*args, **kwargs)
        elif thread:
            if "on_update" in injected and on_update is not None:
                kwargs["on_update"] = _threadsafe(on_update, asyncio.get_running_loop())
            value = await asyncio.to_thread(fn, *args, **kwargs)
        else:
            value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        return to_tool_result(value)

    agent_tool = AgentTool(
        name=tool_name,
        description=description if description is not None else summary,
        parameters=params_model,
        execute=execute,
        label=label or tool_name,
        execution_mode=execution_mode,
    )
    agent_tool.function = fn  # type: ignore[attr-defined]  # the decorated function, for introspection
    functools.update_wrapper(execute, fn)
    return agent_tool


def _split_annotation(annotation: Any) -> tuple[Any, str | None]:
    """``Annotated[x, "text", ...]``: pull out plain-string metadata as the description."""
    if get_origin(annotation) is not Annotated:
        return annotation, None
    base, *metadata = get_args(annotation)
    texts = [m for m in metadata if isinstance(m, str)]
    rest = [m for m in metadata if not isinstance(m, str)]
    args = (base, *rest)
    rebuilt = Annotated[args] if rest else base
    return rebuilt, (" ".join(texts) if texts else None)


def _kwargs_from_params(params: Any, model: type[BaseModel]) -> dict[str, Any]:
    if isinstance(params, model):
        # attribute access keeps nested models as model instances
        return {name: getattr(params, name) for name in model.model_fields}
    if isinstance(params, BaseModel):
        params = params.model_dump(by_alias=False)
    if isinstance(params, dict):
        return _kwargs_from_params(model.model_validate(params), model)
    raise TypeError(f"tool arguments must be an object, got {type(params).__name__}")


def _threadsafe(callback: Callable[[Any], None], loop: asyncio.AbstractEventLoop
                ) -> Callable[[Any], None]:
    def call(value: Any) -> None:
        loop.call_soon_threadsafe(callback, value)

    return call


def to_tool_result(value: Any) -> AgentToolResult:
    """Turn a tool function's return value into an :class:`AgentToolResult`."""
    if isinstance(value, AgentToolResult):
        return value
    if isinstance(value, str):
        return AgentToolResult(content=[TextContent(text=value)])
    if isinstance(value, (TextContent, ImageContent)):
        return AgentToolResult(content=[value])
    if (isinstance(value, (list, tuple)) and value
            and all(isinstance(v, (TextContent, ImageContent)) for v in value)):
        return AgentToolResult(content=list(value))
    if isinstance(value, BaseModel):
        return AgentToolResult(content=[TextContent(text=value.model_dump_json())],
                               details=value.model_dump(mode="json"))
    try:
        text = json.dumps(value, ensure_ascii=False)
        details = value
    except (TypeError, ValueError):
        text, details = repr(value), None
    return AgentToolResult(content=[TextContent(text=text)], details=details)


# --- docstrings -----------------------------------------------------------------------------

_GOOGLE_HEADERS = {"args:", "arguments:", "parameters:", "params:", "keyword args:",
                   "keyword arguments:"}
_ANY_GOOGLE_HEADER = re.compile(r"^[A-Z][A-Za-z ]*:$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")
_DASHES = re.compile(r"^\s*-{3,}\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Return (first paragraph, {parameter: description}) from a Google or NumPy docstring."""
    lines = doc.expandtabs().splitlines()
    summary_lines: list[str] = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        is_header = stripped.lower() in _GOOGLE_HEADERS or (
            i + 1 < len(lines) and _DASHES.match(lines[i + 1]) is not None)
        if not stripped or is_header:
            if summary_lines or is_header:
                break
            continue
        summary_lines.append(stripped)
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.lower() in _GOOGLE_HEADERS:
            i = _parse_google_section(lines, i, params)
        elif (stripped.lower() in ("parameters", "other parameters", "arguments")
              and i + 1 < len(lines) and _DASHES.match(lines[i + 1])):
            i = _parse_numpy_section(lines, i + 2, params)
        else:
            i += 1
    return " ".join(summary_lines), params


def _parse_google_section(lines: list[str], header: int, params: dict[str, str]) -> int:
    header_indent = _indent(lines[header])
    entry_indent: int | None = None
    current: str | None = None
    i = header + 1
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        indent = _indent(line)
        if indent <= header_indent:
            break  # the next section
        if entry_indent is None:
            entry_indent = indent
        match = _GOOGLE_ENTRY.match(line.strip()) if indent == entry_indent else None
        if match:
            current = match.group(1)
            params[current] = match.group(2).strip()
        elif current is not None:
            params[current] = (params[current] + " " + line.strip()).strip()
        i += 1
    return i


def _parse_numpy_section(lines: list[str], start: int, params: dict[str, str]) -> int:
    entry_indent: int | None = None
    current: str | None = None
    i = start
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and line.strip() and _DASHES.match(lines[i + 1]):
            break  # the next section
        if not line.strip():
            i += 1
            continue
        indent = _indent(line)
        if entry_indent is None:
            entry_indent = indent
        if indent <= entry_indent:
            match = _NUMPY_ENTRY.match(line.strip())
            if not match:
                break
            current = match.group(1)
            params[current] = ""
        elif current is not None:
            params[current] = (params[current] + " " + line.strip()).strip()
        i += 1
    return i
