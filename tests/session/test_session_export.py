"""Exporting a conversation as a plain notebook."""

from __future__ import annotations

import re

import nbformat
import pytest
from helpers.messages import assistant

from pi_notebook.ai.types import (
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pi_notebook.session import build_notebook, export_notebook
from pi_notebook.tools.output.updates import (
    DisplayOutput,
    ErrorOutput,
    PythonCallDetails,
    ResultOutput,
    StreamOutput,
)

PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _assistant(*blocks, stop="toolUse", **kw):
    return assistant(blocks, stop=stop, api="faux", provider="faux", model="faux-1", **kw)


def _python(call_id, code):
    return ToolCall(id=call_id, name="python", arguments={"code": code})


def _result(call_id, *content, is_error=False, details=None, name="python"):
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=list(content),
                             is_error=is_error, details=details)


def conversation():
    return [
        UserMessage(content="Compute something and show a picture."),
        _assistant(ThinkingContent(thinking="private reasoning"), TextContent(text="Let me compute."),
                   _python("c1", "x = 21 * 2\nprint(x)")),
        _result("c1", TextContent(text="42\n")),
        _assistant(_python("c2", "y = [i * i for i in range(4)]\nprint(y)"),
                   ToolCall(id="c3", name="read_file", arguments={"path": "data.csv"})),
        _result("c2", TextContent(text="[0, 1, 4, 9]\n"), ImageContent(data=PNG_1PX, mime_type="image/png")),
        _result("c3", TextContent(text="a,b\n1,2"), name="read_file"),
        _assistant(_python("c4", "raise SystemExit('denied code must never run')")),
        _result("c4", TextContent(text="The user denied this call"), is_error=True),
        _assistant(_python("c5", "z = x + len(y)\nprint(z)")),
        _result("c5", TextContent(text="46\n")),
        _assistant(TextContent(text="x is **42** and z is 46."), stop="stop"),
    ]


def test_notebook_structure_and_validity():
    nb = build_notebook(conversation())
    nbformat.validate(nb)
    assert nb.nbformat == 4
    kinds = [(c.cell_type, c.source.splitlines()[0] if c.source else "") for c in nb.cells]
    assert kinds == [
        ("markdown", "**User:**"),
        ("markdown", "**Assistant:**"),
        ("code", "x = 21 * 2"),
        ("code", "y = [i * i for i in range(4)]"),
        ("markdown", "**Tool call `read_file`** (not code, shown for the record)"),
        ("markdown", "**Tool call `python`** (failed or was not run)"),
        ("code", "z = x + len(y)"),
        ("markdown", "**Assistant:**"),
    ]
    first_code = nb.cells[2]
    assert first_code.outputs == [nbformat.from_dict(
        {"output_type": "stream", "name": "stdout", "text": "42\n"})]
    second = nb.cells[3]
    assert [o.output_type for o in second.outputs] == ["stream", "display_data"]
    assert second.outputs[1].data["image/png"] == PNG_1PX
    assert "private reasoning" not in "".join(c.source for c in nb.cells)
    assert "private reasoning" in "".join(c.source for c in build_notebook(
        conversation(), include_thinking=True).cells)


def _details(code, *outputs, **flags):
    return PythonCallDetails(code=code, outputs=list(outputs), elapsed_s=0.5, **flags)


def test_recorded_outputs_become_the_cells_outputs_in_order():
    details = _details(
        "print('a'); display(fig); print('b'); 42",
        StreamOutput(name="stdout", text="a\n"),
        DisplayOutput(data={"image/png": PNG_1PX, "text/plain": "<Figure>"}),
        StreamOutput(name="stdout", text="b\n"),
        StreamOutput(name="stderr", text="warn\n"),
        ResultOutput(data={"text/plain": "42", "text/html": "<b>42</b>"}),
    )
    for stored in (details, details.model_dump(mode="json")):  # live model or session-file dict
        nb = build_notebook([
            _assistant(_python("c1", details.code)),
            _result("c1", TextContent(text="model text, budget-cut"), details=stored),
        ])
        nbformat.validate(nb)
        outs = nb.cells[0].outputs
        assert [o.output_type for o in outs] == ["stream", "display_data", "stream", "stream", "execute_result"]
        assert outs[0].text == "a\n" and outs[2].text == "b\n" and outs[3].name == "stderr"
        assert outs[1].data == {"image/png": PNG_1PX, "text/plain": "<Figure>"}
        assert outs[4].data == {"text/plain": "42"}  # html dropped from exports
        assert "model text" not in repr(outs)


def test_failed_call_keeps_its_recorded_output_as_text():
    details = _details("print('partial'); 1/0", StreamOutput(name="stdout", text="partial\n"),
                       ErrorOutput(ename="ZeroDivisionError", evalue="division by zero",
                                   traceback=["Traceback ...", "ZeroDivisionError: division by zero"]))
    nb = build_notebook([
        _assistant(_python("c1", details.code)),
        _result("c1", TextContent(text="[error] ZeroDivisionError"), is_error=True, details=details),
    ])
    cell = nb.cells[0]
    assert cell.cell_type == "markdown" and "partial" in cell.source and "ZeroDivisionError: division" in cell.source


HOSTILE = ("<script>alert(1)</script> <img src=x onerror=alert(2)> "
           "[click](javascript:alert(3)) ![pixel](https://evil.example/track.png) "
           "<a href=\"javascript:alert(4)\">x</a>")


def _rendered(markdown_text):
    from markdown_it import MarkdownIt

    # Render like a permissive frontend would (raw HTML allowed): nothing live may appear.
    return MarkdownIt("commonmark", {"html": True}).render(markdown_text)


def test_export_is_as_safe_as_the_view():
    details = _details(
        "display(...)",
        DisplayOutput(data={"text/html": "<script>alert(5)</script>", "text/plain": "table"}),
        DisplayOutput(data={"application/javascript": "alert(6)"}),
        DisplayOutput(data={"image/svg+xml": "<svg onload=alert(7)></svg>"}),
        DisplayOutput(data={"text/markdown": HOSTILE}),
        ResultOutput(data={"application/vnd.jupyter.widget-view+json": {"model_id": "x"}}),
    )
    nb = build_notebook([
        UserMessage(content="please " + HOSTILE),
        _assistant(TextContent(text="Sure: " + HOSTILE), _python("c1", "display(...)")),
        _result("c1", TextContent(text="ok"), details=details),
    ], title="<script>alert(8)</script>")
    nbformat.validate(nb)
    allowed = {"text/plain", "text/markdown", "image/png", "image/jpeg", "image/gif"}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            html = _rendered(cell.source)
            assert "<script" not in html and "<img" not in html and "javascript:" not in html
            for href in re.findall(r'href="([^"]*)"', html):
                # a link is plain text or a relative/http(s) URL: the ZWSP-broken scheme of
                # "javascript\u200b:" makes it relative (no script runs)
                assert re.match(r"^(https?://|[^:]*$|[^:]*%E2%80%8B:)", href), href
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            assert set(data) <= allowed, data
            if "text/markdown" in data:
                html = _rendered(data["text/markdown"])
                assert "<script" not in html and "<img" not in html and "javascript:" not in html
    code = next(c for c in nb.cells if c.cell_type == "code")
    assert code.outputs[0].data == {"text/plain": "table"}
    assert "not exported" in code.outputs[1].data["text/plain"]


def test_export_redacts_secrets_again(monkeypatch):
    canary = "sk-export-canary-0123456789abcdefXYZ"
    monkeypatch.setenv("EXPORT_TEST_API_KEY", canary)
    details = _details(f"print('{canary}')", StreamOutput(name="stdout", text=canary + "\n"),
                       ResultOutput(data={"text/plain": repr(canary)}))
    nb = build_notebook([
        UserMessage(content=f"my key is {canary}"),
        _assistant(_python("c1", f"print('{canary}')")),
        _result("c1", TextContent(text=canary), details=details),
    ])
    text = nbformat.writes(nb)
    assert all(canary[i:i + 8] not in text for i in range(len(canary) - 7))
    assert "[redacted]" in text


def test_fences_in_text_cannot_close_the_code_block():
    nb = build_notebook([
        _assistant(ToolCall(id="c1", name="python", arguments={"code": "s = '```'\nboom"})),
        _result("c1", TextContent(text="err"), is_error=True),
    ])
    assert "````python\ns = '```'\nboom\n````" in nb.cells[0].source


def test_export_writes_file_and_refuses_to_overwrite(tmp_path):
    path = tmp_path / "out" / "conv.ipynb"
    assert export_notebook(conversation(), path, title="My run") == path
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].source == "# My run"
    with pytest.raises(FileExistsError):
        export_notebook(conversation(), path)
    with pytest.raises(ValueError, match=r"\.ipynb"):
        export_notebook(conversation(), tmp_path / "conv.txt")
    export_notebook(conversation()[:3], path, overwrite=True)
    assert len(nbformat.read(path, as_version=4).cells) == 3


@pytest.mark.kernel
def test_exported_notebook_runs_top_to_bottom_in_a_fresh_kernel(tmp_path):
    from nbclient import NotebookClient

    path = export_notebook(conversation(), tmp_path / "conv.ipynb")
    nb = nbformat.read(path, as_version=4)
    captured = [c.outputs for c in nb.cells if c.cell_type == "code"]
    client = NotebookClient(nb, kernel_name="python3", timeout=120,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    executed = [c for c in nb.cells if c.cell_type == "code"]
    streams = [[o.text for o in c.outputs if o.output_type == "stream"] for c in executed]
    assert streams == [["42\n"], ["[0, 1, 4, 9]\n"], ["46\n"]]
    # the same text the agent captured when it ran the code
    assert [[o.text for o in outs if o.output_type == "stream"] for outs in captured] == streams


@pytest.mark.kernel
def test_exported_notebook_passes_jupyter_execute(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    path = export_notebook(conversation(), tmp_path / "conv.ipynb")
    jupyter = Path(sys.executable).with_name("jupyter")
    done = subprocess.run([str(jupyter), "execute", str(path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
