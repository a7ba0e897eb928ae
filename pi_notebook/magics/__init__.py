"""%%agent, %steer, %followup, %agent: the run lifecycle on the kernel loop.

``load_ipython_extension`` installs, and ``unload_ipython_extension`` removes, exactly:
the ``AgentMagics`` settings (in ``shell.configurables``), the magics, one
``input_transformers_cleanup`` hook, the execution-history recorder (``pre_run_cell`` /
``post_run_cell`` events, tools/context/history.py) and the notebook tools' output-capture proxies.
Every attribute replaced on a foreign object (the shell, the kernel, ``sys``...) is listed
in the patch registry (tools/kernel/patches.py, ``PATCHES.describe()``) with why; unloading
undoes each one.
Provider, widget and agent code is imported only when first used, so loading stays cheap.
The module map is in docs/design/notebook-layer.md.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..agent import Agent
    from .runtime import Runtime

__all__ = ["load_ipython_extension", "unload_ipython_extension", "get_agent", "current_runtime"]

_runtime: Runtime | None = None
_MAGIC_NAMES = {"line": ("agent", "steer", "followup"), "cell": ("agent",)}


def current_runtime() -> Runtime | None:
    """The loaded extension's Runtime, or None."""
    return _runtime


def load_ipython_extension(ip: InteractiveShell) -> None:
    global _runtime
    if _runtime is not None and _runtime.shell is ip:
        return
    from ..mcp.namespace import set_manager_source
    from ..tools.context.history import install_history
    from .commands import PiNotebookMagics
    from .config import AgentMagics
    from .runtime import Runtime
    from .mcp_command import McpCommandStep
    from .wait import install_transformers, set_command_step

    settings = AgentMagics(parent=ip)
    _configurables(ip).append(settings)
    runtime = Runtime(ip, settings)
    try:
        runtime.attach_loop()
    except RuntimeError:
        pass  # terminal IPython between cells: the loop is found when a run starts
    ip.register_magics(PiNotebookMagics(ip, runtime))
    install_transformers(ip, runtime)
    set_command_step(McpCommandStep(runtime))  # %agent mcp commands wait for their servers
    install_history(ip)  # from now on: the cells the user runs, for the agent's context
    # The tools' output-capture proxies are installed with the agent (first run or
    # get_agent()): importing the agent core at load time would cost seconds in
    # environments where jsonschema pulls in slow optional format checkers.
    runtime.on_agent_created = lambda: _install_capture(ip)
    # `await pi_notebook.mcp.call(...)` in the user's first cell makes the MCP link itself
    set_manager_source(lambda: runtime.mcp().manager)
    _runtime = runtime


def unload_ipython_extension(ip: InteractiveShell) -> None:
    global _runtime
    if _runtime is None:
        return
    runtime: Runtime = _runtime
    from .wait import uninstall_transformers

    try:
        runtime.close()
    finally:
        _runtime = None
        from ..mcp.namespace import set_manager_source

        set_manager_source(None)
        uninstall_transformers(ip)
        from ..tools.context.history import uninstall_history

        uninstall_history(ip)
        if runtime.capture_installed:
            from ..tools import uninstall_capture

            uninstall_capture(ip)
        _stop_local_servers()
        magics = ip.magics_manager.magics
        for kind, names in _MAGIC_NAMES.items():
            for name in names:
                fn = magics[kind].get(name)
                if getattr(getattr(fn, "__self__", None), "runtime", None) is runtime:
                    del magics[kind][name]
        ip.magics_manager.registry.pop("PiNotebookMagics", None)
        # register_magics also lists the Magics instance among the configurables
        settings = runtime.settings
        configurables = _configurables(ip)
        configurables[:] = [c for c in configurables
                            if c is not settings and getattr(c, "runtime", None) is not runtime]


def _configurables(ip: InteractiveShell) -> list[object]:
    """The shell's configurables (IPython annotates the list as one of shells; it holds any
    Configurable: our settings and Magics)."""
    return cast("list[object]", ip.configurables)


def _install_capture(ip: InteractiveShell) -> None:
    from ..tools.kernel.kernel_host import kernel_host

    if not kernel_host(ip).has_kernel:
        return  # terminal IPython: nothing to route
    from ..tools import install_capture

    install_capture(ip)


def _stop_local_servers() -> None:
    """Embedded llama.cpp servers started for this kernel stop with the extension (only
    if that module was ever imported: unloading must not import it)."""
    local = sys.modules.get("pi_notebook.local.provider")
    if local is not None:
        local.stop_local_servers()


def get_agent() -> Agent:
    """The kernel's Agent behind the magics (loads the extension into the running IPython
    if needed)."""
    if _runtime is None:
        from IPython import get_ipython

        ip = get_ipython()
        if ip is None:
            raise RuntimeError("pi_notebook.get_agent() needs IPython; use pi_notebook.agent.Agent "
                               "directly elsewhere.")
        load_ipython_extension(ip)
    assert _runtime is not None
    return _runtime.get_agent()
