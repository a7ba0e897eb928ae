"""An outside MCP client in its own process, the SDK's own client over streamable HTTP.

``python mcp_client.py PLAN_JSON`` with ``{"url", "token" (or null), "origin" (or null),
"steps": [["list"] | ["call", name, arguments] | ["sleep", seconds] | ["wait", path] |
["touch", path]]}`` (or ``{"sessions": [plan, ...]}``, one connection after the other); ``--serve`` reads such
plans from stdin, one per line (``serve_plans``). One JSON line per
step on stdout: ``{"step", "t0", "t1", "tools" | "text", "is_error", "progress"}`` (monotonic
times of this process around the step). A connection that is refused prints
``{"error": "<exception type>", "status": <HTTP status or null>}`` and exits 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


_PLAN: dict[str, Any] = {"id": None}  # the plan being run: every line names it


def _emit(line: dict[str, Any]) -> None:
    print(json.dumps({**line, "plan": _PLAN["id"]}), flush=True)


async def main(plan: dict[str, Any]) -> None:
    """One connection per entry of ``plan["sessions"]`` (one process pays the imports once),
    or the plan itself as the one session."""
    for session in plan.get("sessions") or [plan]:
        await connect(session)


async def connect(plan: dict[str, Any]) -> None:
    headers = {}
    if plan.get("token"):
        headers["Authorization"] = f"Bearer {plan['token']}"
    if plan.get("origin"):
        headers["Origin"] = plan["origin"]
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=600))
    transport = streamable_http_client(plan["url"], http_client=http)
    try:
        async with Client(transport, mode="legacy", cache=None, read_timeout_seconds=600,
                          client_info={"name": plan.get("name", "test-client"), "version": "1"}) as client:
            _emit({"connected": True})
            for step in plan["steps"]:
                t0 = time.monotonic()
                if step[0] == "list":
                    listed = await client.list_tools()
                    _emit({"step": "list", "t0": t0, "t1": time.monotonic(),
                           "tools": {t.name: {"read_only": t.annotations.read_only_hint if t.annotations else None,
                                              "destructive": t.annotations.destructive_hint if t.annotations else None}
                                     for t in listed.tools}})
                elif step[0] == "call":
                    progress: list[str] = []

                    async def on_progress(done: float, total: float | None, message: str | None,
                                          notes: list[str] = progress) -> None:
                        notes.append(message or "")

                    result = await client.call_tool(step[1], step[2], progress_callback=on_progress)
                    texts = [getattr(c, "text", None) or f"<{getattr(c, 'type', '?')}>" for c in result.content]
                    _emit({"step": "call", "tool": step[1], "t0": t0, "t1": time.monotonic(),
                           "text": "\n".join(texts), "is_error": bool(result.is_error),
                           "kinds": [getattr(c, "type", "?") for c in result.content], "progress": progress})
                elif step[0] == "sleep":
                    await asyncio.sleep(step[1])
                elif step[0] == "touch":  # tell the test this point was reached
                    open(step[1], "w").close()
                elif step[0] == "wait":  # until a file exists (the test's go signal)
                    give_up = time.monotonic() + 120  # an abandoned plan must not hold the process
                    while not os.path.exists(step[1]) and time.monotonic() < give_up:
                        await asyncio.sleep(0.02)
    except BaseException as exc:  # the refusals are what some tests want to see
        status = None
        seen: list[BaseException] = [exc]
        while seen:
            current = seen.pop()
            response = getattr(current, "response", None)
            if response is not None and getattr(response, "status_code", None):
                status = response.status_code
            seen.extend(getattr(current, "exceptions", []) or [])
            if current.__cause__ is not None:
                seen.append(current.__cause__)
            if current.__context__ is not None and current.__context__ is not current:
                seen.append(current.__context__) if len(seen) < 50 else None
        _emit({"error": type(exc).__name__, "status": status, "message": str(exc)[:500]})


async def serve_plans() -> None:
    """``--serve``: one plan per line on stdin, each ended by a ``{"done": true}`` line (one
    process for many tests: the SDK's imports are paid once)."""
    while line := await asyncio.to_thread(sys.stdin.readline):
        plan = json.loads(line)
        _PLAN["id"] = plan.get("id")
        await main(plan)
        _emit({"done": True})


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        asyncio.run(serve_plans())
    else:
        asyncio.run(main(json.loads(sys.argv[1])))
