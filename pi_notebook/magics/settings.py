"""Typed settings handed from the magics layer to the parts below it.

``AgentMagics`` (traitlets, ``%config``) is the user's surface; the run lifecycle, the
agent wiring and the tools never read its trait names. They get the plain values built
here, when a run starts, so a ``%config`` change applies from the next run on.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..levels import AgentThinkingLevel, parse_thinking_level
from ..tools.trust.policy import ApprovalPolicy, parse_policy
from .config import AgentMagics, WaitSetting, parse_wait

if TYPE_CHECKING:  # the tools package imports the agent core: loaded with the first agent
    from ..tools import PythonToolSettings

__all__ = ["RunSettings", "run_settings", "python_tool_settings", "update_python_tool_settings",
           "stream_timeouts"]


@dataclass(frozen=True)
class RunSettings:
    """One snapshot of ``AgentMagics`` (see its help texts for each field)."""

    model: str
    base_url: str
    thinking: AgentThinkingLevel
    approval: ApprovalPolicy
    wait: WaitSetting
    system_prompt: str
    autosave: bool
    session_dir: str
    raise_on_error: bool
    first_byte_timeout: float
    idle_timeout: float
    approval_timeout: float  # 0: no limit
    notebook_path: str  # "" : locate the notebook
    context_tokens: int  # 0: no per-prompt context block


def run_settings(magics: AgentMagics) -> RunSettings:
    # the three vocabularies are CaselessStrEnum traits (a TraitError at %config): parsed
    # here into their Literals, so nothing below compares strings again
    return RunSettings(
        model=magics.model.strip(), base_url=magics.base_url.strip(),
        thinking=parse_thinking_level(magics.thinking), approval=parse_policy(magics.approval),
        wait=parse_wait(magics.wait), system_prompt=magics.system_prompt,
        autosave=magics.autosave, session_dir=magics.session_dir,
        raise_on_error=magics.raise_on_error, first_byte_timeout=magics.first_byte_timeout,
        idle_timeout=magics.idle_timeout, approval_timeout=magics.approval_timeout,
        notebook_path=magics.notebook_path.strip(), context_tokens=magics.context_tokens)


def python_tool_settings(magics: AgentMagics) -> PythonToolSettings:
    """The python tool's budgets from the ``AgentMagics`` traits of the same meaning."""
    from ..tools import PythonToolSettings

    return PythonToolSettings(
        max_output_chars=magics.max_output_chars, max_value_chars=magics.max_value_chars,
        max_images=magics.max_images, image_pixel_budget=magics.max_image_pixels,
        timeout_s=magics.tool_timeout or None, max_figures=magics.max_figures,
        repr_timeout_s=magics.repr_timeout, undo_budget=magics.undo_budget,
        protect=tuple(str(name) for name in magics.protect))


def update_python_tool_settings(target: PythonToolSettings, magics: AgentMagics,
                                model: Callable[[], object] | None = None) -> None:
    """Refresh the tools' settings object in place (the tools keep a reference to it).
    ``model``: the conversation's current model (read at each call), whose ``input`` says
    whether a figure is attached as an image or named as not shown (a text-only model)."""
    fresh = python_tool_settings(magics)
    for f in fields(fresh):
        setattr(target, f.name, getattr(fresh, f.name))
    if model is not None:
        target.model_accepts_images = lambda: "image" in (getattr(model(), "input", None) or ["image"])


def stream_timeouts(settings: RunSettings) -> dict[str, float]:
    """The HTTP layer's stream options for a stalled server. 0 disables a limit, so it is
    passed as 0 (left out, the transport's 60 s / 120 s defaults applied instead)."""
    return {"first_byte_timeout_ms": max(0.0, settings.first_byte_timeout) * 1000,
            "idle_timeout_ms": max(0.0, settings.idle_timeout) * 1000}
