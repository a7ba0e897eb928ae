"""OS-level output of agent code: file descriptors 1 and 2, routed to the running tool call.

``os.system``, subprocesses that inherit the kernel's stdout, C extensions and writes to
``sys.__stdout__`` bypass ``sys.stdout`` and write to fd 1/2 directly. ipykernel points those
fds at a pipe of its own and publishes what comes out *raw*, in whatever cell is current: an
agent's ``os.system("env")`` would land, unredacted, in the user's cell.

``with route_fds(cap):`` (entered by the python tool around each execution, reference
counted across parallel calls): while at least one execution runs, fd 1 and 2 point at pipes
of ours (``os.dup2``; the previous targets are saved and put back when the last execution
ends). A reader thread decodes the bytes (UTF-8, invalid bytes replaced) and hands them to
the oldest running capture, whose sink redacts them like any print, so they appear in that
tool card. Before the last execution ends the pipes are drained, so output of a finished
``os.system`` call is in the result.

Processes started by agent code keep the pipe's write end; what they write after the
execution ended is delivered to the capture's late-output path (``capture.py``): redacted
and labelled, never raw. The reader exits when every writer has closed the pipe.

What cannot be told apart: while agent code runs, fd-level output of anything else in the
process (a user cell's ``os.system`` running at the same moment, kernel log lines written to
fd 2) also goes to the tool card, redacted. See docs/design/capture.md.

POSIX only; elsewhere ``route_fds`` does nothing.
"""

from __future__ import annotations

import codecs
import os
import select
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .capture import Capture

if TYPE_CHECKING:
    from ..output.updates import StreamName  # (updates.py imports pydantic: not at %load_ext)

__all__ = ["route_fds"]

_NAMES: dict[int, StreamName] = {1: "stdout", 2: "stderr"}
_READ_SIZE = 65536


class _Pipe:
    """One redirected fd: our pipe's read end, the saved previous target, a decoder."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.name = _NAMES[fd]
        self.read_end, write_end = os.pipe()
        os.set_blocking(self.read_end, False)
        self.saved = os.dup(fd)
        os.dup2(write_end, fd)
        os.close(write_end)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.open = True

    def restore(self) -> None:
        os.dup2(self.saved, self.fd)
        os.close(self.saved)


class _Route:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.owners: list[Capture] = []  # running executions, oldest first
        self.last_owner: Capture | None = None
        self.pipes: list[_Pipe] = []  # of the current redirection

    # --- delivery -------------------------------------------------------------------------

    def _deliver(self, pipe: _Pipe, data: bytes, final: bool = False) -> None:
        text = pipe.decoder.decode(data, final)
        if not text:
            return
        owner = next((c for c in self.owners if not c.closed), None)
        target = owner or pipe_owner(pipe) or self.last_owner
        if target is None:
            return
        target.route_stream(pipe.name, text, None)

    def _read_available(self, pipe: _Pipe) -> bool:
        """Read what is in the pipe now; False at end of file (every writer closed it)."""
        while True:
            try:
                data = os.read(pipe.read_end, _READ_SIZE)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not data:
                return False
            self._deliver(pipe, data)

    def _reader(self, pipes: list[_Pipe]) -> None:
        live = list(pipes)
        while live:
            try:
                ready, _, _ = select.select([p.read_end for p in live], [], [], 0.5)
            except (OSError, ValueError):
                break
            for pipe in [p for p in live if p.read_end in ready]:
                with self.lock:
                    still_open = self._read_available(pipe)
                if not still_open:
                    with self.lock:
                        self._deliver(pipe, b"", final=True)
                    live.remove(pipe)
                    with self.lock:
                        pipe.open = False
                        _PIPE_OWNERS.pop(id(pipe), None)
                        os.close(pipe.read_end)

    # --- enter / leave --------------------------------------------------------------------

    def enter(self, cap: Capture) -> None:
        with self.lock:
            self.owners.append(cap)
            if len(self.owners) > 1:
                return
            pipes: list[_Pipe] = []
            try:
                for fd in (1, 2):
                    pipes.append(_Pipe(fd))
            except OSError:
                for pipe in pipes:
                    pipe.restore()
                    os.close(pipe.read_end)
                return
            for pipe in pipes:
                _PIPE_OWNERS[id(pipe)] = cap
            self.pipes = pipes
            threading.Thread(target=self._reader, args=(pipes,), name="pi-notebook-fd-route",
                             daemon=True).start()

    def leave(self, cap: Capture) -> None:
        with self.lock:
            for pipe in self.pipes:
                if pipe.open:
                    self._read_available(pipe)  # output of finished calls belongs to this call
            self.owners.remove(cap)
            self.last_owner = cap
            if self.owners:
                return
            for pipe in self.pipes:
                _PIPE_OWNERS[id(pipe)] = cap  # late writes of its children go to its late path
                pipe.restore()
            self.pipes = []


# The capture that owned a redirection last: late output of processes it started.
_PIPE_OWNERS: dict[int, Any] = {}


def pipe_owner(pipe: _Pipe) -> Capture | None:
    owner = _PIPE_OWNERS.get(id(pipe))
    return owner if isinstance(owner, Capture) else None


_route = _Route()


@contextmanager
def route_fds(cap: Capture, enabled: bool = True) -> Iterator[None]:
    """Route fd 1/2 to ``cap`` while the block runs (module doc)."""
    if not enabled or os.name != "posix":
        yield
        return
    _route.enter(cap)
    try:
        yield
    finally:
        _route.leave(cap)
