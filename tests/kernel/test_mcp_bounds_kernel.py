"""Untrusted sizes in a real kernel: an MCP server announces 10,004 tools, one of them with a
2 KB schema of doubling ``$ref``s, and answers calls with a 12,000 x 12,000 PNG (a few hundred
KB), an 8,000 x 8,000 GIF and an invalid WebP. While the run works, ``%agent status`` probes are
sent one after another: the kernel answers each (the longest wait is printed), the tools are
capped, the schema is refused, and no image reaches the model.

The server is a few lines of JSON-RPC over stdio (the SDK's own server cannot announce a
malformed image)."""

from __future__ import annotations

import json
import sys

import pytest
from helpers.kernel import RUNTIME, Kernel, faux_setup, probe_until_idle

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]

SERVER = r'''
import base64, json, struct, sys, zlib

def png(w, h):
    def chunk(k, d):
        return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d))
    row = b"\x00" * (w + 1)
    comp = zlib.compressobj(9)
    body = b"".join(comp.compress(row) for _ in range(h)) + comp.flush()
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) + chunk(b"IDAT", body) + chunk(b"IEND", b"")

def doubling(n):
    defs = {f"d{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/d{i+1}"}, "b": {"$ref": f"#/$defs/d{i+1}"}}} for i in range(n)}
    defs[f"d{n}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
PNG = base64.b64encode(png(12000, 12000)).decode()
GIF = base64.b64encode(b"GIF89a" + struct.pack("<HH", 8000, 8000) + b"\x00\x00\x00;").decode()
WEBP = base64.b64encode(b"RIFF\x10\x00\x00\x00WEBPjunkjunk").decode()
tools = [{"name": n, "description": n, "inputSchema": {"type": "object"}} for n in ("png", "gif", "webp")]
tools.append({"name": "refs", "description": "refs", "inputSchema": doubling(int(sys.argv[2]) if len(sys.argv) > 2 else 20)})
tools += [{"name": f"t{i}", "description": f"tool {i}", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}}} for i in range(N)]
content = {"png": [{"type": "image", "data": PNG, "mimeType": "image/png"}],
           "gif": [{"type": "image", "data": GIF, "mimeType": "image/gif"}],
           "webp": [{"type": "image", "data": WEBP, "mimeType": "image/webp"}]}
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, result = msg.get("method"), {}
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "hostile", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": tools}
    elif method == "tools/call":
        result = {"content": content.get(msg["params"]["name"], [{"type": "text", "text": "ok"}])}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
'''


def test_the_kernel_answers_while_a_server_sends_huge_counts_schemas_and_images(tmp_path):
    work = tmp_path / "work"
    (work / ".pi_notebook").mkdir(parents=True)
    script = tmp_path / "hostile.py"
    script.write_text(SERVER)
    (work / ".pi_notebook" / "mcp.json").write_text(json.dumps({"mcpServers": {
        "h": {"command": sys.executable, "args": [str(script), "10000", "20"]}}}))
    kernel = Kernel(cwd=work, env={"HOME": str(tmp_path / "home"), "PI_NOTEBOOK_CACHE": str(tmp_path / "cache")})
    try:
        kernel.connect_frontend()
        kernel.ok(faux_setup(None))
        kernel.ok("%agent model faux/faux-1")
        kernel.ok("%config AgentMagics.approval = 'auto'")
        # the first use of MCP imports the SDK (a fixed cost of a second or more, whatever the
        # server sends): done before, so the probes measure what the server's sizes cost
        kernel.ok("import mcp.client.session, mcp.client.stdio, jsonschema.validators, pi_notebook.agent")
        calls = "[faux_tool_call('h__png', {}), faux_tool_call('h__gif', {}), faux_tool_call('h__webp', {})]"
        gaps = []
        for prompt in ("first", "second"):  # the tool list is read again at every run start
            kernel.ok(f"faux.set_responses([faux_assistant_message({calls}, stop_reason='toolUse'), "
                      "faux_assistant_message('done')])")
            kernel.ok(f"%%agent\n{prompt}")
            gaps += probe_until_idle(kernel)
            assert not kernel.ev(f"{RUNTIME}.is_running()"), "the run did not end"
        print(f"probe replies: {len(gaps)}, longest {max(gaps):.2f} s", [round(g, 2) for g in gaps])
        toolset = kernel.ev(f"sorted(t for _, t in {RUNTIME}.mcp().manager.toolset.origin.values())")
        assert len(toolset) <= 100 and "refs" not in toolset and "png" in toolset
        results = kernel.ev(f"[[(b.type, getattr(b, 'text', '')[:300]) for b in m.content] for m in "
                            f"{RUNTIME}.get_agent().state.messages if m.role == 'toolResult']")
        assert len(results) == 6, results
        for blocks in results:
            assert [kind for kind, _ in blocks] == ["text"], blocks  # no image attached
        texts = [blocks[0][1] for blocks in results]
        assert "12000x12000 omitted" in texts[0] and "8000x8000 omitted" in texts[1], texts
        assert "not a valid image/webp image" in texts[2], texts
        # before: no reply for over 60 s (every tool's schema checked, the $ref schema inlined
        # to 2**20 nodes); generous for a shared machine
        assert max(gaps) < 4.0, gaps
    finally:
        kernel.shutdown()
