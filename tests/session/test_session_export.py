"""Exporting a conversation as a plain notebook."""

from __future__ import annotations

import nbformat
import pytest

from pi_notebook.ai.types import (
    AssistantMessage, ImageContent, TextContent, ThinkingContent, ToolCall, ToolResultMessage,
    UserMessage,
)
from pi_notebook.session import build_notebook, export_notebook

PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _assistant(*blocks, stop_reason="toolUse", **kw):
    return AssistantMessage(content=list(blocks), api="faux", provider="faux", model="faux-1",
                            stop_reason=stop_reason, **kw)


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
        _assistant(TextContent(text="x is **42** and z is 46."), stop_reason="stop"),
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


def test_outputs_from_tool_details_are_used_verbatim_when_present():
    outputs = [{"output_type": "execute_result", "execution_count": None,
                "data": {"text/plain": "42"}, "metadata": {}},
               {"output_type": "bogus"}]
    nb = build_notebook([
        _assistant(_python("c1", "21 * 2")),
        _result("c1", TextContent(text="42"), details={"outputs": outputs}),
    ])
    assert [o.output_type for o in nb.cells[0].outputs] == ["execute_result"]


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
