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
  ``default_policy()`` (reads ``PI_NOTEBOOK_APPROVAL``) are defined in ``approval.py`` only.
- ``run_code(shell, code, ...)`` / ``ExecutionResult``, ``redact(text)``, ``add_secret(value)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..agent.types import AgentTool
from .approval import (
    APPROVAL_ENV,
    APPROVAL_POLICIES,
    ApprovalHook,
    ApprovalPolicy,
    ApprovalRequest,
    default_policy,
    make_approval_hook,
)
from .capture import capture, capture_active, install_capture, uninstall_capture
from .interrupt import ToolInterrupt, interrupt_main_for
from .python_tool import (
    ExecutionResult,
    PythonToolSettings,
    SettingsSource,
    make_python_tool,
    resolve_settings,
    result_content,
    run_code,
)
from .redact import add_secret, discard_secret, redact
from .updates import ToolOutput
from .variables import make_variable_tools

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
    "capture",
    "capture_active",
    "add_secret",
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


def make_notebook_tools(shell: Any, settings: SettingsSource = None, *,
                        on_late_output: Callable[[str, ToolOutput], Any] | None = None) -> list[AgentTool]:
    """The agent's notebook tools bound to ``shell``: python, list_variables, inspect_variable."""
    return [make_python_tool(shell, settings, on_late_output),
            *make_variable_tools(shell, settings)]
