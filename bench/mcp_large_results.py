"""What a large MCP result costs the process that receives it (the kernel), per transport.

A real SDK server (tests/mcp/big_server.py, tool ``big``) answers with a text of 1, 10 and 50 MB
over stdio, over streamable HTTP with SSE events and with JSON bodies. For each call through
``McpServer.call`` (what a kernel runs): wall time, this process's CPU time (all its threads:
the kernel's share, the server's own is in its process), the longest gap of a 10 ms ticker on
the same event loop (how long the kernel could not have answered anything), and the outcome
(the text's length, or the error the call got).

The baseline in the same run is the SDK's own stdio client (``mcp.Client`` over
``StdioServerParameters``), at the sizes given by ``--sdk-sizes`` (its cost grows with the
square of the size: 50 MB is over a minute of CPU). Printed ratios: our CPU at the largest size
over our CPU at the smallest (linear work keeps it near the size ratio or below it, since the
cap stops the work), and the SDK's CPU over ours at each size both ran.

    /work/main/.venv/bin/python bench/mcp_large_results.py [--sizes 1,10,50] [--sdk-sizes 1,10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "mcp"))
SERVER = ROOT / "tests" / "mcp" / "big_server.py"
MB = 1_000_000


async def measure(call: Callable[[], Awaitable[Any]]) -> tuple[float, float, float, str]:
    """(wall s, CPU s, longest loop gap s, outcome) of one call."""
    longest = 0.0
    running = True

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            longest = max(longest, now - last - 0.01)
            last = now

    tick = asyncio.ensure_future(ticker())
    await asyncio.sleep(0.05)
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        result = await call()
        texts = [getattr(block, "text", "") for block in getattr(result, "content", [])]
        outcome = f"ok, {sum(len(t) for t in texts) / MB:.1f} MB of text"
    except Exception as exc:  # the outcome is what is measured
        outcome = f"error: {str(exc)[:90]}"
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    running = False
    await tick
    return wall, cpu, longest, outcome


def row(label: str, size: float, figures: tuple[float, float, float, str]) -> None:
    wall, cpu, gap, outcome = figures
    print(f"  {label:<22} {size:5g} MB  wall {wall:6.2f} s  cpu {cpu:6.2f} s  longest loop gap {gap:5.2f} s  {outcome}",
          flush=True)


async def ours(transport: str, sizes: list[float]) -> dict[float, float]:
    from mcp_helpers import http_server

    from pi_notebook.mcp.config import ServerConfig
    from pi_notebook.mcp.server import McpServer

    cpu: dict[float, float] = {}

    async def run(config: ServerConfig) -> None:
        server = McpServer(config)
        await server.start()
        assert server.state == "connected", server.reason
        try:
            await server.call("echo", {"text": "warm"}, timeout_s=60)  # first-call imports out of the figures
            for size in sizes:
                figures = await measure(lambda size=size: server.call("big", {"size": int(size * MB)}, timeout_s=600))
                row(f"pi_notebook {transport}", size, figures)
                cpu[size] = figures[1]
            after = await server.call("echo", {"text": "still here"}, timeout_s=60)
            print(f"  next call on the same server: {after.content[0].text!r}", flush=True)
        finally:
            await server.stop()

    if transport == "stdio":
        await run(ServerConfig(name="big", command=sys.executable, args=[str(SERVER)]))
    else:
        with http_server(transport, SERVER) as url:
            await run(ServerConfig(name="big", transport="http", url=url))
    return cpu


async def sdk(sizes: list[float]) -> dict[float, float]:
    from mcp import Client, StdioServerParameters

    cpu: dict[float, float] = {}
    async with Client(StdioServerParameters(command=sys.executable, args=[str(SERVER)]), cache=None) as client:
        await client.call_tool("echo", {"text": "warm"})
        for size in sizes:
            figures = await measure(lambda size=size: client.call_tool("big", {"size": int(size * MB)}))
            row("SDK stdio_client", size, figures)
            cpu[size] = figures[1]
    return cpu


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,10,50", help="MB, comma-separated")
    parser.add_argument("--sdk-sizes", default="1,10", help="MB for the SDK baseline ('' for none)")
    parser.add_argument("--transports", default="stdio,http,http-json")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes.split(",") if s]
    sdk_sizes = [float(s) for s in args.sdk_sizes.split(",") if s]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PI_NOTEBOOK_CACHE"] = str(Path(tmp) / "cache")
        print("one text result of each size, per transport:")
        base = asyncio.run(sdk(sdk_sizes)) if sdk_sizes else {}
        for transport in args.transports.split(","):
            cpu = asyncio.run(ours(transport, sizes))
            small, large = min(cpu), max(cpu)
            print(f"  {transport}: CPU at {large:g} MB / CPU at {small:g} MB = "
                  f"{cpu[large] / max(cpu[small], 1e-3):.1f}x (size ratio {large / small:g}x)")
            if transport == "stdio":
                for size in sorted(set(base) & set(cpu)):
                    print(f"  stdio at {size:g} MB: SDK stdio_client CPU / ours = "
                          f"{base[size] / max(cpu[size], 1e-3):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
