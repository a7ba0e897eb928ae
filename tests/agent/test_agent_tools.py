"""``@tool``: schemas and descriptions from typed functions, injection, return values,
where sync functions run, and the decorated tool going through the loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any, Literal, Optional

import pytest
from agent_helpers import MODEL, MockStream, assistant, call, user
from pydantic import BaseModel, Field

from pi_notebook.agent import (
    AbortSignal, AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, run_agent_loop, tool,
)
from pi_notebook.agent.tools import parse_docstring, to_tool_result
from pi_notebook.ai.types import ImageContent, TextContent


class Point(BaseModel):
    x: float
    y: float = 0.0


async def run_tool(agent_tool: AgentTool, args: dict[str, Any]) -> tuple[Any, bool]:
    """Send one call through the real loop; return (tool_execution_end.result, is_error)."""
    events: list[Any] = []
    stream = MockStream(assistant([call("c1", agent_tool.name, args)]), assistant("done"))
    await run_agent_loop([user("go")], AgentContext(tools=[agent_tool]),
                         AgentLoopConfig(model=MODEL), events.append, None, stream)
    end = next(e for e in events if e.type == "tool_execution_end")
    return end.result, end.is_error


def test_schema_and_descriptions_from_google_docstring_and_annotations():
    @tool
    def plot(
        column: str,
        kind: Literal["line", "bar"] = "line",
        bins: Annotated[int, "number of histogram bins"] = 10,
        title: Annotated[Optional[str], Field(description="figure title")] = None,
        origin: Optional[Point] = None,
    ) -> str:
        """Plot one column of the current DataFrame.

        Longer explanation that is not part of the description.

        Args:
            column (str): name of the column
                to plot.
            kind: chart type.
        """
        return "ok"

    assert isinstance(plot, AgentTool)
    assert plot.name == "plot" and plot.label == "plot"
    assert plot.description == "Plot one column of the current DataFrame."
    props = plot.parameters["properties"]
    assert plot.parameters["required"] == ["column"]
    assert props["column"]["description"] == "name of the column to plot."
    assert props["kind"]["enum"] == ["line", "bar"] and props["kind"]["description"] == "chart type."
    assert props["bins"]["description"] == "number of histogram bins"
    assert props["title"]["description"] == "figure title"
    assert issubclass(plot.parameters_model, BaseModel)
    assert "Point" in plot.parameters.get("$defs", {})


def test_numpy_docstring_and_decorator_options():
    @tool(name="fit_model", label="Fit", execution_mode="sequential")
    def fit(degree: int, *, normalize: bool = False) -> str:
        """Fit a polynomial.

        Parameters
        ----------
        degree : int
            Polynomial degree.
        normalize : bool
            Scale inputs first.

        Returns
        -------
        str
        """
        return "fitted"

    assert (fit.name, fit.label, fit.execution_mode) == ("fit_model", "Fit", "sequential")
    props = fit.parameters["properties"]
    assert props["degree"]["description"] == "Polynomial degree."
    assert props["normalize"]["description"] == "Scale inputs first."
    assert "str" not in props and fit.description == "Fit a polynomial."


def test_parse_docstring_summary_stops_at_section():
    summary, params = parse_docstring("Do a thing\nacross two lines.\nArgs:\n    a: first\n")
    assert summary == "Do a thing across two lines." and params == {"a": "first"}


def test_injected_parameters_are_not_in_the_schema_and_varargs_rejected():
    @tool
    async def work(n: int, signal: AbortSignal, on_update: Any) -> str:
        """Work."""
        return "x"

    assert set(work.parameters["properties"]) == {"n"}
    with pytest.raises(TypeError, match=r"\*args"):
        @tool
        def bad(*values: int) -> int:
            return 0


async def test_sync_tool_runs_on_loop_thread_and_coerces_arguments():
    seen: list[Any] = []

    @tool
    def add(a: int, b: int = 1) -> int:
        """Add."""
        seen.append(threading.get_ident())
        return a + b

    result, is_error = await run_tool(add, {"a": "41"})  # coerced by validation
    assert is_error is False
    assert result.content == [TextContent(text="42")] and result.details == 42
    assert seen == [threading.get_ident()]


async def test_thread_true_runs_in_a_worker_and_updates_reach_the_loop():
    seen: list[Any] = []

    @tool(thread=True)
    def crunch(n: int, on_update: Any) -> str:
        """Crunch numbers."""
        seen.append(threading.get_ident())
        on_update(AgentToolResult(content=[TextContent(text="half way")]))
        return f"crunched {n}"

    events: list[Any] = []
    stream = MockStream(assistant([call("c1", "crunch", {"n": 3})]), assistant("done"))
    await run_agent_loop([user("go")], AgentContext(tools=[crunch]), AgentLoopConfig(model=MODEL),
                         events.append, None, stream)
    assert seen and seen[0] != threading.get_ident()
    end = next(e for e in events if e.type == "tool_execution_end")
    assert end.result.content[0].text == "crunched 3"
    # the update is hopped onto the loop with call_soon_threadsafe before the worker's
    # result is, so it arrives while the call is still accepting updates
    updates = [e for e in events if e.type == "tool_execution_update"]
    assert [u.partial_result.content[0].text for u in updates] == ["half way"]


async def test_async_tool_with_signal_and_pydantic_argument():
    received: list[Any] = []

    @tool
    async def move(to: Point, signal: AbortSignal) -> str:
        """Move to a point."""
        received.append((to, signal))
        await asyncio.sleep(0)
        return f"moved to {to.x},{to.y}"

    result, is_error = await run_tool(move, {"to": {"x": 1.5}})
    assert not is_error and result.content[0].text == "moved to 1.5,0.0"
    assert isinstance(received[0][0], Point) and isinstance(received[0][1], AbortSignal)


async def test_raising_tool_and_invalid_arguments_become_error_results():
    @tool
    def divide(a: float, b: float) -> float:
        """Divide."""
        return a / b

    result, is_error = await run_tool(divide, {"a": 1, "b": 0})
    assert is_error and result.content[0].text == "float division by zero"
    result, is_error = await run_tool(divide, {"a": 1})
    assert is_error and result.content[0].text.startswith('Validation failed for tool "divide":')


async def test_returning_is_error_result():
    @tool
    def check(value: str) -> AgentToolResult:
        """Check a value."""
        return AgentToolResult(content=[TextContent(text=f"bad value {value}")], is_error=True)

    result, is_error = await run_tool(check, {"value": "x"})
    assert is_error is True and result.content[0].text == "bad value x"


def test_return_value_conversion():
    assert to_tool_result("hi").content == [TextContent(text="hi")]
    r = to_tool_result({"a": [1, 2]})
    assert r.content[0].text == '{"a": [1, 2]}' and r.details == {"a": [1, 2]}
    image = ImageContent(data="AA", mime_type="image/png")
    assert to_tool_result([TextContent(text="t"), image]).content == [TextContent(text="t"), image]
    assert to_tool_result(Point(x=1)).content[0].text == '{"x":1.0,"y":0.0}'
    r = to_tool_result({1, 2})
    assert r.content[0].text == "{1, 2}" and r.details is None
    assert to_tool_result(None).content[0].text == "null"
    same = AgentToolResult(content=[])
    assert to_tool_result(same) is same


def test_lambda_needs_a_name():
    with pytest.raises(ValueError, match="name"):
        tool(lambda x: x)
    named = tool(name="identity")(lambda x: x)
    assert named.name == "identity" and named.parameters["required"] == ["x"]
