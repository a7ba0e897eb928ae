"""Elicitation: an MCP server asks the user for input in the middle of a tool call.

The SDK calls :func:`elicitation_callback`'s result with the server's request (on the
2026-07-28 protocol inside ``call_tool``, which retries with the answer; on a legacy
connection as a server-to-client request). Only a *form* of primitive fields is shown: the
requested schema must be a flat object whose properties are strings (optionally with an
``enum`` of choices), numbers, integers or booleans -- what a small widget form can ask
for. Anything else (nested objects, arrays, a URL to open) is declined with a notice, and
so is every request when no form can be shown (headless, terminal IPython): the server gets
``decline`` and its tool goes on or fails as it chooses. The user's values go to the
server only (never to the model), checked against the schema first.

The notebook layer answers a :class:`FormRequest` with a :class:`FormAnswer`
(magics/mcp_run.py; the widget form is widgets/input_form.py).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..tools.trust.redact import redact

__all__ = ["FormField", "FormRequest", "FormAnswer", "UnsupportedForm", "form_fields", "check_values",
           "elicitation_callback", "FieldKind"]

FieldKind = Literal["text", "number", "integer", "choice", "confirm"]
Action = Literal["accept", "decline", "cancel"]
_MAX_FIELDS = 20


class UnsupportedForm(ValueError):
    """The requested schema is not a flat form of primitive fields."""


@dataclass(frozen=True)
class FormField:
    name: str
    kind: FieldKind
    title: str
    description: str = ""
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class FormRequest:
    server: str
    message: str
    fields: tuple[FormField, ...]


@dataclass
class FormAnswer:
    action: Action
    values: dict[str, Any] = field(default_factory=dict)


def form_fields(schema: Any) -> tuple[FormField, ...]:
    """The fields of a flat object schema; raises UnsupportedForm (one-line reason)."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise UnsupportedForm("the requested input is not an object")
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict) or not properties:
        raise UnsupportedForm("the requested input has no fields")
    if len(properties) > _MAX_FIELDS:
        raise UnsupportedForm(f"the form has more than {_MAX_FIELDS} fields")
    required = set(schema.get("required") or [])
    out: list[FormField] = []
    for name, prop in properties.items():
        if not isinstance(prop, dict):
            raise UnsupportedForm(f"field {name!r} has no schema")
        kind = _kind(str(name), prop)
        choices: tuple[str, ...] = ()
        if kind == "choice":
            choices = tuple(prop["enum"])
        title = str(prop["title"]) if isinstance(prop.get("title"), str) else str(name)
        description = str(prop["description"]) if isinstance(prop.get("description"), str) else ""
        out.append(FormField(name=str(name), kind=kind, title=redact(title)[:200],
                             description=redact(description)[:500], required=name in required,
                             default=prop.get("default"), choices=choices))
    return tuple(out)


def _kind(name: str, prop: dict[str, Any]) -> FieldKind:
    kind = prop.get("type")
    if kind == "string":
        enum = prop.get("enum")
        if enum is not None:
            if not isinstance(enum, list) or not enum or not all(isinstance(c, str) for c in enum):
                raise UnsupportedForm(f"field {name!r} has choices that are not strings")
            return "choice"
        return "text"
    if kind in ("number", "integer"):
        return "number" if kind == "number" else "integer"
    if kind == "boolean":
        return "confirm"
    raise UnsupportedForm(f"field {name!r} is of type {kind!r}, which a form cannot ask for")


def check_values(fields: tuple[FormField, ...], values: dict[str, Any]) -> dict[str, Any]:
    """The answer's values, typed as the schema says; raises ValueError (for the form to
    show) when one is missing or of the wrong type. An empty optional field is left out."""
    out: dict[str, Any] = {}
    for f in fields:
        value = values.get(f.name)
        if value is None or value == "":
            if f.kind == "confirm":
                out[f.name] = bool(f.default) if value is None else False
                continue
            if f.required:
                raise ValueError(f"{f.title} is required")
            continue
        if f.kind == "confirm":
            out[f.name] = bool(value)
        elif f.kind == "choice":
            if str(value) not in f.choices:
                raise ValueError(f"{f.title}: choose one of {', '.join(f.choices)}")
            out[f.name] = str(value)
        elif f.kind in ("number", "integer"):
            try:
                number = float(str(value).strip())
            except ValueError:
                raise ValueError(f"{f.title} must be a number") from None
            if not math.isfinite(number):
                raise ValueError(f"{f.title} must be a finite number")
            if f.kind == "integer":
                if number != int(number):
                    raise ValueError(f"{f.title} must be a whole number")
                out[f.name] = int(number)
            else:
                out[f.name] = number
        else:
            out[f.name] = str(value)
    return out


def elicitation_callback(server: str, ask: Callable[[FormRequest], Awaitable[FormAnswer]],
                         notice: Callable[[str], None],
                         waiting: Callable[[bool], None] = lambda _on: None) -> Callable[..., Awaitable[Any]]:
    """The SDK's ``elicitation_callback`` for one server (module docstring). ``waiting``
    is told when a form opens and closes (the call's timeout does not run meanwhile)."""

    async def callback(context: Any, params: Any) -> Any:
        import mcp_types as types

        message = redact(str(getattr(params, "message", "") or ""))[:2000]
        if getattr(params, "mode", "form") != "form":
            notice(f"MCP server {server!r} asked you to open a web page ({message[:120]}); pi_notebook "
                   "does not open pages for a server: declined.")
            return types.ElicitResult(action="decline")
        try:
            fields = form_fields(getattr(params, "requested_schema", None))
        except UnsupportedForm as exc:
            notice(f"MCP server {server!r} asked for input that is not a simple form ({exc}): declined.")
            return types.ElicitResult(action="decline")
        waiting(True)
        try:
            answer = await ask(FormRequest(server=server, message=message, fields=fields))
        finally:
            waiting(False)
        if answer.action != "accept":
            return types.ElicitResult(action=answer.action)
        try:
            content = check_values(fields, answer.values)
        except ValueError as exc:  # the form checks first; a wrong answer is not sent
            notice(f"The answer to MCP server {server!r} was not sent ({exc}): declined.")
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=content)

    return callback
