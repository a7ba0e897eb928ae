"""The supervisor of one shared llama-server: started by the first kernel, gone with the last.

Run as a script (``python supervisor.py SPEC.json``, standard library only, so it starts
in milliseconds and imports nothing of the package). Why a supervisor at all
(docs/design/local-model.md, "One server per model"): kernels on the same machine share one
server per model, so the server cannot be the child of one kernel (it would die with it,
under the other kernels' feet) nor outlive all of them (690 MB per model left running).

* Kernels that use the server hold a *shared* ``flock`` on the lease file; the operating
  system drops it when a kernel exits for any reason, SIGKILL included. Every 0.25 s the
  supervisor tries an *exclusive* non-blocking lock: when it gets one, nobody holds a lease;
  after ``linger_s`` of that it removes the port file (still holding the lock, so no kernel
  can pick up a dying server) and stops llama-server.
* llama-server dies with the supervisor: ``PR_SET_PDEATHSIG`` on Linux; elsewhere a watchdog
  pipe (a tiny ``sh`` wrapper that kills the server when the supervisor's end of its stdin
  pipe closes, which also happens on SIGKILL).
* Once healthy it writes the port file (atomically, 0600) that kernels read, then warms the
  prompt cache in the background with the system prompt + tools prefix the provider last
  sent for this model (the warm file), so a new kernel's first answer skips reading it. Its
  requests carry the server's API key (the spec's ``key`` file).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

POLL_S = 0.25
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as resp:
            return resp.status == 200 and json.loads(resp.read() or b"{}").get("status") == "ok"
    except (OSError, ValueError):
        return False


def _read_own(path: Path) -> str:
    """A file of ours that nobody else may read or write (server.read_private, reduced)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as f:
        info = os.fstat(f.fileno())
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise OSError(f"{path} is not a private file of ours")
        return f.read()


def _warm(port: int, warm_path: Path, model: str, key_path: Path | None) -> None:
    """One request with the remembered system prompt + tools and a 1-token answer."""
    try:
        prefix = json.loads(_read_own(warm_path))
        key = _read_own(key_path).strip() if key_path is not None else ""
    except (OSError, ValueError):
        return
    body = {"model": model, "messages": [*prefix.get("messages", []), {"role": "user", "content": "hi"}],
            "max_tokens": 1, "temperature": 0, "stream": False}
    if prefix.get("tools"):
        body.update(tools=prefix["tools"], tool_choice="none")
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                     data=json.dumps(body).encode(), method="POST", headers=headers)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=300) as resp:
            resp.read()
        print(f"supervisor: warmed the prompt cache in {time.monotonic() - started:.1f} s", flush=True)
    except OSError as exc:
        print(f"supervisor: warm-up failed: {exc}", flush=True)


def _write_atomic(path: Path, data: Any) -> None:
    """``data`` (JSON, or text as is) into ``path`` as a 0600 file, atomically."""
    staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))
    staged.replace(path)


def _spawn(cmd: list[str], log: Any) -> subprocess.Popen[bytes]:
    if sys.platform.startswith("linux"):
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=_die_with_parent)
    # watchdog pipe: `cat` returns when our end of its stdin closes, then the wrapper kills the server
    wrapper = ['sh', '-c', '"$@" </dev/null & pid=$!; cat >/dev/null; kill $pid 2>/dev/null', "sh", *cmd]
    return subprocess.Popen(wrapper, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.PIPE)


def _leased(lease_fd: int) -> bool:
    """Some kernel holds a (shared) lease: our exclusive try fails."""
    try:
        fcntl.flock(lease_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(lease_fd, fcntl.LOCK_UN)
    return False


def supervise(spec: dict[str, Any]) -> int:
    info_path, lease_path = Path(spec["info"]), Path(spec["lease"])
    error_path = Path(spec["error"])
    port, linger = int(spec["port"]), float(spec.get("linger_s", 1.0))
    with open(spec["log"], "ab", buffering=0) as log:
        proc = _spawn(spec["cmd"], log)

        def stop(*_: Any) -> None:
            with contextlib.suppress(OSError):
                if info_path.exists() and json.loads(info_path.read_text()).get("supervisor") == os.getpid():
                    info_path.unlink()
            if proc.stdin is not None:  # the watchdog pipe: the wrapper kills the server
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
            sys.exit(0)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a kernel's interrupt is not meant for us
        deadline = time.monotonic() + float(spec.get("health_timeout_s", 120))
        lease_fd = os.open(lease_path, os.O_RDWR | os.O_CREAT, 0o600)
        unused_since: float | None = None
        while not _healthy(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                reason = (f"llama-server exited with code {proc.returncode}" if proc.poll() is not None
                          else "llama-server did not become healthy in time")
                _write_atomic(error_path, reason)
                stop()
            if not _leased(lease_fd):  # the kernel that asked for it is gone (killed, aborted and exited)
                unused_since = unused_since if unused_since is not None else time.monotonic()
                if time.monotonic() - unused_since >= linger:
                    print("supervisor: no kernel waits for the server any more; stopping it", flush=True)
                    stop()
            else:
                unused_since = None
            time.sleep(0.1)
        _write_atomic(info_path, {"port": port, "pid": proc.pid, "supervisor": os.getpid(),
                                  "model": spec["model"], "threads": spec["threads"],
                                  "slots": spec.get("slots"), "binary": spec.get("binary"), "log": spec["log"]})
        print(f"supervisor: llama-server {spec['model']} ready on port {port} "
              f"({spec['threads']} threads, {spec.get('slots')} slots)", flush=True)
        key_path = Path(spec["key"]) if spec.get("key") else None
        threading.Thread(target=_warm, args=(port, Path(spec["warm"]), spec["model"], key_path),
                         daemon=True).start()
        idle_since: float | None = None
        while proc.poll() is None:
            time.sleep(POLL_S)
            try:
                fcntl.flock(lease_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                idle_since = None  # some kernel holds a lease
                continue
            now = time.monotonic()
            idle_since = idle_since if idle_since is not None else now
            if now - idle_since >= linger:
                print("supervisor: no kernel uses the server any more; stopping it", flush=True)
                stop()  # exits while holding the lock: nobody reads a port file being removed
            fcntl.flock(lease_fd, fcntl.LOCK_UN)
        print(f"supervisor: llama-server exited with code {proc.returncode}", flush=True)
        stop()
    return 0


if __name__ == "__main__":
    sys.exit(supervise(json.loads(_read_own(Path(sys.argv[1])))))
