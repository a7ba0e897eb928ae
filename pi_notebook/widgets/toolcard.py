"""The widget of one tool call: name, status, code, approval panel, output, result.

It renders a :class:`~pi_notebook.widgets.toolcall.ToolItem`. Code shown for approval
is shown as it will run: invisible and bidirectional-control characters are written
out (``⟨U+202E⟩``) with a warning line. Figures keep their natural size (never
taller or wider than the card; no fixed height). Tracebacks show the last frame of
the agent's code and the exception first; the full traceback is folded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import ipywidgets as W

from ..tools.trust.approval import approval_line, invisible_fields, reveal_invisible
from ..tools.output.updates import IMAGE_MIMES
from ._util import B64_RE, code_ticks, content_images, fmt_seconds, mark_invisible, strip_control
from .blocks import Block, ChunkedText, WidgetSet, line_split_point, pill_html
from .markdown import escape_text, highlight_code
from .protocol import MimeBundle
from .toolcall import OutputRun, ToolItem, args_code, fold_traceback

__all__ = ["ToolCard", "MAX_RESULT_CHARS", "image_html", "invisible_warning_html"]

MAX_RESULT_CHARS = 20_000
# A result text longer than this many lines (a JSON table from an MCP tool) is shown folded:
# its first lines, and the whole behind a summary that opens it.
RESULT_LINES_OPEN = 15
_PREVIEW_LINES = 6


def image_html(mime: str, data: str, css_class: str = "pi-out-img") -> str | None:
    """An <img> for a base64 PNG/JPEG/GIF payload we validated, else None."""
    if mime == "image/jpg":
        mime = "image/jpeg"
    if mime not in IMAGE_MIMES or not data or not B64_RE.match(data):
        return None
    return f'<img class="{css_class}" src="data:{mime};base64,{"".join(data.split())}">'


def invisible_warning_html(code: str, fields: Mapping[str, str | None] | None = None) -> str:
    """The warning above an approval: which shown field (the code or arguments, the tool's
    and server's names, its description) holds invisible or text-direction characters."""
    found = invisible_fields({"code": code, **(fields or {})})
    if not found:
        return ""
    if list(found) == ["code"]:
        names = ", ".join(f"U+{ord(c):04X}" for c in found["code"])
        return ('<div class="pi-invisible-warning">⚠ This code contains invisible or text-direction '
                f"characters ({escape_text(names)}), shown as ⟨U+…⟩: the code may not do what it "
                "appears to do.</div>")
    where = "; ".join(f"{label}: " + ", ".join(f"U+{ord(c):04X}" for c in chars) for label, chars in found.items())
    return ('<div class="pi-invisible-warning">⚠ This call contains invisible or text-direction '
            f"characters ({escape_text(where)}), shown as ⟨U+…⟩: it may not be what it appears to be.</div>")


def approval_fields(item: ToolItem, hints: Mapping[str, object] | None) -> dict[str, str | None]:
    """The fields besides the code an approval shows, by label (for the warning)."""
    fields: dict[str, str | None] = {"tool name": item.tool_name}
    if hints is not None:
        for key, label in (("tool", "tool name"), ("server", "server name"), ("description", "description")):
            value = hints.get(key)
            if isinstance(value, str) and value:
                fields[label] = value
    return fields


def code_html(code: str, lang: str) -> str:
    """Highlighted code with invisible characters written out and marked."""
    return mark_invisible(highlight_code(code, lang))


def _render_stream(name: str) -> Callable[[str, bool], str]:
    cls = "pi-out pi-stderr" if name == "stderr" else "pi-out"

    def render(text: str, live: bool) -> str:
        return f'<pre class="{cls}">{escape_text(text)}</pre>' if text else ""
    return render


def display_html(data: MimeBundle) -> str | None:
    for mime in IMAGE_MIMES:
        payload = data.get(mime)
        if isinstance(payload, list):
            payload = "".join(payload)
        if isinstance(payload, str):
            img = image_html(mime, payload)
            if img is not None:
                return img
    # Never text/html, SVG or JavaScript from tool output: text/plain only.
    plain = data.get("text/plain")
    if isinstance(plain, list):
        plain = "".join(plain)
    if isinstance(plain, str) and plain:
        # The model's copy of a value is budgeted; the card's must be too: a 20 MB repr sent
        # whole reached the browser as 20 MB of iopub. The whole value stays in the kernel.
        cut = len(plain) - MAX_RESULT_CHARS
        note = (f'<div class="pi-note">… {cut:,} more characters (the whole value is in the kernel)</div>'
                if cut > 0 else "")
        return f'<pre class="pi-out">{escape_text(strip_control(plain[:MAX_RESULT_CHARS]))}</pre>{note}'
    return None


def error_html(ename: str, evalue: str, traceback: list[str]) -> str:
    text = strip_control("\n".join(traceback)).strip() or f"{ename}: {evalue}"
    summary, folded = fold_traceback(text)
    html = f'<pre class="pi-out pi-err">{escape_text(summary)}</pre>'
    if folded:
        lines = text.count("\n") + 1
        html += (f'<details class="pi-tb-full"><summary>Full traceback ({lines} lines)</summary>'
                 f'<pre class="pi-out pi-err">{escape_text(text)}</pre></details>')
    return html


def namespace_html(title: str, lines: Iterable[str]) -> str:
    """What a call did (or may do) to the user's names: one escaped line each, the names in
    backticks as code. The lines carry names and code read from the model's code: text only."""
    items = "".join(f"<li>{code_ticks(escape_text(strip_control(line)))}</li>" for line in lines)
    if not items:
        return ""
    return f'<div class="pi-ns"><b>{escape_text(title)}</b><ul>{items}</ul></div>'


def _approval_namespace(info: Mapping[str, object] | None) -> str:
    if not isinstance(info, Mapping):
        return ""
    lines = [x for x in (info.get("lines") or []) if isinstance(x, str)]  # type: ignore[attr-defined]  # a list from the gate
    undo = [x for x in (info.get("undo") or []) if isinstance(x, str)]  # type: ignore[attr-defined]  # a list from the gate
    protected = [x for x in (info.get("protected") or []) if isinstance(x, str)]  # type: ignore[attr-defined]  # a list from the gate
    html = namespace_html("Your variables:", lines) + namespace_html("Not undoable:", undo)
    if protected:
        html += namespace_html("Protected (AgentMagics.protect):",
                               [", ".join(f"`{n}`" for n in protected) + ": asked even under auto"])
    return html


def _approval_text(item: ToolItem, hints: Mapping[str, object] | None = None) -> str:
    """The question above the buttons: code for python, a named call for any other tool
    (an MCP tool is ``server__tool``: both names are shown; the arguments are above)."""
    if item.tool_name == "python" or item.approval_code:
        return ('<div class="pi-approval-text"><b>Run this code?</b> The agent wants '
                'to execute it in your kernel.</div>')
    server, _, tool = item.tool_name.partition("__")
    if hints is not None and hints.get("server") and hints.get("tool"):  # the real names (a renamed tool)
        server, tool = str(hints["server"]), str(hints["tool"])
    what = (f"the tool <code>{_shown(tool)}</code> of the MCP server <code>{_shown(server)}</code>"
            if tool else f"the tool <code>{_shown(item.tool_name)}</code>")
    badges = hint_badges(hints)
    note = ""
    if hints is not None and hints.get("destructive") is True:
        note = " The server marks it destructive: it is asked for at every call."
    if hints is not None and isinstance(hints.get("changed"), str):
        note += f" {escape_text(str(hints['changed']))}"
    described = hints.get("description") if hints is not None else None
    if isinstance(described, str) and described:
        note += f'<div class="pi-approval-description">The server describes it: {_shown(described)}</div>'
    # the arguments are shown above the panel only when there are some (args_code)
    arguments = " with the arguments shown above" if args_code(item.tool_name, item.args)[0] else " without arguments"
    return (f'<div class="pi-approval-text"><b>Call this tool?</b> {badges} The agent wants to call {what}'
            f'{arguments}.{note}</div>')


def _shown(text: str) -> str:
    """A field shown for approval: invisible characters written out, then escaped."""
    return escape_text(reveal_invisible(text))


def hint_badges(hints: object) -> str:
    """The server's annotations of an MCP tool as badges ("read-only", "destructive"): its
    own word about itself, shown as such (the text is escaped like everything else)."""
    if not isinstance(hints, dict):
        return ""
    labels = []
    if hints.get("read_only") is True:
        labels.append(("read-only", "pi-badge-readonly", "the server says this tool only reads"))
    if hints.get("destructive") is True:
        labels.append(("destructive", "pi-badge-destructive", "the server says this tool may delete or overwrite"))
    return "".join(f'<span class="pi-metric pi-badge {cls}" title="{escape_text(tip)}">{escape_text(label)}</span>'
                   for label, cls, tip in labels)


def _result_summary(item: ToolItem, lines: int) -> str:
    """The title of a folded result: its size, and its rows when it is a structured table."""
    details = item.result.details if item.result is not None else None
    mcp = details.get("mcp") if isinstance(details, dict) else None
    structured = mcp.get("structured") if isinstance(mcp, dict) else None
    rows = None
    if isinstance(structured, list):
        rows = len(structured)
    elif isinstance(structured, dict):
        lists = [v for v in structured.values() if isinstance(v, list)]
        rows = len(lists[0]) if len(lists) == 1 else None
    size = f"{rows:,} rows, " if rows is not None else ""
    return f"Whole result ({size}{lines:,} lines)"


class ToolCard(Block[ToolItem]):
    """One tool call's widgets."""

    def __init__(self, item: ToolItem, widgets: WidgetSet) -> None:
        super().__init__(item, widgets)
        self._head: W.HTML | None = None
        self._args: W.HTML | None = None
        self._args_version = -1
        self._approval: W.VBox | None = None
        self._approval_buttons: list[W.Button] = []
        self._outbox: W.VBox | None = None
        self._out_widgets: dict[int, W.Widget] = {}
        self._streams: dict[int, ChunkedText] = {}
        self._progress: W.HTML | None = None
        self._result: W.Widget | None = None
        self._result_built = False
        self._note: W.HTML | None = None
        self._children: tuple[W.Widget, ...] = ()
        # (tool_call_id, choice, request): a click answers the request its panel was made for
        self.on_approval_click: Callable[[str, str, int], None] | None = None
        # which approval request the panel on screen belongs to (the view numbers them)
        self.approval_request = 0
        self._approval_built_for = -1
        # an MCP tool's request: server, tool, annotations, "always" scope (gate.py)
        self.approval_hints: Mapping[str, object] | None = None
        # a python call's request: what it may do to the user's names (tools/python/namespace_review.py)
        self.approval_namespace: Mapping[str, object] | None = None
        self._namespace: W.HTML | None = None

    # -- what tests and the view read --
    tool_call_id = property(lambda self: self.item.tool_call_id)
    status = property(lambda self: self.item.status)
    approval_pending = property(lambda self: self.item.approval_pending)
    outputs = property(lambda self: self.item.outputs)
    duration = property(lambda self: self.item.duration)
    dropped_chars = property(lambda self: self.item.dropped_chars)
    shown_chars = property(lambda self: self.item.shown_chars)

    @property
    def approval_buttons(self) -> dict[str, W.Button]:
        """The Run / Skip / Always buttons once the panel has been shown (no "always" for a
        tool asked at every call)."""
        return dict(zip(("run", "skip", "always"), self._approval_buttons, strict=False))

    def disable_buttons(self) -> None:
        for button in self._approval_buttons:
            button.disabled = True

    # -- rendering (flush only) --

    def _head_html(self) -> str:
        item = self.item
        live = not item.frozen and item.status in ("running", "waiting for approval", "preparing")
        bits = [f'<span class="pi-tool-name">⚙ {_shown(item.title)}</span>',
                pill_html(item.status, live=live)]
        if item.duration is not None:
            bits.append(f'<span class="pi-metric" title="execution time">{fmt_seconds(item.duration)}</span>')
        elif item.started is not None and not item.frozen and item.status == "running":
            bits.append(f'<span class="pi-metric">{fmt_seconds(time.monotonic() - item.started, precise=False)}'
                        "</span>")
        details = item.result.details if item.result is not None else None
        mcp = details.get("mcp") if isinstance(details, dict) else None
        bits.append(hint_badges(mcp if isinstance(mcp, dict) else self.approval_hints))
        approval = approval_line(details) if item.result is not None else None
        if approval:  # why it ran (or did not): one short line, from the session's record
            bits.append(f'<span class="pi-metric pi-approval-line">{escape_text(approval)}</span>')
        return f'<div class="pi-tool-head">{"".join(bits)}</div>'

    def _args_html(self) -> str:
        code, lang = self.item.code()
        if not code:
            return ""
        # While the approval panel is up, its own warning line says it (once).
        warning = "" if self.item.approval_pending else invisible_warning_html(code)
        return warning + code_html(code, lang)

    def _on_click(self, choice: str, request: int) -> Callable[[Any], None]:
        def handler(_button: W.Button) -> None:
            # Runs on whatever thread the comm is handled on; the view's callback
            # only schedules work on the loop (call_soon_threadsafe).
            if self.on_approval_click is not None:
                self.on_approval_click(self.item.tool_call_id, choice, request)
        return handler

    def _approval_widget(self) -> W.VBox:
        # A new request gets new button models: a click still in flight from an earlier panel
        # (a double click on Run; a server that reuses tool-call ids such as "call_0") then
        # reaches the old buttons and answers nothing, instead of answering this request.
        if self._approval is not None and self._approval_built_for != self.approval_request:
            for old in self._approval_buttons:
                old.disabled = True
            self._approval = None
        if self._approval is None:
            self._approval_built_for = self.approval_request
            code = self.item.approval_code or ""
            prompt = self.widgets.html(_approval_text(self.item, self.approval_hints)
                                       + _approval_namespace(self.approval_namespace)
                                       + invisible_warning_html(code, approval_fields(self.item, self.approval_hints)))

            def button(description: str, icon: str, style: str = "") -> W.Button:
                return self.widgets.add(W.Button(description=description, icon=icon, button_style=style,
                                                 layout=self.widgets.add(W.Layout(width="auto", flex="0 0 auto"))))
            run = button("Run", "play", "success")
            skip = button("Skip", "ban")
            hints = self.approval_hints
            buttons = [(run, "run"), (skip, "skip")]
            if hints is None:  # python (and any non-MCP tool): the rest of the run
                buttons.append((button("Always for this run", "check-double"), "always"))
            elif hints.get("always") == "tool":  # an MCP tool: this tool, for the rest of the run
                buttons.append((button("Always for this tool", "check-double"), "always"))
            for b, choice in buttons:
                b.on_click(self._on_click(choice, self.approval_request))
            self._approval_buttons = [b for b, _ in buttons]
            # Text above, the buttons in a row below: at any width the text wraps as
            # text, and the buttons wrap as a row (never one word per line).
            row = self.widgets.add(W.HBox(self._approval_buttons))
            row.add_class("pi-approval-buttons")
            self._approval = self.widgets.add(W.VBox([prompt, row]))
            self._approval.add_class("pi-approval")
        return self._approval

    def _output_widget(self, index: int, out: OutputRun) -> W.Widget | None:
        if out.kind == "stream" and out.stream is not None:
            chunks = self._streams.get(index)
            if chunks is None:
                chunks = ChunkedText(out.stream, _render_stream(out.name), line_split_point, self.widgets, 4000)
                self._streams[index] = chunks
            box = chunks.sync()
            box.add_class("pi-stream")
            return box
        widget = self._out_widgets.get(index)
        if widget is None:
            if out.kind == "display":
                html = display_html(out.data)
            elif out.error is not None:
                html = error_html(out.error.ename, out.error.evalue, out.error.traceback)
            else:
                html = None
            if html is None:
                return None
            widget = self.widgets.html(html)
            self._out_widgets[index] = widget
        return widget

    def _result_widget(self) -> W.Widget | None:
        item = self.item
        text = item.result_text
        parts: list[str] = []
        folded: W.Widget | None = None
        if text:
            cut = len(text) - MAX_RESULT_CHARS
            cls = "pi-out pi-err" if item.is_error else "pi-out"
            whole = f'<pre class="{cls}">{escape_text(text[:MAX_RESULT_CHARS])}</pre>'
            if cut > 0:
                whole += f'<div class="pi-note">… {cut:,} more characters</div>'
            lines = text[:MAX_RESULT_CHARS].splitlines()
            if len(lines) > RESULT_LINES_OPEN and not item.outputs:
                preview = "\n".join(lines[:_PREVIEW_LINES])
                parts.append(f'<pre class="{cls}">{escape_text(preview)}</pre>'
                             f'<div class="pi-note">… {len(lines) - _PREVIEW_LINES:,} more lines</div>')
                folded = self.widgets.add(W.Accordion(children=[self.widgets.html(whole)],
                                                      titles=(_result_summary(item, len(lines)),),
                                                      selected_index=None))
                folded.add_class("pi-result-box")
            else:
                parts.append(whole)
        if item.details is None:
            for mime, data in content_images(item.result.content if item.result is not None else None):
                img = image_html(mime, data)
                if img:
                    parts.append(img)
        if not parts:
            return None
        html = self.widgets.html("".join(parts))
        if folded is not None:
            box = self.widgets.add(W.VBox([html, folded]))
            return box
        if item.outputs and not item.is_error:
            # The streamed output is already on screen; what the model got back is
            # there for the curious, collapsed.
            acc = self.widgets.add(W.Accordion(children=[html], titles=("Result sent to the model",),
                                               selected_index=None))
            acc.add_class("pi-result-box")
            return acc
        return html

    def _set_html(self, widget: W.HTML | None, value: str) -> W.HTML:
        if widget is None:
            return self.widgets.html(value)
        if widget.value != value:
            widget.value = value
        return widget

    def sync(self) -> None:
        item = self.item
        self._head = self._set_html(self._head, self._head_html())
        children: list[W.Widget] = [self._head]
        if self._args_version != item.args_version or self._args is None:
            self._args = self._set_html(self._args, self._args_html())
            self._args_version = item.args_version
        if self._args.value:
            children.append(self._args)
        if item.approval_pending:
            children.append(self._approval_widget())
        elif self._approval_buttons:
            self.disable_buttons()  # answered: no live button stays behind
        out_widgets = [w for i, out in enumerate(item.outputs) if (w := self._output_widget(i, out)) is not None]
        if item.progress_text:
            self._progress = self._set_html(self._progress,
                                            f'<pre class="pi-out">{escape_text(item.progress_text)}</pre>')
            out_widgets.append(self._progress)
        if out_widgets:
            if self._outbox is None:
                self._outbox = self.widgets.add(W.VBox(out_widgets))
                self._outbox.add_class("pi-outbox")
            elif tuple(self._outbox.children) != tuple(out_widgets):
                self._outbox.children = tuple(out_widgets)
            children.append(self._outbox)
        if item.dropped_chars:
            self._note = self._set_html(self._note, f'<div class="pi-note">… {item.dropped_chars:,} more '
                                                    "characters of output not shown</div>")
            children.append(self._note)
        changed = item.details.namespace if item.details is not None else []
        if changed:
            self._namespace = self._set_html(self._namespace, namespace_html("Variables changed:", changed))
            children.append(self._namespace)
        if item.result is not None:
            if not self._result_built:
                self._result = self._result_widget()
                self._result_built = True
            if self._result is not None:
                children.append(self._result)
        if self.widget is None:
            self.widget = self.widgets.add(W.VBox(children))
            self.widget.add_class("pi-tool")
        elif tuple(children) != self._children and isinstance(self.widget, W.VBox):
            self.widget.children = tuple(children)
        self._children = tuple(children)
        if item.is_error and item.frozen:
            self.widget.add_class("pi-tool-error")
