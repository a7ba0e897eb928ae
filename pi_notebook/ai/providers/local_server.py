"""The kernel's side of the shared llama-server: a lease, the port file, the start lock.

``LlamaServer(model_id).start_blocking()`` (called in a worker thread, never on the loop):

1. takes a shared ``flock`` on ``servers/<key>.lease`` in the cache and keeps it: that is
   this kernel's lease (the OS drops it when the kernel exits, SIGKILL included);
2. under the exclusive start lock ``servers/<key>.start``, reads the port file
   ``servers/<key>.json``; a live, healthy server there is used as is;
3. otherwise starts the supervisor (local_supervisor.py), which starts llama-server on a
   free port, logs to ``logs/llama-server-<key>.log`` in the cache, writes the port file when
   healthy and stops the server when no lease is left.

``stop()`` drops the lease (the server stops when it was the last one). The number of
threads is chosen when the server starts, from the machine's cores and load
(``choose_threads``) unless ``PI_NOTEBOOK_LLAMA_THREADS`` says otherwise.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from .local_setup import (
    PACKAGED_MODELS,
    SETUP_HINT,
    LocalSetupError,
    cache_dir,
    find_llama_server,
    resolve_model_path,
)

__all__ = ["CONTEXT_WINDOW", "LlamaServer", "choose_threads", "server_key", "servers_dir", "remember_prefix"]

HEALTH_TIMEOUT_S = 120.0
CONTEXT_WINDOW = 8192  # tokens of the server's one slot; local.py's Model says the same
SUPERVISOR = Path(__file__).with_name("local_supervisor.py")


def servers_dir() -> Path:
    return cache_dir() / "servers"


def server_key(model_id: str) -> str:
    """A file-name-safe key: the packaged name, or a digest of the GGUF path."""
    if model_id in PACKAGED_MODELS:
        return model_id
    path = str(Path(model_id).expanduser().resolve())
    return "gguf-" + re.sub(r"[^A-Za-z0-9.-]", "_", Path(path).stem)[:40] + "-" + \
        hashlib.sha256(path.encode()).hexdigest()[:12]


def choose_threads(cpus: int | None = None, load: float | None = None) -> int:
    """Threads for a new server: every core that is not busy, at least one.

    Two threads on two cores while something else computes collapse llama.cpp to <1 tok/s
    (its threads spin-wait on each other), so a busy core is left out: on a 2-core machine
    that means 2 threads only when the 1-minute load is below ~0.5.
    """
    explicit = os.environ.get("PI_NOTEBOOK_LLAMA_THREADS", "").strip()
    if explicit.isdigit() and int(explicit) > 0:
        return int(explicit)
    if cpus is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count() or 1
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            load = float(cpus)  # unknown: assume busy
    return max(1, min(cpus, math.floor(cpus - load + 0.5)))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return resp.status == 200 and json.loads(resp.read() or b"{}").get("status") == "ok"
    except (OSError, ValueError):
        return False


def remember_prefix(model_id: str, messages: list[dict[str, Any]], tools: list[Any]) -> None:
    """Keep the system prompt + tools of the latest request: the next server start warms its
    prompt cache with them (local_supervisor.py)."""
    system = [m for m in messages[:1] if m.get("role") == "system"]
    data = json.dumps({"messages": system, "tools": tools}, sort_keys=True)
    path = servers_dir() / f"{server_key(model_id)}.warm.json"
    with contextlib.suppress(OSError):
        if path.is_file() and path.read_text() == data:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_suffix(f".{os.getpid()}.tmp")
        staged.write_text(data)
        staged.replace(path)


class LlamaServer:
    """This kernel's lease on the shared llama-server of one model."""

    def __init__(self, model_id: str, threads: int | None = None) -> None:
        self.model_id = model_id
        self.key = server_key(model_id)
        self.requested_threads = threads
        self.port: int | None = None
        self.pid: int | None = None
        self.threads: int | None = None
        self.log_path: Path | None = None
        self._lease_fd: int | None = None
        self._lock = threading.Lock()

    def _path(self, suffix: str) -> Path:
        return servers_dir() / f"{self.key}{suffix}"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def running(self) -> bool:
        """The lease is held and the server process is alive."""
        return self._lease_fd is not None and _pid_alive(self.pid)

    def _read_info(self) -> dict[str, Any] | None:
        try:
            info = json.loads(self._path(".json").read_text())
        except (OSError, ValueError):
            return None
        ok = (isinstance(info, dict) and _pid_alive(info.get("pid")) and isinstance(info.get("port"), int)
              and _healthy(info["port"]))
        return info if ok else None

    def _adopt(self, info: dict[str, Any]) -> str:
        self.port, self.pid, self.threads = info["port"], info["pid"], info.get("threads")
        self.log_path = Path(info["log"]) if info.get("log") else None
        return self.base_url

    def start_blocking(self) -> str:
        """Join the running server or start it; raises LocalSetupError with a clear message."""
        with self._lock:
            if self.running() and self.port is not None and _healthy(self.port):
                return self.base_url
            servers_dir().mkdir(parents=True, exist_ok=True)
            if self._lease_fd is None:
                fd = os.open(self._path(".lease"), os.O_RDWR | os.O_CREAT, 0o600)
                fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while a supervisor is deciding to stop
                self._lease_fd = fd
            start_fd = os.open(self._path(".start"), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(start_fd, fcntl.LOCK_EX)
                info = self._read_info()
                if info is None:
                    info = self._launch()
                return self._adopt(info)
            except BaseException:
                self._release()
                raise
            finally:
                os.close(start_fd)

    def _launch(self) -> dict[str, Any]:
        binary = find_llama_server()
        if binary is None:
            raise LocalSetupError(
                "llama-server is not installed. Build it once with "
                f"`{SETUP_HINT} binary` (about 8 minutes), put llama-server on PATH, "
                "or set PI_NOTEBOOK_LLAMA_SERVER to its path."
            )
        gguf, template = resolve_model_path(self.model_id)
        port = _free_port()
        threads = self.requested_threads or choose_threads()
        logs = cache_dir() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"llama-server-{self.key}.log"
        cmd = [str(binary), "-m", str(gguf), "-a", self.model_id, "--host", "127.0.0.1",
               "--port", str(port), "-c", str(CONTEXT_WINDOW), "-np", "1", "-t", str(threads), "-tb", str(threads)]
        if template is not None:
            cmd += ["--jinja", "--chat-template-file", str(template)]
        for stale in (".json", ".error"):
            self._path(stale).unlink(missing_ok=True)
        spec = {"cmd": cmd, "port": port, "model": self.model_id, "threads": threads, "log": str(log),
                "info": str(self._path(".json")), "lease": str(self._path(".lease")),
                "error": str(self._path(".error")), "warm": str(self._path(".warm.json")),
                "health_timeout_s": HEALTH_TIMEOUT_S}
        spec_path = self._path(".spec.json")
        spec_path.write_text(json.dumps(spec))
        with open(log, "ab") as out:
            out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n".encode())
            supervisor = subprocess.Popen(
                [sys.executable, str(SUPERVISOR), str(spec_path)], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # the kernel's Stop button (SIGINT) must not reach it
            )
        deadline = time.monotonic() + HEALTH_TIMEOUT_S + 5
        while time.monotonic() < deadline:
            info = self._read_info()
            if info is not None:
                return info
            if supervisor.poll() is not None:
                reason = self._path(".error").read_text() if self._path(".error").exists() else \
                    f"the supervisor exited with code {supervisor.returncode}"
                raise LocalSetupError(f"{reason}:\n{self._log_tail(log)}")
            time.sleep(0.1)
        supervisor.terminate()
        raise LocalSetupError(f"llama-server did not become healthy in {HEALTH_TIMEOUT_S:.0f} s")

    @staticmethod
    def _log_tail(path: Path, lines: int = 15) -> str:
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def log_tail(self, lines: int = 15) -> str:
        return self._log_tail(self.log_path, lines) if self.log_path is not None else ""

    def _release(self) -> None:
        fd, self._lease_fd = self._lease_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing drops the flock

    def stop(self) -> None:
        """Drop this kernel's lease; the supervisor stops the server when it was the last."""
        with self._lock:
            self._release()
            self.pid = None
