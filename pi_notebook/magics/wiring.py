"""The kernel's Agent, wired for the notebook: tools, approval gate, per-prompt notebook
context, compaction, keys, stream timeouts.

The notebook tools are ``python``, ``list_variables``, ``inspect_variable`` and the context
tools ``notebook_history`` and ``read_notebook`` (tools/context/prompt_context.py). Each prompt's
notebook-context block travels as a :class:`PromptNotes` note, merged into a copy of the
prompt by ``transform_context`` before compaction (so the compactor counts it) and never
into ``agent.state.messages`` (docs/design/notebook-context.md).

:func:`build_agent` receives everything it calls back into as :class:`AgentHooks`
(plain callables), so this module knows nothing of the runtime that owns the Agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..agent import Agent, AgentTool
from ..agent.types import AgentMessage
from ..ai.abort import AbortSignal
from ..ai.env import get_env_api_key
from ..ai.event_stream import AssistantMessageEventStream
from ..ai.stream import stream_simple
from ..ai.types import Context, Model, PromptProgress
from ..local.profile import small_model_profile
from ..session.compaction import (
    CompactionInfo,
    context_overhead_tokens,
    make_context_compactor,
    make_model_summarizer,
)
from ..session.prompt_notes import PromptNotes
from ..tools import PythonToolSettings, make_notebook_tools
from ..tools.context.prompt_context import make_context_tools
from ..tools.trust.approval import ApprovalHook, ApprovalRequest, make_approval_hook
from ..tools.python.namespace_review import preview_call
from ..tools.trust.policy import ApprovalChoice, ApprovalPolicy
from .settings import RunSettings

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = ["AgentHooks", "WiredAgent", "build_agent", "env_api_key"]


def env_api_key(provider: str) -> str | None:
    """Keys come only from the environment, read per request, never stored."""
    return get_env_api_key(provider)


@dataclass
class AgentHooks:
    """The runtime's side of the wiring."""

    policy: Callable[[], ApprovalPolicy]  # the approval policy of the run being answered
    ask: Callable[[ApprovalRequest], Awaitable[ApprovalChoice]]  # its view's approval panel
    is_interactive: Callable[[], bool]
    notify: Callable[[str], None]  # a warning for the run's view (headless approval)
    on_compaction: Callable[[str], None]
    stream_options: Callable[[], dict[str, float]]  # read per request (%config applies)
    notebook_path: Callable[[], str] = lambda: ""  # AgentMagics.notebook_path, read per call
    tools: Callable[[], list[AgentTool]] | None = None  # replaces the notebook tools (tests)
    # what the model's server is doing before it can answer (the embedded llama-server
    # starting): a provider calls the ``on_status`` stream option, the run's view shows it
    on_status: Callable[[str], None] = lambda _text: None
    # how far the server has read the prompt (llama-server's prompt progress): the pill says it
    on_progress: Callable[[PromptProgress], None] = lambda _progress: None


@dataclass
class WiredAgent:
    agent: Agent
    approval: ApprovalHook
    notes: PromptNotes  # the per-prompt notebook context (attach when a prompt is built)


def notebook_tools(shell: InteractiveShell, hooks: AgentHooks, tool_settings: PythonToolSettings) -> list[AgentTool]:
    """python, list_variables, inspect_variable, notebook_history, read_notebook."""
    return [*make_notebook_tools(shell, tool_settings),
            *make_context_tools(shell, hooks.notebook_path)]


def build_agent(settings: RunSettings, shell: InteractiveShell, hooks: AgentHooks,
                tool_settings: PythonToolSettings) -> WiredAgent:
    tools = hooks.tools() if hooks.tools is not None else notebook_tools(shell, hooks, tool_settings)
    approval = make_approval_hook(hooks.policy, ask=hooks.ask, is_interactive=hooks.is_interactive,
                                  notify=hooks.notify, timeout_s=settings.approval_timeout or None)
    approval.preview = lambda code: preview_call(shell, code, tool_settings)

    def stream(model: Model, context: Context, options: dict[str, object] | None = None,
               **kw: object) -> AssistantMessageEventStream:
        return stream_simple(model, context, {**hooks.stream_options(), "on_status": hooks.on_status,
                                              "on_progress": hooks.on_progress, **(options or {})}, **kw)

    agent = Agent(
        initial_state={"system_prompt": settings.system_prompt, "thinking_level": settings.thinking,
                       "tools": list(tools)},
        stream_fn=stream,
        get_api_key=env_api_key,
        before_tool_call=approval,
        after_tool_call=approval.after_tool_call,  # the decision joins the result's details
    )
    notes = PromptNotes()
    agent.transform_context = _Compaction(agent, hooks, notes).transform
    return WiredAgent(agent, approval, notes)


class _Compaction:
    """Adds each prompt's notebook-context note, then shrinks old history before a request
    would overflow the model's window; old turns are summarised by the conversation's own
    model."""

    def __init__(self, agent: Agent, hooks: AgentHooks, notes: PromptNotes) -> None:
        self._agent = agent
        self._hooks = hooks
        self._notes = notes
        self._cached: tuple[tuple[str, str, int, int], Callable[..., Awaitable[list[AgentMessage]]]] | None = None

    async def transform(self, messages: list[AgentMessage],
                        signal: AbortSignal | None = None) -> list[AgentMessage]:
        messages = self._notes.apply(messages)  # copies: agent.state.messages stays as typed
        compactor = self._compactor()
        if compactor is None:
            return messages
        return list(await compactor(messages, signal))

    def _compactor(self) -> Callable[..., Awaitable[list[AgentMessage]]] | None:
        model: Model | None = self._agent.state.model
        window = (model.context_window or 0) if model is not None else 0
        if model is None or not window:
            return None
        key = (model.provider, model.id, window, model.max_tokens)
        if self._cached is None or self._cached[0] != key:
            state = self._agent.state  # the answer's room and the fixed prefix come off the window
            profile = small_model_profile(model)
            # None: the compactor's extract (a small model's summary request costs minutes)
            summarize = self._summarize if profile is None or profile.model_summary else None
            self._cached = (key, make_context_compactor(
                window, summarize, on_compaction=self._compacted,
                max_output_tokens=model.max_tokens or None,
                overhead_tokens=lambda: context_overhead_tokens(state.system_prompt, state.tools),
                images="image" in (model.input or ())))
        return self._cached[1]

    async def _summarize(self, messages: list[AgentMessage]) -> str:
        model = self._agent.state.model
        options: dict[str, object] = {"signal": self._agent.signal, **self._hooks.stream_options()}
        key = env_api_key(model.provider)  # for this one request, not kept
        if key:
            options["api_key"] = key
        return await make_model_summarizer(model, options=options)(messages)

    def _compacted(self, info: CompactionInfo) -> None:
        self._hooks.on_compaction(f"Context compacted: {info.describe()}")
