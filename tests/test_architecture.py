"""docs/design/architecture.md lists the public API: every name it lists exists and is exported
(in its module's ``__all__``), so the page and the code cannot drift apart."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "design" / "architecture.md"


def _listed() -> list[tuple[str, str]]:
    """(module, name) for every name imported in the Public API section's python block."""
    section = PAGE.read_text().split("## Public API", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "the Public API section has no python block"
    pairs = []
    for node in ast.walk(ast.parse(block.group(1))):
        if isinstance(node, ast.ImportFrom):
            pairs += [(node.module or "", alias.name) for alias in node.names]
    return pairs


def test_the_page_lists_the_public_api():
    modules = {module for module, _ in _listed()}
    assert modules == {"pi_notebook", "pi_notebook.ai", "pi_notebook.ai.providers.faux", "pi_notebook.agent"}
    assert len(_listed()) >= 45  # names are added to the contract, never taken out


def test_every_listed_name_exists_and_is_exported():
    missing, unexported = [], []
    for module_name, name in _listed():
        module = importlib.import_module(module_name)
        if not hasattr(module, name):
            missing.append(f"{module_name}.{name}")
        elif name not in getattr(module, "__all__", ()):
            unexported.append(f"{module_name}.{name}")
    assert not missing, f"architecture.md lists names that do not exist: {missing}"
    assert not unexported, f"architecture.md lists names missing from __all__: {unexported}"


def test_the_agent_api_the_page_describes():
    """The methods and hooks the page names in prose are there too."""
    from pi_notebook.agent import Agent, AgentLoopConfig

    section = PAGE.read_text().split("### The loop and the Agent", 1)[1].split("\n## ", 1)[0]
    for method in ("subscribe", "prompt", "continue_", "steer", "follow_up", "abort", "wait_for_idle",
                   "reset", "clear_steering_queue", "clear_follow_up_queue", "clear_all_queues",
                   "has_queued_messages", "steering_mode", "follow_up_mode", "signal", "state"):
        assert re.search(rf"`(await )?{method}\b", section) and hasattr(Agent, method), method
    for hook in ("transform_context", "get_api_key", "before_tool_call", "after_tool_call",
                 "should_stop_after_turn", "prepare_next_turn", "get_steering_messages",
                 "get_follow_up_messages", "tool_execution"):
        assert f"`{hook}`" in section and hook in {f.name for f in dataclasses.fields(AgentLoopConfig)}, hook
