"""The shell parent stays with the request that holds the main shell.

ipykernel 7 runs a comm message that arrives while a request holds the main shell next to that
request, and when the comm is done it sets the shell parent back to the one it read when the
message arrived. That parent lives in a context every main-shell request shares. When the
holding request ended while the comm ran and the next queued request had already started, the
put-back gave the new request the old request's parent: the new request's result and its final
``idle`` went out as the old one's, and JupyterLab left the new cell at ``[*]`` for good. Run All
with a widget frontend meets this all the time: JupyterLab reports ``_view_count`` for each view
it renders, in bursts, exactly as a cell with widgets ends.

The guard wraps two methods of the kernel object (instance attributes, through the patch
registry, undone at unload):

- ``dispatch_shell``: a main-shell request that takes the shell (not a comm run next to it, not
  a control cell dispatched beside a waiting cell) becomes the *holder* when ipykernel sets its
  parent, and stops being it when its dispatch returns;
- ``set_parent``: a call that puts back a parent set earlier (its msg_id was seen before: a
  new request always brings a new one) while another request holds the shell sets the holder's
  parent instead.

Only ipykernel 7's shape needs it (a ``concurrent`` flag on ``dispatch_shell``): 6.x queues comm
messages behind a running cell and never puts a parent back.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from .patches import PATCHES, Patch

__all__ = ["ShellParentGuard", "install_shell_parent_guard", "uninstall_shell_parent_guard"]

# the kernel host's adapter (tools/kernel/kernel_host.py) is the one caller: ipykernel's kernel object
# stays untyped there and here
ForeignKernel = Any
ParentHeader = dict[str, Any]

# msg_ids remembered to recognise a put-back (a comm is put back within one request or two)
_REMEMBERED = 256


class ShellParentGuard:
    """The bookkeeping behind the two wrappers (one per kernel)."""

    def __init__(self, set_parent: Callable[..., Any], dispatch_shell: Callable[..., Awaitable[Any]]) -> None:
        self._set_parent = set_parent
        self._dispatch_shell = dispatch_shell
        self.holder: tuple[object, ParentHeader] | None = None
        self._claiming = False
        self._seen: OrderedDict[str, None] = OrderedDict()

    def set_parent(self, ident: object, parent: ParentHeader, channel: str = "shell") -> Any:
        if channel == "shell" and isinstance(parent, dict) \
                and threading.current_thread() is threading.main_thread():
            msg_id = _msg_id(parent)
            if self._claiming:
                self._claiming = False
                self.holder = (ident, parent)
            elif self.holder is not None and msg_id is not None and msg_id in self._seen \
                    and msg_id != _msg_id(self.holder[1]):
                ident, parent = self.holder
            if msg_id is not None:
                self._remember(msg_id)
        return self._set_parent(ident, parent, channel)

    async def dispatch_shell(self, msg: Any, /, subshell_id: str | None = None, *,
                             concurrent: bool = False, **kwargs: Any) -> Any:
        takes_shell = not concurrent and subshell_id is None and self.holder is None \
            and not self._claiming
        if not takes_shell:  # a comm next to the holder, a subshell, a control cell beside a wait
            return await self._dispatch_shell(msg, subshell_id=subshell_id, concurrent=concurrent, **kwargs)
        # ipykernel sets the request's parent before its first await: that call claims the shell
        self._claiming = True
        try:
            return await self._dispatch_shell(msg, subshell_id=subshell_id, concurrent=concurrent, **kwargs)
        finally:
            self._claiming = False
            self.holder = None

    def _remember(self, msg_id: str) -> None:
        self._seen[msg_id] = None
        self._seen.move_to_end(msg_id)
        while len(self._seen) > _REMEMBERED:
            self._seen.popitem(last=False)


def _msg_id(parent: ParentHeader) -> str | None:
    header = parent.get("header")
    msg_id = header.get("msg_id") if isinstance(header, dict) else None
    return msg_id if isinstance(msg_id, str) else None


def _needs_guard(kernel: ForeignKernel) -> bool:
    dispatch = getattr(kernel, "dispatch_shell", None)
    if kernel is None or not callable(dispatch) or not callable(getattr(kernel, "set_parent", None)):
        return False
    try:
        return "concurrent" in inspect.signature(dispatch).parameters
    except (TypeError, ValueError):
        return False


_installed: dict[int, tuple[ShellParentGuard, Patch, Patch]] = {}


def install_shell_parent_guard(kernel: ForeignKernel) -> ShellParentGuard | None:
    """Wrap ``kernel``'s parent bookkeeping (None: this ipykernel does not need it)."""
    if not _needs_guard(kernel):
        return None
    found = _installed.get(id(kernel))
    if found is not None and PATCHES.find(kernel, "set_parent") is found[1]:
        return found[0]
    guard = ShellParentGuard(kernel.set_parent, kernel.dispatch_shell)
    set_patch = PATCHES.apply(kernel, "set_parent", guard.set_parent,
                              "a comm run next to a cell never puts an ended cell's parent back")
    dispatch_patch = PATCHES.apply(kernel, "dispatch_shell", guard.dispatch_shell,
                                   "which request holds the main shell (for the parent put-back)")
    _installed[id(kernel)] = (guard, set_patch, dispatch_patch)
    return guard


def uninstall_shell_parent_guard(kernel: ForeignKernel) -> None:
    found = _installed.pop(id(kernel), None)
    if found is not None:
        PATCHES.undo(found[2])
        PATCHES.undo(found[1])
