"""Widgets for the transcript's items (the tool card is in ``toolcard.py``).

A block renders one item of the :class:`~pi_notebook.widgets.transcript.Transcript`:
``sync()`` (called only from the view's coalesced flush) creates its widgets on first
use, then pushes the item's state into widget traits. Once an item is frozen and its
block synced one last time, the view stops syncing it.

Long streaming text (assistant Markdown, thinking, tool output) is shown by
``ChunkedText``: when the live tail grows past a threshold, a finished leading part
is frozen into its own ``HTML`` widget, so each flush re-sends a bounded tail rather
than the whole message.

Every widget a block creates goes through the view's :class:`WidgetSet`, so closing
the view closes all of them, also chunks that are no longer in the widget tree.

Untrusted text is escaped (``escape_text``), rendered with the safe Markdown renderer,
or highlighted by Pygments; no block puts raw model or tool text into HTML.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

import ipywidgets as W

from ._util import strip_control
from .items import Item, NoticeItem, OtherItem, StreamText, TextItem, ThinkingItem, UserItem
from .markdown import escape_text, note_safe_cut, render_markdown, without_notes
from .theme import STATUS_COLOURS

__all__ = ["WidgetSet", "Block", "ChunkedText", "UserBlock", "NoticeBlock", "OtherMessageBlock",
           "MarkdownBlock", "ThinkingBlock", "pill_html", "markdown_split_point", "line_split_point",
           "CHUNK_CHARS"]

CURSOR_HTML = '<span class="pi-cursor"></span>'
# A live tail longer than this is split at a safe point and its head frozen.
CHUNK_CHARS = 6000
_ICONS = {"info": "ℹ", "warning": "⚠", "error": "✖"}
_W = TypeVar("_W", bound=W.Widget)
_I = TypeVar("_I", bound=Item, covariant=True)  # a ToolCard is a Block[Item]


def pill_html(status: str, *, live: bool = False, label: str | None = None, title: str = "") -> str:
    """A coloured status pill (colours from our table; the label and title are escaped)."""
    bg, fg = STATUS_COLOURS.get(status, ("#e8eaed", "#3c4043"))
    dot = '<span class="pi-dot"></span>' if live else ""
    cls = "pi-pill pi-live" if live else "pi-pill"
    tip = f' title="{escape_text(title)}"' if title else ""
    return f'<span class="{cls}"{tip} style="background:{bg};color:{fg}">{dot}{escape_text(label or status)}</span>'


class WidgetSet:
    """Every widget one view created, so ``close()`` can close them all."""

    def __init__(self) -> None:
        self._widgets: list[W.Widget] = []

    def add(self, widget: _W) -> _W:
        self._widgets.append(widget)
        return widget

    def html(self, value: str = "", *classes: str, layout: W.Layout | None = None) -> W.HTML:
        w = self.add(W.HTML(value=value, layout=self.add(layout)) if layout is not None else W.HTML(value=value))
        for c in classes:
            w.add_class(c)
        return w

    def __iter__(self) -> Iterator[W.Widget]:
        return iter(self._widgets)

    def close_all(self) -> None:
        """Close each widget and the models it holds (layout, style), once."""
        seen: set[int] = set()
        for root in list(self._widgets):
            for widget in _walk(root, seen):
                widget.close()
        self._widgets.clear()


def _walk(widget: W.Widget, seen: set[int]) -> Iterator[W.Widget]:
    """``widget`` and every model it refers to: children, layout, style."""
    if id(widget) in seen:
        return
    seen.add(id(widget))
    for name in ("layout", "style"):
        sub = getattr(widget, name, None)
        if isinstance(sub, W.Widget):
            yield from _walk(sub, seen)
    for child in getattr(widget, "children", ()) or ():
        if isinstance(child, W.Widget):
            yield from _walk(child, seen)
    yield widget


class Block(Generic[_I]):
    """Base class: the widgets of one item, built on first ``sync``."""

    def __init__(self, item: _I, widgets: WidgetSet) -> None:
        self.item = item
        self.widgets = widgets
        self.widget: W.Widget | None = None

    @property
    def frozen(self) -> bool:
        return self.item.frozen

    def sync(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


# --- chunked streaming text -------------------------------------------------------------

_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def markdown_split_point(text: str) -> int:
    """Index where ``text`` can be cut into two independently rendered Markdown
    pieces: the start of a non-indented line after a blank line, outside any fenced
    code block and any ``$$`` math block. 0 if there is none."""
    best = 0
    fence: str | None = None
    math = False
    pos = 0
    prev_blank = False
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        if fence is None and not math:
            if prev_blank and stripped and not stripped[0].isspace() and pos > 0:
                best = pos
            m = _FENCE_RE.match(stripped)
            if m:
                fence = m.group(1)
            elif stripped.strip().startswith("$$") and stripped.strip().count("$$") == 1:
                math = True
        elif fence is not None:
            m = _FENCE_RE.match(stripped)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not stripped.strip().strip(fence[0]):
                fence = None
        elif "$$" in stripped:
            math = False
        prev_blank = not stripped.strip()
        pos += len(line)
    # Only cut if the line at ``best`` is complete-looking, i.e. not the very tail
    # that is still being written (it might turn into a fence or an indented line).
    return best if best < len(text) - 1 else 0


def line_split_point(text: str) -> int:
    """Index after the last newline (plain text can be cut at any line)."""
    return text.rfind("\n") + 1


class ChunkedText:
    """A :class:`StreamText` shown as frozen HTML chunks plus one live HTML tail.

    ``sync`` (at most once per flush) takes the parts appended since the last sync,
    renders only the tail and, if the tail is long, freezes its head.
    """

    def __init__(self, stream: StreamText, render: Callable[[str, bool], str], split: Callable[[str], int],
                 widgets: WidgetSet, chunk_chars: int = CHUNK_CHARS, *classes: str) -> None:
        self.stream = stream
        self._render = render
        self._split = split
        self._set = widgets
        self._chunk_chars = chunk_chars
        self._classes = classes
        self._consumed = 0
        self._epoch = stream.epoch
        self._tail = ""
        self._frozen_text: list[str] = []
        self._frozen_widgets: list[W.HTML] = []
        self._live: W.HTML | None = None
        self.box: W.VBox | None = None
        self._structure_dirty = True

    @property
    def text(self) -> str:
        return self.stream.text

    def _take(self) -> None:
        stream = self.stream
        if stream.epoch != self._epoch:  # the text was rewritten: start over with one piece
            self._epoch = stream.epoch
            self._frozen_text.clear()
            self._frozen_widgets.clear()  # still in the WidgetSet: closed with the view
            self._structure_dirty = True
            self._tail, self._consumed = "", 0
        if self._consumed < len(stream.parts):
            self._tail += "".join(stream.parts[self._consumed:])
            self._consumed = len(stream.parts)

    def sync(self) -> W.VBox:
        self._take()
        final = self.stream.final
        if not final and len(self._tail) > self._chunk_chars:
            # (never inside a quoted notebook-context note: each chunk drops a note whole)
            cut = note_safe_cut(self._tail, self._split(self._tail))
            if cut > 0:
                head, self._tail = self._tail[:cut], self._tail[cut:]
                self._frozen_text.append(head)
                # Built with its value: the comm_open carries it, no update follows.
                self._frozen_widgets.append(self._set.html(self._render(head, False), *self._classes))
                self._structure_dirty = True
        value = self._render(self._tail, not final)
        if self._live is None:
            self._live = self._set.html(value, *self._classes)
        elif self._live.value != value:
            self._live.value = value
        if self.box is None:
            self.box = self._set.add(W.VBox([*self._frozen_widgets, self._live]))
            self._structure_dirty = False
        elif self._structure_dirty:
            self.box.children = (*tuple(self._frozen_widgets), self._live)
            self._structure_dirty = False
        return self.box

    @property
    def pieces(self) -> list[str]:
        """The source text of each widget in ``widgets`` (after the last sync)."""
        return [*self._frozen_text, self._tail]

    @property
    def widgets(self) -> list[W.HTML]:
        """The HTML widgets in display order (frozen chunks, then the tail)."""
        return self._frozen_widgets + ([self._live] if self._live is not None else [])


def _render_md(text: str, live: bool) -> str:
    html = render_markdown(without_notes(text))
    if live:
        # Put the cursor inside the last paragraph so it sits at the end of the text.
        html = html[:-5] + CURSOR_HTML + "</p>\n" if html.endswith("</p>\n") else html + CURSOR_HTML
    return f'<div class="pi-md jp-RenderedHTMLCommon jp-RenderedMarkdown">{html}</div>'


def _render_thinking(text: str, live: bool) -> str:
    return f'<div class="pi-thinking">{escape_text(strip_control(without_notes(text)))}</div>'


# --- simple blocks ----------------------------------------------------------------------

class UserBlock(Block[UserItem]):
    """A user, steering or follow-up message."""

    @property
    def text(self) -> str:
        return self.item.text

    def html(self) -> str:
        item = self.item
        extra = f' <span class="pi-note">[{item.images} image(s)]</span>' if item.images else ""
        return (f'<div class="pi-msg pi-user pi-{item.kind}"><span class="pi-label">{item.label}</span>'
                f'<span class="pi-user-text">{escape_text(strip_control(item.text))}</span>{extra}</div>')

    def sync(self) -> None:
        value = self.html()
        if self.widget is None:
            self.widget = self.widgets.html(value)
        elif isinstance(self.widget, W.HTML) and self.widget.value != value:
            self.widget.value = value  # e.g. the image count arrived with the agent's message


class NoticeBlock(Block[NoticeItem]):
    """A one-line notice (compaction, headless approval refusal, errors)."""

    def sync(self) -> None:
        if self.widget is None:
            item = self.item
            self.widget = self.widgets.html(f'<div class="pi-notice pi-{item.level}">{_ICONS[item.level]} '
                                            f"{escape_text(strip_control(item.text))}</div>")


class OtherMessageBlock(Block[OtherItem]):
    """A custom agent message: label + text."""

    def sync(self) -> None:
        if self.widget is None:
            item = self.item
            self.widget = self.widgets.html(f'<div class="pi-msg pi-other"><span class="pi-label">'
                                            f"{escape_text(item.role)}</span>"
                                            f"{escape_text(strip_control(item.text))}</div>")


class MarkdownBlock(Block[TextItem]):
    """Assistant text, rendered as Markdown (math as MathML); live while it streams."""

    def __init__(self, item: TextItem, widgets: WidgetSet) -> None:
        super().__init__(item, widgets)
        self.chunks = ChunkedText(item.stream, _render_md, markdown_split_point, widgets)

    @property
    def text(self) -> str:
        return self.item.text

    def sync(self) -> None:
        box = self.chunks.sync()
        if self.widget is None:
            box.add_class("pi-msg")
            self.widget = box


class ThinkingBlock(Block[ThinkingItem]):
    """Model reasoning: while it streams, a live preview of its last lines above the
    collapsed full text; once done, only the collapsed full text."""

    PREVIEW_LINES = 3

    def __init__(self, item: ThinkingItem, widgets: WidgetSet) -> None:
        super().__init__(item, widgets)
        self.chunks = ChunkedText(item.stream, _render_thinking, line_split_point, widgets)
        self._accordion: W.Accordion | None = None
        self._preview: W.HTML | None = None

    @property
    def text(self) -> str:
        return self.item.text

    def _preview_html(self) -> str:
        text = strip_control(self.item.preview(self.PREVIEW_LINES))
        return f'<div class="pi-thinking pi-thinking-preview"><div>{escape_text(text)}{CURSOR_HTML}</div></div>'

    def sync(self) -> None:
        box = self.chunks.sync()
        title = self.item.title
        if self._accordion is None:
            self._accordion = self.widgets.add(W.Accordion(children=[box], titles=(title,), selected_index=None))
            self._accordion.add_class("pi-thinking-box")
        elif self._accordion.titles != (title,):
            self._accordion.titles = (title,)
        children: tuple[W.Widget, ...] = (self._accordion,)
        if not self.item.frozen and self.item.text.strip():
            value = self._preview_html()
            if self._preview is None:
                self._preview = self.widgets.html(value)
            elif self._preview.value != value:
                self._preview.value = value
            children = (self._accordion, self._preview)
        if self.widget is None:
            self.widget = self.widgets.add(W.VBox(children))
            self.widget.add_class("pi-thinking-block")
        elif isinstance(self.widget, W.VBox) and tuple(self.widget.children) != children:
            self.widget.children = children
