"""The Agent the magics build (their tools' approval, compaction and context), without a kernel:
for tests of what a conversation sends over many requests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def magics_agent(tool: Callable[[], Any]) -> tuple[Any, list[str]]:
    """What ``magics/wiring.py`` wires under ``auto`` with one tool (``.agent``, ``.notes``,
    ``.approval``); the notices it shows (compaction, warnings) are collected in the list."""
    from pi_notebook.magics.config import AgentMagics
    from pi_notebook.magics.settings import python_tool_settings, run_settings
    from pi_notebook.magics.wiring import AgentHooks, build_agent

    notices: list[str] = []

    async def deny(request: object) -> str:
        return "deny"

    hooks = AgentHooks(policy=lambda: "auto", ask=deny, is_interactive=lambda: False,
                       notify=notices.append, on_compaction=notices.append,
                       stream_options=dict, tools=lambda: [tool()])
    magics = AgentMagics()
    wired = build_agent(run_settings(magics), None, hooks, python_tool_settings(magics))
    return wired, notices
