"""Notebook tools: run Python in the user's kernel, inspect variables, approvals, redaction.

Public API (used by the magics/widgets layers):

- ``install_capture(shell)`` / ``uninstall_capture(shell)``: routing proxies for
  ``sys.stdout``/``sys.stderr``/``shell.display_pub`` (once, at extension load/unload).
- ``make_notebook_tools(shell, settings, *, on_late_output=None) -> list[AgentTool]``:
  ``python``, ``list_variables``, ``inspect_variable``. ``settings`` is a
  :class:`PythonToolSettings` (built by the magics layer), a callable returning one (read
  at each call), or ``None`` (defaults).
- ``make_approval_hook(get_policy, ask, is_interactive)``: the ``before_tool_call`` hook of
  the approval policy; ``APPROVAL_POLICIES``, ``ApprovalPolicy``, ``APPROVAL_ENV`` and
  ``default_policy()`` (reads ``PI_NOTEBOOK_APPROVAL``) are defined in ``trust/policy.py`` only
  (dependency-free, so the magics read them at ``%load_ext``; ``trust/approval.py`` re-exports them).
- ``run_code(shell, code, ...)`` / ``ExecutionResult``, ``redact(text)``, ``add_secret(value)``.

Five rooms, each importing only from the rooms listed before it:

- ``trust/``: the approval gate and its policy, secret redaction, credential shapes;
- ``output/``: what a call's output is (typed records) and how it reads as text (budgets,
  images, tracebacks, error hints);
- ``kernel/``: the seams to the kernel hosting IPython (the kernel host, patches, routed
  stdout/stderr/display and fds, guards, interrupts, worker threads, the output sink);
- ``context/``: the notebook the agent reads (cell history, namespace summary, the notebook
  file, project files, references, the per-prompt context block);
- ``python/``: the ``python``, ``list_variables`` and ``inspect_variable`` tools.

Names are loaded lazily: importing a data-only module (``tools.output.updates``,
``tools.trust.redact``, ``tools.trust.approval``) does not import IPython.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from collections.abc import Callable

    from ..agent.types import AgentTool
    from .python.python_tool import SettingsSource
    from .output.updates import ToolOutput

__all__ = [
    "APPROVAL_ENV",
    "APPROVAL_POLICIES",
    "ApprovalHook",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ExecutionResult",
    "PythonToolSettings",
    "SettingsSource",
    "ToolInterrupt",
    "add_secret",
    "capture",
    "capture_active",
    "default_policy",
    "discard_secret",
    "install_capture",
    "interrupt_main_for",
    "make_approval_hook",
    "make_notebook_tools",
    "make_python_tool",
    "make_variable_tools",
    "redact",
    "resolve_settings",
    "result_content",
    "run_code",
    "uninstall_capture",
]

_LAZY = {
    **dict.fromkeys(("APPROVAL_ENV", "APPROVAL_POLICIES", "ApprovalPolicy", "default_policy"), ".trust.policy"),
    **dict.fromkeys(("ApprovalHook", "ApprovalRequest", "make_approval_hook"), ".trust.approval"),
    **dict.fromkeys(("capture", "capture_active", "install_capture", "uninstall_capture"), ".kernel.capture"),
    **dict.fromkeys(("ToolInterrupt", "interrupt_main_for"), ".kernel.interrupt"),
    **dict.fromkeys(("ExecutionResult", "PythonToolSettings", "SettingsSource", "make_python_tool",
                     "resolve_settings", "result_content", "run_code"), ".python.python_tool"),
    **dict.fromkeys(("add_secret", "discard_secret", "redact"), ".trust.redact"),
    "make_variable_tools": ".python.variables",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def make_notebook_tools(shell: InteractiveShell, settings: SettingsSource = None, *,
                        on_late_output: Callable[[str, ToolOutput], Any] | None = None) -> list[AgentTool]:
    """The agent's notebook tools bound to ``shell``: python, list_variables, inspect_variable.

    ``on_late_output(tool_call_id, record)``: output that threads, tasks or processes started
    by agent code write after their call returned (redacted; see ``python_tool.run_code``).
    """
    from .python.python_tool import make_python_tool
    from .python.variables import make_variable_tools

    return [make_python_tool(shell, settings, on_late_output),
            *make_variable_tools(shell, settings)]
