"""The README's Python API example runs as written (CI exercises every README command)."""

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
