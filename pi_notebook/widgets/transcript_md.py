"""The static Markdown transcript that replaces the live view when a run ends.

It is saved in the notebook and rendered by JupyterLab (trusted Markdown allows raw
HTML, unsanitised), nbconvert, GitHub and nbviewer, so:

- it keeps the live view's frame (box, header line, "You" row, tool cards with a code box
  and an output box) but not its scroll box: a finished run reads as a document, full
  height from its first line; our own escaped HTML blocks around the items' Markdown,
  styled by one constant stylesheet (``TRANSCRIPT_STYLE``);
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

from markdown_it import MarkdownIt

from ..tools.output.updates import IMAGE_MIMES

from ._util import B64_RE, code_ticks, fence_for, fmt_cost, fmt_seconds, reveal_invisible, safe_text, strip_control
from .items import Item, NoticeItem, OtherItem, TextItem, ThinkingItem, UserItem
from .markdown import markdown_for_transcript, without_notes
from .protocol import MimeBundle
from .theme import STATUS_COLOURS
from .toolcall import ToolItem, fold_traceback
from .transcript import Transcript

__all__ = ["transcript_markdown", "seal", "fenced", "TRANSCRIPT_OUTPUT_CHARS", "TRANSCRIPT_STYLE"]

_log = logging.getLogger(__name__)
# Per output run: head and tail, the middle elided.
TRANSCRIPT_OUTPUT_CHARS = 10_000
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_SENTINEL = "pi-transcript-sentinel"
# The transcript keeps the live view's frame: the same bordered box, header line, "You"
# row and tool cards, so the end of a run does not jump sideways. It has no height limit:
# the live scroll box keeps the newest text in view while it streams, but a finished run
# is read (and printed, and saved as PDF) from the question down, so it is one document.
# A wide table scrolls inside its own box. One constant stylesheet, ours, scoped to .pi-transcript; renderers
# that sanitise (an untrusted notebook in Lab, GitHub) drop it with its text and keep the
# plain structure.
# nbconvert's HTML (so nbviewer) styles a <pre> in a Markdown *output* with
# `.jp-OutputArea-output pre { font-family: inherit }`, placed after the code-font rule:
# the code rules below are more specific, so fenced blocks stay monospaced there too.
TRANSCRIPT_STYLE = """<style>
.pi-transcript { border: 1px solid var(--jp-border-color2, #e1e4e8); border-radius: 8px;
  padding: 6px 10px 8px 10px; margin: 0; background: var(--jp-layout-color0, #fff); box-sizing: border-box;
  max-width: 100%; min-width: 0; }
.jp-RenderedHTMLCommon:has(> .pi-transcript) { padding-right: 0; }
.pi-transcript .pi-head { display: flex; align-items: center; gap: 10px; flex-wrap: wrap; font-size: 12px;
  color: var(--jp-content-font-color2, #57606a); padding: 2px 0 6px 0; margin: 0; line-height: 1.5;
  font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  /* the live header row's height (it holds the Abort button) */
  min-height: 31.5px; box-sizing: border-box; }
.pi-transcript .pi-sep { display: none; }
.pi-transcript .pi-model, .pi-transcript .pi-tool-name { font-weight: 600;
  color: var(--jp-content-font-color1, #1f2328);
  font-family: var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, monospace); }
.pi-transcript .pi-pill { display: inline-block; border-radius: 999px; padding: 1px 9px; font-size: 11px;
  font-weight: 600; letter-spacing: .02em; white-space: nowrap; line-height: 1.5; }
.pi-transcript .pi-metric { white-space: nowrap; font-variant-numeric: tabular-nums; }
/* a finished transcript is a document: full height from its first line, no inner scroll
   box, so it reads from the question down and prints whole */
.pi-transcript .pi-body { display: block; min-width: 0; max-width: 100%; overflow: visible; }
/* its own block formatting context, as the live scroll box's flex item was: the first row's
   margin stays inside, so the question sits where it sat live */
.pi-transcript .pi-body > div { display: flow-root; min-width: 0; max-width: 100%; }
.pi-transcript .pi-user { border-left: 3px solid #6b8afd; padding: 2px 0 2px 10px; margin: 6px 0 2px 0;
  background: var(--jp-layout-color1, #f8f9fb); border-radius: 0 6px 6px 0; line-height: 1.5;
  font-family: var(--jp-ui-font-family, system-ui, sans-serif); font-size: var(--jp-content-font-size1, 13px); }
.pi-transcript .pi-user.pi-steer { border-left-color: #f59e0b; }
.pi-transcript .pi-user.pi-followup { border-left-color: #10b981; }
.pi-transcript .pi-user.pi-check { border-left-color: #8c959f; }
.pi-transcript .pi-user.pi-check .pi-label { text-transform: none; letter-spacing: 0; }
.pi-transcript .pi-label { font-size: 10.5px; font-weight: 700; text-transform: uppercase; letter-spacing: .06em;
  color: var(--jp-content-font-color2, #57606a); margin-right: 6px; }
.pi-transcript .pi-user-text { white-space: pre-wrap; word-break: break-word; }
.pi-transcript .pi-notice { font-size: 12px; padding: 3px 9px; border-radius: 6px; margin: 4px 0;
  background: var(--jp-layout-color2, #f1f3f5); color: var(--jp-content-font-color2, #57606a); }
.pi-transcript .pi-notice.pi-warning { background: #fff8e1; color: #7a5d00; }
.pi-transcript .pi-notice.pi-error { background: #ffebee; color: #b71c1c; white-space: pre-wrap; }
.pi-transcript table { display: block; max-width: 100%; overflow-x: auto; margin-left: 0; margin-right: 0; }
.pi-transcript .pi-tool { border: 1px solid var(--jp-border-color2, #e1e4e8); border-radius: 7px;
  padding: 5px 10px 6px 10px; margin: 6px 0; background: var(--jp-layout-color0, #fff); }
.pi-transcript .pi-tool.pi-tool-error { border-color: #f3c4c4; }
.pi-transcript .pi-tool-head { display: flex; align-items: center; gap: 2px 8px; flex-wrap: wrap; font-size: 12px;
  margin: 0 0 3px 0;
  color: var(--jp-content-font-color2, #57606a); font-family: var(--jp-ui-font-family, system-ui, sans-serif); }
.pi-transcript .pi-tool > :last-child { margin-bottom: 0; }
.pi-transcript pre, .jp-RenderedHTMLCommon .pi-transcript pre { margin: 0 0 .6em 0; padding: 7px 10px;
  border-radius: 6px; background: var(--jp-cell-editor-background, #f6f8fa);
  border: 1px solid var(--jp-border-color3, #eaeef2);
  font-family: var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, monospace);
  font-size: var(--jp-code-font-size, 12.5px); line-height: 1.45; overflow-x: auto; white-space: pre; }
.pi-transcript pre code { background: none; padding: 0; font-size: inherit; }
/* a tool's code wraps, as in the live card: the document shows (and prints) all of it */
.pi-transcript .pi-tool pre, .jp-RenderedHTMLCommon .pi-transcript .pi-tool pre { white-space: pre-wrap;
  overflow-wrap: anywhere; word-break: normal; }
.pi-transcript div.highlight { margin: 0 0 .6em 0; background: none; }
.pi-transcript div.highlight pre { margin: 0; }
.pi-transcript .pi-outbox { margin: 4px 0 0 0; border-radius: 6px; border: 1px solid var(--jp-border-color3, #eaeef2);
  background: var(--jp-layout-color1, #fbfbfc); padding: 2px 0; }
.pi-transcript .pi-outbox pre, .jp-RenderedHTMLCommon .pi-transcript .pi-outbox pre { margin: 0; border: none;
  border-radius: 0; background: transparent; padding: 1px 10px; white-space: pre-wrap; word-break: break-word; }
.pi-transcript .pi-outbox div.highlight { margin: 0; }
.pi-transcript .pi-outbox img { margin: 4px 10px; max-width: calc(100% - 20px); height: auto; display: block; }
.pi-transcript .pi-outbox p { margin: 0; }
.pi-transcript .pi-err pre, .jp-RenderedHTMLCommon .pi-transcript .pi-err pre { background: #fff5f5; color: #9a2c2c; }
.pi-transcript details > summary { font-size: 11.5px; cursor: pointer; color: var(--jp-content-font-color3, #8c959f); }
.pi-transcript .pi-ns { font-size: 12px; margin: 4px 0; overflow-wrap: anywhere; }
.pi-transcript .pi-outbox details > summary { padding: 2px 10px; }
.pi-transcript .pi-thinking { font-size: 12px; font-style: italic; color: var(--jp-content-font-color3, #8c959f);
  border-left: 2px solid var(--jp-border-color2, #e1e4e8); padding-left: 8px; }
.pi-transcript .pi-thinking > summary { padding: 3px 0; }
body[data-jp-theme-light="false"] .pi-transcript pre { background: #0d1117; border-color: #30363d; }
body[data-jp-theme-light="false"] .pi-transcript .pi-outbox pre { background: transparent; }
body[data-jp-theme-light="false"] .pi-transcript .pi-err pre { background: #3b1f22; color: #ffb3b3; }
body[data-jp-theme-light="false"] .pi-transcript .pi-notice.pi-warning { background: #3a3117; color: #f2dc8c; }
body[data-jp-theme-light="false"] .pi-transcript .pi-notice.pi-error { background: #3b1f22; color: #ffb3b3; }
body[data-jp-theme-light="false"] .pi-transcript .pi-pill { filter: saturate(.8) brightness(.92); }
</style>"""
_ICONS = {"info": "ℹ", "warning": "⚠", "error": "✖"}
_OPEN = '<div class="pi-body"><div>'
_CLOSE = "</div></div></div>"


def transcript_markdown(t: Transcript) -> str:
    """The transcript: one HTML frame (header line, body) around the items'
    Markdown; each HTML block stands alone (blank lines around it), so CommonMark
    renderers read the Markdown between them as Markdown."""
    parts = []
    for item in t.items:
        try:
            md = item_markdown(item)
        except Exception:  # one odd item must not lose the whole transcript
            _log.exception("transcript: could not write %s", type(item).__name__)
            md = "*(this item could not be written)*"
        if md:
            parts.append(seal(safe_text(md)))
    head = f'<div class="pi-transcript">\n{header_html(t)}\n{_OPEN}'
    body = "\n\n".join(parts) if parts else "<!-- -->"
    return f"{head}\n\n{body}\n\n{_CLOSE}\n\n{TRANSCRIPT_STYLE}\n"


def _inert(text: str, br: str = "<br>\n") -> str:
    """Escaped text for inside our own HTML block: no Markdown or TeX pass touches it."""
    return html.escape(text, quote=False).replace("$", "&#36;").replace("\n", br)


def _attr(text: str) -> str:
    return html.escape(text, quote=True).replace("$", "&#36;")


def _pill(status: str, label: str | None = None, title: str = "") -> str:
    bg, fg = STATUS_COLOURS.get(status, ("#e8eaed", "#3c4043"))
    tip = f' title="{_attr(title)}"' if title else ""
    return f'<span class="pi-pill"{tip} style="background:{bg};color:{fg}">{_inert(label or status)}</span>'


_SEP = '<span class="pi-sep"> · </span>'


def header_html(t: Transcript) -> str:
    """The live view's header line (model, status pill, metrics) as one line of HTML;
    its text reads "pi agent · model · done · 1.2s · …" where styles are dropped."""
    tin, tout, cost = t.usage_now()
    label, colour, why = t.pill()
    bits = [f'<span class="pi-model">{_inert(strip_control(t.model_label))}</span>', _pill(colour, label, why)]
    if t.policy:
        bits.append(f'<span class="pi-metric">approval: {_inert(strip_control(t.policy))}</span>')
    if t.timed:
        bits.append(f'<span class="pi-metric">{fmt_seconds(t.elapsed)}</span>')
    if tin or tout:
        bits.append(f'<span class="pi-metric">{tin:,} tokens in / {tout:,} out</span>')
    if cost > 0:
        bits.append(f'<span class="pi-metric">{_inert(fmt_cost(cost))}</span>')
    if t.context_used and t.context_window and t.context_used / t.context_window >= 0.01:
        bits.append(f'<span class="pi-metric">context {t.context_used / t.context_window:.0%}</span>')
    return safe_text(f'<div class="pi-head"><span class="pi-sep">pi agent · </span>{_SEP.join(bits)}</div>')


def item_markdown(item: Item) -> str | None:
    match item:
        case UserItem():
            extra = (f' <span class="pi-note">[{item.images} image(s)]</span>' if item.images else "")
            text = _inert(strip_control(item.text.strip()) or " ", br="<br>")
            return (f'<div class="pi-msg pi-user pi-{item.kind}"><span class="pi-label">{item.label}</span>'
                    f'<span class="pi-sep">: </span><span class="pi-user-text">{text}</span>{extra}</div>')
        case NoticeItem():
            return (f'<div class="pi-notice pi-{item.level}">{_ICONS[item.level]} '
                    f"{_inert(strip_control(item.text), br='<br>')}</div>")
        case OtherItem():
            return (f'<div class="pi-msg pi-other"><span class="pi-label">{_inert(item.role)}</span> '
                    f"{_inert(strip_control(item.text), br='<br>')}</div>")
        case ThinkingItem():
            return _thinking_markdown(item)
        case TextItem():
            text = without_notes(item.text).strip()
            return markdown_for_transcript(text) if text else None
        case ToolItem():
            return tool_markdown(item)
    return None


def _thinking_markdown(item: ThinkingItem) -> str | None:
    text = without_notes(item.text).strip()
    if not text:
        return None
    # Paragraphs, not <pre>: renderers wrap them at word boundaries. Each paragraph is
    # an HTML block of its own (no blank line inside one), its text escaped.
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", strip_control(text)) if p.strip()]
    body = "\n\n".join(f"<p>{_inert(p)}</p>" for p in paragraphs)
    return (f'<details class="pi-thinking"><summary>{html.escape(item.title)}</summary>\n\n{body}\n\n</details>')


def tool_markdown(item: ToolItem) -> str:
    """A tool card: head line, the code (a fenced block in a box), and the outputs in a
    box of their own below it, as in the live card."""
    bits = [f'<span class="pi-tool-name">⚙ {_inert(strip_control(item.title))}</span>',
            _pill(item.status)]
    if item.duration is not None:
        bits.append(f'<span class="pi-metric">{fmt_seconds(item.duration)}</span>')
    error = " pi-tool-error" if item.is_error and item.frozen else ""
    parts = [f'<div class="pi-tool{error}">', f'<div class="pi-tool-head">{_SEP.join(bits)}</div>']
    code, lang = item.code()
    if code:
        parts.append(fenced(reveal_invisible(code), lang))
    outputs: list[str] = []
    for out in item.outputs:
        if out.kind == "stream" and out.stream is not None:
            md = fenced(_head_tail(out.stream.text, TRANSCRIPT_OUTPUT_CHARS), "text")
            outputs.append(f'<div class="pi-err">\n\n{md}\n\n</div>' if out.name == "stderr" else md)
        elif out.kind == "display":
            shown = display_markdown(out.data)
            if shown:
                outputs.append(shown)
        elif out.kind == "error" and out.error is not None:
            outputs.append(error_markdown(out.error.ename, out.error.evalue, "\n".join(out.error.traceback)))
    text = item.result_text
    if text and (not item.outputs or item.is_error):
        md = fenced(_head_tail(text, TRANSCRIPT_OUTPUT_CHARS), "text")
        outputs.append(f'<div class="pi-err">\n\n{md}\n\n</div>' if item.is_error else md)
    if outputs:
        parts += ['<div class="pi-outbox">', *outputs, "</div>"]
    if item.dropped_chars:
        parts.append(f"*… {item.dropped_chars:,} more characters of output not shown*")
    changed = item.details.namespace if item.details is not None else []
    if changed:
        parts.append('<div class="pi-ns"><b>Variables changed:</b><br>\n'
                     + "<br>\n".join(code_ticks(_inert(strip_control(line))) for line in changed) + "</div>")
    parts.append("</div>")
    return "\n\n".join(parts)


def display_markdown(data: MimeBundle) -> str | None:
    """An image (validated base64) or the text/plain of a display; never its HTML."""
    for mime in IMAGE_MIMES:
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
    return f'<div class="pi-err">\n\n{md}\n\n</div>'



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
