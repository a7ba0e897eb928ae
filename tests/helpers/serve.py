"""A served test kernel and outside clients in their own processes (mcp_client.py)."""

from __future__ import annotations

import atexit
import itertools
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


class ClientRun:
    """One plan running in a client process: the shared one (``--serve``) or its own."""

    def __init__(self, process: subprocess.Popen[str], plan_id: str | None) -> None:
        self.process = process
        self.plan_id = plan_id  # None: a process of its own, ended by finish()

    def alive(self) -> bool:
        return self.process.poll() is None

    def readline(self) -> dict[str, Any]:
        """The plan's next line (lines of earlier, abandoned plans are skipped)."""
        assert self.process.stdout is not None
        while True:
            raw = self.process.stdout.readline()
            if not raw:
                raise AssertionError("the client process ended")
            if raw.startswith("{"):
                line = json.loads(raw)
                if self.plan_id is None or line.get("plan") == self.plan_id:
                    return line


_shared: list[subprocess.Popen[str]] = []
_plans = itertools.count(1)


def _shared_process() -> subprocess.Popen[str]:
    if not _shared or _shared[0].poll() is not None:
        _shared[:] = [subprocess.Popen([sys.executable, str(CLIENT), "--serve"], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True, bufsize=1)]
        atexit.register(_shared[0].kill)
    return _shared[0]


def start_client(plan: dict[str, Any], *, own_process: bool = False) -> ClientRun:
    """Start ``plan``; ``own_process`` for a client that must run beside another one."""
    if own_process:
        return ClientRun(subprocess.Popen(client_command(plan), stdout=subprocess.PIPE, text=True), None)
    process = _shared_process()
    plan_id = f"p{next(_plans)}"
    assert process.stdin is not None
    process.stdin.write(json.dumps({**plan, "id": plan_id}) + "\n")
    process.stdin.flush()
    return ClientRun(process, plan_id)


def finish(run: ClientRun, timeout: float = 180) -> list[dict[str, Any]]:
    if run.plan_id is None:
        out, err = run.process.communicate(timeout=timeout)
        return parse(out, err or "")
    lines = []
    while not (line := run.readline()).get("done"):
        lines.append(line)
    assert lines, "the client printed nothing"
    return lines


def run_client(plan: dict[str, Any], timeout: float = 180) -> list[dict[str, Any]]:
    return finish(start_client(plan), timeout)


def parse(out: str, err: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert lines, f"the client printed nothing; stderr:\n{err[-3000:]}"
    return lines


def calls(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("step") == "call"]
