"""A served test kernel and outside clients in their own processes (mcp_client.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

CLIENT = Path(__file__).resolve().parent / "mcp_client.py"


def serve(kernel: Any, allow_stdin: bool = False) -> tuple[str, str, str, str]:
    """``%agent serve`` in ``kernel``: (url, token, the cell's printed text, its msg_id).
    ``allow_stdin=False`` is how nbclient sends cells: nobody sits at this client."""
    mid = kernel.start("%agent serve", allow_stdin=allow_stdin)
    kernel.wait_reply(mid, timeout=120)
    text = kernel.text_of(mid)
    url = re.search(r"at (http://127\.0\.0\.1:\d+/mcp)", text)
    path = re.search(r"The bearer token is in (\S+) ", text)
    assert url and path, text
    return url.group(1), Path(path.group(1)).read_text().strip(), text, mid


def client_command(plan: dict[str, Any]) -> list[str]:
    return [sys.executable, str(CLIENT), json.dumps(plan)]


def run_client(plan: dict[str, Any], timeout: float = 180) -> list[dict[str, Any]]:
    done = subprocess.run(client_command(plan), capture_output=True, text=True, timeout=timeout)
    return parse(done.stdout, done.stderr)


def start_client(plan: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(client_command(plan), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen[str], timeout: float = 180) -> list[dict[str, Any]]:
    out, err = process.communicate(timeout=timeout)
    return parse(out, err)


def parse(out: str, err: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert lines, f"the client printed nothing; stderr:\n{err[-3000:]}"
    return lines


def calls(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("step") == "call"]
