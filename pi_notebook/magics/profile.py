"""Per-model conversation settings: small embedded models get a short prompt, fewer tools and
a turn budget (docs/design/local-model.md); every other model the configured prompt and all
tools. Applied when each run starts, so switching models switches profiles."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..ai.providers.local_profile import small_model_profile
from .config import DEFAULT_SYSTEM_PROMPT

if TYPE_CHECKING:
    from ..agent import Agent, AgentTool
    from ..agent.types import ShouldStopAfterTurnContext

__all__ = ["apply_model_profile"]


def apply_model_profile(agent: Agent, system_prompt: str, all_tools: list[AgentTool], *,
                        instructions: str = "") -> None:
    """``instructions``: the project's (magics/instructions.py), after either prompt."""
    profile = small_model_profile(agent.state.model)
    if profile is None:
        agent.state.system_prompt = system_prompt + instructions
        agent.state.tools = list(all_tools)
        agent.should_stop_after_turn = None
        return
    # a system prompt the user set is theirs to keep; only the default is replaced
    agent.state.system_prompt = (profile.system_prompt if system_prompt == DEFAULT_SYSTEM_PROMPT
                                 else system_prompt) + instructions
    agent.state.tools = [t for t in all_tools if t.name in profile.tool_names]
    agent.should_stop_after_turn = _turn_budget(profile.max_turns)


def _turn_budget(max_turns: int | None) -> Callable[..., bool] | None:
    """``should_stop_after_turn``: stop a prompt after ``max_turns`` model turns (a backstop
    for a small model that keeps calling tools; every tool call still has its result)."""
    if not max_turns:
        return None

    def should_stop(ctx: ShouldStopAfterTurnContext, signal: object = None) -> bool:
        turns = sum(1 for m in ctx.new_messages if getattr(m, "role", None) == "assistant")
        return turns >= max_turns

    return should_stop
