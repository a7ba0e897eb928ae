"""The README is for users and says what is true: its Python API example runs as written, every
command, magic and option it names exists, the files it points to are there, and it stays short
(CI runs its install commands: tests/notebooks/test_quickstart_cli.py and .ci/run)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_api_block() -> str:
    section = README.read_text().split("## Python API", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the Python API section has no python block"
    return match.group(1)


async def test_python_api_example_runs_and_a_missing_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = "async def __example():\n" + textwrap.indent(_python_api_block(), "    ") + "\n    return agent\n"
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    agent = await namespace["__example"]()
    await agent.wait_for_idle()
    messages = agent.state.messages
    assert messages[0].role == "user"
    last = messages[-1]
    # No key in the environment: the run ends with an error naming the variable, not an exception.
    assert last.role == "assistant" and last.stop_reason == "error"
    assert "OPENAI_API_KEY" in last.error_message
    assert agent.has_queued_messages()  # steer/follow_up after the run stay queued


ROOT = README.parent


def test_the_readme_stays_short_and_keeps_its_sections():
    text = README.read_text()
    assert len(text.splitlines()) <= 255
    for heading in ("## Install", "## A tour", "## Reference", "## Your kernel as an MCP server",
                    "## What the agent changed (review and undo)", "## Python API", "## Limits"):
        assert f"\n{heading}\n" in text, heading


def test_every_package_command_it_names_exists():
    from pi_notebook.__main__ import main

    named = set(re.findall(r"python\s+-m\s+pi_notebook\s+([a-z-]+)", README.read_text()))
    assert {"quickstart", "setup", "doctor", "--version"} <= named
    for command in named - {"--version"}:
        try:
            main([command, "--help"])
        except SystemExit as exit_:
            assert exit_.code == 0, command


def test_every_agent_subcommand_and_option_it_names_exists():
    from pi_notebook.magics.commands import COMMANDS
    from pi_notebook.magics.config import AgentMagics

    text = README.read_text()
    subcommands = set(re.findall(r"%agent ([a-z]+)", text))
    assert subcommands and not subcommands - set(COMMANDS), subcommands - set(COMMANDS)
    traits = set(AgentMagics.class_own_traits(config=True))
    named = set(re.findall(r"AgentMagics\.([a-z_]+)", text))
    listed = text.split("`%config\nAgentMagics` lists them:", 1)[1].split("\n\n", 1)[0]
    named |= {w for w in re.findall(r"[a-z_]+", listed) if "_" in w or w in traits}
    assert named and not named - traits, named - traits
    # the option list leaves none out
    assert not traits - named - {"mcp_trust_annotations"}, traits - named


def test_the_files_it_points_to_exist():
    text = README.read_text()
    paths = set(re.findall(r"`((?:docs|notebooks|pi_notebook|bench)/[\w./-]+)`", text))
    paths |= set(re.findall(r"\]\(((?:docs)/[\w./-]+)\)", text))
    assert paths and not [p for p in paths if not (ROOT / p).exists()], paths
