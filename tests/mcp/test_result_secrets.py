"""Secrets stay out of every string of an MCP result that reaches the model or the view: the
result is walked, not read field by field (mcp/results.py)."""

from __future__ import annotations

import json

import mcp.types as t

from pi_notebook.mcp.results import convert_result
from pi_notebook.tools import PythonToolSettings
from pi_notebook.tools.trust.redact import add_secret, discard_secret

SECRET = "canary-" + "5d1c0ffee9a7b3"


def _everything(out) -> str:
    text = "\n".join(getattr(c, "text", "") for c in out.content)
    return text + json.dumps(out.details, default=str)


def test_resource_link_names_uris_and_types_are_redacted() -> None:
    add_secret(SECRET)
    try:
        result = t.CallToolResult(content=[
            t.ResourceLink(type="resource_link", name=f"report-{SECRET}.csv",
                           uri=f"https://files.example/report.csv?token={SECRET}", mimeType=f"image/x-{SECRET}"),
            t.EmbeddedResource(type="resource", resource=t.BlobResourceContents(
                uri=f"file:///tmp/{SECRET}.bin", mimeType=f"application/x-{SECRET}", blob="AAAA")),
            t.EmbeddedResource(type="resource", resource=t.TextResourceContents(
                uri=f"file:///tmp/a?sig={SECRET}", text="plain")),
            t.ImageContent(type="image", data="AAAA", mimeType=f"image/{SECRET}"),
            t.AudioContent(type="audio", data="AAAA", mimeType=f"audio/{SECRET}"),
        ], structuredContent={SECRET: ["nested", {"deeper": SECRET}]})
        out = convert_result(result, PythonToolSettings(), server="files", tool="list")
        shown = _everything(out)
        assert "files.example/report.csv" in shown  # the link is still there, without its secret
        assert SECRET not in shown and SECRET[-8:] not in shown
    finally:
        discard_secret(SECRET)


def test_credential_shapes_in_a_link_are_redacted_without_knowing_the_secret() -> None:
    key = "sk-ant-api03-" + "Q" * 40
    result = t.CallToolResult(content=[t.ResourceLink(type="resource_link", name=key, uri="https://x.example/a")])
    shown = _everything(convert_result(result, PythonToolSettings(), server="s", tool="t"))
    assert key not in shown and "x.example/a" in shown


def test_a_long_text_gets_shapes_redacted_in_what_is_shown():
    key = "sk-ant-api03-" + "Z" * 40
    long = "x" * 200_000 + " " + key + " tail"
    result = t.CallToolResult(content=[t.TextContent(type="text", text=long)])
    shown = _everything(convert_result(result, PythonToolSettings(max_output_chars=2000), server="s", tool="t"))
    assert "tail" in shown and key not in shown and "sk-ant-api03" not in shown
