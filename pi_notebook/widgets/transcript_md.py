"""The static Markdown transcript that replaces the live view when a run ends.

It is saved in the notebook and rendered by JupyterLab (trusted Markdown allows raw
HTML, unsanitised), nbconvert, GitHub and nbviewer, so:

- model text goes through ``markdown_for_transcript`` (no raw HTML, no remote image,
  no ``javascript:`` link; math as our own sanitised MathML);
- each item is *sealed*: a code fence it left open is closed, so one item's text
  cannot swallow the rest of the transcript; what still would is shown as code;
- agent code and text output are fenced code blocks (monospaced everywhere), each
  fence longer than any backtick run inside;
- invalid text (lone surrogates) is replaced, never an error.
"""

from __future__ import annotations

import html
import logging
import re
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt

from ._util import B64_RE, fence_for, fmt_cost, fmt_seconds, reveal_invisible, safe_text, strip_control
from .items import Item, NoticeItem, OtherItem, TextItem, ThinkingItem, UserItem
from .markdown import markdown_for_transcript
from .toolcall import ToolItem, fold_traceback
from .transcript import Transcript

__all__ = ["transcript_markdown", "seal", "fenced", "TRANSCRIPT_OUTPUT_CHARS", "MONOSPACE_STYLE"]

_log = logging.getLogger(__name__)
# Per output run: head and tail, the middle elided.
TRANSCRIPT_OUTPUT_CHARS = 10_000
_IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_SENTINEL = "pi-transcript-sentinel"
_ANY_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.M)
# nbconvert's HTML (so nbviewer) styles a <pre> in a Markdown *output* with
# `.jp-OutputArea-output pre { font-family: inherit }`, which comes after the code-font rule:
# fenced blocks in the transcript came out proportional there (DataFrame columns did not
# line up). This one rule, ours and constant, restores what JupyterLab itself shows.
# Sanitising renderers (an untrusted notebook in Lab, GitHub) drop a <style> with its text.
# (nbconvert wraps a fence in div.highlight, JupyterLab does not: that rule only spaces the
# blocks in nbconvert's page, which otherwise run into each other.)
MONOSPACE_STYLE = ("<style>.jp-OutputArea-output.jp-RenderedMarkdown pre "
                   "{ font-family: var(--jp-code-font-family, monospace); line-height: 1.4; } "
                   ".jp-OutputArea-output.jp-RenderedMarkdown div.highlight { margin: 0 0 1em 0; }"
                   "</style>")
_ICONS = {"info": "ℹ", "warning": "⚠", "error": "✖"}


def transcript_markdown(t: Transcript) -> str:
    parts = [header_markdown(t)]
    for item in t.items:
        try:
            md = item_markdown(item)
        except Exception:  # one odd item must not lose the whole transcript
            _log.exception("transcript: could not write %s", type(item).__name__)
            md = "*(this item could not be written)*"
        if md:
            parts.append(seal(safe_text(md)))
    if any(_ANY_FENCE_RE.search(part) for part in parts):
        parts.append(MONOSPACE_STYLE)
    return "\n\n".join(parts) + "\n"


def header_markdown(t: Transcript) -> str:
    tin, tout, cost = t.usage_now()
    bits = [f"**{markdown_for_transcript(t.model_label)}**", t.status]
    if t.timed:
        bits.append(fmt_seconds(t.elapsed))
    if t.policy:
        bits.append(f"approval: {markdown_for_transcript(t.policy)}")
    if tin or tout:
        bits.append(f"{tin:,} tokens in / {tout:,} out")
    if cost > 0:
        bits.append(fmt_cost(cost))
    if t.context_used and t.context_window and t.context_used / t.context_window >= 0.01:
        bits.append(f"context {t.context_used / t.context_window:.0%}")
    return safe_text("pi agent · " + " · ".join(bits))


def item_markdown(item: Item) -> str | None:
    match item:
        case UserItem():
            body = markdown_for_transcript(item.text.strip() or " ")
            quoted = "\n".join("> " + line if line else ">" for line in body.split("\n"))
            extra = f"\n> *[{item.images} image(s)]*" if item.images else ""
            return f"> **{item.label}:**\n{quoted}{extra}"
        case NoticeItem():
            return f"> {_ICONS[item.level]} " + markdown_for_transcript(item.text).replace("\n", "\n> ")
        case OtherItem():
            return f"*{markdown_for_transcript(item.role)}:* " + markdown_for_transcript(item.text)
        case ThinkingItem():
            return _thinking_markdown(item)
        case TextItem():
            text = item.text.strip()
            return markdown_for_transcript(text) if text else None
        case ToolItem():
            return tool_markdown(item)
    return None


def _inert(text: str) -> str:
    """Escaped text for inside our own HTML block: no Markdown or TeX pass touches it."""
    return html.escape(text, quote=False).replace("$", "&#36;").replace("\n", "<br>\n")


def _thinking_markdown(item: ThinkingItem) -> str | None:
    text = item.text.strip()
    if not text:
        return None
    # Paragraphs, not <pre>: renderers wrap them at word boundaries. Each paragraph is
    # an HTML block of its own (no blank line inside one), its text escaped.
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", strip_control(text)) if p.strip()]
    body = "\n\n".join(f"<p>{_inert(p)}</p>" for p in paragraphs)
    return (f"<details><summary>{html.escape(item.title)}</summary>\n\n{body}\n\n</details>")


def tool_markdown(item: ToolItem) -> str:
    name = markdown_for_transcript(item.tool_name or "tool")
    head = f"**⚙ {name}** · {item.status}"
    if item.duration is not None:
        head += f" · {fmt_seconds(item.duration)}"
    parts = [head]
    code, lang = item.code()
    if code:
        parts.append(fenced(reveal_invisible(code), lang))
    for out in item.outputs:
        if out.kind == "stream" and out.stream is not None:
            parts.append(fenced(_head_tail(out.stream.text, TRANSCRIPT_OUTPUT_CHARS), "text"))
        elif out.kind == "display":
            md = display_markdown(out.data)
            if md:
                parts.append(md)
        elif out.kind == "error" and out.error is not None:
            parts.append(error_markdown(out.error.ename, out.error.evalue, "\n".join(out.error.traceback)))
    if item.dropped_chars:
        parts.append(f"*… {item.dropped_chars:,} more characters of output not shown*")
    text = item.result_text
    if text and (not item.outputs or item.is_error):
        parts.append(fenced(_head_tail(text, TRANSCRIPT_OUTPUT_CHARS), "text"))
    return "\n\n".join(parts)


def display_markdown(data: dict[str, Any]) -> str | None:
    """An image (validated base64) or the text/plain of a display; never its HTML."""
    for mime in _IMAGE_MIMES:
        payload = data.get(mime)
        if isinstance(payload, list):
            payload = "".join(payload)
        if isinstance(payload, str) and payload and B64_RE.match(payload):
            return f"![output](data:{mime};base64,{''.join(payload.split())})"
    plain = data.get("text/plain")
    if isinstance(plain, list):
        plain = "".join(plain)
    if isinstance(plain, str) and plain:
        return fenced(_head_tail(strip_control(plain), TRANSCRIPT_OUTPUT_CHARS), "text")
    return None


def error_markdown(ename: str, evalue: str, traceback: str) -> str:
    text = traceback.strip() or f"{ename}: {evalue}"
    summary, folded = fold_traceback(text)
    md = fenced(summary, "text")
    if folded:
        md += ("\n\n<details><summary>Full traceback</summary>\n\n"
               f"{fenced(_head_tail(strip_control(text), TRANSCRIPT_OUTPUT_CHARS), 'text')}\n\n</details>")
    return md


def fenced(text: str, lang: str) -> str:
    fence = fence_for(text)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{lang}\n{body}{fence}"


def _head_tail(text: str, limit: int) -> str:
    """``text`` if it fits, else its head and tail around a note of what was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n… [{cut:,} characters not shown] …\n{text[-half:]}"


# --- sealing --------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _html_parser() -> MarkdownIt:
    # What JupyterLab does with trusted Markdown: CommonMark + GFM tables, raw HTML on.
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def open_fence(md: str) -> str | None:
    """The closing fence ``md`` needs if it ends inside a fenced code block."""
    fence: str | None = None
    for line in md.split("\n"):
        m = _FENCE_RE.match(line)
        if fence is None:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = m.group(1)
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2).strip():
            fence = None
    return fence


def _swallows(md: str) -> bool:
    """True if a paragraph written after ``md`` would not be a paragraph of its own."""
    tokens = _html_parser().parse(md + "\n\n" + _SENTINEL + "\n")
    return not (len(tokens) >= 3 and tokens[-3].type == "paragraph_open" and tokens[-3].level == 0
                and tokens[-2].content == _SENTINEL)


def seal(md: str) -> str:
    """``md`` closed off: an open fence is closed; if anything else would still run on
    into what follows, the whole item is shown as code instead."""
    fence = open_fence(md)
    if fence is not None:
        md = md.rstrip("\n") + "\n" + fence
    if _swallows(md):
        return fenced(md, "text")
    return md
