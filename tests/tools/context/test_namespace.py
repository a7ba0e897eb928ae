from __future__ import annotations

import os
from typing import Any

import pytest

from pi_notebook.agent import Agent
from pi_notebook.ai.options import estimate_text_tokens
from pi_notebook.ai.providers.faux import faux_assistant_message, register_faux_provider
from pi_notebook.ai.stream import stream_simple
from pi_notebook.ai.types import UserMessage, now_ms
from pi_notebook.tools.context.namespace import namespace_summary

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")

CANARY = "sk-canary-namespace-27182818"


def user_function(frame: Any, column: str, *rest: Any) -> Any:
    return frame


user_function.__module__ = "__main__"  # as if defined in a cell


class Proxy:
    """An object whose attribute access or len would be expensive or fail."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"summary touched attribute {name!r}")

    def __len__(self) -> int:
        raise AssertionError("summary called len()")

    def __repr__(self) -> str:
        raise AssertionError("summary called repr()")


Proxy.__module__ = "__main__"  # an instance of a class defined in a cell


def sample_ns() -> dict[str, Any]:
    return {
        "sales": pd.DataFrame({"month": ["jan", "feb"], "region": ["n", "s"], "revenue": [1.5, 2.5]}),
        "arr": np.zeros((3, 4), dtype="float32"),
        "ratio": 0.25,
        "title": "Quarterly report",
        "rows": [1, 2, 3],
        "os": os,
        "join": os.path.join,
        "_private": 1,
        "In": [""], "Out": {}, "exit": object(), "get_ipython": lambda: None,
        "user_function": user_function,
        "proxy": Proxy(),
        "DataFrame": pd.DataFrame,
    }


def test_columns_types_and_shapes_appear_and_internals_do_not() -> None:
    text = namespace_summary(sample_ns())
    lines = {line.split(":", 1)[0]: line for line in text.splitlines()[1:]}
    assert lines["sales"] == "sales: DataFrame 2 x 3 (month: str, region: str, revenue: float64)" \
        or lines["sales"] == "sales: DataFrame 2 x 3 (month: object, region: object, revenue: float64)"
    assert lines["arr"] == "arr: ndarray shape 3 x 4 float32"
    assert lines["ratio"] == "ratio: float = 0.25"
    assert lines["title"] == "title: str len 16 = 'Quarterly report'"
    assert lines["rows"] == "rows: list len 3"
    assert lines["proxy"] == "proxy: Proxy"
    assert "defined here: user_function(frame, column, *rest)" in text
    for left_out in ("os", "join", "_private", "In", "Out", "exit", "get_ipython", "DataFrame"):
        assert left_out not in lines
    # data first
    assert text.splitlines()[1].startswith(("sales", "arr"))


def test_recent_names_come_first_and_hidden_names_are_skipped() -> None:
    ns = sample_ns()
    text = namespace_summary(ns, recent=["ratio", "missing"], hidden={"rows": ns["rows"]})
    assert text.splitlines()[1].startswith("ratio:")
    assert "rows:" not in text


def test_no_secret_value_ever(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAMESPACE_TEST_TOKEN", CANARY)
    ns = {
        "from_env": CANARY,  # a long env secret: too long to show, and redacted anyway
        "api_key": "short",  # a credential-like name: value hidden whatever it is
        "password": 12345678,
        "pasted": "ghp_ABCDEFabcdef1234567890",  # a token-looking string not in the environment
        CANARY: 1,  # even a name
        "frame": pd.DataFrame({CANARY: [1]}),  # and a column name
    }
    text = namespace_summary(ns)
    fragments = {CANARY[i:i + 8] for i in range(len(CANARY) - 7)}
    assert not any(f in text for f in fragments)
    assert "'short'" not in text and "12345678" not in text and "ghp_" not in text
    assert "api_key: str len 5" in text and "password: int (value hidden)" in text
    assert "[redacted]" in text


def test_huge_int_is_not_converted_to_text() -> None:
    text = namespace_summary({"big": 10 ** 5000, "small": 7})
    assert "big: int (16610 bits)" in text and "small: int = 7" in text


def test_within_budget_on_5000_vars_and_a_1gib_frame() -> None:
    ns: dict[str, Any] = {f"v{i}": (i, f"s{i}", [i], np.ones(3)) [i % 4] for i in range(5000)}
    # 1 GiB of float64 zeros: the OS allocates the pages lazily, nothing is touched
    ns["big"] = pd.DataFrame(np.zeros((16_777_216, 8)), columns=[f"c{i}" for i in range(8)], copy=False)
    assert ns["big"].memory_usage(deep=False).sum() >= 2 ** 30
    ns["wide"] = pd.DataFrame(np.zeros((2, 500)), columns=[f"feature_{i}" for i in range(500)])
    for budget in (60, 150, 400, 1000):
        text = namespace_summary(ns, token_budget=budget)
        assert estimate_text_tokens(text) <= budget, budget
    text = namespace_summary(ns, token_budget=400)
    assert "big: DataFrame 16,777,216 x 8" in text
    assert "+470 more columns" in text
    assert text.splitlines()[-1].startswith("... ") and "more" in text.splitlines()[-1]
    assert namespace_summary({}, 400) == ""


def test_a_describe_failure_is_contained() -> None:
    class BrokenArray:
        @property
        def shape(self) -> Any:
            raise RuntimeError("lazy array failed")

    BrokenArray.__module__ = "numpy.fake"  # an array library type: its shape is read
    text = namespace_summary({"ok": 1, "broken": BrokenArray()})
    assert "ok: int = 1" in text
    assert "broken: BrokenArray (could not describe: RuntimeError)" in text


async def test_summary_reaches_the_model_as_a_transient_context_message() -> None:
    """The wiring suggested for the magics: transform_context adds the summary to the request
    only; the agent's saved messages keep the user's own text."""
    ns = sample_ns()
    faux = register_faux_provider()
    seen: list[Any] = []

    def answer(context: Any, options: Any, state: Any, model: Any) -> Any:
        seen.extend(context.messages)
        return faux_assistant_message("sales has month, region and revenue.")

    async def add_context(messages: list[Any], signal: Any = None) -> list[Any]:
        note = UserMessage(content="[notebook context]\n" + namespace_summary(ns), timestamp=now_ms())
        return [*messages[:-1], note, messages[-1]]

    try:
        faux.set_responses([answer])
        agent = Agent(initial_state={"model": faux.get_model(), "system_prompt": "test"},
                      stream_fn=stream_simple, transform_context=add_context)
        await agent.prompt("which columns does sales have?")
    finally:
        faux.unregister()
    sent = "\n".join(m.content if isinstance(m.content, str) else "" for m in seen)
    assert "sales: DataFrame 2 x 3 (month:" in sent
    stored = [m for m in agent.state.messages if m.role == "user"]
    assert [m.content for m in stored] == ["which columns does sales have?"] or \
        [m.content[0].text for m in stored] == ["which columns does sales have?"]


def test_an_object_that_lies_about_its_class_is_listed_safely() -> None:
    class Liar:
        @property  # type: ignore[misc]  # overriding __class__ on purpose
        def __class__(self) -> Any:
            raise RuntimeError("no class for you")

    text = namespace_summary({"liar": Liar(), "n": 1})
    # __class__ is user code: the summary reads type() and never calls it
    assert "liar: test_namespace.Liar" in text and "could not describe" not in text and "n: int = 1" in text


def test_a_secret_spanning_two_entries_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPANNING_TEST_KEY", "= 1\nzz: int")
    text = namespace_summary({"zz": 2, "aa": 1})  # newest first: "aa: int = 1" then "zz: int = 2"
    assert "= 1\nzz: int" not in text and "[redacted]" in text


def test_assigned_summary_shows_what_the_last_assignment_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    from pi_notebook.tools.context.namespace import assigned_summary

    secret = "sk-live-" + "q" * 30
    monkeypatch.setenv("MY_SERVICE_API_KEY", secret)
    ns = {"totals": pd.Series([1608.1, 1343.1], index=["north", "south"], name="revenue"),
          "api_key": secret, "label": "hello", "n": 3}
    (line,) = assigned_summary("x = 1\ntotals = df.groupby('region')['revenue'].sum()", ns)
    assert line.startswith("totals =\n") and "1608.1" in line and "south" in line
    assert assigned_summary("totals = 1\nprint(totals)", ns) == []  # the last statement shows it
    assert assigned_summary("n, totals = 3, 4", ns)[0].startswith("n =")
    (keyed,) = assigned_summary("api_key = load()", ns)
    assert keyed == f"api_key: str len {len(secret)} (looks like a credential; value not shown)"
    assert assigned_summary("label = 'hi'", ns) == ["label: str len 5 = 'hello'"]  # as in the summary
    assert assigned_summary("not python (", ns) == [] and assigned_summary("gone = 1", ns) == []
