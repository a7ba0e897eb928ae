"""The lines about the user's variables are text on the card and in the transcript: names and
code come from the model's code, so nothing in them becomes live HTML."""

from __future__ import annotations

from pi_notebook.widgets.toolcard import namespace_html


def test_names_and_code_in_the_lines_are_escaped_text():
    html = namespace_html("Variables changed:", ["`df` changed in place: columns added '<img src=x onerror=alert(1)>'",
                                                 "changes `d['<script>'] = …` in `d`, which you created"])
    assert "<img" not in html and "<script>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<code>df</code> changed in place" in html
    assert "<code>d[&#x27;&lt;script&gt;&#x27;] = …</code>" in html or "<code>d['&lt;script&gt;'] = …</code>" in html
    assert namespace_html("Variables changed:", []) == ""


def test_the_static_transcript_shows_names_as_code_and_nothing_live():
    from pi_notebook.tools.output.updates import PythonCallDetails
    from pi_notebook.widgets.toolcall import ToolItem
    from pi_notebook.widgets.transcript_md import tool_markdown

    item = ToolItem("call-1", "python", {"code": "x = 1"})
    item.details = PythonCallDetails(code="x = 1", namespace=[
        "`notes` created: str of 17 characters", "`df` changed in place: columns added '<img src=x onerror=alert(1)>'"])
    md = tool_markdown(item)
    assert "<code>notes</code> created: str of 17 characters" in md and "`notes`" not in md
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md
