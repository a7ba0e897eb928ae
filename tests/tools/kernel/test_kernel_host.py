"""The kernel host adapter on the two ipykernel shapes it reads (6.x: one global parent and
``kernel.shell_stream``; 7.x: context-variable parents and the shell channel thread), and on
terminal IPython (no kernel). The real kernels are exercised by tests/kernel."""

from __future__ import annotations

import asyncio
import types

from pi_notebook.tools.kernel.kernel_host import SavedParent, kernel_host


class Kernel6:
    def __init__(self) -> None:
        self.shell_stream = object()
        self._parent_ident = {"shell": b"ident-a"}
        self._parent = {"header": {"msg_id": "a"}, "content": {"allow_stdin": True}}
        self.set_parent_calls: list[tuple[object, object, str]] = []
        self.saved_sigint_handler = "handler-of-the-waiting-request"
        self.dispatched: list[object] = []

    def get_parent(self, channel: str = "shell") -> dict:
        return self._parent

    def set_parent(self, ident: object, parent: dict, channel: str) -> None:
        self.set_parent_calls.append((ident, parent, channel))
        self._parent_ident = {"shell": ident}
        self._parent = parent

    async def dispatch_shell(self, msg: object) -> None:
        # what a request's handler does: its own parent and SIGINT handler
        self.set_parent(b"ident-b", {"header": {"msg_id": "b"}}, "shell")
        self.saved_sigint_handler = "handler-of-the-control-cell"
        self.dispatched.append(msg)


class Kernel7:
    def __init__(self) -> None:
        self.stream = object()
        pair = types.SimpleNamespace(to_stream=self.stream)
        self.shell_channel_thread = types.SimpleNamespace(manager=types.SimpleNamespace(_shell_channel_to_main=pair))
        self._allow_stdin = False
        self.dispatched: list[tuple[object, object]] = []

    def get_parent(self, channel: str = "shell") -> dict:
        return {}

    async def dispatch_shell(self, msg: object, subshell_id: object = "missing") -> None:
        self.dispatched.append((msg, subshell_id))


def _shell(kernel: object = None) -> types.SimpleNamespace:
    shell = types.SimpleNamespace(user_ns={})
    if kernel is not None:
        shell.kernel = kernel
    return shell


def test_terminal_ipython_has_no_kernel():
    host = kernel_host(_shell())
    assert not host.has_kernel and host.kernel is None
    assert host.parent_header() is None and host.request_allows_stdin() is None
    assert host.saved_parent() is None and host.main_shell_stream() is None
    assert host.ipykernel_major is None and not host.comms_wait_for_cells
    host.restore_parent(None)  # nothing to do
    host.log_warning("no kernel log: nothing happens")


def test_ipykernel_6_shape():
    kernel = Kernel6()
    host = kernel_host(_shell(kernel))
    assert host.has_kernel and host.main_shell_stream() is kernel.shell_stream
    assert host.comms_wait_for_cells  # 6.x: comm messages wait behind a running cell
    assert host.request_allows_stdin() is True
    saved = host.saved_parent()
    assert saved == SavedParent(b"ident-a", kernel._parent)
    asyncio.run(host.dispatch_beside(["msg"]))
    assert kernel.dispatched == [["msg"]]
    # the running request keeps its parent and its saved SIGINT handler
    assert kernel._parent_ident == {"shell": b"ident-a"} and kernel._parent["header"]["msg_id"] == "a"
    assert kernel.saved_sigint_handler == "handler-of-the-waiting-request"


def test_ipykernel_7_shape():
    kernel = Kernel7()
    host = kernel_host(_shell(kernel))
    assert host.main_shell_stream() is kernel.stream and not host.comms_wait_for_cells
    assert host.saved_parent() is None  # parents live in context variables
    assert host.parent_header() is None  # an empty parent is no parent
    assert host.request_allows_stdin() is False  # from do_execute's flag
    asyncio.run(host.dispatch_beside(["msg"]))
    assert kernel.dispatched == [(["msg"], None)]  # the main shell, no subshell


def test_publishing_as_swaps_the_publisher_parent_on_6_only(monkeypatch):
    import sys

    class Publisher:
        parent_header = {"header": "latest"}

        def set_parent(self, parent: dict) -> None:
            self.parent_header = parent

    publisher = Publisher()
    shell = _shell(Kernel6())
    shell.display_pub = publisher
    monkeypatch.setitem(sys.modules, "ipykernel", types.SimpleNamespace(version_info=(6, 29, 5)))
    host = kernel_host(shell)
    assert host.ipykernel_major == 6
    with host.publishing_as({"header": "the agent cell"}):
        assert publisher.parent_header == {"header": "the agent cell"}
    assert publisher.parent_header == {"header": "latest"}
    monkeypatch.setitem(sys.modules, "ipykernel", types.SimpleNamespace(version_info=(7, 4, 0)))
    with host.publishing_as({"header": "the agent cell"}):
        assert publisher.parent_header == {"header": "latest"}  # 7.x: the task's own parent
