"""What a widget tree shows, as text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def shown_text(widget: Any, value: Callable[[Any], Any] | None = None) -> str:
    """Every string ``widget`` and its children hold, depth first, one a line.

    ``value`` reads one widget's string: its ``value`` trait unless told (a test with a comm
    log passes ``comms.last_value``: what was last sent to the frontend)."""
    read = value or (lambda w: getattr(w, "value", None))
    seen: list[str] = []

    def walk(w: Any) -> None:
        text = read(w)
        if isinstance(text, str):
            seen.append(text)
        for child in getattr(w, "children", ()) or ():
            walk(child)

    walk(widget)
    return "\n".join(seen)
