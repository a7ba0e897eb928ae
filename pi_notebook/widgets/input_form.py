"""A small form in the view for an MCP server's request for input (elicitation).

Built from the request's fields (``name``, ``kind``: text | number | integer | choice |
confirm, ``title``, ``description``, ``required``, ``default``, ``choices``; pi_notebook/mcp/
elicit.py makes them. :class:`FormRequestLike` and :class:`FormFieldLike` say what is read,
so the widgets do not import the MCP layer).
The server's message and every label are text, escaped: never live HTML. Submit checks the
values (a required field, a number) and says what is wrong in the form instead of answering;
Decline and Cancel answer at once. Button handlers may run on a subshell thread: the view
passes ``on_click`` that hops onto the loop, and reading the values happens there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

import ipywidgets as W

from .blocks import WidgetSet
from .markdown import escape_text

__all__ = ["InputForm", "FormRequestLike", "FormFieldLike", "FormValue", "FormValues"]

FormValue = str | int | float | bool  # what a control gives: text, a number, a choice, a checkbox
FormValues = dict[str, FormValue]


class FormFieldLike(Protocol):
    """One field of the form (``mcp.elicit.FormField``)."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...  # text | number | integer | choice | confirm
    @property
    def title(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def required(self) -> bool: ...
    @property
    def default(self) -> object: ...
    @property
    def choices(self) -> Sequence[str]: ...


class FormRequestLike(Protocol):
    """An MCP server's request for input (``mcp.elicit.FormRequest``)."""

    @property
    def server(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def fields(self) -> Sequence[FormFieldLike]: ...


class InputForm:
    def __init__(self, request: FormRequestLike, widgets: WidgetSet, on_click: Callable[[str], None]) -> None:
        self.fields = tuple(request.fields)
        self.controls: dict[str, W.Widget] = {}
        server = request.server
        message = request.message
        rows: list[W.Widget] = [widgets.html(
            f'<div class="pi-approval-text"><b>Input requested</b> by the MCP server '
            f"<code>{escape_text(server)}</code>: {escape_text(message)}</div>")]
        for f in self.fields:
            label = escape_text(str(f.title)) + (" *" if f.required else "")
            if f.description:
                label += f' <span class="pi-note">{escape_text(str(f.description))}</span>'
            control = self._control(f, widgets)
            self.controls[f.name] = control
            rows.append(widgets.add(W.VBox([widgets.html(f"<div>{label}</div>"), control])))
        self.error = widgets.html("")
        rows.append(self.error)

        def button(description: str, action: str, style: str = "") -> W.Button:
            b = widgets.add(W.Button(description=description, button_style=style,
                                     layout=widgets.add(W.Layout(width="auto", flex="0 0 auto"))))
            b.on_click(lambda _b: on_click(action))
            return b

        self.buttons = {"submit": button("Submit", "submit", "success"), "decline": button("Decline", "decline"),
                        "cancel": button("Cancel", "cancel")}
        row = widgets.add(W.HBox(list(self.buttons.values())))
        row.add_class("pi-approval-buttons")
        rows.append(row)
        self.widget = widgets.add(W.VBox(rows))
        self.widget.add_class("pi-approval")

    @staticmethod
    def _control(f: FormFieldLike, widgets: WidgetSet) -> W.Widget:
        default = f.default
        if f.kind == "confirm":
            return widgets.add(W.Checkbox(value=bool(default), indent=False))
        if f.kind == "choice":
            options = [str(c) for c in f.choices]
            value = str(default) if default in options else (options[0] if f.required and options else None)
            return widgets.add(W.Dropdown(options=options, value=value))
        text = "" if default is None else str(default)
        placeholder = {"number": "a number", "integer": "a whole number"}.get(f.kind, "")
        return widgets.add(W.Text(value=text, placeholder=placeholder))

    def collect(self) -> tuple[FormValues, str | None]:
        """The values typed in, and what is wrong with them (None: nothing)."""
        values: FormValues = {}
        for f in self.fields:
            value = self.controls[f.name].value
            if f.kind in ("text", "number", "integer") and isinstance(value, str):
                value = value.strip()
            if value in (None, ""):
                if f.required and f.kind != "confirm":
                    return values, f"{f.title} is required."
                continue
            if f.kind in ("number", "integer"):
                try:
                    number = float(value)
                except ValueError:
                    return values, f"{f.title} must be a number."
                if not math.isfinite(number) or (f.kind == "integer" and number != int(number)):
                    return values, f"{f.title} must be a {'whole' if f.kind == 'integer' else 'finite'} number."
                value = int(number) if f.kind == "integer" else number
            values[f.name] = value
        return values, None

    def show_error(self, text: str) -> None:
        self.error.value = f'<div class="pi-note pi-err">{escape_text(text)}</div>'

    def disable(self) -> None:
        for b in self.buttons.values():
            b.disabled = True
        for control in self.controls.values():
            control.disabled = True
