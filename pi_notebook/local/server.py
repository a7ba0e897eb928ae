"""The kernel's side of the shared llama-server: a lease, the port file, the start lock.

``LlamaServer(model_id).start_blocking()`` (called in a worker thread, never on the loop):

1. takes a shared ``flock`` on ``servers/<key>.lease`` in the cache and keeps it: that is
   this kernel's lease (the OS drops it when the kernel exits, SIGKILL included);
2. under the exclusive start lock ``servers/<key>.start``, reads the port file
   ``servers/<key>.json``; a live, healthy server there is used as is;
3. otherwise starts the supervisor (supervisor.py), which starts llama-server on a
   free port, logs to ``logs/llama-server-<key>.log`` in the cache, writes the port file when
   healthy and stops the server when no lease is left.

``stop()`` drops the lease (the server stops when it was the last one). The number of
threads is chosen when the server starts, from the machine's cores and load
(``choose_threads``; prompt processing takes every core, ``choose_batch_threads``) unless
``PI_NOTEBOOK_LLAMA_THREADS`` says otherwise; the number of
slots (requests it works on at once, each with a full context window) is
``PI_NOTEBOOK_LLAMA_SLOTS`` or 4, so kernels sharing it do not wait for each other.

Trust (docs/design/local-model.md, "Who may talk to the server"): the folders holding these
files are private (0700, ours, refused when another user owns them or may write them), every
file is 0600, a port file is adopted only when its pid is the llama-server it names (same user,
same binary, same port), and the server takes requests only with its own API key
(``servers/<key>.key``, given to llama-server as ``--api-key-file``, so it is never on a
command line), which kernels send.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import re
import secrets
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from .setup import (build_time_estimate,
    PACKAGED_MODELS,
    SETUP_HINT,
    LocalSetupError,
    cache_dir,
    find_llama_server,
    resolve_model_path,
)

__all__ = ["CONTEXT_WINDOW", "DEFAULT_SLOTS", "LlamaServer", "choose_slots", "choose_threads", "private_dir",
           "read_private", "server_key", "servers_dir", "remember_prefix", "write_private"]

HEALTH_TIMEOUT_S = 120.0
CONTEXT_WINDOW = 8192  # tokens of each slot; provider.py's Model says the same
DEFAULT_SLOTS = 4
# tokens of the prompt read per step (-b): the server reports its prompt progress once a step
# (return_progress), so the view's "reading the prompt" moves every ~512 tokens, not once per
# 2,048 (two minutes on a busy 2-core machine); the compute step (-ub) is 512 tokens either way
PROMPT_BATCH_TOKENS = 512
SUPERVISOR = Path(__file__).with_name("supervisor.py")


def servers_dir() -> Path:
    return cache_dir() / "servers"


def private_dir(path: Path) -> Path:
    """``path`` as a folder only this user can use: created 0700, tightened to 0700 when it is
    ours but readable by others (folders made by earlier versions), refused otherwise."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:  # e.g. a file where the folder (or one of its parents) should be
        raise LocalSetupError(f"Cannot use {path} for the embedded model's server files: "
                              f"{exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise LocalSetupError(f"Refusing {path} for the embedded model's server files: it is not a folder "
                              "(a symbolic link or a file)")
    if info.st_uid != os.getuid():
        raise LocalSetupError(f"Refusing {path} for the embedded model's server files: it belongs to "
                              f"user id {info.st_uid}, not to you")
    if info.st_mode & 0o022:
        raise LocalSetupError(f"Refusing {path} for the embedded model's server files: other users may write "
                              f"to it (mode {stat.S_IMODE(info.st_mode):o}); remove it or `chmod 700` it")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def read_private(path: Path, secret: bool = False) -> str | None:
    """The text of one of our files; ``None`` when it does not exist. A file that is a link,
    belongs to someone else or that others may write is refused; a ``secret`` one also when
    others may read it. (Files of earlier versions were 0644: still read, then rewritten 0600.)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LocalSetupError(f"Refusing {path}: {exc.strerror or exc} (a link?)") from None
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or \
                info.st_mode & (0o077 if secret else 0o022):
            raise LocalSetupError(
                f"Refusing {path}: it must be a file of yours that only you can "
                f"{'read and write' if secret else 'write'} "
                f"(it is owned by user id {info.st_uid}, mode {stat.S_IMODE(info.st_mode):o}); remove it")
        return f.read()


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically as a 0600 file."""
    staged = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)
    staged.replace(path)


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
    explicit = _explicit_threads()
    if explicit is not None:
        return explicit
    cpus = _usable_cpus() if cpus is None else cpus
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            load = float(cpus)  # unknown: assume busy
    return max(1, min(cpus, math.floor(cpus - load + 0.5)))


def choose_batch_threads(threads: int, cpus: int | None = None) -> int:
    """Threads for prompt processing (``-tb``): every usable core, never fewer than ``threads``.

    The spin collapse of ``choose_threads`` is a generation effect. Prompt processing, which
    dominates an agent's request (a few hundred tokens of system prompt and notebook context
    for a few dozen of answer), gains from every core and loses nothing when one is busy:
    measured on this 2-core machine with the 1.5B (docs/design/local-model.md), ``-t 1 -tb 2``
    against ``-t 1``: prompt 39 vs 21.5 tok/s idle, 18.9 vs 17.4 tok/s beside a CPU burner,
    generation unchanged (8.3 vs 8.0, 7.4 vs 7.5 tok/s). ``PI_NOTEBOOK_LLAMA_THREADS`` sets both.
    """
    explicit = _explicit_threads()
    if explicit is not None:
        return explicit
    return max(threads, _usable_cpus() if cpus is None else cpus)


def _explicit_threads() -> int | None:
    """``PI_NOTEBOOK_LLAMA_THREADS`` when it is a positive whole number."""
    explicit = os.environ.get("PI_NOTEBOOK_LLAMA_THREADS", "").strip()
    return int(explicit) if explicit.isdigit() and int(explicit) > 0 else None


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def choose_slots() -> int:
    """Requests the server works on at once: ``PI_NOTEBOOK_LLAMA_SLOTS``, else 4.

    With one slot a second kernel's request waited behind a 134 s answer of the first (and
    failed on the first-byte timeout). Each slot has a full context window of its own (KV
    cache, measured in docs/design/local-model.md); a fifth concurrent request waits in the
    server's queue, and the client does not count that wait (provider.py).
    """
    explicit = os.environ.get("PI_NOTEBOOK_LLAMA_SLOTS", "").strip()
    if explicit.isdigit() and int(explicit) > 0:
        return int(explicit)
    return DEFAULT_SLOTS


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


def _is_our_server(pid: int, port: int, binary: str) -> bool:
    """``pid`` is a process of ours running ``binary`` with ``--port port``: a pid reused by an
    unrelated process after the server died is not adopted. Without /proc (macOS) the private
    folder and the API key are the guard."""
    proc = Path(f"/proc/{pid}")
    if not Path("/proc/self").exists():
        return True
    try:
        if proc.stat().st_uid != os.getuid():
            return False
        args = [a.decode(errors="replace") for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return False
    if "--port" not in args or args.index("--port") + 1 >= len(args) or args[args.index("--port") + 1] != str(port):
        return False
    want = os.path.realpath(binary)
    try:
        exe = os.path.realpath(os.readlink(proc / "exe"))
    except OSError:
        exe = ""
    # argv[1]: a server that is a script (the tests' fake llama-server) runs under its interpreter
    if exe != want and not any(os.path.realpath(a) == want for a in args[:2]):
        return False
    return _listens_on(pid, port)


def _listens_on(pid: int, port: int) -> bool:
    """The listening socket of 127.0.0.1:``port`` is one of ``pid``'s open files (so nobody
    who bound the port first, while our server was loading, answers in its name)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


def _authorized(port: int, api_key: str) -> bool:
    """The server at ``port`` takes our key (``/v1/models`` needs it)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models",
                                     headers={"Authorization": f"Bearer {api_key}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


def requests_waiting(port: int, api_key: str | None, timeout: float = 2.0) -> int | None:
    """How many requests wait in the server's queue for a free slot (``/metrics``,
    ``llamacpp:requests_deferred``); ``None`` when the server does not say."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            text = resp.read(1 << 20).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    for line in text.splitlines():
        if line.startswith("llamacpp:requests_deferred "):
            try:
                return int(float(line.split()[1]))
            except (IndexError, ValueError):
                return None
    return None


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return resp.status == 200 and json.loads(resp.read() or b"{}").get("status") == "ok"
    except (OSError, ValueError):
        return False


def remember_prefix(model_id: str, messages: list[dict[str, Any]], tools: list[Any]) -> None:
    """Keep the system prompt + tools of the latest request: the next server start warms its
    prompt cache with them (supervisor.py)."""
    system = [m for m in messages[:1] if m.get("role") == "system"]
    data = json.dumps({"messages": system, "tools": tools}, sort_keys=True)
    path = servers_dir() / f"{server_key(model_id)}.warm.json"
    with contextlib.suppress(OSError, LocalSetupError):
        private_dir(path.parent)
        if read_private(path) == data:
            return
        write_private(path, data)


class LlamaServer:
    """This kernel's lease on the shared llama-server of one model."""

    def __init__(self, model_id: str, threads: int | None = None) -> None:
        self.model_id = model_id
        self.key = server_key(model_id)
        self.requested_threads = threads
        self.port: int | None = None
        self.pid: int | None = None
        self.threads: int | None = None
        self.slots: int | None = None
        self.api_key: str | None = None
        self.log_path: Path | None = None
        self._lease_fd: int | None = None
        self._lock = threading.Lock()
        self._cancel = threading.Event()  # stop() while a start waits: the start gives up

    def _path(self, suffix: str) -> Path:
        return servers_dir() / f"{self.key}{suffix}"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def running(self) -> bool:
        """The lease is held and the server process is alive."""
        return self._lease_fd is not None and _pid_alive(self.pid)

    def _read_info(self) -> dict[str, Any] | None:
        """The running server of the port file, with its API key; ``None`` when there is none
        (no file, a dead or foreign pid, an unhealthy port, a key it does not take)."""
        try:
            info = json.loads(read_private(self._path(".json")) or "null")
        except ValueError:
            return None
        binary = find_llama_server()  # what we would run, not what the file claims
        if not (isinstance(info, dict) and isinstance(info.get("port"), int) and _pid_alive(info.get("pid"))
                and binary is not None and _is_our_server(info["pid"], info["port"], str(binary))
                and _healthy(info["port"])):
            return None
        key = (read_private(self._path(".key"), secret=True) or "").strip()
        if not key or not _authorized(info["port"], key):
            return None
        return {**info, "api_key": key}

    def _adopt(self, info: dict[str, Any]) -> str:
        self.port, self.pid, self.threads = info["port"], info["pid"], info.get("threads")
        self.slots, self.api_key = info.get("slots"), info["api_key"]
        self.log_path = Path(info["log"]) if info.get("log") else None
        return self.base_url

    def requests_waiting(self) -> int | None:
        """Requests queued in the server for a free slot (None: unknown)."""
        return None if self.port is None else requests_waiting(self.port, self.api_key)

    def start_blocking(self) -> str:
        """Join the running server or start it; raises LocalSetupError with a clear message."""
        with self._lock:
            if self.running() and self.port is not None and _healthy(self.port):
                return self.base_url
            private_dir(servers_dir())
            if self._lease_fd is None:
                fd = os.open(self._path(".lease"), os.O_RDWR | os.O_CREAT, 0o600)
                fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while a supervisor is deciding to stop
                self._lease_fd = fd
            start_fd = os.open(self._path(".start"), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                self._wait_for_lock(start_fd)  # another kernel may be starting the server
                info = self._read_info()
                if info is None:
                    info = self._launch()
                return self._adopt(info)
            except BaseException:
                self._release()
                raise
            finally:
                os.close(start_fd)

    def _check_cancel(self) -> None:
        if self._cancel.is_set():
            raise LocalSetupError("The embedded model server's start was cancelled (the kernel let go of it).")

    def _wait_for_lock(self, fd: int) -> None:
        while True:
            self._check_cancel()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                time.sleep(0.1)

    def _launch(self) -> dict[str, Any]:
        binary = find_llama_server()
        if binary is None:
            raise LocalSetupError(
                "llama-server is not built yet. Build it once with "
                f"`{SETUP_HINT} binary` ({build_time_estimate(max(1, os.cpu_count() or 1))}), "
                "put llama-server on PATH, or set PI_NOTEBOOK_LLAMA_SERVER to its path."
            )
        gguf, template = resolve_model_path(self.model_id)
        port = _free_port()
        threads = self.requested_threads or choose_threads()
        batch_threads = self.requested_threads or choose_batch_threads(threads)
        slots = choose_slots()
        logs = private_dir(cache_dir() / "logs")
        log = logs / f"llama-server-{self.key}.log"
        for stale in (".json", ".error", ".key"):
            self._path(stale).unlink(missing_ok=True)
        key_path = self._path(".key")
        write_private(key_path, secrets.token_hex(32) + "\n")  # a new key per server
        # Each slot gets the whole window (-c is shared by the slots); /metrics tells clients how
        # many requests wait for a slot; /slots (every slot's prompt text) is not needed: off.
        cmd = [str(binary), "-m", str(gguf), "-a", self.model_id, "--host", "127.0.0.1",
               "--port", str(port), "-c", str(CONTEXT_WINDOW * slots), "-np", str(slots), "--no-kv-unified",
               "-t", str(threads), "-tb", str(batch_threads), "-b", str(PROMPT_BATCH_TOKENS),
               "--api-key-file", str(key_path), "--metrics", "--no-slots"]
        if template is not None:
            cmd += ["--jinja", "--chat-template-file", str(template)]
        spec = {"cmd": cmd, "port": port, "model": self.model_id, "threads": threads, "slots": slots,
                "binary": str(binary), "log": str(log), "key": str(key_path),
                "info": str(self._path(".json")), "lease": str(self._path(".lease")),
                "error": str(self._path(".error")), "warm": str(self._path(".warm.json")),
                "health_timeout_s": HEALTH_TIMEOUT_S}
        spec_path = self._path(".spec.json")
        write_private(spec_path, json.dumps(spec))
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.fchmod(fd, 0o600)  # logs of earlier versions were 0644
        with os.fdopen(fd, "ab") as out:
            out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n".encode())
            supervisor = subprocess.Popen(
                [sys.executable, str(SUPERVISOR), str(spec_path)], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # the kernel's Stop button (SIGINT) must not reach it
            )
        deadline = time.monotonic() + HEALTH_TIMEOUT_S + 5
        while time.monotonic() < deadline:
            if self._cancel.is_set():
                supervisor.terminate()  # it would stop anyway once our lease is gone
                self._check_cancel()
            info = self._read_info()
            if info is not None:
                return info
            if supervisor.poll() is not None:
                reason = read_private(self._path(".error")) or \
                    f"the supervisor exited with code {supervisor.returncode}"
                raise LocalSetupError(f"{reason} (log: {log}):\n{self._log_tail(log)}")
            time.sleep(0.1)
        supervisor.terminate()
        raise LocalSetupError(f"llama-server did not become healthy in {HEALTH_TIMEOUT_S:.0f} s "
                              f"(log: {log}):\n{self._log_tail(log)}")

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
        """Drop this kernel's lease; the supervisor stops the server when it was the last.
        A start still waiting (after an Abort) gives up first, so this returns at once."""
        self._cancel.set()
        try:
            with self._lock:
                self._release()
                self.pid = None
        finally:
            self._cancel.clear()
