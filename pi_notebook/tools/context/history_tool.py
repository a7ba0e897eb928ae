"""What the model is given of the history: the ``notebook_history`` tool and the ``%agent fix`` prompt.

- ``make_history_tool(history) -> AgentTool``: ``notebook_history(last=10, cell=None)``, the user's
  recent cells as compact text (tools/context/history.py records them);
- ``fix_prompt(history) -> str | None``: "explain and fix the error in cell [n]", with the cell
  and its trimmed traceback, or None when the latest code cell did not raise.
"""

from __future__ import annotations

from typing import Any

from ...agent.types import AgentTool, AgentToolResult
from ...ai.types import TextContent
from .history import ExecutionHistory, indent

__all__ = ["fix_prompt", "make_history_tool"]


def fix_prompt(history: ExecutionHistory) -> str | None:
    """The prompt ``%agent fix`` sends: explain and fix the user's latest error (None when the
    latest code cell did not raise). The failing cell travels with it, so even a small model
    needs no tool call to start."""
    record = history.last_error()
    if record is None or record.error is None:
        return None
    error = record.error
    lines = [
        f"Explain and fix the error in cell {record.label}: {error.headline()}.",
        "",
        f"Cell {record.label}:",
        indent(record.source),
    ]
    if error.traceback:
        lines += ["Traceback (most recent call last):", indent(error.traceback)]
    lines += [
        "",
        "Say in one or two sentences what caused it. Then run the corrected code with the python "
        "tool, so that what the cell was meant to compute exists in the namespace, and check it "
        "worked. Change only what the error needs: leave the user's other variables and their "
        "columns as they are (no conversions, no reassignments, no in-place changes beyond the "
        "fix). End by showing the corrected line(s) and saying exactly what you changed. Use "
        "notebook_history or inspect_variable if you need more context; do not redefine data the "
        "user already has.",
    ]
    return "\n".join(lines)


def make_history_tool(history: ExecutionHistory, max_chars: int = 8000) -> AgentTool:
    """``notebook_history(last=10, cell=None)``: the user's recent cells as text."""

    async def execute(tool_call_id: str, params: Any, signal: Any = None,
                      on_update: Any = None) -> AgentToolResult:
        params = params if isinstance(params, dict) else {}
        cell = params.get("cell")
        last = params.get("last", 10)
        if cell is not None and (isinstance(cell, bool) or not isinstance(cell, int)):
            raise ValueError("notebook_history: 'cell' must be an integer execution count")
        if isinstance(last, bool) or not isinstance(last, int) or last < 1:
            raise ValueError("notebook_history: 'last' must be a positive integer")
        text = history.render(last=min(last, 50), cell=cell, max_chars=max_chars)
        return AgentToolResult(content=[TextContent(text=text)],
                               details={"last": last, "cell": cell})

    return AgentTool(
        name="notebook_history",
        label="History",
        description=(
            "The cells the user ran in this kernel, oldest first: execution count, source, "
            "printed output, Out value, and for errors the exception, failing line and a "
            "trimmed traceback. %%agent cells are shown as 'agent prompt'. Use cell=N for "
            "one cell by execution count (In[N]), or last=K for the K most recent."),
        parameters={
            "type": "object",
            "properties": {
                "last": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10,
                         "description": "How many recent cells to show."},
                "cell": {"type": "integer", "description": "One cell by execution count (In[N])."},
            },
        },
        execute=execute,
    )
