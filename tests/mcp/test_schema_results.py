"""MCP tool names, input schemas and results, as the model gets them."""

from __future__ import annotations

import base64
import types

import pytest

from pi_notebook.mcp.results import convert_result
from pi_notebook.mcp.schema import SchemaRejected, simplify_schema, tool_name, unique_name
from pi_notebook.tools import PythonToolSettings
from pi_notebook.tools.trust.redact import add_secret, discard_secret

PNG = base64.b64encode(base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==")).decode()


def test_names_are_valid_everywhere_and_collisions_get_a_suffix():
    assert tool_name("db", "run query!") == "db__run_query_"
    assert len(tool_name("s", "x" * 200)) == 64
    assert unique_name("db__q", {"db__q"}) == "db__q_2"
    assert unique_name("db__q", {"db__q", "db__q_2"}) == "db__q_3"


def test_refs_are_inlined_and_property_names_are_kept():
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
              "properties": {"item": {"$ref": "#/$defs/Item"}, "$id": {"type": "string"}},
              "$defs": {"Item": {"type": "object", "properties": {"n": {"type": "integer"}}}}}
    out = simplify_schema(schema)
    assert "$schema" not in out and "$defs" not in out
    assert out["properties"]["item"] == {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert out["properties"]["$id"] == {"type": "string"}  # a property called "$id" is data
    assert simplify_schema(None) == {"type": "object", "properties": {}}


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}},
     "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}},  # recursive
    {"type": "array"},  # not an object
    {"type": "object", "properties": {"x": {"$ref": "http://elsewhere/schema"}}},  # remote ref
    {"type": "object", "properties": {"x": {"type": 12}}},  # not JSON Schema
])
def test_schemas_a_provider_would_reject_are_refused(schema):
    with pytest.raises(SchemaRejected):
        simplify_schema(schema)


def _result(*content, structured=None, is_error=False):
    return types.SimpleNamespace(content=list(content), structured_content=structured, is_error=is_error)


def _text(result):
    return result.content[0].text


def test_text_image_structured_links_resources_and_errors():
    settings = PythonToolSettings(max_output_chars=1000)
    text = types.SimpleNamespace(type="text", text="hello")
    image = types.SimpleNamespace(type="image", data=PNG, mime_type="image/png")
    link = types.SimpleNamespace(type="resource_link", name="report", uri="file:///r.csv", mime_type="text/csv")
    embedded = types.SimpleNamespace(type="resource", resource=types.SimpleNamespace(
        uri="mem://notes", text="embedded words", mime_type="text/plain"))
    out = convert_result(_result(text, image, link, embedded), settings, server="s", tool="t")
    body = _text(out)
    assert "hello" in body and "report file:///r.csv (text/csv)" in body and "embedded words" in body
    assert [c.type for c in out.content] == ["text", "image"] and not out.is_error
    no_images = PythonToolSettings(model_accepts_images=False)
    assert "does not take images" in _text(convert_result(_result(image), no_images, server="s", tool="t"))
    structured = convert_result(_result(structured={"rows": [{"a": 1}]}), settings, server="s", tool="t")
    assert '"a": 1' in _text(structured) and structured.details["mcp"]["structured"] == {"rows": [{"a": 1}]}
    failed = convert_result(_result(text, is_error=True), settings, server="s", tool="t")
    assert failed.is_error


def test_budget_and_redaction_as_for_python_output():
    secret = "canary-" + "9f8e7d6c5b4a"
    add_secret(secret)
    try:
        long = "x" * 5000 + secret + "y" * 5000
        out = convert_result(_result(types.SimpleNamespace(type="text", text=long), structured={"k": secret}),
                             PythonToolSettings(max_output_chars=800), server="s", tool="t")
        assert len(_text(out)) < 1200 and secret not in _text(out)
        assert out.details["mcp"]["structured"] == {"k": "[redacted]"}
    finally:
        discard_secret(secret)
