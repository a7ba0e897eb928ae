"""Starting the shared embedded server from a real kernel: ``%agent abort`` ends a
run whose server is slow to become healthy, a cache path that is not a folder ends the run
with one clear line, and in both cases the next plain cell runs. The server is the fake
llama-server of tests/local (no model needed)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from helpers.kernel import RUNTIME, Kernel

pytestmark = pytest.mark.kernel

LAST = "__import__('pi_notebook').get_agent().state.messages[-1]"
FAKE = Path(__file__).resolve().parents[1] / "local" / "fake_llama_server.py"


def _interactive_kernel(tmp_path: Path, **env: str) -> tuple[Kernel, Path]:
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    binary.chmod(0o755)
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF fake")
    kernel = Kernel(env={"PI_NOTEBOOK_LLAMA_SERVER": str(binary), "PI_NOTEBOOK_LLAMA_THREADS": "1", **env})
    kernel.connect_frontend()  # a frontend: %%agent runs in the background
    kernel.ok("%load_ext pi_notebook\n%config AgentMagics.autosave = False")
    kernel.ok(f"%agent model local/{gguf}")
    return kernel, gguf


def _gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.1)
    return False


def test_agent_abort_ends_a_run_whose_server_is_slow_to_start(tmp_path):
    pid_file = tmp_path / "fake.pid"
    kernel, _ = _interactive_kernel(tmp_path, PI_NOTEBOOK_CACHE=str(tmp_path / "cache"),
                                    FAKE_LLAMA_HEALTH_DELAY="60", FAKE_LLAMA_PID=str(pid_file))
    try:
        kernel.ok("%%agent\nhello\n")
        kernel.wait_for(f"{RUNTIME}.is_running()", timeout=10)
        time.sleep(1.0)  # the server is starting (it takes 60 s to become healthy)
        assert kernel.ev(f"{RUNTIME}.is_running()") is True
        started = time.monotonic()
        kernel.ok("%agent abort")
        kernel.wait_for(f"not {RUNTIME}.is_running()", timeout=10)
        took = time.monotonic() - started
        assert took < 5, f"the run ended {took:.1f} s after %agent abort"  # was 20+ s
        assert kernel.ev(f"{LAST}.stop_reason") == "aborted"
        assert kernel.ok("print('next cell')", timeout=10)["status"] == "ok"
    finally:
        kernel.shutdown()
    # the server still starting for a kernel that is gone stops (it used to wait to be healthy)
    assert pid_file.exists()
    assert _gone(int(pid_file.read_text())), "the server kept starting after its kernel exited"


def test_a_cache_path_that_is_a_file_ends_the_run_with_one_clear_line(tmp_path):
    cache = tmp_path / "cache-is-a-file"
    cache.write_text("not a folder")
    kernel, _ = _interactive_kernel(tmp_path, PI_NOTEBOOK_CACHE=str(cache))
    try:
        kernel.ok("%%agent\nhello\n")
        kernel.wait_for(f"not {RUNTIME}.is_running()", timeout=30)
        assert kernel.ev(f"{LAST}.stop_reason") == "error"
        message = kernel.ev(f"{LAST}.error_message")
        assert str(cache) in message.splitlines()[0] and "embedded model" in message, message
        assert kernel.ok("print('next cell')", timeout=10)["status"] == "ok"
        kernel.ok("%%agent\nagain\n")  # and a second run ends the same way
        kernel.wait_for(f"not {RUNTIME}.is_running()", timeout=30)
        assert kernel.ev(f"{LAST}.stop_reason") == "error"
    finally:
        kernel.shutdown()
