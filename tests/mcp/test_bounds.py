"""Untrusted sizes from an MCP server are bounded before the work they would cost: the number
of tools offered (per server and in all), the expansion of a schema's ``$ref``s, and images
checked by their headers alone."""

from __future__ import annotations

import base64
import struct
import types
import zlib

import pytest

from pi_notebook.mcp.schema import MAX_SCHEMA_NODES, SchemaRejected, simplify_schema
from pi_notebook.mcp.server import ToolInfo
from pi_notebook.mcp.tools import MAX_TOOLS, MAX_TOOLS_PER_SERVER, build_tools
from pi_notebook.tools import PythonToolSettings
from pi_notebook.tools.output.images import MAX_DECODE_PIXELS, image_info, prepare_image


def _server(name: str, n: int, schema=None) -> types.SimpleNamespace:
    config = types.SimpleNamespace(tools=None, auto_approve=[], approval=None, timeout=None)
    tools = [ToolInfo(name=f"t{i}", description="d", input_schema=schema or {"type": "object"}) for i in range(n)]
    return types.SimpleNamespace(name=name, state="connected", config=config, tools=tools)


def test_the_tools_offered_are_capped_per_server_and_in_all_and_the_drop_is_said():
    assert MAX_TOOLS_PER_SERVER < 1000 and MAX_TOOLS < 2000
    calls = []

    def counting(schema):
        calls.append(1)
        return simplify_schema(schema)

    import pi_notebook.mcp.tools as tools_module

    original = tools_module.simplify_schema
    tools_module.simplify_schema = counting
    try:
        servers = [_server("big", 10_000), *[_server(f"s{i}", MAX_TOOLS_PER_SERVER) for i in range(6)]]
        out = build_tools(servers, set(), PythonToolSettings, lambda: 30.0)
    finally:
        tools_module.simplify_schema = original
    per_server = {}
    for server, _ in out.origin.values():
        per_server[server] = per_server.get(server, 0) + 1
    assert per_server["big"] == MAX_TOOLS_PER_SERVER
    assert len(out.tools) == MAX_TOOLS
    assert len(calls) <= MAX_TOOLS + len(servers)  # no work for the dropped tools
    text = "\n".join(out.notices)
    assert f"{10_000 - MAX_TOOLS_PER_SERVER} of the 10000 tools of 'big'" in text
    assert "not offered" in text


def _doubling(levels: int) -> dict:
    defs = {f"d{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/d{i + 1}"},
                                                       "b": {"$ref": f"#/$defs/d{i + 1}"}}}
            for i in range(levels)}
    defs[f"d{levels}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}


def test_ref_expansion_is_bounded_before_the_work_and_refused_clearly():
    schema = _doubling(24)  # 2**24 leaves when inlined; about 2 KB as sent
    with pytest.raises(SchemaRejected, match="expands to more than"):
        simplify_schema(schema)
    small = simplify_schema(_doubling(3))  # 8 leaves: fine
    assert small["properties"]["x"]["properties"]["a"]["properties"]["a"]["properties"]["a"] == {"type": "string"}
    assert MAX_SCHEMA_NODES >= 1000
    deep: dict = {"type": "string"}
    for _ in range(500):
        deep = {"type": "object", "properties": {"n": deep}}
    with pytest.raises(SchemaRejected):
        simplify_schema(deep)


def _png(width: int, height: int, body: bytes | None = None) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = body if body is not None else zlib.compress(b"\x00" * (width + 1) * min(height, 4))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def _gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00" + b"\x3b"


def _webp_vp8x(width: int, height: int) -> bytes:
    payload = b"\x00\x00\x00\x00" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + 8 + len(payload)) + b"WEBP" + b"VP8X" + struct.pack("<I", len(payload)) + payload


def test_image_headers_are_read_for_every_format_without_decoding():
    assert image_info(_png(12_000, 12_000)) == ("image/png", 12_000, 12_000)
    assert image_info(_gif(8000, 8000)) == ("image/gif", 8000, 8000)
    assert image_info(_webp_vp8x(640, 480)) == ("image/webp", 640, 480)
    assert image_info(b"RIFF\x10\x00\x00\x00WEBPjunkjunk") is None  # an invalid WebP
    assert image_info(b"\xff\xd8\xff\xc0\x00\x11\x08\x01\x00\x02\x00\x03" + b"\x00" * 20) == ("image/jpeg", 512, 256)
    assert image_info(b"not an image at all") is None


@pytest.mark.parametrize("raw, mime, why", [
    (_png(12_000, 12_000), "image/png", "over"),
    (_gif(8000, 8000), "image/gif", "over"),
    (b"RIFF\x10\x00\x00\x00WEBPjunkjunk", "image/webp", "not a valid"),
    (_png(64, 64), "image/gif", "not a valid"),  # a PNG that says it is a GIF
])
def test_over_budget_and_invalid_images_become_a_note_before_any_decode(raw, mime, why, monkeypatch):
    import PIL.Image

    def no_decode(*args, **kwargs):
        raise AssertionError("decoded")

    monkeypatch.setattr(PIL.Image, "open", no_decode)
    out = prepare_image(base64.b64encode(raw).decode(), mime, 1_000_000)
    assert isinstance(out, str) and why in out, out
    assert MAX_DECODE_PIXELS < 12_000 * 12_000


def test_mcp_images_of_every_type_go_through_the_one_check():
    from pi_notebook.mcp.results import convert_result

    settings = PythonToolSettings(model_accepts_images=True)
    for raw, mime in ((_gif(8000, 8000), "image/gif"), (b"RIFF\x10\x00\x00\x00WEBPjunkjunk", "image/webp")):
        result = {"content": [{"type": "image", "mimeType": mime, "data": base64.b64encode(raw).decode()}]}
        out = convert_result(result, settings, server="s", tool="t")
        assert len(out.content) == 1, (mime, out.content)  # no image attached
