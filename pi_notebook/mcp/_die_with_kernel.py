"""Exec a stdio MCP server so that it dies with its kernel, even a SIGKILLed one.

Run as ``python -S -I _die_with_kernel.py KERNEL_PID COMMAND ARGS...`` (standard library
only: it starts in milliseconds and imports nothing of the package). On Linux it asks the
kernel for ``PR_SET_PDEATHSIG`` = SIGKILL, which survives ``execve``, then becomes the
server: stdin, stdout, stderr and the pid are the server's own, so the SDK's shutdown
(close stdin, SIGTERM, SIGKILL the process group) works unchanged. If the kernel is already
gone when the flag is set (a race with the fork), it exits instead. Elsewhere it only execs:
the server then sees EOF on stdin when the kernel dies, which ends well-behaved servers.
The same idea as llama-server's supervisor (ai/providers/local_supervisor.py).
"""

import os
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        sys.stderr.write("usage: _die_with_kernel.py KERNEL_PID COMMAND [ARGS...]\n")
        return 2
    kernel_pid, command = int(argv[1]), argv[2:]
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != kernel_pid:  # the kernel died before the flag was set
            return 1
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"cannot start {command[0]!r}: {exc.strerror or exc}\n")
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
