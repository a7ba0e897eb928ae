"""A matplotlib figure's own words, as text the model reads beside the image or in its place.

A model that takes no images learns nothing from "[display 1: image/png image, not shown]",
and the run checks of a small model (local/checks.py) read the tool result as the call's
output: a month that is only a tick label of the chart it drew was "a value no output shows".
``figure_text(fig)`` gives, per Axes, its titles, axis labels, tick labels, legend entries and
free texts (annotations, bar and pie labels), and the figure's suptitle, axis labels, legends
and texts.

Read from the Figure object right after it was drawn to show it: by the tool, which draws
the figures agent code left open (``tools/python/execution.py``), or by an image formatter
when the code shows a figure itself (``plt.show()``, ``display(fig)``: the formatter of
``tools/kernel/guards.py``). That draw set the text of every tick it drew, so nothing is
drawn again and the image is never parsed. Duck-typed (no matplotlib import); a part that
cannot be read is left out, and a figure with no words gives "". Each entry is redacted
before it is clipped (``trust/redact.py``).

Bounded: at most ``MAX_LABELS`` entries of a list (the rest counted), ``MAX_ENTRY_CHARS`` per
entry, ``MAX_AXES`` Axes, ``MAX_CHARS`` in all (each cut is said). A label is whatever the
code wrote: line breaks and control characters become spaces, so no label starts a line of
its own, and the text is only ever read as text (``FIGURE_TEXT_MIME``).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any

from ..trust.redact import redact

__all__ = ["FIGURE_TEXT_MIME", "MAX_AXES", "MAX_CHARS", "MAX_ENTRY_CHARS", "MAX_LABELS", "figure_text"]

# The display type of these words, beside the figure's image/png. Untrusted text: the views and
# the export never render it (they keep only the types they know); the model reads it as text.
FIGURE_TEXT_MIME = "text/x-pi-notebook-figure-text"

MAX_LABELS = 30  # entries of one list (the ticks of one axis, a legend, the texts of an Axes)
MAX_ENTRY_CHARS = 80
MAX_AXES = 12
MAX_CHARS = 2_000

# A matplotlib figure, its Axes, Axis, Text and Legend objects: read by duck typing
Artist = Any


def _clean(text: object) -> str:
    """One entry on one line: redacted, control characters and line breaks as spaces, clipped."""
    if not isinstance(text, str):
        return ""
    # bounded before the per-character work (a label can be huge), redacted before the clip
    # that keeps its head: no piece of a secret is left at the cut
    text = redact(text[:4 * MAX_ENTRY_CHARS])
    flat = "".join(" " if unicodedata.category(c)[0] in "CZ" else c for c in text)
    flat = " ".join(flat.split())
    return flat if len(flat) <= MAX_ENTRY_CHARS else flat[:MAX_ENTRY_CHARS - 1] + "…"


def _text_of(artist: Artist) -> str:
    """The text of a matplotlib Text that is drawn, else ""."""
    try:
        if artist is None or not artist.get_visible():
            return ""
        return _clean(artist.get_text())
    except Exception:
        return ""


def _listed(entries: Iterable[str], total: int) -> str:
    """At most MAX_LABELS non-empty entries of ``total`` candidates, the rest counted."""
    kept: list[str] = []
    for entry in entries:
        if entry:
            kept.append(entry)
            if len(kept) == MAX_LABELS:
                break
    if not kept:
        return ""
    text = " | ".join(kept)
    more = total - len(kept)
    if len(kept) == MAX_LABELS and more > 0:
        text += f" (and up to {more:,} more, not listed)"
    return text


def _tick_labels(axis: Artist) -> str:
    """The major tick labels the last draw showed: those inside the view, in order."""
    try:
        if axis is None or not axis.get_visible():
            return ""
        locs = list(axis.get_majorticklocs())
        low, high = sorted(float(v) for v in axis.get_view_interval())
        slack = (high - low) * 1e-9
        in_view = [i for i, loc in enumerate(locs) if low - slack <= float(loc) <= high + slack]
        ticks = axis.get_major_ticks(len(locs))  # made by the draw: no new ticks here
    except Exception:
        return ""

    def labels() -> Iterable[str]:
        for i in in_view:
            tick = ticks[i]
            yield _text_of(getattr(tick, "label1", None)) or _text_of(getattr(tick, "label2", None))

    return _listed(labels(), len(in_view))


def _texts(artists: Iterable[Artist], total: int) -> str:
    return _listed((_text_of(a) for a in artists), total)


def _legend(legend: Artist) -> str:
    if legend is None:
        return ""
    try:
        if not legend.get_visible():
            return ""
        entries = list(legend.get_texts())
        title = _text_of(legend.get_title())
    except Exception:
        return ""
    listed = _texts(entries, len(entries))
    return f"{title}: {listed}" if title and listed else title or listed


def _call(obj: Artist, name: str, *args: object) -> str:
    """What ``obj.name(*args)`` gives as an entry: a string, or the text of a Text it returns."""
    method = getattr(obj, name, None)
    if method is None:
        return ""
    try:
        value = method(*args)
    except Exception:
        return ""
    return _clean(value) if isinstance(value, str) else _text_of(value)


def _axes_lines(ax: Artist) -> list[str]:
    heads: list[str] = []
    titles = [t for t in (_call(ax, "get_title", loc) for loc in ("left", "center", "right")) if t]
    if titles:
        heads.append("title: " + " | ".join(titles))
    rows: list[str] = []
    if getattr(ax, "axison", True):
        for name in ("x", "y", "z"):
            axis = getattr(ax, f"{name}axis", None)
            if axis is None:
                continue
            label = _call(ax, f"get_{name}label")
            if label:
                heads.append(f"{name} label: {label}")
            ticks = _tick_labels(axis)
            if ticks:
                # the scale or offset matplotlib writes at the axis's end ("1e6"): the ticks
                # read alone would be off by it
                offset = _call(axis, "get_offset_text")
                rows.append(f"  {name} ticks: {ticks}" + (f" (offset text: {offset})" if offset else ""))
    legend = _legend(getattr(ax, "legend_", None))
    if legend:
        rows.append(f"  legend: {legend}")
    texts = list(getattr(ax, "texts", ()))
    listed = _texts(texts, len(texts))
    if listed:
        rows.append(f"  texts: {listed}")
    if not heads and not rows:
        return []
    return ["; ".join(heads), *rows]


def _bounded(lines: list[str]) -> str:
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        if used + len(line) + 1 > MAX_CHARS:
            rest = sum(len(x) + 1 for x in lines[i:])
            out.append(f"[figure text cut: {rest:,} more characters]")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def figure_text(fig: Artist) -> str:
    """The words of a drawn figure, one entry list per line (module doc); "" when it has none."""
    lines: list[str] = []
    heads = [f"{what}: {text}" for what, text in (
        ("title", _call(fig, "get_suptitle")), ("x label", _call(fig, "get_supxlabel")),
        ("y label", _call(fig, "get_supylabel"))) if text]
    if heads:
        lines.append("figure " + "; ".join(heads))
    for legend in list(getattr(fig, "legends", ()))[:MAX_LABELS]:
        text = _legend(legend)
        if text:
            lines.append(f"figure legend: {text}")
    # (the suptitle and the figure's axis labels are among its texts: said once, above)
    said = {_call(fig, name) for name in ("get_suptitle", "get_supxlabel", "get_supylabel")}
    fig_texts = [t for t in getattr(fig, "texts", ()) if _text_of(t) not in said]
    listed = _texts(fig_texts, len(fig_texts))
    if listed:
        lines.append(f"figure texts: {listed}")
    try:
        axes = [ax for ax in fig.axes if ax.get_visible()]
    except Exception:
        axes = []
    for number, ax in enumerate(axes[:MAX_AXES], 1):
        axes_lines = _axes_lines(ax)
        if axes_lines:
            head = axes_lines[0]
            lines.append(f"axes {number}" + (f": {head}" if head else ""))
            lines.extend(axes_lines[1:])
    if len(axes) > MAX_AXES:
        lines.append(f"[{len(axes) - MAX_AXES} more axes not read]")
    return _bounded(lines)
