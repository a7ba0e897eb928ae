"""Control cells run at once while a cell waits for an agent run.

ipykernel runs execute requests one at a time: ipykernel 7 holds an asyncio lock around
each one, ipykernel 6 takes them from a queue one by one. A cell that waits for the agent
(a plain cell behind a run, a blocking ``%%agent``) therefore holds back every later cell,
including ``%agent abort`` / ``%agent reset`` / ``%steer`` -- the commands that would end
the wait. While a cell waits, this module looks at each message as it arrives on the main
shell stream and dispatches an ``execute_request`` whose code is a control cell (see
:func:`is_control_cell`) at once, next to the waiting cell, instead of queueing it.
On ipykernel 6, widget comm messages (the view's Abort and approval buttons) get the same
treatment, since 6.x never processes them during a cell. Everything else queues as before.

This leans on ipykernel internals (the main shell stream's receive callback, the parent
header, the saved SIGINT handler), each reached through the kernel host
(tools/kernel/kernel_host.py); docs/design/waiting.md lists each one and what was measured on 6.29
and 7.4. The receive callback is replaced through the patch registry (tools/kernel/patches.py).
When they are not found, nothing is installed and control cells queue like any other cell.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..tools.kernel.kernel_host import KernelHost, kernel_host
from ..tools.kernel.patches import PATCHES

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = ["is_control_cell", "is_control_line", "install_control_bypass", "uninstall_control_bypass"]

# First line of a cell that never waits and may run next to a waiting cell.
CONTROL_PREFIXES = ("%agent", "%steer", "%followup")


# ``%agent`` commands that start a run like a ``%%agent`` cell: prompts, not control cells.
RUN_COMMANDS = ("fix",)


def starts_run(line: str) -> bool:
    """``line`` (stripped) is an ``%agent`` command that starts a run (``%agent fix``)."""
    words = line.split()
    return len(words) == 2 and words[0] == "%agent" and words[1] in RUN_COMMANDS


def is_control_line(line: str) -> bool:
    """``%agent``, ``%steer`` or ``%followup`` as a whole magic name, alone or with arguments
    (``%agentlog`` is another magic; ``%%agent`` and ``%agent fix`` are prompts)."""
    if starts_run(line):
        return False
    for magic in CONTROL_PREFIXES:
        if line == magic or (line.startswith(magic) and line[len(magic)].isspace()):
            return True
    return False


def is_control_cell(code: str) -> bool:
    """A cell made only of control lines (see :func:`is_control_line`), blank lines and
    comments. Anything else in it (code after ``%agent status``, a user magic whose name merely
    starts with ``agent``) makes it an ordinary cell, which waits its turn: running it next to
    the waiting cell would run it out of order."""
    found = False
    for line in code.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not is_control_line(stripped):
            return False
        found = True
    return found


class _Bypass:
    def __init__(self, host: KernelHost, original: Callable[[list[object]], object],
                 is_waiting: Callable[[], bool]) -> None:
        self.host = host
        self.original = original
        self.is_waiting = is_waiting
        self.queued_comms = host.comms_wait_for_cells
        self.dispatched = 0  # control cells run next to a waiting cell (tests, status)

    def on_recv(self, msg: list[object]) -> object:
        if self.is_waiting():
            kind = self._kind(msg)
            if kind is not None:
                return self._dispatch_now(msg, kind)
        return self.original(msg)

    def _kind(self, msg: list[object]) -> str | None:
        session = self.host.kernel.session
        try:
            _, frames = session.feed_identities(msg, copy=False)
            # content=False: a peek that leaves the signature for the real dispatch
            peek = session.deserialize(frames, content=False, copy=False)
            msg_type = peek["header"].get("msg_type")
            if peek["header"].get("subshell_id"):
                return None
            if msg_type in ("comm_msg", "comm_open", "comm_close"):
                return "comm" if self.queued_comms else None
            if msg_type != "execute_request":
                return None
            raw = peek["content"]
            content = session.unpack(raw if isinstance(raw, (bytes, str)) else bytes(raw))
            if content.get("silent") or not is_control_cell(content.get("code", "")):
                return None
            return "execute"
        except Exception:
            return None

    async def _dispatch_now(self, msg: list[object], kind: str) -> None:
        hook = self.host.shell.displayhook
        saved_result = hook.exec_result
        try:
            if kind == "execute":
                self.dispatched += 1
            await self.host.dispatch_beside(msg)
        finally:
            hook.exec_result = saved_result  # the waiting cell's result object (its In[n]) stays its own


def install_control_bypass(shell: InteractiveShell, is_waiting: Callable[[], bool]) -> bool:
    """Route control cells past a waiting cell (False when the kernel's shape is unknown)."""
    host = kernel_host(shell)
    if not host.has_kernel:
        return False
    stream = host.main_shell_stream()
    if PATCHES.find(stream, "_recv_callback") is not None:
        return False
    original = getattr(stream, "_recv_callback", None)
    if stream is None or original is None or not host.can_dispatch():
        return False
    bypass = _Bypass(host, original, is_waiting)
    stream.on_recv(bypass.on_recv, copy=False)
    PATCHES.record(stream, "_recv_callback", original, bypass.on_recv,
                   "control cells (%agent abort, %steer) run at once while a cell waits for a run",
                   restore=lambda: stream.on_recv(original, copy=False))
    return True


def uninstall_control_bypass(shell: InteractiveShell) -> None:
    host = kernel_host(shell)
    if host.has_kernel:
        PATCHES.undo(PATCHES.find(host.main_shell_stream(), "_recv_callback"))
