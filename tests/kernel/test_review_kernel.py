"""What agent code does to the user's variables, in a real kernel with a scripted model: the
changes told to the model and shown on the card, the approval panel's reading of the code,
``%agent undo`` and ``AgentMagics.protect``. One kernel for the module."""

from __future__ import annotations

import time

import pytest

from helpers.kernel import RUNTIME, Kernel, faux_setup

pytestmark = pytest.mark.kernel


SETUP = """\
import numpy as np, pandas as pd
from pi_notebook import get_agent
def call(code):
    return faux_assistant_message([faux_tool_call('python', {'code': code})], stop_reason='toolUse')
def script(*codes):
    faux.set_responses([*(call(c) for c in codes), faux_assistant_message('done')])
def last_result():
    result = [m for m in get_agent().state.messages if m.role == 'toolResult'][-1]
    return ''.join(getattr(b, 'text', '') for b in result.content), list(result.details.namespace)
"""


@pytest.fixture(scope="module")
def kernel():
    k = Kernel()
    k.connect_frontend()  # a frontend: approval panels are shown
    k.ok(faux_setup(None))
    k.ok("%agent model faux/faux-1")
    k.ok(SETUP)
    yield k
    k.shutdown()


def agent_run(kernel: Kernel, *codes: str, prompt: str = "go") -> None:
    kernel.ok(f"script(*{list(codes)!r})")
    kernel.ok(f"%%agent\n{prompt}\n")
    kernel.wait_for(f"not {RUNTIME}.is_running()", timeout=30)


def new_button(kernel: Kernel, label: str, known: set[str], timeout: float = 10.0) -> str | None:
    """A button that was not in ``known`` (panels of earlier tests stay in the record)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fresh = [b for b in kernel.buttons(label) if b not in known]
        if fresh:
            return fresh[-1]
        time.sleep(0.05)
    return None


def html_seen(kernel: Kernel, since: float) -> str:
    """Every HTML widget value and Markdown output the frontend was sent since ``since``."""
    parts = []
    for msg in kernel.messages(since):
        content = msg.get("content", {})
        state = (content.get("data") or {}).get("state") or {}
        if isinstance(state.get("value"), str):
            parts.append(state["value"])
        data = content.get("data") or {}
        if isinstance(data.get("text/markdown"), str):
            parts.append(data["text/markdown"])
    return "\n".join(parts)


def test_each_kind_of_change_is_told_to_the_model_and_shown(kernel):
    kernel.ok("%config AgentMagics.approval = 'auto'")
    kernel.ok("df = pd.DataFrame({'a': [1, 2, 3], 'b': [1.0, 2.0, 3.0]}); s = pd.Series([1, 2, 3])\n"
              "arr = np.zeros(4); lst = [1, 2]; d = {'k': 1}; st = {1, 2}; cfg = {'runs': [{'lr': 0.1}]}\n"
              "n = 1; gone = 'x'")
    since = time.monotonic()
    agent_run(kernel, "df['c'] = df.a * 2\ns.iloc[0] = 9\narr[1] = 5\nlst.append(3)\nd['k'] = 2\n"
                      "st.add(3)\ncfg['runs'][0]['lr'] = 0.2\nn = 2\ndel gone\nmade = [1]")
    text, lines = kernel.ev("last_result()")
    expected = [
        "`df` changed in place: DataFrame 3×3, shape 3×2 → 3×3; columns added 'c'",
        "`s` changed in place: Series of 3 (int64), values changed",
        "`arr` changed in place: ndarray 4 float64, values changed",
        "`lst` changed in place: list of 3, length 2 → 3",
        "`d` changed in place: dict of 1, values changed",
        "`st` changed in place: set of 3, length 2 → 3",
        "`cfg` changed in place: dict of 1, values changed",
        "`n` rebound: int → int (another value)",
        "`gone` deleted (was str of 1 characters)",
        "`made` created: list of 1",
    ]
    assert sorted(lines) == sorted(expected)
    assert "[variables changed]" in text and all(line in text for line in expected)
    seen = html_seen(kernel, since)
    assert "Variables changed:" in seen and "<code>df</code> changed in place" in seen  # the card
    assert "Variables changed:</b><br>" in seen  # the static transcript the view freezes into


def test_undo_restores_in_order_and_leaves_newer_work(kernel):
    kernel.ok("%config AgentMagics.approval = 'auto'")
    kernel.ok("frame = pd.DataFrame({'a': [1, 2]}); nums = [1]; total = 0")
    agent_run(kernel, "frame.drop(columns=['a'], inplace=True)\nnums.append(2)")
    agent_run(kernel, "nums.append(3)\ntotal = 10")
    kernel.ok("total = 99")  # the user's newer work
    reply = kernel.execute("%agent undo")
    out = kernel.text_of(reply["msg_id"])
    assert "restored `nums`" in out and "left as they are, changed since the run: `total`" in out
    assert kernel.ev("(nums, total)") == [[1, 2], 99]
    out = kernel.text_of(kernel.execute("%agent undo")["msg_id"])
    assert "restored `frame`, `nums`" in out
    assert kernel.ev("(list(frame.columns), nums)") == [["a"], [1]]


def test_over_the_budget_is_named_before_and_after(kernel):
    kernel.ok("%config AgentMagics.approval = 'ask'")
    kernel.ok("%config AgentMagics.undo_budget = 1000")
    kernel.ok("big = np.zeros(1000)")
    since = time.monotonic()
    kernel.ok("script('big[0] = 1')")
    known = set(kernel.buttons("Run"))
    kernel.ok("%%agent\ngo\n")
    run = new_button(kernel, "Run", known)
    assert run is not None, "no approval panel under ask"
    panel = html_seen(kernel, since)
    assert "changes <code>big[0] = …</code> in <code>big</code>, which you created" in panel
    assert "undo could not restore <code>big</code>: 8 KB is over the undo budget of 1 KB" in panel
    kernel.click(run)
    kernel.wait_for(f"not {RUNTIME}.is_running()", timeout=30)
    out = kernel.text_of(kernel.execute("%agent undo")["msg_id"])
    assert "not restored: `big` (changed in place, and 8 KB, over the undo budget of 1 KB)" in out
    kernel.ok("%config AgentMagics.undo_budget = 536870912")


def test_protect_asks_under_auto_and_puts_back_an_unseen_change(kernel):
    kernel.ok("%config AgentMagics.approval = 'auto'")
    kernel.ok("%config AgentMagics.protect = ['guarded']")
    kernel.ok("guarded = pd.DataFrame({'a': [1, 2]})")
    kernel.ok("script(\"guarded['a'] = 0\")")
    known = set(kernel.buttons("Skip"))
    kernel.ok("%%agent\ngo\n")
    skip = new_button(kernel, "Skip", known)
    assert skip is not None, "a change of a protected name ran without asking under auto"
    kernel.click(skip)
    kernel.wait_for(f"not {RUNTIME}.is_running()", timeout=30)
    assert kernel.ev("guarded['a'].tolist()") == [1, 2]
    # code that changes it through another name is not asked for; the after-check puts it back
    agent_run(kernel, "alias = guarded\nalias.loc[0, 'a'] = 9")
    assert kernel.ev("guarded['a'].tolist()") == [1, 2]
    text, _ = kernel.ev("last_result()")
    assert "`guarded` protected (AgentMagics.protect): the change was undone" in text
    kernel.ok("%config AgentMagics.protect = []")


def test_the_undo_button_under_a_run_undoes_it_there_newest_first(kernel):
    kernel.ok("%config AgentMagics.approval = 'auto'")
    kernel.ok("kept = [1, 2]; level = 1")
    known = set(kernel.buttons("Undo this run"))
    bars = kernel.ev(f"len({RUNTIME}.undo_offers.bars)")  # earlier tests' runs keep theirs
    agent_run(kernel, "kept.append(3)")
    first = new_button(kernel, "Undo this run", known)
    agent_run(kernel, "level = 2")
    second = new_button(kernel, "Undo this run", known | {first})
    assert first is not None and second is not None, "no Undo button under a run that changed names"
    kernel.wait_for("True")  # the second run's refresh has been sent
    states = kernel.widget_states()
    assert states[first]["disabled"] and not states[second]["disabled"]  # the newest run only
    since = time.monotonic()
    kernel.click(second)
    kernel.wait_for("level == 1")
    assert kernel.ev("kept") == [1, 2, 3]  # the older run is not undone with it
    # the message replaces the button in that cell's output: static text, no widget left
    deadline = time.monotonic() + 10
    replaced = []
    while not replaced and time.monotonic() < deadline:
        replaced = [m["content"]["data"] for m in kernel.messages(since)
                    if m["msg_type"] == "update_display_data"
                    and "restored <code>level</code>" in m["content"]["data"].get("text/markdown", "")]
        time.sleep(0.05)
    assert replaced and "application/vnd.jupyter.widget-view+json" not in replaced[0]
    kernel.wait_for(f"not {RUNTIME}.undo_offers.bars[-1].button.disabled")  # the run before it: enabled now
    kernel.click(first)
    kernel.wait_for("kept == [1, 2]")
    assert kernel.ev(f"len({RUNTIME}.undo_offers.bars)") == bars  # both ended as static text
