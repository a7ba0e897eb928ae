"""``%unload_ext pi_notebook`` undoes every patch: the registry (tools/kernel/patches.py) lists what
loading replaced, with why, and after unloading each attribute is the original again.

The kernel here is a stand-in with the attributes pi_notebook patches on ipykernel's
(``do_shutdown``, the main shell stream's receive callback, ``raw_input``/``getpass``), so
the kernel-only patches are installed too; the real kernels are in tests/kernel. (The
kernel's request hooks are patched only while agent code runs, tools/kernel/interrupt.py, and are
undone when it ends: tests/tools.)
"""

from __future__ import annotations

import builtins
import getpass
import sys
import threading
import types

import pytest
from IPython.core.interactiveshell import InteractiveShell

import pi_notebook.magics as magics
from pi_notebook.tools.kernel.patches import PATCHES


class FakeStream:
    """The main shell stream: ipykernel's ZMQStream keeps its callback in ``_recv_callback``."""

    def __init__(self) -> None:
        self._recv_callback = self.dispatch

    def dispatch(self, msg: object) -> None:
        pass

    def on_recv(self, callback: object, copy: bool = True) -> None:
        self._recv_callback = callback


class FakeKernel:
    def __init__(self) -> None:
        self.shell_stream = FakeStream()  # ipykernel 6's shape
        self.io_loop = None
        self.session = None

    def do_shutdown(self, restart: bool) -> dict[str, str]:
        return {"status": "ok"}

    async def dispatch_shell(self, msg: object) -> None:
        pass

    def raw_input(self, prompt: str = "") -> str:
        return ""

    def getpass(self, prompt: str = "", stream: object = None) -> str:
        return ""

    def get_parent(self, channel: str = "shell") -> dict[str, object]:
        return {}


@pytest.fixture
def kernel_shell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert magics.current_runtime() is None
    from pi_notebook.tools import uninstall_capture

    uninstall_capture()  # an earlier test's capture (tests that need one install their own)
    ip = InteractiveShell.instance()
    ip.kernel = FakeKernel()
    yield ip
    if magics.current_runtime() is not None:
        ip.run_line_magic("unload_ext", "pi_notebook")
    del ip.kernel
    InteractiveShell.clear_instance()


def _present(owner: object, name: str) -> tuple[object, bool]:
    """The attribute's value, and whether the owner holds it itself (not its class)."""
    try:
        own = name in vars(owner)
    except TypeError:
        own = True
    return getattr(owner, name), own


def _kind(owner: object) -> str:
    if isinstance(owner, types.ModuleType):
        return "module"
    return owner.__name__ if isinstance(owner, type) else type(owner).__name__


def test_unload_undoes_every_patch(kernel_shell):
    ip = kernel_shell
    kernel = ip.kernel
    # (ask_exit is the kernel's and the terminal's shell's, not the base InteractiveShell's)
    watched = [(ip, "should_run_async"), (ip, "_showtraceback"), (ip, "display_pub"),
               (ip.events, "trigger"), (kernel, "do_shutdown"), (kernel, "raw_input"), (kernel, "getpass"),
               (kernel.shell_stream, "_recv_callback"), (sys, "stdout"), (sys, "stderr"),
               (builtins, "input"), (getpass, "getpass"), (threading.Thread, "start")]
    assert not PATCHES.listed(), f"patches left by an earlier test: {PATCHES.describe()}"
    before = {(id(owner), name): _present(owner, name) for owner, name in watched}
    sys_class = type(sys)

    ip.run_line_magic("load_ext", "pi_notebook")
    runtime = magics.current_runtime()
    runtime.tools_factory = lambda rt: []
    runtime.get_agent()  # installs the tools' output capture and its guards
    from pi_notebook.magics.frontend import count_new_views

    count_new_views(True)  # what a blocking cell does: ipywidgets' construction callback
    import ipywidgets

    construction_before = None  # (what was there before count_new_views: ipywidgets' default)
    for patch in PATCHES.listed():
        if patch.name == "_widget_construction_callback":
            construction_before = patch.original

    listed = {(_kind(p.owner), p.name) for p in PATCHES.listed()}
    assert {("InteractiveShell", "should_run_async"), ("InteractiveShell", "_showtraceback"), ("InteractiveShell", "display_pub"),
            ("EventManager", "trigger"), ("FakeKernel", "do_shutdown"), ("FakeKernel", "raw_input"),
            ("FakeKernel", "getpass"), ("FakeStream", "_recv_callback"), ("module", "stdout"),
            ("module", "stderr"), ("module", "input"), ("module", "getpass"), ("Thread", "start"),
            ("Widget", "_widget_construction_callback")} <= listed
    # each says why, and every watched attribute really is replaced now
    assert all(p.why for p in PATCHES.listed()) and len(PATCHES.describe()) == len(PATCHES.listed())
    for owner, name in watched:
        now, _ = _present(owner, name)
        assert now != before[(id(owner), name)][0], f"{name} was not patched"

    from pi_notebook.tools.output.figure_text import FIGURE_TEXT_MIME

    assert FIGURE_TEXT_MIME in ip.display_formatter.formatters  # a figure's words, for agent code

    ip.run_line_magic("unload_ext", "pi_notebook")

    assert PATCHES.listed() == [] and FIGURE_TEXT_MIME not in ip.display_formatter.formatters
    for owner, name in watched:
        value, own = before[(id(owner), name)]
        now, own_now = _present(owner, name)
        assert now == value, f"{type(owner).__name__}.{name} is not the original again"
        assert own_now == own, f"{type(owner).__name__}.{name}: an instance attribute is left over"
    assert type(sys) is sys_class
    assert ipywidgets.Widget._widget_construction_callback is construction_before


def test_a_patch_replaced_since_is_left_to_its_new_owner():
    """Someone wrapped our replacement: undo leaves theirs in place (it passes through to ours,
    which passes through to the original once pi_notebook is not active)."""

    class Owner:
        def hook(self) -> str:
            return "original"

    owner = Owner()
    patch = PATCHES.apply(owner, "hook", lambda: "ours", "a test patch")
    assert owner.hook() == "ours" and PATCHES.find(owner, "hook") is patch

    def theirs() -> str:
        return "theirs"

    owner.hook = theirs
    assert PATCHES.undo(patch) is False
    assert owner.hook is theirs and PATCHES.listed() == []

    other = Owner()
    PATCHES.undo(PATCHES.apply(other, "hook", lambda: "ours", "a test patch"))
    assert "hook" not in vars(other) and other.hook() == "original"  # the method shows again
