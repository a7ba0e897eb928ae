"""Secrets never leave in any piece of 8 or more characters, whatever cuts the text.

Canaries of several lengths sit in user variables, prints, reprs, DataFrame cells and
exception messages; every text that leaves a tool (model content, details, live updates,
listings) is checked for every 8-character window of every canary.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.shell import get_shell, routed

from pi_notebook.agent.types import AgentToolResult
from pi_notebook.tools import add_secret, discard_secret, make_notebook_tools
from pi_notebook.tools.output.format import clip, cut
from pi_notebook.tools.python.python_tool import PythonToolSettings
from pi_notebook.tools.trust.redact import REDACTED, redact

pd = pytest.importorskip("pandas")

# High-entropy canaries, 12 to 300 characters (none contains another's 8-gram).
CANARIES = {
    "CANARY_12_TOKEN": "q7Vx2Lm9Rt4Z",
    "CANARY_40_API_KEY": "sk-40-" + "Hq3Nw8Zp1Ks6Vd0Lx5Jc7Bf2Tm9Gr4Ye8Ua1Io3",
    "CANARY_90_SECRET": "sk-proj-90-" + "aZ4kW9qP2mN7xL1vB8cR3tY6uH0jG5fD2sE9wQ4zX7cV1bN6mK3lJ8hG5fD0sA2qW7eR4tY9uI1oP",
    "CANARY_300_PASSWORD": "".join(f"{i:03d}Xq{chr(65 + i % 26)}" for i in range(50)),
}


@pytest.fixture
def canaries(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    return CANARIES


def fragments(value: str) -> list[str]:
    return [value[i:i + 8] for i in range(len(value) - 7)]


def assert_no_fragment(text: str, where: str = "") -> None:
    for value in CANARIES.values():
        for piece in fragments(value):
            assert piece not in text, f"{where}: piece {piece!r} of a secret leaked"


def dump(obj: Any) -> str:
    if isinstance(obj, list):
        return "\n".join(dump(o) for o in obj)
    if hasattr(obj, "model_dump"):
        return json.dumps(obj.model_dump(mode="json"), ensure_ascii=False)
    return str(obj)


def test_redact_first_then_cut_never_leaves_a_piece(canaries: dict[str, str]) -> None:
    for value in canaries.values():
        text = "prefix " + value + " middle " + value + " suffix " * 3
        for budget in range(10, len(text) + 5, 7):
            out = cut(text, budget)
            assert_no_fragment(out, f"cut {budget}")
            assert "[redac" not in out.replace(REDACTED, "")  # a marker is never split
            out = clip(text, budget)
            assert_no_fragment(out, f"clip {budget}")
            assert "[redac" not in out.replace(REDACTED, "")


def test_pieces_next_to_an_ellipsis_are_redacted(canaries: dict[str, str]) -> None:
    value = canaries["CANARY_90_SECRET"]
    # what pandas (head...) and reprlib (head...tail) do to a long value
    assert_no_fragment(redact(f"cell {value[:47]}... next"))
    assert_no_fragment(redact(f"'{value[:20]}...{value[-20:]}'"))
    assert_no_fragment(redact(f"{value[:30]}\u2026"))


def test_explicit_keys_are_secrets() -> None:
    key = "explicit-key-7Hq3Nw8Zp1Ks6Vd0"
    assert redact(key) == key
    add_secret(key)
    try:
        assert redact(f"x {key} y") == f"x {REDACTED} y"
    finally:
        discard_secret(key)
    assert redact(key) == key


class Leaky:
    def __init__(self, secret: str) -> None:
        self.secret = secret

    def __repr__(self) -> str:
        return f"Leaky(secret={self.secret!r}, padding={'p' * 80})"


@pytest.fixture
def namespace(canaries: dict[str, str]):
    shell = get_shell()
    values = list(canaries.values())
    added = {
        "key_str": values[2],
        "short_key": values[0],
        "key_list": [values[1], values[3]],
        "key_obj": Leaky(values[2]),
        "key_frame": pd.DataFrame({"token": [values[2], values[3], "plain"],
                                   "n": [1, 2, 3], "mixed": [f"Bearer {values[1]}", "x", "y"]}),
        "key_series": pd.Series([values[3], values[2]], name="s"),
        "key_long_text": "lorem " * 20 + values[2] + " ipsum" * 20,
    }
    shell.user_ns.update(added)
    yield shell, added
    for name in added:
        shell.user_ns.pop(name, None)


async def test_variable_tools_never_show_a_piece(namespace) -> None:
    shell, added = namespace
    _, listing, inspect = make_notebook_tools(shell, PythonToolSettings())
    with routed(shell):
        listed = await listing.execute("c", {}, None, None)
        texts = [dump(listed)]
        for name in added:
            texts.append(dump(await inspect.execute("c", {"name": name}, None, None)))
    for text in texts:
        assert_no_fragment(text)
    assert "key_frame | pandas.DataFrame | shape 3x3" in texts[0]
    assert REDACTED in texts[0]


async def test_python_tool_never_shows_a_piece(namespace) -> None:
    shell, _ = namespace
    python = make_notebook_tools(shell, PythonToolSettings(max_output_chars=300, max_value_chars=120))[0]
    updates: list[AgentToolResult] = []
    codes = [
        "print(key_str)\nprint(key_list)\nprint(key_obj)",
        "key_frame",  # DataFrame repr: pandas shortens cells to 50 characters
        "key_series",
        "key_obj",
        "print(key_long_text * 50)",  # cut by the model budget
        "import sys\nfor ch in key_str: sys.stdout.write(ch)",  # one character per write
        "raise ValueError('bad key ' + key_str + ' ' + short_key)",
        "{'k': key_list, 'o': key_obj}",
        "from IPython.display import display, HTML\ndisplay(HTML('<td>' + key_str[:40] + '...</td>'))",
    ]
    with routed(shell) as (out, err):
        results = [await python.execute(f"c{i}", {"code": code}, None, updates.append)
                   for i, code in enumerate(codes)]
    for code, result in zip(codes, results, strict=True):
        assert_no_fragment(dump(result), code)
    assert_no_fragment(dump(updates), "live updates")
    assert_no_fragment(out.getvalue() + err.getvalue(), "real streams")
    assert results[6].is_error and REDACTED in dump(results[6])
