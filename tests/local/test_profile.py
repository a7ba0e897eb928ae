"""The small-model profile is applied per run: local/* models get the short prompt, the few
tools and a turn budget; any other model gets the configured prompt and every tool back."""

from __future__ import annotations

from types import SimpleNamespace

from pi_notebook.agent import Agent, tool
from pi_notebook.local.provider import local_model
from pi_notebook.local.profile import SMALL_MODEL_SYSTEM_PROMPT
from pi_notebook.ai.providers.faux import register_faux_provider
from pi_notebook.magics.config import DEFAULT_SYSTEM_PROMPT
from pi_notebook.local.apply import apply_model_profile


@tool
def python(code: str) -> str:
    """Run code."""
    return code


@tool
def list_variables() -> str:
    """List variables."""
    return ""


@tool
def notebook_history(last: int = 10) -> str:
    """History."""
    return ""


ALL = [python, list_variables, notebook_history]


def _names(agent: Agent) -> list[str]:
    return [t.name for t in agent.state.tools]


def test_local_model_gets_the_small_profile_and_other_models_get_everything_back():
    agent = Agent(initial_state={"tools": list(ALL), "model": local_model()})
    apply_model_profile(agent, DEFAULT_SYSTEM_PROMPT, ALL, default_system_prompt=DEFAULT_SYSTEM_PROMPT)
    assert _names(agent) == ["python"]
    assert agent.state.system_prompt == SMALL_MODEL_SYSTEM_PROMPT
    assert agent.should_stop_after_turn is not None

    faux = register_faux_provider()
    try:
        agent.state.model = faux.get_model()
        apply_model_profile(agent, DEFAULT_SYSTEM_PROMPT, ALL, default_system_prompt=DEFAULT_SYSTEM_PROMPT)
    finally:
        faux.unregister()
    assert _names(agent) == ["python", "list_variables", "notebook_history"]
    assert agent.state.system_prompt == DEFAULT_SYSTEM_PROMPT
    assert agent.should_stop_after_turn is None


def test_a_system_prompt_the_user_set_is_kept_for_a_local_model():
    agent = Agent(initial_state={"tools": list(ALL), "model": local_model()})
    apply_model_profile(agent, "Answer in French.", ALL, default_system_prompt=DEFAULT_SYSTEM_PROMPT)
    assert agent.state.system_prompt == "Answer in French."
    assert _names(agent) == ["python"]


def test_the_turn_budget_stops_after_five_model_turns():
    agent = Agent(initial_state={"tools": list(ALL), "model": local_model()})
    apply_model_profile(agent, DEFAULT_SYSTEM_PROMPT, ALL, default_system_prompt=DEFAULT_SYSTEM_PROMPT)
    stop = agent.should_stop_after_turn
    assistant, user = SimpleNamespace(role="assistant"), SimpleNamespace(role="toolResult")
    assert not stop(SimpleNamespace(new_messages=[assistant, user] * 4), None)  # (ctx, signal), as the loop calls it
    assert stop(SimpleNamespace(new_messages=[assistant, user] * 5), None)
