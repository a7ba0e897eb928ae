"""In a real kernel: files the product reads on its own are only the project's (AGENTS.md as a
FIFO and as a link to a credentials file out of the project), and what an MCP server starts
dies with the kernel (a server's own child process, the kernel SIGKILLed). One kernel: the
SIGKILL comes last."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from helpers.processes import alive

from helpers.kernel import RECORDING_MODEL, Kernel, faux_setup

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]

FAMILY = str(Path(__file__).resolve().parents[1] / "mcp" / "family_server.py")
AWS_KEY = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY0"

SCRIPT = RECORDING_MODEL


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_project_files_and_a_server_family_in_one_kernel(tmp_path):
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {AWS_KEY}\n")
    work = tmp_path / "repo" / "analysis"
    (work.parent / ".git").mkdir(parents=True)
    (work / ".pi_notebook").mkdir(parents=True)
    os.mkfifo(work / "AGENTS.md")  # no writer: a blocking open() would hang the kernel
    (work.parent / "AGENTS.md").symlink_to(home / ".aws" / "credentials")
    (work / ".pi_notebook" / "mcp.json").write_text(json.dumps({"mcpServers": {
        "fam": {"command": sys.executable, "args": [FAMILY], "autoApprove": ["family"]}}}))
    kernel = Kernel(cwd=work, env={"HOME": str(home), "PI_NOTEBOOK_CACHE": str(tmp_path / "cache")},
                    log_path=tmp_path / "kernel.log")
    try:
        kernel.ok(faux_setup(2000) + SCRIPT)
        kernel.ok("%agent model faux/faux-1")
        kernel.ok("faux.set_responses([answer('done')])")
        started = time.monotonic()
        reply = kernel.ok("%%agent --approve auto --wait\nhello", timeout=120)
        assert reply["status"] == "ok" and time.monotonic() - started < 60
        system = kernel.ev("RECEIVED[0]")
        assert AWS_KEY not in system and "aws_secret_access_key" not in system
        shown = json.dumps([m["content"] for m in kernel.messages()])
        assert "not a regular file" in shown or "outside the project" in shown  # the user is told

        kernel.ok("import pi_notebook, os\nfamily = await pi_notebook.mcp.call('fam', 'family')", timeout=120)
        family = kernel.ev("family")
        kernel_pid = kernel.ev("os.getpid()")
        assert alive(family["server"]) and alive(family["child"])
        os.kill(kernel_pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while (alive(family["server"]) or alive(family["child"])) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(family["server"]), "the MCP server outlived its SIGKILLed kernel"
        assert not alive(family["child"]), "the MCP server's own child outlived the SIGKILLed kernel"
    finally:
        kernel.shutdown()
