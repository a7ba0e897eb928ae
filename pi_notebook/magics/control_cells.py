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
header, the saved SIGINT handler); docs/design/waiting.md lists each one and what was
measured on 6.29 and 7.4. When they are not found, nothing is installed and control
cells queue like any other cell.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any

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


def _main_shell_stream(kernel: Any) -> Any:
    """The ZMQStream on the kernel's main thread that receives main-shell messages."""
    channel_thread = getattr(kernel, "shell_channel_thread", None)
    if channel_thread is not None:  # ipykernel 7: forwarded from the shell channel thread
        pair = getattr(getattr(channel_thread, "manager", None), "_shell_channel_to_main", None)
        return getattr(pair, "to_stream", None)
    return getattr(kernel, "shell_stream", None)  # ipykernel 6


class _Bypass:
    def __init__(self, kernel: Any, stream: Any, original: Callable[..., Any],
                 is_waiting: Callable[[], bool]) -> None:
        self.kernel = kernel
        self.stream = stream
        self.original = original
        self.is_waiting = is_waiting
        self.queued_comms = getattr(kernel, "shell_channel_thread", None) is None
        self.dispatched = 0  # control cells run next to a waiting cell (tests, status)

    def on_recv(self, msg: list[Any]) -> Any:
        if self.is_waiting():
            kind = self._kind(msg)
            if kind is not None:
                return self._dispatch_now(msg, kind)
        return self.original(msg)

    def _kind(self, msg: list[Any]) -> str | None:
        session = self.kernel.session
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

    async def _dispatch_now(self, msg: list[Any], kind: str) -> None:
        kernel = self.kernel
        shell = getattr(kernel, "shell", None)
        saved_sigint = getattr(kernel, "saved_sigint_handler", None)
        parent_ident = getattr(kernel, "_parent_ident", None)
        saved_parent = None
        if isinstance(parent_ident, dict):  # ipykernel 6: one global parent
            saved_parent = (parent_ident.get("shell"), kernel.get_parent("shell"))
        hook = getattr(shell, "displayhook", None)
        saved_result = getattr(hook, "exec_result", None)
        try:
            if kind == "execute":
                self.dispatched += 1
            if isinstance(parent_ident, dict):
                await kernel.dispatch_shell(msg)
            else:
                # ipykernel 7 keeps the parent in context variables: a copied context keeps
                # the control cell's parent away from the waiting cell's output
                # (a task copies the context current when it is created)
                task = contextvars.copy_context().run(
                    asyncio.ensure_future, kernel.dispatch_shell(msg, subshell_id=None))
                await task
        finally:
            # the handler hooks save and restore SIGINT around a request; the waiting
            # request's saved handler (SIG_IGN or the tools' handler) must survive
            if saved_sigint is not None:
                kernel.saved_sigint_handler = saved_sigint
            if saved_parent is not None:
                kernel.set_parent(saved_parent[0], saved_parent[1], "shell")
            if hook is not None:
                hook.exec_result = saved_result


def install_control_bypass(shell: Any, is_waiting: Callable[[], bool]) -> bool:
    """Route control cells past a waiting cell (False when the kernel's shape is unknown)."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None or getattr(kernel, "_pi_control_bypass", None) is not None:
        return False
    stream = _main_shell_stream(kernel)
    original = getattr(stream, "_recv_callback", None)
    if stream is None or original is None or not hasattr(kernel, "dispatch_shell"):
        return False
    bypass = _Bypass(kernel, stream, original, is_waiting)
    stream.on_recv(bypass.on_recv, copy=False)
    kernel._pi_control_bypass = bypass
    return True


def uninstall_control_bypass(shell: Any) -> None:
    kernel = getattr(shell, "kernel", None)
    bypass = getattr(kernel, "_pi_control_bypass", None)
    if kernel is None or bypass is None:
        return
    bypass.stream.on_recv(bypass.original, copy=False)
    kernel._pi_control_bypass = None
