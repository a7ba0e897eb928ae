"""The one seam between pi_notebook and the kernel that hosts IPython.

"Is this a kernel or a terminal?", "which request is running?", "publish as a reply to
that cell", "where do shell messages arrive?": every such question is asked of a
:class:`KernelHost`, and only :class:`IPythonKernelHost` (the adapter) looks at ipykernel's
objects to answer it. The rest of the package never probes ``shell.kernel`` itself.

Why an adapter: ipykernel 6 and 7 differ exactly where the notebook layer leans on them
(docs/design/waiting.md, /reference/jupyter-mechanics.md):

- the parent header: 6.x keeps one global parent (``kernel._parent_ident``, the *latest*
  request), 7.x keeps it in context variables, so a task keeps its cell's parent;
- the main shell stream: 6.x ``kernel.shell_stream``; 7.x forwards main-shell messages from
  the shell channel thread over ``shell_channel_thread.manager._shell_channel_to_main``;
- ``dispatch_shell(msg)`` vs ``dispatch_shell(msg, subshell_id=None)``.

ipykernel's kernel object is the one foreign object this module leaves untyped
(:data:`ForeignKernel`): its attributes differ between the two majors, and the adapter
reads each with a default.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = ["ForeignKernel", "KernelHost", "IPythonKernelHost", "ParentHeader", "SavedParent", "kernel_host"]

# ipykernel's Kernel (6.x or 7.x): untyped on purpose, see the module docstring
ForeignKernel = Any
# a Jupyter message header dict, as ipykernel hands it out
ParentHeader = dict[str, Any]


@dataclass(frozen=True)
class SavedParent:
    """ipykernel 6's global parent (identities, header) at one moment, to put back."""

    ident: object
    header: ParentHeader


class KernelHost(Protocol):
    """What pi_notebook asks of the kernel hosting the shell (terminal IPython: no kernel)."""

    @property
    def shell(self) -> InteractiveShell:
        """The IPython shell the kernel runs."""

    @property
    def has_kernel(self) -> bool:
        """A Jupyter kernel hosts the shell (False: terminal IPython)."""

    @property
    def kernel(self) -> ForeignKernel:
        """ipykernel's kernel object, or None in terminal IPython."""

    def parent_header(self) -> ParentHeader | None:
        """The shell-channel parent of the request running now (None: none, or no kernel)."""

    def request_allows_stdin(self) -> bool | None:
        """Did the running request allow ``input()`` (None: unknown, or no kernel)?"""

    def saved_parent(self) -> SavedParent | None:
        """ipykernel 6's global parent now, to :meth:`restore_parent` later; None on 7.x
        (its parent lives in context variables) and without a kernel."""

    def restore_parent(self, saved: SavedParent | None) -> None:
        """Make ``saved`` the kernel's parent again (everything that publishes follows)."""

    def publishing_as(self, parent: ParentHeader | None) -> contextlib.AbstractContextManager[None]:
        """Within: displays go out as replies to ``parent`` (only ipykernel 6 needs it)."""

    @property
    def ipykernel_major(self) -> int | None:
        """ipykernel's major version (None: not imported, no kernel)."""

    def main_shell_stream(self) -> Any:
        """The ZMQStream on the main thread that receives main-shell messages, or None."""

    @property
    def comms_wait_for_cells(self) -> bool:
        """Comm messages queue behind a running cell (ipykernel 6: no shell channel thread)."""

    def can_dispatch(self) -> bool:
        """:meth:`dispatch_beside` can run a shell message."""

    async def dispatch_beside(self, msg: list[Any]) -> None:
        """Dispatch the shell message ``msg`` now, next to the request running (which keeps
        its parent header and its saved SIGINT handler)."""

    def guard_shell_parent(self, on: bool) -> None:
        """Keep the shell parent with the request that holds the main shell when a comm message
        is handled next to it (tools/kernel/shell_parent.py); ``on=False`` puts the kernel back."""

    def asyncio_loop(self) -> asyncio.AbstractEventLoop | None:
        """The kernel's asyncio loop (found between cells), or None."""

    def log_warning(self, text: str) -> None:
        """A line in the kernel's log (nothing in terminal IPython)."""


class IPythonKernelHost:
    """The adapter: an IPython shell, and ipykernel's kernel object when there is one."""

    def __init__(self, shell: InteractiveShell) -> None:
        self._shell = shell

    @property
    def shell(self) -> InteractiveShell:
        return self._shell

    @property
    def kernel(self) -> ForeignKernel:
        return getattr(self._shell, "kernel", None)

    @property
    def has_kernel(self) -> bool:
        return self.kernel is not None

    def parent_header(self) -> ParentHeader | None:
        kernel = self.kernel
        try:
            parent = kernel.get_parent("shell") if kernel is not None else None
        except Exception:
            return None
        return parent if isinstance(parent, dict) and parent else None

    def request_allows_stdin(self) -> bool | None:
        kernel = self.kernel
        if kernel is None:
            return None
        parent = self.parent_header()
        content = parent.get("content") if parent is not None else None
        if isinstance(content, dict) and "allow_stdin" in content:
            return bool(content["allow_stdin"])
        allow = getattr(kernel, "_allow_stdin", None)  # set by do_execute for the running request
        return allow if isinstance(allow, bool) else None

    def _global_idents(self) -> dict[str, object] | None:
        idents = getattr(self.kernel, "_parent_ident", None)  # ipykernel 6 only
        return idents if isinstance(idents, dict) else None

    def saved_parent(self) -> SavedParent | None:
        idents = self._global_idents()
        kernel = self.kernel
        if idents is None or not hasattr(kernel, "get_parent"):
            return None
        return SavedParent(idents.get("shell"), kernel.get_parent("shell"))

    def restore_parent(self, saved: SavedParent | None) -> None:
        if saved is not None:
            self.kernel.set_parent(saved.ident, saved.header, "shell")

    @contextlib.contextmanager
    def _publishing_as(self, parent: ParentHeader | None) -> Iterator[None]:
        publisher = getattr(self._shell, "display_pub", None)
        major = self.ipykernel_major
        if not parent or major is None or major >= 7 or publisher is None \
                or not hasattr(publisher, "set_parent"):
            yield
            return
        saved = getattr(publisher, "parent_header", None)
        publisher.set_parent(parent)
        try:
            yield
        finally:
            # the routed publisher forwards set_parent; a plain assignment would stay on the proxy
            publisher.set_parent(saved)

    def publishing_as(self, parent: ParentHeader | None) -> contextlib.AbstractContextManager[None]:
        return self._publishing_as(parent)

    @property
    def ipykernel_major(self) -> int | None:
        if self.kernel is None:
            return None
        module = sys.modules.get("ipykernel")  # imported already when there is a kernel
        info = getattr(module, "version_info", None)
        try:
            return int(info[0]) if info else None
        except (TypeError, ValueError):
            return None

    def main_shell_stream(self) -> Any:
        kernel = self.kernel
        channel_thread = getattr(kernel, "shell_channel_thread", None)
        if channel_thread is not None:  # ipykernel 7: forwarded from the shell channel thread
            pair = getattr(getattr(channel_thread, "manager", None), "_shell_channel_to_main", None)
            return getattr(pair, "to_stream", None)
        return getattr(kernel, "shell_stream", None)  # ipykernel 6

    @property
    def comms_wait_for_cells(self) -> bool:
        return self.has_kernel and getattr(self.kernel, "shell_channel_thread", None) is None

    def can_dispatch(self) -> bool:
        return hasattr(self.kernel, "dispatch_shell")

    async def dispatch_beside(self, msg: list[Any]) -> None:
        kernel = self.kernel
        saved_sigint = getattr(kernel, "saved_sigint_handler", None)
        saved = self.saved_parent()
        try:
            if self._global_idents() is not None:  # ipykernel 6: one global parent
                await kernel.dispatch_shell(msg)
            else:
                # ipykernel 7 keeps the parent in context variables: a copied context keeps
                # the dispatched request's parent away from the running one's output
                # (a task copies the context current when it is created)
                task = contextvars.copy_context().run(
                    asyncio.ensure_future, kernel.dispatch_shell(msg, subshell_id=None))
                await task
        finally:
            # the handler hooks save and restore SIGINT around a request; the running
            # request's saved handler (SIG_IGN or the tools' handler) must survive
            if saved_sigint is not None:
                kernel.saved_sigint_handler = saved_sigint
            self.restore_parent(saved)

    def guard_shell_parent(self, on: bool) -> None:
        from .shell_parent import install_shell_parent_guard, uninstall_shell_parent_guard

        if self.kernel is None:
            return
        if on:
            install_shell_parent_guard(self.kernel)
        else:
            uninstall_shell_parent_guard(self.kernel)

    def asyncio_loop(self) -> asyncio.AbstractEventLoop | None:
        loop = getattr(getattr(self.kernel, "io_loop", None), "asyncio_loop", None)
        return loop if isinstance(loop, asyncio.AbstractEventLoop) else None

    def log_warning(self, text: str) -> None:
        log = getattr(self.kernel, "log", None)
        if log is not None:
            log.warning(text)


def kernel_host(shell: InteractiveShell) -> KernelHost:
    """The kernel host of ``shell`` (cheap: an adapter around it, nothing is probed yet)."""
    return IPythonKernelHost(shell)
