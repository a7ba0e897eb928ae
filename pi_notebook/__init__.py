"""pi_notebook: a Jupyter-native LLM agent that runs on the IPython kernel's own loop.

``%load_ext pi_notebook`` registers the ``%%agent``, ``%steer``, ``%followup`` and
``%agent`` magics. The agent core (``pi_notebook.agent``) and the LLM layer
(``pi_notebook.ai``) import nothing from IPython and work in any asyncio program.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent import Agent

from .version import __version__

__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension", "get_agent"]


def load_ipython_extension(ipython: Any) -> None:
    from .magics import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unload_ipython_extension as _unload

    _unload(ipython)


def __getattr__(name: str) -> Any:
    # ``await pi_notebook.mcp.call(...)`` after a bare ``import pi_notebook``: the subpackage
    # is imported on first use (it imports no SDK by itself)
    if name == "mcp":
        import importlib

        return importlib.import_module(".mcp", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_agent() -> Agent:
    """The kernel's Agent behind the magics (created on first use)."""
    from .magics import get_agent as _get_agent

    return _get_agent()
