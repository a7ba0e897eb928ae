"""The plain-text transcript: the ``text/plain`` beside the static Markdown one.

A terminal, ``jupyter nbconvert --to markdown`` or an agent reading the ``.ipynb`` file takes
``text/plain`` and would otherwise see our HTML frame's tags. This is the same run as text:
the header line, each user row under its label, the answer's Markdown source (it reads as
text), each tool call with its code indented and its outputs, notices with their level.
Images are named, never inlined; a quoted notebook-context note is left out, as everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from .toolcall import ToolItem, fold_traceback
from ._util import fmt_cost, fmt_seconds, reveal_invisible, safe_text, strip_control
from .items import Item, NoticeItem, OtherItem, TextItem, ThinkingItem, UserItem
from .markdown import without_notes
from .transcript import Transcript
from ..tools.output.updates import IMAGE_MIMES

__all__ = ["transcript_text", "TEXT_OUTPUT_CHARS"]

TEXT_OUTPUT_CHARS = 4_000  # per output: head and tail kept, the middle elided


def transcript_text(t: Transcript) -> str:
    parts = [header_text(t)]
    for item in t.items:
        try:
            text = item_text(item)
        except Exception:  # one odd item must not lose the whole transcript
            text = "(this item could not be written)"
        if text:
            parts.append(text)
    return safe_text("\n\n".join(parts)) + "\n"


def header_text(t: Transcript) -> str:
    label, _colour, _why = t.pill()
    bits = ["pi agent", strip_control(t.model_label), label]
    if t.policy:
        bits.append(f"approval: {t.policy}")
    if t.timed:
        bits.append(fmt_seconds(t.elapsed))
    tin, tout, cost = t.usage_now()
    if tin or tout:
        bits.append(f"{tin:,} tokens in / {tout:,} out")
    if cost > 0:
        bits.append(fmt_cost(cost))
    return " · ".join(bits)


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def _cut(text: str, limit: int = TEXT_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - limit:,} characters not shown …]\n{text[-half:]}"


def item_text(item: Item) -> str | None:
    match item:
        case UserItem():
            images = f" [{item.images} image(s)]" if item.images else ""
            return f"{item.label}: {strip_control(item.text.strip())}{images}"
        case NoticeItem():
            return f"[{item.level}] {strip_control(item.text)}"
        case OtherItem():
            return f"[{strip_control(item.role)}] {strip_control(item.text)}"
        case ThinkingItem():
            text = without_notes(item.text).strip()
            return f"({item.title})" if text else None
        case TextItem():
            text = strip_control(without_notes(item.text)).strip()
            return text or None
        case ToolItem():
            return tool_text(item)
    return None


def tool_text(item: ToolItem) -> str:
    head = [f"⚙ {strip_control(item.title)}", item.status]
    if item.duration is not None:
        head.append(fmt_seconds(item.duration))
    lines = [" · ".join(head)]
    code, _lang = item.code()
    if code:
        lines.append(_indent(reveal_invisible(strip_control(code))))
    outputs: list[str] = []
    for out in item.outputs:
        if out.kind == "stream" and out.stream is not None:
            outputs.append(_cut(strip_control(out.stream.text)).rstrip("\n"))
        elif out.kind == "display":
            shown = _display_text(out.data)
            if shown:
                outputs.append(shown)
        elif out.kind == "error" and out.error is not None:
            tb = "\n".join(out.error.traceback).strip() or f"{out.error.ename}: {out.error.evalue}"
            outputs.append(strip_control(fold_traceback(tb)[0]))
    result = item.result_text
    if result and (not item.outputs or item.is_error):
        outputs.append(_cut(strip_control(result)))
    if outputs:
        lines.append(_indent("\n".join(outputs), "  │ "))
    if item.dropped_chars:
        lines.append(f"  … {item.dropped_chars:,} more characters of output not shown")
    return "\n".join(lines)


def _display_text(data: object) -> str | None:
    if not isinstance(data, Mapping):
        return None
    for mime in IMAGE_MIMES:
        if data.get(mime):
            return f"[image: {mime}]"
    plain = data.get("text/plain")
    if isinstance(plain, list):
        plain = "".join(str(p) for p in plain)
    return _cut(strip_control(plain)) if isinstance(plain, str) and plain else None
