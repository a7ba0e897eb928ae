"""The lines about the user's variables are text on the card and in the transcript: names and
code come from the model's code, so nothing in them becomes live HTML."""

from __future__ import annotations

from pi_notebook.widgets.toolcard import namespace_html


def test_names_and_code_in_the_lines_are_escaped_text():
    html = namespace_html("Variables changed:", ["`df` changed in place: columns added '<img src=x onerror=alert(1)>'",
                                                 "changes `d['<script>'] = …`, which you created"])
    assert "<img" not in html and "<script>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<code>df</code> changed in place" in html
    assert "<code>d[&#x27;&lt;script&gt;&#x27;] = …</code>" in html or "<code>d['&lt;script&gt;'] = …</code>" in html
    assert namespace_html("Variables changed:", []) == ""
