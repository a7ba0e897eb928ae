"""Overhead of an MCP tool call through pi_notebook vs the SDK's bare ``call_tool``, and the
cost of configured servers at ``%load_ext``.

1. Per call, on two processes of the same stdio server (tests/mcp/server.py, tool ``echo``),
   interleaved: the SDK's bare ``Client.call_tool`` (the floor), ``McpServer.call`` (our
   lifecycle task, deadline and Abort plumbing), and the AgentTool's ``execute`` (what the agent
   loop calls: the above plus result conversion, budgets and redaction). Wall-clock medians
   (the server's time is the same in every column); the ratio to the floor is printed.
   Aim: agent tool / bare <= 1.2.
2. ``%load_ext pi_notebook`` in a fresh interpreter, in a folder with five configured servers
   vs none (servers start with the first run, so the two should be the same).

    /work/venv/bin/python bench/mcp_overhead.py [--calls N] [--loads N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SERVER = ROOT / "tests" / "mcp" / "server.py"


async def per_call(calls: int) -> dict[str, float]:
    from mcp import Client, StdioServerParameters

    from pi_notebook.mcp.config import ServerConfig
    from pi_notebook.mcp.server import McpServer
    from pi_notebook.mcp.tools import build_tools
    from pi_notebook.tools import PythonToolSettings

    ours = McpServer(ServerConfig(name="bench", command=sys.executable, args=[str(SERVER)]))
    await ours.start()
    assert ours.state == "connected", ours.reason
    settings = PythonToolSettings()
    tool = next(t for t in build_tools([ours], set(), lambda: settings, lambda: 120.0).tools
                if t.name == "bench__echo")
    times: dict[str, list[float]] = {"bare call_tool": [], "McpServer.call": [], "agent tool": []}
    async with Client(StdioServerParameters(command=sys.executable, args=[str(SERVER)]), cache=None) as bare:
        for _ in range(20):  # warm both paths
            await bare.call_tool("echo", {"text": "warm"})
            await tool.execute("id", {"text": "warm"}, None, None)
        for i in range(calls):
            args = {"text": f"call {i}"}
            for name in list(times)[i % 3:] + list(times)[:i % 3]:  # rotate the order
                started = time.perf_counter()
                if name == "bare call_tool":
                    await bare.call_tool("echo", args)
                elif name == "McpServer.call":
                    await ours.call("echo", args, timeout_s=120)
                else:
                    await tool.execute("id", args, None, None)
                times[name].append(time.perf_counter() - started)
    await ours.stop()
    return {name: statistics.median(values) for name, values in times.items()}


def load_ext_seconds(folder: Path, loads: int) -> float:
    code = ("import time\nfrom IPython.core.interactiveshell import InteractiveShell\n"
            "ip = InteractiveShell.instance()\nt = time.perf_counter()\n"
            "ip.run_line_magic('load_ext', 'pi_notebook')\nprint(time.perf_counter() - t)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(folder)}
    values = []
    for _ in range(loads):
        out = subprocess.run([sys.executable, "-c", code], cwd=folder, env=env, capture_output=True,
                             text=True, check=True)
        values.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(values)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PI_NOTEBOOK_CACHE"] = str(Path(tmp) / "cache")
        medians = asyncio.run(per_call(args.calls))
        floor = medians["bare call_tool"]
        print(f"per call (median of {args.calls}, echo over stdio):")
        for name, value in medians.items():
            print(f"  {name:<16} {value * 1000:7.2f} ms  {value / floor:5.2f}x")
        empty, configured = Path(tmp) / "none", Path(tmp) / "five"
        empty.mkdir()
        (configured / ".pi_notebook").mkdir(parents=True)
        (configured / ".pi_notebook" / "mcp.json").write_text(json.dumps({"mcpServers": {
            f"s{i}": {"command": sys.executable, "args": [str(SERVER)]} for i in range(5)}}))
        none_s = load_ext_seconds(empty, args.loads)
        five_s = load_ext_seconds(configured, args.loads)
        print(f"%load_ext (median of {args.loads} fresh interpreters): no servers {none_s * 1000:.1f} ms, "
              f"five configured {five_s * 1000:.1f} ms ({five_s / none_s:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
