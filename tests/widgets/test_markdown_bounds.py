"""Pathological model text is not parsed as Markdown on the kernel (plain fallback)."""

from __future__ import annotations

import time

from pi_notebook.widgets.markdown import MAX_MARKUP_WEIGHT, render_markdown, too_heavy


def test_pathological_markdown_falls_back_to_escaped_plain_text() -> None:
    cases = {
        "open brackets": "[" * 200_000,
        "distinct formulas": " ".join(f"$x_{{{i}}}^{{{i}}}$" for i in range(3000)),
        "emphasis runs": "*a " * 50_000,
        "very long": "word <b>x</b> " * 20_000,
    }
    for name, text in cases.items():
        assert too_heavy(text), name
        start = time.perf_counter()
        html = render_markdown(text)
        elapsed = time.perf_counter() - start
        assert html.startswith('<pre class="pi-plain"'), name
        assert "<b>" not in html and "<math" not in html, name  # escaped, never live markup
        assert elapsed < 5.0, (name, elapsed)  # 1.3-5.7 s each before; generous for a busy machine


def test_ordinary_markdown_is_still_rendered() -> None:
    text = "Some **bold**, a [link](https://example.com), $x^2$ and\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert not too_heavy(text)
    html = render_markdown(text)
    assert "<strong>bold</strong>" in html and "<table>" in html and "<math" in html
    # a long but ordinary answer stays Markdown
    assert not too_heavy(("A paragraph with *some* emphasis and a [x](https://e.com) link.\n\n") * 400)
    assert MAX_MARKUP_WEIGHT >= 2_000


def test_the_saved_transcript_keeps_pathological_text_as_an_inert_code_block() -> None:
    from pi_notebook.widgets.markdown import markdown_for_transcript

    text = "[" * 200_000 + " <img src=x onerror=alert(1)> ```` $x$"
    out = markdown_for_transcript(text)
    fence = "`" * 5  # longer than the longest backtick run inside
    assert out.startswith(fence + "text\n") and out.endswith("\n" + fence)
    assert out[len(fence) + 5:-len(fence) - 1] == text
    # ordinary text still goes through the usual neutralising
    assert "<img" not in markdown_for_transcript("<img src=x onerror=alert(1)>")
