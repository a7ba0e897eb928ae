"""Per-model conversation settings: small embedded models get a short prompt, fewer tools, a
turn budget and the run checks of local/checks.py (docs/design/local-model.md); every other
model the configured prompt and all tools. Applied by the magics when each run starts, so
switching models switches profiles."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

from .profile import small_model_profile
from .checks import RunChecks, UserValue

if TYPE_CHECKING:
    from ..agent import Agent, AgentTool
    from ..agent.types import BeforeToolCallContext, BeforeToolCallResult, ShouldStopAfterTurnContext

__all__ = ["apply_model_profile"]

# the Agent's before_tool_call: (context, signal) -> a result or None, maybe awaited
BeforeHook = Callable[..., object]
_BASE = "_pi_notebook_base_hook"  # the hook a profile wrapper replaced (the approval gate)


def apply_model_profile(agent: Agent, system_prompt: str, all_tools: list[AgentTool],
                        user_ns: Mapping[str, UserValue] | None = None, *, instructions: str = "",
                        default_system_prompt: str | None = None) -> None:
    """``user_ns``: the namespace the run's code works in; without one the run checks are off.
    ``instructions``: the project's (magics/instructions.py), after either prompt.
    ``default_system_prompt``: the configured default, which the profile's own prompt replaces;
    any other prompt is the user's and is kept."""
    base_before = getattr(agent.before_tool_call, _BASE, agent.before_tool_call)
    profile = small_model_profile(agent.state.model)
    if profile is None:
        agent.state.system_prompt = system_prompt + instructions
        agent.state.tools = list(all_tools)
        agent.should_stop_after_turn = None
        agent.before_tool_call = base_before
        return
    # a system prompt the user set is theirs to keep; only the default is replaced
    agent.state.system_prompt = (profile.system_prompt if system_prompt == default_system_prompt
                                 else system_prompt) + instructions
    agent.state.tools = [t for t in all_tools if t.name in profile.tool_names]
    if user_ns is None:
        agent.should_stop_after_turn = _turn_budget(profile.max_turns)
        agent.before_tool_call = base_before
        return
    checks = RunChecks(user_ns, agent.steer, profile.max_turns)
    agent.should_stop_after_turn = checks.should_stop
    agent.before_tool_call = _checked(checks, base_before)


def _checked(checks: RunChecks, base: BeforeHook | None) -> BeforeHook:
    """``before_tool_call``: the run checks first (a blocked call never reaches approval), then
    the hook that was there."""

    async def before(ctx: BeforeToolCallContext, signal: object = None) -> BeforeToolCallResult | None:
        blocked = checks.before_tool_call(ctx)
        if blocked is not None:
            return blocked
        if base is None:
            return None
        result = base(ctx, signal)
        if inspect.isawaitable(result):
            result = await result
        return cast("BeforeToolCallResult | None", result)  # what the hook it wraps answers

    setattr(before, _BASE, base)
    return before


def _turn_budget(max_turns: int | None) -> Callable[..., bool] | None:
    """``should_stop_after_turn``: stop a prompt after ``max_turns`` model turns (a backstop
    for a small model that keeps calling tools; every tool call still has its result)."""
    if not max_turns:
        return None

    def should_stop(ctx: ShouldStopAfterTurnContext, signal: object = None) -> bool:
        turns = sum(1 for m in ctx.new_messages if getattr(m, "role", None) == "assistant")
        return turns >= max_turns

    return should_stop
