"""The pieces of an AgentView transcript, each owning its own widgets.

A block keeps its state in plain Python; ``sync()`` (called only from the view's
coalesced flush) creates its widgets on first use and then pushes the state into
widget traits. Once a block is *frozen* and synced one last time, the view stops
syncing it, so a flush re-sends only the blocks that are still live.

Long streaming text (assistant Markdown, thinking, tool output) is held by
``ChunkedText``: when the live tail grows past a threshold, a finished leading
part is frozen into its own ``HTML`` widget, so each flush re-sends a bounded tail
rather than the whole message.

Untrusted text is escaped here (``escape_text``), rendered with the safe Markdown
renderer, or highlighted by Pygments; no block puts raw model or tool text into
HTML.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as W

from ._util import B64_RE, content_images, content_text, field, fence_for, fmt_seconds, strip_control
from .markdown import escape_text, highlight_code, markdown_for_transcript, render_markdown
from .theme import STATUS_COLOURS

__all__ = [
    "Block", "ChunkedText", "UserBlock", "NoticeBlock", "MarkdownBlock", "ThinkingBlock",
    "ToolCard", "pill_html", "USER_LABELS",
]

USER_LABELS = {"prompt": "You", "steer": "Steer", "followup": "Follow-up", "user": "You"}
CURSOR_HTML = '<span class="pi-cursor"></span>'
# A live tail longer than this is split at a safe point and its head frozen.
CHUNK_CHARS = 6000
# Per tool card: output shown in the view beyond this is counted, not displayed
# (the model gets its own, budgeted summary from the tool; the browser stays fast).
MAX_OUTPUT_CHARS = 200_000
MAX_RESULT_CHARS = 20_000
# Per output run in the saved Markdown transcript: head and tail, the middle elided.
TRANSCRIPT_OUTPUT_CHARS = 10_000
_IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif")


def pill_html(status: str, *, live: bool = False, label: str | None = None) -> str:
    """A coloured status pill (colours from our table; the label is escaped)."""
    bg, fg = STATUS_COLOURS.get(status, ("#e8eaed", "#3c4043"))
    dot = '<span class="pi-dot"></span>' if live else ""
    cls = "pi-pill pi-live" if live else "pi-pill"
    return f'<span class="{cls}" style="background:{bg};color:{fg}">{dot}{escape_text(label or status)}</span>'


def _html(value: str = "", *classes: str) -> W.HTML:
    w = W.HTML(value=value)
    for c in classes:
        w.add_class(c)
    return w


def _image_html(mime: str, data: str, css_class: str = "pi-out-img") -> str | None:
    """An <img> for a base64 PNG/JPEG/GIF payload we validated, else None."""
    if mime == "image/jpg":
        mime = "image/jpeg"
    if mime not in _IMAGE_MIMES or not data or not B64_RE.match(data):
        return None
    return f'<img class="{css_class}" src="data:{mime};base64,{"".join(data.split())}">'


class Block:
    """Base class: a transcript item with a root widget built on first ``sync``."""

    frozen: bool = False

    def __init__(self) -> None:
        self.widget: W.Widget | None = None

    def sync(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_markdown(self) -> str | None:
        return None


# --- chunked streaming text -------------------------------------------------------------

_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def markdown_split_point(text: str) -> int:
    """Index where ``text`` can be cut into two independently rendered Markdown
    pieces: the start of a non-indented line after a blank line, outside any
    fenced code block. 0 if there is none."""
    best = 0
    fence: str | None = None
    pos = 0
    prev_blank = False
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        if fence is None:
            if prev_blank and stripped and not stripped[0].isspace() and pos > 0:
                best = pos
            m = _FENCE_RE.match(stripped)
            if m:
                fence = m.group(1)
        else:
            m = _FENCE_RE.match(stripped)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not stripped.strip().strip(fence[0]):
                fence = None
        prev_blank = not stripped.strip()
        pos += len(line)
    # Only cut if the line at ``best`` is complete-looking, i.e. not the very tail
    # that is still being written (it might turn into a fence or an indented line).
    return best if best < len(text) - 1 else 0


def line_split_point(text: str) -> int:
    """Index after the last newline (plain text can be cut at any line)."""
    return text.rfind("\n") + 1


class ChunkedText:
    """Streaming text shown as frozen HTML chunks plus one live HTML tail.

    ``append`` is O(delta). ``sync`` (at most once per flush) joins the pending
    deltas, renders only the tail and, if the tail is long, freezes its head.
    """

    def __init__(self, render: Callable[[str, bool], str], split: Callable[[str], int],
                 chunk_chars: int = CHUNK_CHARS, *classes: str) -> None:
        self._render = render
        self._split = split
        self._chunk_chars = chunk_chars
        self._classes = classes
        self._pending: list[str] = []
        self._tail = ""
        self._frozen_text: list[str] = []
        self._frozen_widgets: list[W.HTML] = []
        self._live: W.HTML | None = None
        self.box: W.VBox | None = None
        self.final = False
        self._structure_dirty = True

    @property
    def text(self) -> str:
        return "".join(self._frozen_text) + self._tail + "".join(self._pending)

    def __len__(self) -> int:  # cheap enough for limits: called per flush
        return sum(map(len, self._frozen_text)) + len(self._tail) + sum(map(len, self._pending))

    def append(self, delta: str) -> None:
        if delta:
            self._pending.append(delta)

    def set_text(self, text: str) -> None:
        """Replace the whole text (e.g. the final ``text_end`` content)."""
        if text == self.text:
            return
        frozen = "".join(self._frozen_text)
        self._pending.clear()
        if text.startswith(frozen):
            self._tail = text[len(frozen):]
        else:  # the provider rewrote earlier text: start over with one piece
            self._frozen_text.clear()
            for w in self._frozen_widgets:
                w.close()
            self._frozen_widgets.clear()
            self._structure_dirty = True
            self._tail = text

    def finish(self) -> None:
        self.final = True

    def sync(self) -> W.VBox:
        if self._pending:
            self._tail += "".join(self._pending)
            self._pending.clear()
        if not self.final and len(self._tail) > self._chunk_chars:
            cut = self._split(self._tail)
            if cut > 0:
                head, self._tail = self._tail[:cut], self._tail[cut:]
                self._frozen_text.append(head)
                # Built with its value: the comm_open carries it, no update follows.
                self._frozen_widgets.append(_html(self._render(head, False), *self._classes))
                self._structure_dirty = True
        value = self._render(self._tail, not self.final)
        if self._live is None:
            self._live = _html(value, *self._classes)
        elif self._live.value != value:
            self._live.value = value
        if self.box is None:
            self.box = W.VBox(self._frozen_widgets + [self._live])
            self._structure_dirty = False
        elif self._structure_dirty:
            self.box.children = tuple(self._frozen_widgets) + (self._live,)
            self._structure_dirty = False
        return self.box

    @property
    def pieces(self) -> list[str]:
        """The source text of each widget in ``widgets`` (after the last sync)."""
        return self._frozen_text + [self._tail]

    @property
    def widgets(self) -> list[W.HTML]:
        """The HTML widgets in display order (frozen chunks, then the tail)."""
        return self._frozen_widgets + ([self._live] if self._live is not None else [])


def _render_md(text: str, live: bool) -> str:
    html = render_markdown(text)
    if live:
        # Put the cursor inside the last paragraph so it sits at the end of the text.
        html = html[:-5] + CURSOR_HTML + "</p>\n" if html.endswith("</p>\n") else html + CURSOR_HTML
    return f'<div class="pi-md">{html}</div>'


def _render_thinking(text: str, live: bool) -> str:
    return f'<div class="pi-thinking">{escape_text(text)}</div>'


# --- simple blocks ----------------------------------------------------------------------

class UserBlock(Block):
    """A user, steering or follow-up message. Frozen from the start."""

    frozen = True

    def __init__(self, text: str, kind: str = "prompt", images: int = 0) -> None:
        super().__init__()
        self.text = text
        self.kind = kind if kind in USER_LABELS else "prompt"
        self.images = images

    @property
    def label(self) -> str:
        return USER_LABELS[self.kind]

    def html(self) -> str:
        extra = f' <span class="pi-note">[{self.images} image(s)]</span>' if self.images else ""
        return (f'<div class="pi-msg pi-user pi-{self.kind}"><span class="pi-label">{self.label}</span>'
                f'<span class="pi-user-text">{escape_text(self.text)}</span>{extra}</div>')

    def sync(self) -> None:
        if self.widget is None:
            self.widget = _html(self.html())

    def to_markdown(self) -> str:
        body = markdown_for_transcript(self.text.strip() or " ")
        quoted = "\n".join("> " + line if line else ">" for line in body.split("\n"))
        return f"> **{self.label}:**\n{quoted}"


class NoticeBlock(Block):
    """A one-line notice (compaction, headless approval refusal, errors)."""

    frozen = True
    LEVELS = ("info", "warning", "error")

    def __init__(self, text: str, level: str = "info") -> None:
        super().__init__()
        self.text = text
        self.level = level if level in self.LEVELS else "info"

    def sync(self) -> None:
        if self.widget is None:
            icon = {"info": "ℹ", "warning": "⚠", "error": "✖"}[self.level]
            self.widget = _html(f'<div class="pi-notice pi-{self.level}">{icon} '
                                f"{escape_text(self.text)}</div>")

    def to_markdown(self) -> str:
        icon = {"info": "ℹ", "warning": "⚠", "error": "✖"}[self.level]
        return f"> {icon} " + markdown_for_transcript(self.text).replace("\n", "\n> ")


class OtherMessageBlock(Block):
    """A custom agent message (a role pi_notebook does not know): label + text."""

    frozen = True

    def __init__(self, role: str, text: str) -> None:
        super().__init__()
        self.role, self.text = role, text

    def sync(self) -> None:
        if self.widget is None:
            self.widget = _html(f'<div class="pi-msg pi-other"><span class="pi-label">'
                                f"{escape_text(self.role)}</span>{escape_text(self.text)}</div>")

    def to_markdown(self) -> str:
        return f"*{markdown_for_transcript(self.role)}:* " + markdown_for_transcript(self.text)


# --- assistant content ----------------------------------------------------------------

class MarkdownBlock(Block):
    """Assistant text, rendered as Markdown; live while the text block streams."""

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self.chunks = ChunkedText(_render_md, markdown_split_point)
        self.chunks.append(text)

    def append(self, delta: str) -> None:
        self.chunks.append(delta)

    def finish(self, text: str | None = None) -> None:
        if text is not None:
            self.chunks.set_text(text)
        self.chunks.finish()
        self.frozen = True

    @property
    def text(self) -> str:
        return self.chunks.text

    def sync(self) -> None:
        box = self.chunks.sync()
        if self.widget is None:
            box.add_class("pi-msg")
            self.widget = box

    def to_markdown(self) -> str | None:
        text = self.text.strip()
        return markdown_for_transcript(text) if text else None


class ThinkingBlock(Block):
    """Model reasoning: collapsed by default in an Accordion, muted text."""

    def __init__(self, text: str = "", redacted: bool = False) -> None:
        super().__init__()
        self.chunks = ChunkedText(_render_thinking, line_split_point)
        self.chunks.append(text)
        self.redacted = redacted
        self.started = time.monotonic()
        self.seconds: float | None = None
        self._accordion: W.Accordion | None = None

    def append(self, delta: str) -> None:
        self.chunks.append(delta)

    def finish(self, text: str | None = None) -> None:
        if text is not None:
            self.chunks.set_text(text)
        if self.seconds is None:
            self.seconds = time.monotonic() - self.started
        self.chunks.finish()
        self.frozen = True

    @property
    def title(self) -> str:
        if self.redacted:
            return "Thinking (redacted by the provider)"
        if not self.frozen:
            return "Thinking…"
        if not self.seconds or self.seconds < 0.1:  # not streamed: no meaningful duration
            return "Thinking"
        return f"Thought for {fmt_seconds(self.seconds)}"

    def sync(self) -> None:
        box = self.chunks.sync()
        if self._accordion is None:
            self._accordion = W.Accordion(children=[box], titles=(self.title,), selected_index=None)
            self._accordion.add_class("pi-thinking-box")
            self.widget = self._accordion
        elif self._accordion.titles != (self.title,):
            self._accordion.titles = (self.title,)

    def to_markdown(self) -> str | None:
        text = self.chunks.text.strip()
        if not text:
            return None
        # Our own <details>; the reasoning text is HTML-escaped inside a <pre>.
        return (f"<details><summary>{escape_text(self.title)}</summary>\n\n"
                f"<pre>{escape_text(text)}</pre>\n\n</details>")


# --- tool cards -------------------------------------------------------------------------

def _render_stream(name: str) -> Callable[[str, bool], str]:
    cls = "pi-out pi-stderr" if name == "stderr" else "pi-out"

    def render(text: str, live: bool) -> str:
        return f'<pre class="{cls}">{escape_text(text)}</pre>' if text else ""
    return render


def _args_code(tool_name: str, args: Any) -> tuple[str, str]:
    """(source, language) to show for a call's arguments."""
    if isinstance(args, dict) and isinstance(args.get("code"), str) and \
            (tool_name == "python" or set(args) == {"code"}):
        return args["code"], "python"
    if args in (None, {}):
        return "", "json"
    try:
        return json.dumps(args, indent=2, ensure_ascii=False, default=str), "json"
    except (TypeError, ValueError):
        return str(args), "text"


class _Output:
    """One item in a tool card's output area: a stream run or a display."""

    def __init__(self, kind: str, name: str = "", html: str = "", md: str = "") -> None:
        self.kind, self.name = kind, name
        self.chunks: ChunkedText | None = None
        if kind == "stream":
            self.chunks = ChunkedText(_render_stream(name), line_split_point, 4000)
        self.html, self.md = html, md
        self.widget: W.Widget | None = None
        self.dirty = True  # only the newest output can change; the others are left alone


class ToolCard(Block):
    """One tool call: name, status, streamed arguments, approval, output, result."""

    def __init__(self, tool_call_id: str, tool_name: str, args: Any = None) -> None:
        super().__init__()
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.args = args
        self.status = "preparing"
        self.started: float | None = None
        self.duration: float | None = None
        self.approval_code: str | None = None
        self.approval_pending = False
        self.approval_outcome: str | None = None
        self.outputs: list[_Output] = []
        self.dropped_chars = 0
        self.shown_chars = 0
        self.progress_text: str | None = None
        self.result: Any = None
        self.is_error = False
        # widgets
        self._head: W.HTML | None = None
        self._args: W.HTML | None = None
        self._approval: W.HBox | None = None
        self._approval_buttons: list[W.Button] = []
        self._outbox: W.VBox | None = None
        self._progress: W.HTML | None = None
        self._result: W.Widget | None = None
        self._note: W.HTML | None = None
        self._children: tuple[W.Widget, ...] = ()
        self._args_dirty = True  # the highlighted arguments are re-rendered only on change
        self._args_value = ""
        self.on_approval_click: Callable[[str, str], None] | None = None

    # -- state changes (any time, on the loop) --

    def set_args(self, args: Any) -> None:
        self.args = args
        self._args_dirty = True

    def start(self, args: Any = None) -> None:
        if args is not None and args != self.args:
            self.args = args
            self._args_dirty = True
        if self.started is None:
            self.started = time.monotonic()
        if self.status in ("preparing", "waiting for approval") and not self.approval_pending:
            self.status = "running"

    def request_approval(self, code: str | None) -> None:
        self.approval_code = code
        self._args_dirty = True
        self.approval_pending = True
        self.status = "waiting for approval"

    def resolve_approval(self, outcome: str) -> None:
        self.approval_pending = False
        if self.frozen:  # the run ended (or the call finished) while waiting
            return
        self.approval_outcome = outcome
        self.status = "skipped" if outcome == "skip" else "running"

    def add_update(self, partial: Any) -> None:
        details = field(partial, "details")
        event = field(details, "event") if isinstance(details, dict) else None
        if event == "stream":
            name = "stderr" if field(details, "name") == "stderr" else "stdout"
            self._add_stream(name, strip_control(str(field(details, "text", "") or "")))
        elif event == "display":
            self._add_display(field(details, "data") or {})
        else:
            # A generic tool's partial result: pi tools report progress as the
            # latest partial content, so it replaces the previous one.
            text = content_text(field(partial, "content"))
            self.progress_text = strip_control(text) if text else None

    def _add_stream(self, name: str, text: str) -> None:
        if not text:
            return
        room = MAX_OUTPUT_CHARS - self.shown_chars
        if room <= 0:
            self.dropped_chars += len(text)
            return
        if len(text) > room:
            self.dropped_chars += len(text) - room
            text = text[:room]
        self.shown_chars += len(text)
        last = self.outputs[-1] if self.outputs else None
        if last is None or last.kind != "stream" or last.name != name:
            last = _Output("stream", name)
            self.outputs.append(last)
        assert last.chunks is not None
        last.chunks.append(text)
        last.dirty = True

    def _add_display(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        for mime in _IMAGE_MIMES:
            payload = data.get(mime)
            if isinstance(payload, list):
                payload = "".join(payload)
            if isinstance(payload, str):
                img = _image_html(mime, payload)
                if img is not None:
                    self.outputs.append(_Output("display", html=img,
                                                md=f"![output](data:{mime};base64,{''.join(payload.split())})"))
                    return
        # Never text/html, SVG or JavaScript from tool output: text/plain only.
        plain = data.get("text/plain")
        if isinstance(plain, list):
            plain = "".join(plain)
        if isinstance(plain, str) and plain:
            text = strip_control(plain)
            self.outputs.append(_Output("display", html=f'<pre class="pi-out">{escape_text(text)}</pre>',
                                        md=_fenced(text, "text")))

    def end(self, result: Any, is_error: bool) -> None:
        self.result = result
        self.is_error = bool(is_error)
        if self.started is not None and self.duration is None:
            self.duration = time.monotonic() - self.started
        if self.approval_outcome == "skip":
            self.status = "skipped"
        elif self.status != "aborted":
            self.status = "error" if self.is_error else "done"
        self.approval_pending = False
        self.progress_text = None
        for out in self.outputs:
            if out.chunks is not None:
                out.chunks.finish()
                out.dirty = True
        self.frozen = True

    def abort(self) -> None:
        """The run ended while this call had not finished."""
        if not self.frozen:
            if self.started is not None and self.duration is None:
                self.duration = time.monotonic() - self.started
            self.status = "aborted"
            self.approval_pending = False
            for out in self.outputs:
                if out.chunks is not None:
                    out.chunks.finish()
                    out.dirty = True
            self.frozen = True

    @property
    def running(self) -> bool:
        return not self.frozen and self.started is not None

    # -- rendering (flush only) --

    def _head_html(self) -> str:
        live = not self.frozen and self.status in ("running", "waiting for approval", "preparing")
        bits = [f'<span class="pi-tool-name">⚙ {escape_text(self.tool_name or "tool")}</span>',
                pill_html(self.status, live=live)]
        if self.duration is not None:
            bits.append(f'<span class="pi-metric">{fmt_seconds(self.duration)}</span>')
        elif self.started is not None and not self.frozen and self.status == "running":
            bits.append(f'<span class="pi-metric">{fmt_seconds(time.monotonic() - self.started, precise=False)}'
                        "</span>")
        return f'<div class="pi-tool-head">{"".join(bits)}</div>'

    def _args_html(self) -> str:
        code, lang = _args_code(self.tool_name, self.args)
        if not code and self.approval_code:
            code, lang = self.approval_code, "python"
        return highlight_code(code, lang) if code else ""

    def _result_widget(self) -> W.Widget | None:
        content = field(self.result, "content")
        text = content_text(content)
        parts: list[str] = []
        if text:
            text = strip_control(text)
            cut = len(text) - MAX_RESULT_CHARS
            shown = text[:MAX_RESULT_CHARS]
            cls = "pi-out pi-err" if self.is_error else "pi-out"
            parts.append(f'<pre class="{cls}">{escape_text(shown)}</pre>')
            if cut > 0:
                parts.append(f'<div class="pi-note">… {cut:,} more characters</div>')
        for mime, data in content_images(content):
            img = _image_html(mime, data)
            if img:
                parts.append(img)
        if not parts:
            return None
        html = _html("".join(parts))
        if self.outputs and not self.is_error:
            # The streamed output is already on screen; what the model got back is
            # there for the curious, collapsed.
            acc = W.Accordion(children=[html], titles=("Result sent to the model",), selected_index=None)
            acc.add_class("pi-result-box")
            return acc
        return html

    def _on_click(self, choice: str) -> Callable[[Any], None]:
        def handler(_button: Any) -> None:
            # Runs on whatever thread the comm is handled on; the view's callback
            # only schedules work on the loop (call_soon_threadsafe).
            if self.on_approval_click is not None:
                self.on_approval_click(self.tool_call_id, choice)
        return handler

    def _approval_widget(self) -> W.HBox:
        if self._approval is None:
            prompt = _html('<b>Run this code?</b> The agent wants to execute it in your kernel.')
            prompt.layout = W.Layout(flex="1 1 auto", min_width="0")

            def button(description: str, icon: str, style: str = "") -> W.Button:
                # flex none: the prompt text shrinks, the button labels never do
                return W.Button(description=description, icon=icon, button_style=style,
                                layout=W.Layout(width="auto", flex="0 0 auto"))
            run = button("Run", "play", "success")
            skip = button("Skip", "ban")
            always = button("Always for this run", "check-double")
            for button, choice in ((run, "run"), (skip, "skip"), (always, "always")):
                button.on_click(self._on_click(choice))
            self._approval_buttons = [run, skip, always]
            self._approval = W.HBox([prompt, run, skip, always])
            self._approval.add_class("pi-approval")
        return self._approval

    @property
    def approval_buttons(self) -> dict[str, W.Button]:
        """The Run / Skip / Always buttons once the panel has been shown (for tests)."""
        return dict(zip(("run", "skip", "always"), self._approval_buttons))

    def sync(self) -> None:
        head = self._head_html()
        if self._head is None:
            self._head = _html(head)
        elif self._head.value != head:
            self._head.value = head
        if self._args_dirty:
            self._args_value = self._args_html()
            self._args_dirty = False
        args = self._args_value
        if self._args is None:
            self._args = _html(args)
        elif self._args.value != args:
            self._args.value = args
        children: list[W.Widget] = [self._head]
        if args:
            children.append(self._args)
        if self.approval_pending:
            children.append(self._approval_widget())
        # outputs
        out_widgets: list[W.Widget] = []
        for out in self.outputs:
            if out.dirty or out.widget is None:
                if out.kind == "stream":
                    assert out.chunks is not None
                    out.widget = out.chunks.sync()
                else:
                    out.widget = _html(out.html)
                out.dirty = False
            out_widgets.append(out.widget)
        if self.progress_text:
            value = f'<pre class="pi-out">{escape_text(self.progress_text)}</pre>'
            if self._progress is None:
                self._progress = _html(value)
            elif self._progress.value != value:
                self._progress.value = value
            out_widgets.append(self._progress)
        if out_widgets:
            if self._outbox is None:
                self._outbox = W.VBox(out_widgets)
                self._outbox.add_class("pi-outbox")
            elif tuple(self._outbox.children) != tuple(out_widgets):
                self._outbox.children = tuple(out_widgets)
            children.append(self._outbox)
        if self.dropped_chars:
            note = f'<div class="pi-note">… {self.dropped_chars:,} more characters of output not shown</div>'
            if self._note is None:
                self._note = _html(note)
            elif self._note.value != note:
                self._note.value = note
            children.append(self._note)
        if self.result is not None:
            if self._result is None:
                self._result = self._result_widget()
            if self._result is not None:
                children.append(self._result)
        if self.widget is None:
            self.widget = W.VBox(children)
            self.widget.add_class("pi-tool")
        elif tuple(children) != self._children:
            self.widget.children = tuple(children)
        self._children = tuple(children)
        if self.is_error and self.frozen:
            self.widget.add_class("pi-tool-error")

    def to_markdown(self) -> str:
        name = markdown_for_transcript(self.tool_name or "tool")
        head = f"**⚙ {name}** · {self.status}"
        if self.duration is not None:
            head += f" · {fmt_seconds(self.duration)}"
        parts = [head]
        code, lang = _args_code(self.tool_name, self.args)
        if not code and self.approval_code:
            code, lang = self.approval_code, "python"
        if code:
            parts.append(_fenced(code, lang))
        for out in self.outputs:
            if out.kind == "stream":
                assert out.chunks is not None
                parts.append(_fenced(_head_tail(out.chunks.text, TRANSCRIPT_OUTPUT_CHARS), "text"))
            elif out.md:
                parts.append(out.md)
        if self.dropped_chars:
            parts.append(f"*… {self.dropped_chars:,} more characters of output not shown*")
        if self.result is not None and (not self.outputs or self.is_error):
            text = strip_control(content_text(field(self.result, "content")))
            if text:
                parts.append(_fenced(_head_tail(text, TRANSCRIPT_OUTPUT_CHARS), "text"))
        return "\n\n".join(parts)


def _head_tail(text: str, limit: int) -> str:
    """``text`` if it fits, else its head and tail around a note of what was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n… [{cut:,} characters not shown] …\n{text[-half:]}"


def _fenced(text: str, lang: str) -> str:
    fence = fence_for(text)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{lang}\n{body}{fence}"
