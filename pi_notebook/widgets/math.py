"""TeX math (``$…$``, ``$$…$$``) to MathML, on the server, for untrusted text.

Browsers render MathML natively, so math shows while an answer streams, in the live
view and in the saved transcript alike, with no MathJax pass in the frontend.

latex2mathml's output is not trusted as is: TeX commands such as ``\\href`` put
attributes from the source into it. So the MathML is parsed and rebuilt from an
allow-list of presentation-MathML elements and attributes; attribute values and text
are escaped again when written. A formula that does not convert (a syntax error, an
unknown command) is shown as code, never raises.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from functools import lru_cache

__all__ = ["tex_to_mathml", "math_html"]

_NS = "{http://www.w3.org/1998/Math/MathML}"
_TAGS = frozenset({
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup", "msubsup", "mfrac",
    "msqrt", "mroot", "mstyle", "merror", "mpadded", "mphantom", "mfenced", "menclose", "munder",
    "mover", "munderover", "mtable", "mtr", "mtd", "mlabeledtr", "mmultiscripts", "mprescripts",
    "none", "semantics", "annotation",
})
_ATTRS = frozenset({
    "display", "mathvariant", "stretchy", "fence", "separator", "lspace", "rspace", "minsize",
    "maxsize", "movablelimits", "accent", "accentunder", "linethickness", "displaystyle",
    "scriptlevel", "columnalign", "rowalign", "columnspacing", "rowspacing", "columnlines",
    "rowlines", "frame", "framespacing", "equalrows", "equalcolumns", "notation", "symmetric",
    "largeop", "form", "open", "close", "separators", "width", "height", "depth", "mathsize",
    "mathcolor", "mathbackground", "encoding", "align", "numalign", "denomalign", "bevelled",
    "columnwidth", "rowspan", "columnspan", "voffset",
})
# Attribute values: short words, numbers, lengths and colours only (never a URL).
_VALUE_RE = re.compile(r"^[#A-Za-z0-9 .,%+\-]{0,64}$")
MAX_TEX_CHARS = 4000


def _rebuild(el: ET.Element, out: list[str]) -> bool:
    tag = el.tag[len(_NS):] if el.tag.startswith(_NS) else el.tag
    if tag not in _TAGS:
        return False
    attrs = []
    for name, value in el.attrib.items():
        if name in _ATTRS and _VALUE_RE.match(value):
            attrs.append(f' {name}="{html.escape(value, quote=True)}"')
    if tag == "math":
        attrs.insert(0, ' xmlns="http://www.w3.org/1998/Math/MathML"')
    out.append(f"<{tag}{''.join(attrs)}>")
    if el.text:
        out.append(html.escape(el.text, quote=False))
    for child in el:
        if not _rebuild(child, out):
            return False
        if child.tail:
            out.append(html.escape(child.tail, quote=False))
    out.append(f"</{tag}>")
    return True


@lru_cache(maxsize=512)
def tex_to_mathml(tex: str, display: bool = False) -> str | None:
    """Sanitised MathML for ``tex``, or None if it does not convert."""
    if not tex.strip() or len(tex) > MAX_TEX_CHARS:
        return None
    from latex2mathml.converter import convert

    try:
        raw = convert(tex, display="block" if display else "inline")
        root = ET.fromstring(raw)
    except Exception:  # latex2mathml raises many types on bad input; a formula must never break a view
        return None
    out: list[str] = []
    if not _rebuild(root, out):
        return None
    return "".join(out)


def math_html(tex: str, display: bool = False, *, in_line: bool = False) -> str:
    """HTML for one formula: MathML, or the TeX source as escaped code if it does not convert.

    ``in_line``: the formula sits inside a line of Markdown text (``a $$x$$ b``). Then only
    phrasing elements are used (``span``, ``code``; the block look comes from CSS): a line that
    starts with ``<div`` or ``<pre`` would open an HTML block in a Markdown renderer that
    passes raw HTML, and that block would run on past this line, over text we did not write.
    """
    mathml = tex_to_mathml(tex, display)
    if mathml is not None:
        cls = "pi-math pi-math-block" if display else "pi-math"
        # a block formula is a paragraph of its own, so it gets the paragraph spacing of
        # whatever renders it (the live view and the static transcript alike)
        tag = "p" if display and not in_line else "span"
        return f'<{tag} class="{cls}">{mathml}</{tag}>'
    delim = "$$" if display else "$"
    code = html.escape(f"{delim}{tex}{delim}", quote=False).replace("$", "&#36;")
    if display and not in_line:
        return f'<pre class="pi-math-error"><code>{code}</code></pre>'
    return f'<code class="pi-math-error">{code}</code>'
