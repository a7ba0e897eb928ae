"""The embedded model, for real: llama-server + the default Qwen2.5-Coder through provider ``local``.

Marked ``local_model``: it needs the ``local`` extra and a built llama-server
(``python -m pi_notebook.local.setup``). CI builds both, so here a
missing piece is a failure, not a skip.
"""

from __future__ import annotations

import re

import pytest

from pi_notebook.agent import Agent, tool
from pi_notebook.ai import get_model
from pi_notebook.local.provider import get_local_server, local_model_available, stop_local_servers
from pi_notebook.local.setup import DEFAULT_LOCAL_MODEL

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(600)]


@pytest.fixture(scope="module", autouse=True)
def _servers():
    yield
    stop_local_servers()


def test_embedded_model_is_installed():
    assert local_model_available(), "run: python -m pi_notebook.local.setup"


async def test_agent_calls_add_tool_and_answers_with_the_sum():
    calls: list[tuple[int, int]] = []

    @tool
    def add(a: int, b: int) -> str:
        """Add two integers and return the sum."""
        calls.append((a, b))
        return str(a + b)

    model = get_model(f"local/{DEFAULT_LOCAL_MODEL}")
    agent = Agent(initial_state={"model": model, "tools": [add],
                                 "system_prompt": "You are a helpful assistant."})
    await agent.prompt("What is 3+4? Use the add tool.")

    messages = agent.state.messages
    tool_calls = [c for m in messages if m.role == "assistant" for c in m.content if c.type == "toolCall"]
    assert tool_calls, [m.model_dump() for m in messages]
    assert tool_calls[0].name == "add"
    assert tool_calls[0].arguments == {"a": 3, "b": 4}
    assert calls and calls[0] == (3, 4)
    results = [m for m in messages if m.role == "toolResult"]
    assert results and not results[0].is_error
    final = messages[-1]
    assert final.role == "assistant" and final.stop_reason == "stop", final.model_dump()
    assert "7" in "".join(c.text for c in final.content if c.type == "text")
    assert get_local_server(model.id).running()


async def test_missing_gguf_path_is_a_clear_error_event():
    from pi_notebook.ai import complete
    from pi_notebook.ai.types import Context, UserMessage

    model = get_model("local//nonexistent/model.gguf")
    msg = await complete(model, Context(messages=[UserMessage(content="hi")]))
    assert msg.stop_reason == "error"
    assert "No GGUF file" in msg.error_message


def _agent_with_python(output: str) -> tuple[Agent, list[str]]:
    """The embedded model with one ``python`` tool that records its code and returns ``output``."""
    ran: list[str] = []

    @tool
    def python(code: str) -> str:
        """Run Python code in the user's notebook and return what it printed."""
        ran.append(code)
        return output

    model = get_model(f"local/{DEFAULT_LOCAL_MODEL}")
    agent = Agent(initial_state={"model": model, "tools": [python],
                                 "system_prompt": "You work in a Jupyter notebook. Use the python tool."})
    return agent, ran


async def test_every_call_names_a_real_tool_and_the_run_ends_with_an_answer():
    """A request that made the 0.5B model invent tool names (and llama-server fail with its
    peg-native parser message) now gets constrained calls of the offered tool and an answer."""
    agent, ran = _agent_with_python("[value]\n1445.2")
    await agent.prompt("plot a bar chart of totals")
    messages = agent.state.messages
    calls = [c for m in messages if m.role == "assistant" for c in m.content if c.type == "toolCall"]
    assert calls and all(c.name == "python" and isinstance(c.arguments.get("code"), str) for c in calls)
    assert ran, "the constrained call did not run"
    final = messages[-1]
    assert final.role == "assistant" and final.stop_reason == "stop", final.model_dump()
    assert not any(m.role == "assistant" and m.stop_reason == "error" for m in messages)
    text = "".join(c.text for c in final.content if c.type == "text")
    # grounded numbers: any number in the answer is one the tool output or the prompt showed
    assert all(n in {"1445.2", "1445", "1445.0"} for n in re.findall(r"\d+(?:\.\d+)?", text)), text


async def test_a_request_that_names_its_result_assigns_it():
    """ "into totals": the grammar makes the first call assign the name (the 0.5B otherwise
    shows the value and leaves ``totals`` undefined), and llama-server accepts that grammar."""
    agent, ran = _agent_with_python("(no output; assigned)\ntotals =\nnorth    1608.1\nsouth    1343.1")
    await agent.prompt("compute total revenue per region of df into totals")
    assert ran and ran[0].startswith("totals = "), ran
    assert agent.state.messages[-1].stop_reason == "stop"
