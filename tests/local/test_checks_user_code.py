"""The small model's run checks (local/checks.py) run no user code and bound their work: objects in the
namespace are read by their type alone (a flask-style proxy, a slow ``__getattr__``, a lazy
frame whose ``len()`` computes are never called), an answer's values are checked up to a
bound, and a check that cannot decide never fails the run."""

from __future__ import annotations

from typing import Any

import pandas as pd

from pi_notebook.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage
from pi_notebook.local import checks as checks_module
from pi_notebook.local.checks import MAX_ANSWER_CHARS, RunChecks

CALLED: list[str] = []


class LocalProxy:
    """Like flask's: every attribute and ``len`` go to an object that is not there."""

    def __getattr__(self, name: str) -> Any:
        CALLED.append(f"proxy.{name}")
        raise RuntimeError("Working outside of application context.")

    def __len__(self) -> int:
        CALLED.append("proxy.len")
        raise RuntimeError("Working outside of application context.")


class DataFrame:
    """A lazy frame of another library: its columns and length are computed on access."""

    @property
    def columns(self) -> list[str]:
        CALLED.append("lazy.columns")
        return ["a"]

    def __len__(self) -> int:
        CALLED.append("lazy.len")
        return 10


class Sneaky(pd.DataFrame):
    """A pandas subclass that computes on ``len``."""

    def __len__(self) -> int:
        CALLED.append("sneaky.len")
        return super().__len__()


def _messages(answer: str, output: str = "Widget 40") -> list[Any]:
    def assistant(*blocks: Any, stop: str) -> AssistantMessage:
        return AssistantMessage(content=list(blocks), api="x", provider="x", model="x", usage=Usage(),
                                stop_reason=stop)  # type: ignore[arg-type]  # a test's literal

    return [UserMessage(content="which product sold most? put it in top"),
            assistant(ToolCall(id="a", name="python", arguments={"code": "top = sales.idxmax()"}), stop="toolUse"),
            ToolResultMessage(tool_call_id="a", tool_name="python", content=[TextContent(text=output)]),
            assistant(TextContent(text=answer), stop="stop")]


def test_the_checks_call_no_user_code_in_the_namespace():
    CALLED.clear()
    ns = {"request": LocalProxy(), "lazy": DataFrame(),
          "sneaky": Sneaky({"product": ["Widget"], "units": [40]}),
          "sales": pd.DataFrame({"product": ["Widget", "Gizmo"], "units": [40, 31]})}
    checks = RunChecks(ns, steer=lambda m: None)
    ns["top"] = "Widget"
    correction = checks.correction(_messages("Widget sold most: 40 units."))
    assert CALLED == [], CALLED
    assert correction is None  # Widget and 40 are in the output
    assert "Widget" in checks_module._labels(ns)  # the plain frame is still read
    assert "Gizmo" in checks_module._labels(ns)


def test_an_answer_with_70000_numbers_is_checked_up_to_a_bound(monkeypatch):
    seen: list[int] = []
    original = checks_module.ungrounded_values

    def measuring(answer: str, sources: Any, labels: Any) -> list[str]:
        seen.append(len(answer))
        return original(answer, sources, labels)

    monkeypatch.setattr(checks_module, "ungrounded_values", measuring)
    answer = "The values are " + ", ".join(str(1000 + i) for i in range(70_000)) + "."
    correction = RunChecks({"top": 1}, steer=lambda m: None).correction(_messages(answer))
    assert seen and max(seen) <= MAX_ANSWER_CHARS
    assert correction is not None and "1000" in correction  # what is checked is still flagged


def test_a_check_that_cannot_decide_never_fails_the_run(monkeypatch):
    def broken(*args: Any) -> list[str]:
        raise RuntimeError("cannot decide")

    monkeypatch.setattr(checks_module, "ungrounded_values", broken)
    steered: list[Any] = []
    ns: dict[str, Any] = {}
    checks = RunChecks(ns, steer=steered.append)
    ns["top"] = "Gizmo"  # the outcome is there: only the values check is left to decide
    ctx = type("Ctx", (), {})()
    messages = _messages("Gizmo sold 99.")
    ctx.message = messages[-1]
    ctx.context = type("C", (), {"messages": messages})()
    ctx.new_messages = messages[1:]
    assert checks.should_stop(ctx) is False and steered == []
    call_ctx = type("Ctx", (), {})()
    call_ctx.tool_call = ToolCall(id="b", name="python", arguments={"code": 1})  # not a str: odd input
    call_ctx.context = type("C", (), {"messages": messages})()
    monkeypatch.setattr(checks_module, "read_paths", broken)
    assert checks.before_tool_call(call_ctx) is None
