"""What the model sees of one ``python`` call: text cut to the budgets, images attached.

``result_content(result, settings)`` builds the tool result's ``content`` from an
``ExecutionResult``: stdout/stderr (terminal-resolved, cut head+tail), displays and the value
by text preference (images attached up to ``max_images``, downscaled to the pixel budget; a
matplotlib figure's words beside its image, or in its place for a model without images),
counts of what was dropped, the error with a short traceback, and the elapsed time. All input
is already redacted; ``format.cut`` redacts again before cutting.
"""

from __future__ import annotations

from typing import Any

from ...ai.types import ImageContent, TextContent
from ..output.format import bundle_text, cut, prepare_image, strip_ansi, terminal_text
from .python_types import ExecutionResult, PythonToolSettings
from ..output.tracebacks import shorten_traceback
from ..output.updates import FIGURE_TEXT_MIME, MODEL_IMAGE_MIMES

__all__ = ["result_content"]


def result_content(result: ExecutionResult, settings: PythonToolSettings,
                   assigned: list[str] | None = None, hint: str | None = None,
                   changes: list[str] | None = None, note: str | None = None) -> list[TextContent | ImageContent]:
    """The model-facing content of an execution (see the module docstring). ``assigned``: what
    the names the code's last statement assigned now hold (namespace.assigned_summary), said
    when the code showed nothing else. ``hint``: a line for the error (tools/output/error_hints.py).
    ``changes``: what the call did to the user's names (review/, one line each). ``note``: a
    line about the code's result (unmatched.py)."""
    parts: list[str] = []
    images: list[ImageContent] = []
    accepts_images = settings.accepts_images()
    out_budget = settings.max_output_chars
    streams = [(n, terminal_text(t)) for n, t in (("stdout", result.stdout), ("stderr", result.stderr)) if t]
    total = sum(len(t) for _, t in streams) or 1
    for name, text in streams:
        budget = max(200, out_budget * len(text) // total) if out_budget > 0 else 0
        parts.append(f"[{name}]\n{cut(text, budget).rstrip()}")

    def add_image(label: str, data: dict[str, Any], image_mime: str) -> None:
        if not accepts_images:
            parts.append(f"[{label}: {image_mime} image, not shown: the model does not take images]")
        elif len(images) >= settings.max_images:
            parts.append(f"[{label}: {image_mime} image omitted: at most {settings.max_images} images per call]")
        else:
            prepared = prepare_image(data[image_mime], image_mime, settings.image_pixel_budget)
            if isinstance(prepared, str):
                parts.append(f"[{label}: {prepared}]")
            else:
                b64, mime, note = prepared
                images.append(ImageContent(data=b64, mime_type=mime))
                parts.append(f"[{label}: image {len(images)} attached ({note})]")

    def add_figure_text(label: str, data: dict[str, Any]) -> None:
        # a figure's words (figure_text.py): read beside its image, or instead of it
        words = data.get(FIGURE_TEXT_MIME)
        if isinstance(words, str) and words.strip():
            parts.append(f"[{label}: the figure's text]\n{cut(strip_ansi(words), settings.max_value_chars).rstrip()}")

    def add_bundle(label: str, data: dict[str, Any], text: str | None) -> None:
        image_mime = next((m for m in MODEL_IMAGE_MIMES if m in data), None)
        if image_mime is not None:
            add_image(label, data, image_mime)
            add_figure_text(label, data)
            return
        if text is None:
            text = bundle_text(data)
        if text is None:
            kinds = ", ".join(sorted(data)) or "empty"
            parts.append(f"[{label}: {kinds} (not shown to the model)]")
            return
        parts.append(f"[{label}]\n{cut(strip_ansi(text), settings.max_value_chars).rstrip()}")

    for i, display in enumerate(result.displays, 1):
        add_bundle(f"display {i}", display.get("data") or {}, None)
    if result.displays_dropped:
        parts.append(f"[{result.displays_dropped} more displays not kept]")
    if result.figures_dropped:
        parts.append(f"[{result.figures_dropped} more figures/images not drawn or kept: at most "
                     f"{settings.max_figures} per call; they were closed]")
    if result.value is not None:
        add_bundle("value", result.value.data, result.value_text)
    if result.error is not None:
        err = result.error
        head = f"{err.ename}: {err.evalue}" if err.evalue else err.ename
        if result.interrupted:
            parts.append(f"[interrupted] {head}")
        else:
            parts.append(f"[error] {head}" + (f" ({hint})" if hint else ""))
        if err.traceback:
            parts.append(shorten_traceback("\n".join(err.traceback), max_lines=40, max_chars=3000,
                                           library_summary=True)[0])
    if not parts:
        parts.append("(no output)" if not assigned else "(no output; assigned)\n" + "\n".join(assigned))
    if note:
        parts.append(note)
    if changes:
        parts.append("[variables changed]\n" + "\n".join(changes))
    parts.append(f"[elapsed {result.elapsed_s:.2f} s]")
    content: list[TextContent | ImageContent] = [TextContent(text="\n\n".join(parts))]
    content.extend(images)
    return content
