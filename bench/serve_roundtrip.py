"""A served kernel seen from an outside MCP client, in a real kernel.

Prints:
- the median / p90 round trip of a small ``execute`` call (``1 + 1``) from the SDK's client over
  streamable HTTP, as a ratio against a bare ``execute_request`` of the same code sent with
  jupyter_client to the same kernel in the same run (target <= 1.5x);
- the median / max ``tools/list`` latency while a user cell sleeps (target: well under 1 s, the
  cell does not hold it up).

The client lives in this process (one connection, reused), the kernel in its own, with the
approval policy ``auto`` and no widget frontend (no views are drawn).

Usage: ``python bench/serve_roundtrip.py [--n 30]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the helpers package

from helpers.kernel import Kernel
from helpers.serve import serve


def bare_round_trip(kernel: Kernel, code: str) -> float:
    start = time.perf_counter()
    kernel.wait_reply(kernel.kc.execute(code), timeout=30)
    return time.perf_counter() - start


def summary(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return f"median {statistics.median(ordered) * 1000:7.1f} ms, p90 {p90 * 1000:7.1f} ms"


async def served_numbers(kernel: Kernel, url: str, token: str, n: int) -> tuple[list[float], list[float]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=120))
    async with Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as client:
        for _ in range(3):  # warm: imports and the first capture in the kernel
            await client.call_tool("execute", {"code": "1 + 1"})
        calls = []
        for _ in range(n):
            start = time.perf_counter()
            result = await client.call_tool("execute", {"code": "1 + 1"})
            calls.append(time.perf_counter() - start)
            assert not result.is_error
        cell = kernel.kc.execute("import time; time.sleep(4)")
        await asyncio.sleep(0.5)  # the cell is running
        lists = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            start = time.perf_counter()
            await client.list_tools()
            lists.append(time.perf_counter() - start)
        kernel.wait_reply(cell, timeout=30)
    return calls, lists


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=30)
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory() as folder, Kernel(env={"PI_NOTEBOOK_SERVE_DIR": folder,
                                                              "PI_NOTEBOOK_APPROVAL": "auto"}) as kernel:
        kernel.ok("%load_ext pi_notebook")
        url, token, _, _ = serve(kernel)
        for _ in range(3):
            bare_round_trip(kernel, "1 + 1")
        bare = [bare_round_trip(kernel, "1 + 1") for _ in range(n)]
        calls, lists = asyncio.run(served_numbers(kernel, url, token, n))
        bare_again = [bare_round_trip(kernel, "1 + 1") for _ in range(n)]  # the machine's load drifts
    baseline = statistics.median(bare + bare_again)
    ratio = statistics.median(calls) / baseline
    print(f"bare execute_request (jupyter_client): {summary(bare + bare_again)}")
    print(f"MCP execute over HTTP:                 {summary(calls)}")
    print(f"ratio MCP / bare: {ratio:.2f}x (target <= 1.5x)")
    print(f"tools/list while a cell sleeps:        {summary(lists)}, max {max(lists) * 1000:.1f} ms "
          f"over {len(lists)} calls (target < 1000 ms)")


if __name__ == "__main__":
    main()
