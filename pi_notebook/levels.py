"""The thinking levels, defined once for every layer.

A root module without imports on purpose: ``ai/types.py`` types messages and state with
the ``Literal``, and ``AgentMagics.thinking`` / ``%%agent --thinking`` validate against the
tuple at ``%load_ext``, which must not import pydantic or the agent core.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["AgentThinkingLevel", "THINKING_LEVELS", "parse_thinking_level"]

# pi's agent-core levels: pi-ai's ThinkingLevel plus "off" (no reasoning requested)
AgentThinkingLevel = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]
THINKING_LEVELS: tuple[AgentThinkingLevel, ...] = get_args(AgentThinkingLevel)


def parse_thinking_level(value: str) -> AgentThinkingLevel:
    """``value`` as a level (case and surrounding space ignored); ``ValueError`` otherwise."""
    wanted = value.strip().lower()
    for level in THINKING_LEVELS:
        if wanted == level:
            return level
    raise ValueError(f"must be one of {', '.join(THINKING_LEVELS)}, not {value!r}")
