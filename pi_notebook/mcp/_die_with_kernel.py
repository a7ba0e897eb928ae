"""Run a stdio MCP server so that it, and every process it starts, dies with its kernel, even
a SIGKILLed one.

Run as ``python -S -I _die_with_kernel.py KERNEL_PID COMMAND ARGS...`` (standard library
only: it starts in milliseconds and imports nothing of the package). This process is the
leader of its own process group (the SDK starts it in a new session; otherwise it makes one),
so the server and whatever the server starts (a ``node`` child of ``npx``, a worker pool) are
all in that group. It forks the server and stays as its guard:

* The kernel dies (on Linux ``PR_SET_PDEATHSIG`` delivers SIGUSR1 at once; elsewhere the
  guard sees its parent change within a quarter second): the guard SIGKILLs the whole group.
* The server exits: what it left running in the group is SIGKILLed and the guard exits with
  the server's status.
* The SDK's shutdown (close stdin, SIGTERM the group, SIGKILL the group) reaches the server
  unchanged; the guard keeps no copy of the server's stdin, stdout or stderr, so EOF and the
  end of the log come when the server's own copies close.
* On Linux the server itself has ``PR_SET_PDEATHSIG`` = SIGKILL on the guard, so killing the
  guard alone ends it too.

The same idea as llama-server's supervisor (local/supervisor.py).
"""

import os
import signal
import sys
import time

_LINUX = sys.platform.startswith("linux")
_PR_SET_PDEATHSIG = 1


def _death_signal(signum: int) -> None:
    """Ask Linux to send ``signum`` to this process when its parent dies."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)


def _kill_group() -> None:
    """SIGKILL the group: the server, its descendants and this guard."""
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    except OSError:
        pass
    os._exit(137)


def _exec_server(command: list[str]) -> None:
    """The forked child: becomes the server (never returns)."""
    try:
        if _LINUX:
            _death_signal(signal.SIGKILL)  # the guard died (killed alone): the server goes too
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"cannot start {command[0]!r}: {exc.strerror or exc}\n")
        sys.stderr.flush()
    os._exit(127)


def _let_go_of_stdio() -> None:
    """Give the server's stdin/stdout/stderr back to the server alone (module doc)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _status(wait_status: int) -> int:
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status) if os.WIFEXITED(wait_status) else 1


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        sys.stderr.write("usage: _die_with_kernel.py KERNEL_PID COMMAND [ARGS...]\n")
        return 2
    kernel_pid, command = int(argv[1]), argv[2:]
    if os.getpgrp() != os.getpid():
        try:
            os.setsid()
        except OSError:  # already a group leader elsewhere: keep the group we have
            pass
    # The SDK's SIGTERM is for the server; the guard stays until the server has gone.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _LINUX:
        signal.signal(signal.SIGUSR1, lambda *_: _kill_group())
        _death_signal(signal.SIGUSR1)
    if os.getppid() != kernel_pid:  # the kernel died before the flag was set
        return 1
    child = os.fork()
    if child == 0:
        _exec_server(command)
    _let_go_of_stdio()
    while True:
        if _LINUX:
            done, wait_status = os.waitpid(child, 0)
        else:
            done, wait_status = os.waitpid(child, os.WNOHANG)
            if not done:
                if os.getppid() != kernel_pid:
                    _kill_group()
                time.sleep(0.25)
                continue
        break
    # the server is gone: anything it left running in the group goes too
    try:
        os.killpg(os.getpgrp(), signal.SIGTERM)  # ignored by this guard, ends the rest
    except OSError:
        pass
    time.sleep(0.05)
    if _others_left():
        _kill_group()  # one ignored SIGTERM: SIGKILL (the guard's status goes with it)
    return _status(wait_status)


def _others_left() -> bool:
    """Whether a live process other than this guard is left in the group (read from /proc;
    elsewhere the SIGTERM above is all)."""
    if not _LINUX:
        return False
    group = os.getpgrp()
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != b"Z":
            return True
    return False


if __name__ == "__main__":
    sys.exit(main(sys.argv))
