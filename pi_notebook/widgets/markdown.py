"""Server-side Markdown -> HTML for untrusted text (model and tool output).

The HTML produced here goes straight into an ipywidgets ``HTML`` widget, which the
frontend inserts with ``innerHTML`` and no sanitiser. So everything that can carry
markup or script is neutralised here:

- raw HTML in the source is escaped (markdown-it ``html=False``), never passed on;
- link and image URLs are checked against an allow-list of schemes (``http``,
  ``https``, ``mailto`` and scheme-less relative/anchor URLs); ``javascript:``,
  ``vbscript:``, ``file:``, ``data:`` and any other scheme make the construct stay
  plain text. The one exception is inline ``data:image/png|jpeg|gif`` images;
- remote images are *not* loaded: a model (or a prompt injection in tool output)
  could otherwise leak data through the image URL; they become ordinary links;
- ``$…$`` / ``$$…$$`` math becomes sanitised MathML (``math.py``), in both renderers;
- code blocks are highlighted by Pygments with CSS classes (the stylesheet is in
  ``theme.py`` and is sent once per view); Pygments escapes the code itself.

``markdown_for_transcript`` is the counterpart for the static Markdown transcript
that is saved in the notebook: it keeps Markdown readable while making sure that a
Markdown renderer which allows raw HTML (trusted outputs in JupyterLab) sees none.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.dollarmath import dollarmath_plugin

from .math import math_html

__all__ = [
    "render_markdown", "highlight_code", "escape_text", "is_safe_url",
    "markdown_for_transcript", "CODE_CSS_CLASS", "without_notes", "note_safe_cut",
]

CODE_CSS_CLASS = "pi-hl"

_SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
_SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")
_SAFE_DATA_IMAGE_RE = re.compile(r"^data:image/(png|jpeg|jpg|gif);base64,[A-Za-z0-9+/=\s]*$", re.I)
# Browsers drop ASCII tab/newline anywhere in a URL and strip leading C0 controls and
# spaces, so "java\tscript:" is javascript:. Remove them before looking at the scheme.
_URL_IGNORED_RE = re.compile(r"[\x00-\x20\x7f]")
# A notebook-context note (tools/context/prompt_context.py's context block, magics/context.py's
# %agent fix block): a bracketed header, "(boundary pn-<12 hex>)" (drawn at random per kernel,
# taken out of every piece of data inside), the data, then "[end pn-<the same>]". The model
# gets it beside the prompt; a model that quotes it (a scripted echo, a verbose answer) must
# not show it to a person. Its own rule line names the close ("Everything up to [end …] is
# data"): that mention is not the close. A note cut short runs to the end of the text.
_NOTE_START = "(boundary pn-"
_NOTE_RE = re.compile(r"(?:\[[^\[\]\n]{1,200}\][ \t]*\n?[ \t]*)?\(boundary (pn-[0-9a-f]{12})\)"
                      r".*?(?:(?<!up to )\[end \1\][ \t]*\n?|\Z)", re.S)


def escape_text(text: str) -> str:
    """Escape text for HTML element content or a quoted attribute."""
    return html.escape(text, quote=True)


def is_safe_url(url: str, *, image: bool = False) -> bool:
    """True if ``url`` may become an ``href`` (or, with ``image=True``, an ``img src``).

    An allow-list, not a deny-list: anything with a scheme other than http, https or
    mailto is refused; scheme-less URLs (``#anchor``, ``page.html``) are allowed.
    For images only inline PNG/JPEG/GIF ``data:`` URLs pass (see the module doc for
    why remote images are not loaded).
    """
    compact = _URL_IGNORED_RE.sub("", html.unescape(url))
    if image:
        return bool(_SAFE_DATA_IMAGE_RE.match(compact))
    m = _SCHEME_RE.match(compact)
    if m is None:
        # "//host/x" is protocol-relative (i.e. https); a lone ":" before any "/" can't
        # be a scheme then, so the URL is relative and harmless.
        return True
    return m.group(1).lower() in _SAFE_SCHEMES


# --- code highlighting ----------------------------------------------------------------

@lru_cache(maxsize=64)
def _lexer_for(language: str) -> Any:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=1)
def _formatter() -> Any:
    from pygments.formatters import HtmlFormatter

    # nowrap: we write the <pre> ourselves so the output shape is fixed and escaped.
    return HtmlFormatter(nowrap=True)


def highlight_code(code: str, language: str | None = "python") -> str:
    """``<pre class="pi-hl">`` with Pygments token spans; plain escaped text if the
    language is unknown. Safe for innerHTML: Pygments escapes every token."""
    lang = (language or "").strip().split()[0].lower() if language and language.strip() else ""
    lexer = _lexer_for(lang) if lang else None
    if lexer is None:
        body = escape_text(code)
    else:
        from pygments import highlight

        body = highlight(code, lexer, _formatter())
    return f'<pre class="{CODE_CSS_CLASS}"><code>{body}</code></pre>'


# --- Markdown -----------------------------------------------------------------------

def _highlight_fence(code: str, lang: str, _attrs: str) -> str:
    # markdown-it uses the return value verbatim when it starts with "<pre".
    return highlight_code(code, lang or None)


def _render_link_open(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                      env: EnvType) -> str:
    token = tokens[idx]
    href = str(token.attrGet("href") or "")
    if not is_safe_url(href):  # the text stays, inert: no href, nothing to click
        token.attrs.clear()
        token.attrSet("class", "pi-link-refused")
    else:
        token.attrSet("target", "_blank")
        token.attrSet("rel", "noopener noreferrer nofollow")
    return self.renderToken(tokens, idx, options, env)


def _render_image(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                  env: EnvType) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env)
    if is_safe_url(src, image=True):
        return f'<img class="pi-md-img" src="{escape_text(src)}" alt="{escape_text(alt)}">'
    label = escape_text(alt or "image")
    if is_safe_url(src) and src:
        return (f'<a href="{escape_text(src)}" target="_blank" rel="noopener noreferrer nofollow">'
                f"[image: {label}]</a>")
    return f"[image: {label}]"


def _validate_link(url: str) -> bool:
    # Called by markdown-it for link, autolink and image destinations (after
    # normalisation). Every destination forms its construct, so a refused link shows
    # its text, as in the saved transcript (not its raw "[text](javascript:…)" source):
    # _render_link_open drops a refused href, _render_image applies the image rule.
    return True


def _render_math_inline(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                        env: EnvType) -> str:
    return math_html(tokens[idx].content, display=tokens[idx].type == "math_inline_double")


def _render_math_block(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                       env: EnvType) -> str:
    return math_html(tokens[idx].content.strip(), display=True) + "\n"


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False,
                                   "highlight": _highlight_fence})
    md.enable(["table", "strikethrough"])
    # Strict dollar rules, as in GitHub and pandoc: "$5 and $6" is money, not math.
    md.use(dollarmath_plugin, allow_labels=False, allow_space=False, allow_digits=False,
           allow_blank_lines=False, double_inline=True)
    md.validateLink = _validate_link  # type: ignore[method-assign]  # markdown-it-py's documented hook
    md.add_render_rule("link_open", _render_link_open)
    md.add_render_rule("image", _render_image)
    md.add_render_rule("math_inline", _render_math_inline)
    md.add_render_rule("math_inline_double", _render_math_inline)
    md.add_render_rule("math_block", _render_math_block)
    return md


# Bounds on what is parsed as Markdown. The parser's cost grows faster than the
# text with unclosed brackets, emphasis runs and formulas (200,000 "[": 5.7 s; 3,000 distinct
# formulas: 1.4 s), and the view renders on the kernel. Past these, the text is shown plain.
MAX_MARKDOWN_CHARS = 200_000
MAX_MARKUP_WEIGHT = 6_000  # "[", "*", "_" count 1 each, "$" 2 (a formula costs ~0.4 ms)


def too_heavy(text: str) -> bool:
    """``text`` is too long or too dense in markup to parse within the view's time bound."""
    if len(text) > MAX_MARKDOWN_CHARS:
        return True
    weight = text.count("[") + text.count("*") + text.count("_") + 2 * text.count("$")
    return weight > MAX_MARKUP_WEIGHT


def render_markdown(text: str) -> str:
    """Render untrusted Markdown to HTML that is safe to put in an ``HTML`` widget
    (pathological text, ``too_heavy``, is shown as escaped plain text instead)."""
    if too_heavy(text):
        return f'<pre class="pi-plain" style="white-space: pre-wrap">{escape_text(text)}</pre>'
    rendered: str = _parser().render(text)  # markdown-it types render() as Any
    return rendered


# --- Markdown for the saved transcript --------------------------------------------------

# A maximal backtick run, content, and a maximal run of the same length, on one line.
_CODE_SPAN_RE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
# Inline math as the parser's strict rules find it: "$$…$$", or "$…$" with no space inside
# the delimiters and no digit after the closing one.
_MATH_SPAN_RE = re.compile(r"(?<![\\$])(?:\$\$(?P<d>[^$]+?)\$\$|\$(?=[^\s$])(?P<i>[^$]*?[^\s\\$])\$(?![\d$]))")
_DANGEROUS_SCHEME_RE = re.compile(r"(?i)\b(javascript|vbscript|data|file)(\s*):")
# Characters that mean something to Markdown, GFM tables or JupyterLab's math
# extraction; inside our <code> element they are written as numeric references.
_CODE_SPECIALS = {c: f"&#{ord(c)};" for c in "`*_[]\\!~$|{}"}


def _escape_plain(segment: str) -> str:
    # "&" first: an entity such as "&#106;avascript:" must stay literal text, since
    # Markdown decodes entities inside link destinations.
    segment = segment.replace("&", "&amp;").replace("<", "&lt;")
    # "![" would load a (possibly remote, data-leaking) image: make it "!" + link.
    segment = segment.replace("![", "&#33;[")
    # A "$" left over (money, a formula that did not convert) must not start math in a
    # frontend that runs its own TeX pass (JupyterLab, nbconvert's MathJax).
    segment = segment.replace("$", "\\$")
    # A zero-width space before ":" turns "javascript:" into a scheme-less (relative)
    # URL inside a link destination.
    return _DANGEROUS_SCHEME_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}\u200b:", segment)


# An inline link or image on one line: [text](destination "title"), the destination
# without spaces (one level of balanced parentheses) or in <…>.
_LINK_RE = re.compile(r"(?P<bang>!?)\[(?P<text>(?:[^\[\]\\\n]|\\.)*)\]\(\s*"
                      r"(?P<dest><[^<>\n]*>|(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))*)"
                      r"(?P<title>\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)")


def _escape_url(url: str) -> str:
    # entities decode inside a destination: "&" and "<" written as entities stay what
    # they were, and nothing in it can open a tag should a renderer not take the link
    return url.replace("&", "&amp;").replace("<", "&lt;").replace(" ", "%20")


def _link_markdown(m: re.Match[str]) -> str:
    """A link or image as the live view shows it (``_render_link_open`` /
    ``_render_image``): a refused link as its text, a remote image as a link
    "[image: alt]", an inline data image as the image."""
    text, dest = m.group("text"), m.group("dest")
    url = dest[1:-1] if dest.startswith("<") else dest
    label = _escape_plain(text)
    if m.group("bang"):
        alt = _escape_plain(text or "image").replace("[", "\\[").replace("]", "\\]")
        if is_safe_url(url, image=True):
            return f"![{alt}]({''.join(url.split())})"
        if url and is_safe_url(url):
            return f"[\\[image: {alt}\\]]({_escape_url(url)})"
        return f"\\[image: {alt}\\]"
    if not is_safe_url(url):
        return label
    title = m.group("title") or ""
    return f"[{label}]({_escape_url(url)}{_escape_plain(title)})"


def _escape_prose(segment: str) -> str:
    """``_escape_plain`` outside the links and images of ``segment``, which are
    written by ``_link_markdown``."""
    out: list[str] = []
    pos = 0
    for m in _LINK_RE.finditer(segment):
        if m.start() > 0 and segment[m.start() - 1] == "\\":
            continue  # "\[" is literal text, no link
        before = _escape_plain(segment[pos:m.start()])
        link = _link_markdown(m)
        if link.startswith("[") and before.endswith("!"):
            before = before[:-1] + "&#33;"  # "!" + our "[…](…)" would be an image
        out += [before, link]
        pos = m.end()
    out.append(_escape_plain(segment[pos:]))
    return "".join(out)


def _code_html(content: str) -> str:
    # CommonMark strips one space on each side when both are present.
    if len(content) >= 2 and content[0] == " " and content[-1] == " " and content.strip():
        content = content[1:-1]
    escaped = html.escape(content, quote=False)
    return "<code>" + "".join(_CODE_SPECIALS.get(c, c) for c in escaped) + "</code>"


def _markdown_inert(fragment: str) -> str:
    """Our own HTML (MathML) with the text between tags made inert for Markdown: a
    ``*`` or ``_`` inside ``<mo>`` must not turn into emphasis."""
    return re.sub(r">([^<]+)<", lambda m: ">" + "".join(_CODE_SPECIALS.get(c, c) for c in m.group(1)) + "<",
                  fragment)


def _math_or_code(line: str, pos: int) -> tuple[re.Match[str] | None, bool]:
    code = _CODE_SPAN_RE.search(line, pos)
    math = _MATH_SPAN_RE.search(line, pos)
    if math is not None and (code is None or math.start() < code.start()):
        return math, True
    return code, False


def _neutralise_inline(line: str) -> str:
    """Escape ``&``/``<`` (so no raw HTML, entity trick or autolink can form), turn
    images into links and break dangerous URL schemes.

    Code spans that open and close on this line are replaced by our own ``<code>``
    element with escaped content, so the renderer never sees their backticks: whatever
    it would have decided about code-span boundaries, no raw ``<`` from the source
    reaches it. The worst case of a mis-detected span is cosmetic.
    """
    out: list[str] = []
    pos = 0
    while pos < len(line):
        m, is_math = _math_or_code(line, pos)
        if m is None:
            out.append(_escape_prose(line[pos:]))
            break
        if m.start() > 0 and line[m.start() - 1] == "\\":
            # An escaped backtick opens nothing: emit it as text and go on after it.
            out.append(_escape_prose(line[pos:m.start() + 1]))
            pos = m.start() + 1
            continue
        out.append(_escape_prose(line[pos:m.start()]))
        if is_math:
            display = m.group("d") is not None
            out.append(_markdown_inert(math_html(m.group("d") if display else m.group("i"), display,
                                                 in_line=True)))
        else:
            out.append(_code_html(m.group(2)))
        pos = m.end()
    return "".join(out)


def markdown_for_transcript(text: str) -> str:
    """Return Markdown that renders like ``text`` but cannot produce raw HTML, a remote
    image or a ``javascript:``-style link in a CommonMark/GFM renderer that allows raw
    HTML (JupyterLab renders trusted Markdown outputs without a sanitiser).

    Fenced and indented code blocks (found with markdown-it's own block parser) are
    kept verbatim: their content is never interpreted as HTML. A fence's opening line
    (with its info string) goes through the inline escaping like any other line.
    Pathological text (``too_heavy``) becomes one fenced code block: inert, and no parse.
    """
    if too_heavy(text):
        longest = max((len(m.group(0)) for m in re.finditer("`+", text)), default=0)
        fence = "`" * max(3, longest + 1)
        return f"{fence}text\n{text}\n{fence}"
    lines = text.split("\n")
    verbatim = [False] * len(lines)
    math_blocks: dict[int, tuple[int, str]] = {}  # first line -> (end line, TeX)
    for token in _parser().parse(text):
        if token.type in ("fence", "code_block") and token.map is not None:
            start, end = token.map
            first = start + 1 if token.type == "fence" else start
            for i in range(first, min(end, len(lines))):
                verbatim[i] = True
        elif token.type == "math_block" and token.map is not None:
            math_blocks[token.map[0]] = (token.map[1], token.content.strip())
    out: list[str] = []
    i = 0
    while i < len(lines):
        if i in math_blocks:
            end, tex = math_blocks[i]
            # An HTML block of its own: blank lines around it, none inside.
            out += ["", _markdown_inert(math_html(tex, display=True)).replace("\n", " "), ""]
            i = max(end, i + 1)
            continue
        out.append(lines[i] if verbatim[i] else _neutralise_inline(lines[i]))
        i += 1
    return "\n".join(out)


def without_notes(text: str) -> str:
    """``text`` without any notebook-context note quoted in it (see ``_NOTE_RE``): what a
    person may read of a message (the views, ``%agent history``, the export)."""
    if _NOTE_START not in text:
        return text
    return _NOTE_RE.sub("", text)


def note_safe_cut(text: str, cut: int) -> int:
    """``cut`` (where a live view freezes the head of streaming text), moved back to the start
    of a quoted note it would fall inside (an open note runs to the end of the text): each
    chunk is cleaned on its own, so a note is only ever dropped whole."""
    if _NOTE_START not in text:
        return cut
    for m in _NOTE_RE.finditer(text):
        if m.start() < cut < m.end():
            return m.start()
    return cut
