"""The views of a run: AgentView (ipywidgets, rendering a plain-data Transcript) and TextView
(terminal, printing events as they come), both ``RunView``s. Module map: ``docs/design/view.md``.

Names are loaded lazily so that ``%load_ext pi_notebook`` does not pay for
ipywidgets, markdown-it and Pygments until a view is first shown.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AgentView", "TextView", "Transcript", "render_event_text", "render_markdown",
           "markdown_for_transcript"]

_LAZY = {
    "AgentView": ".view",
    "TextView": ".text_view",
    "Transcript": ".transcript",
    "render_event_text": ".text",
    "render_markdown": ".markdown",
    "markdown_for_transcript": ".markdown",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value
