"""UndoBar: the Undo button under a finished run's transcript, and the undo's message beside it.

A widget of its own, shown as a separate output after the run's static transcript (the
transcript itself is Markdown: it has no buttons, in the live notebook or a saved one). The
bar only shows and reports; what may be undone and when is ``magics/undo_offers.py``'s
business, which enables it only while its run is the newest one an undo would restore.

Threading: the click handler may run on a comm thread (see ``view.py``): it only calls
``on_click``, which hops onto the kernel loop.

In a saved notebook a bar that is still live is the widget output plus a text/plain line
(what nbconvert, GitHub and a reader without widgets show): no button there. A bar whose
undo was used, or that can no longer undo, is replaced by its message as Markdown
(``final_bundle``), so what is saved has no widget left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import ipywidgets as W

from ._util import code_ticks, strip_control
from .blocks import WidgetSet
from .markdown import escape_text
from .theme import stylesheet

__all__ = ["UNDO_LABEL", "UndoBar"]

UNDO_LABEL = "Undo this run"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
FALLBACK_TEXT = "(An Undo button for this run, live only while its kernel runs; or %agent undo.)"
_LISTED = 6  # names listed beside the button


class UndoBar:
    """``names``: what the run changed (listed beside the button); ``on_click`` is called
    (from any thread) when the button is clicked."""

    def __init__(self, names: Iterable[str], on_click: Callable[[], None]) -> None:
        self._set = WidgetSet()
        self._on_click = on_click
        names = list(names)
        shown = ", ".join(f"`{n}`" for n in names[:_LISTED])
        more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
        self.summary = f"Put back what this run changed: {shown}{more}."
        style = self._set.html(stylesheet(), "pi-hidden-style")
        self.button = self._set.add(W.Button(
            description=UNDO_LABEL, icon="undo", tooltip="Restore the variables this run changed "
            "to what they were before it (as %agent undo does)",
            layout=self._set.add(W.Layout(width="auto", flex="0 0 auto"))))
        self.button.add_class("pi-undo-button")
        self.button.on_click(lambda _b: self._on_click())
        self.message = self._set.html(_lines_html([self.summary]), "pi-undo-text",
                                      layout=W.Layout(flex="1 1 auto", min_width="0"))
        self.box = self._set.add(W.HBox([style, self.button, self.message],
                                        layout=self._set.add(W.Layout(align_items="center"))))
        self.box.add_class("pi-agent")
        self.box.add_class("pi-undo")
        self.closed = False

    @property
    def enabled(self) -> bool:
        return not self.button.disabled

    def set_enabled(self, enabled: bool, why: str = "") -> None:
        """Enable the button, or disable it and say why beside it."""
        if self.closed:
            return
        self.button.disabled = not enabled
        value = _lines_html([self.summary] if enabled else [self.summary, why] if why else [self.summary])
        if self.message.value != value:
            self.message.value = value

    def say(self, text: str) -> None:
        """A message beside the button (the button stays as it is)."""
        if not self.closed:
            self.message.value = _lines_html(text.splitlines())

    def bundle(self) -> dict[str, object]:
        return {WIDGET_VIEW_MIME: {"version_major": 2, "version_minor": 0, "model_id": self.box.model_id},
                "text/plain": FALLBACK_TEXT}

    @staticmethod
    def final_bundle(text: str) -> dict[str, object]:
        """What replaces the bar once it can no longer undo: its message, as static text."""
        lines = [line for line in text.splitlines() if line.strip()]
        return {"text/markdown": f'<div class="pi-undo-done">{_lines_html(lines)}</div>', "text/plain": text}

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.button.disabled = True
            self._set.close_all()


def _lines_html(lines: list[str]) -> str:
    """One escaped line each, names in backticks as code: the names come from the user's
    namespace and the agent's code, so they are text only."""
    return "".join(f'<div class="pi-undo-line">{code_ticks(escape_text(strip_control(line)))}</div>'
                   for line in lines)
