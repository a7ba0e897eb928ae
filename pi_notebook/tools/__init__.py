"""Notebook tools: run Python in the user's kernel, inspect variables, approvals, redaction.

Public API (used by the magics/widgets layers):

- ``install_capture(shell)`` / ``uninstall_capture(shell)``: routing proxies for
  ``sys.stdout``/``sys.stderr``/``shell.display_pub`` (once, at extension load/unload).
- ``make_notebook_tools(shell, settings) -> list[AgentTool]``: ``python``, ``list_variables``,
  ``inspect_variable``. ``settings`` is a :class:`PythonToolSettings`, ``None`` or a config
  object with ``tool_timeout``/``max_output_chars``/``max_value_chars``/``max_images``/
  ``max_image_pixels`` (e.g. ``AgentMagics``).
- ``make_approval_hook(get_policy, ask, is_interactive)``: the ``before_tool_call`` hook of
  the approval policy (``ask`` | ``auto`` | ``deny``); ``default_policy()`` reads
  ``PI_NOTEBOOK_APPROVAL``.
- ``run_code(shell, code, ...)`` / ``ExecutionResult``, ``redact(text)``.
"""

from __future__ import annotations

from typing import Any

from ..agent.types import AgentTool
from .approval import ApprovalHook, ApprovalRequest, default_policy, make_approval_hook
from .capture import capture, capture_active, install_capture, uninstall_capture
from .interrupt import ToolInterrupt, interrupt_main_for
from .python_tool import ExecutionResult, PythonToolSettings, make_python_tool, result_content, run_code
from .redact import redact
from .variables import make_variable_tools

__all__ = [
    "ApprovalHook",
    "ApprovalRequest",
    "ExecutionResult",
    "PythonToolSettings",
    "ToolInterrupt",
    "capture",
    "capture_active",
    "default_policy",
    "install_capture",
    "interrupt_main_for",
    "make_approval_hook",
    "make_notebook_tools",
    "make_python_tool",
    "make_variable_tools",
    "redact",
    "result_content",
    "run_code",
    "uninstall_capture",
]


def make_notebook_tools(shell: Any, settings: Any = None) -> list[AgentTool]:
    """The agent's notebook tools bound to ``shell``: python, list_variables, inspect_variable."""
    conf = PythonToolSettings.from_any(settings)
    # python gets the config object itself: it reads tool_timeout etc. at each call.
    return [make_python_tool(shell, settings), *make_variable_tools(shell, conf)]
