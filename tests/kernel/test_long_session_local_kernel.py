"""A whole conversation with the embedded model in one kernel, as a user has it.

Fifteen requests of one analysis in one conversation, several of them drawing figures, then an
error and ``%agent fix``: the conversation grows past the 8k window, compaction keeps it inside,
and no reply is cut because the request left the answer no room. Per-request seconds and tokens
are printed (``pytest -s``) for the benchmarks page.
"""

from __future__ import annotations

import json
import time

import pytest
from kernel_helpers import Kernel

# local_model only, not kernel: the ipykernel 6 pass of CI reruns the kernel tests in an
# environment without the embedded model, and one long conversation per CI run is enough
pytestmark = [pytest.mark.local_model, pytest.mark.timeout(2400)]

SETUP = """\
import pandas as pd, numpy as np
rng = np.random.default_rng(0)
months = pd.date_range('2024-01-01', periods=12, freq='MS')
sales = pd.DataFrame({'month': np.tile(months, 2), 'region': ['north'] * 12 + ['south'] * 12,
                      'revenue': np.r_[np.arange(100, 220, 10), np.arange(150, 90, -5)].astype(float),
                      'units': np.r_[np.arange(10, 22), np.arange(20, 8, -1)]})
"""

REQUESTS = [
    "How many rows does sales have?",
    "What is the total revenue of the north region?",
    "Plot revenue by month for both regions.",
    "Which region had more revenue in the second half of the year?",
    "What is the mean units per month in the south region?",
    "Draw a bar chart of total revenue per region.",
    "Which month had the highest revenue in the north?",
    "Add a column price = revenue / units to sales.",
    "What is the median price across all rows?",
    "Plot price over time for the south region.",
    "How many months did the south region have revenue above 120?",
    "What is the correlation between revenue and units?",
    "Draw a histogram of revenue.",
    "What was the revenue of the north region in March 2024?",
    "Summarise in one sentence what we found about the two regions.",
]

STATS = """__import__('json').dumps([
    {'role': m.role, 'stop': getattr(m, 'stop_reason', None), 'error': getattr(m, 'error_message', None),
     'input': getattr(getattr(m, 'usage', None), 'input', 0) + getattr(getattr(m, 'usage', None), 'cache_read', 0),
     'output': getattr(getattr(m, 'usage', None), 'output', 0)}
    for m in __import__('pi_notebook').get_agent().state.messages[-%d:] if m.role == 'assistant'])"""


def _assistants_since(kernel: Kernel, count_before: int) -> list[dict]:
    total = kernel.ev("len(__import__('pi_notebook').get_agent().state.messages)")
    return json.loads(kernel.ev(STATS % max(1, total - count_before)))


def test_a_fifteen_request_conversation_and_a_fix_keep_room_for_every_answer():
    kernel = Kernel()
    try:
        kernel.ok("%load_ext pi_notebook\n%config AgentMagics.autosave = False")
        kernel.ok(SETUP)
        rows = []
        for number, request in enumerate([*REQUESTS, None], 1):
            before = kernel.ev("len(__import__('pi_notebook').get_agent().state.messages)") if number > 1 else 0
            started = time.monotonic()
            if request is None:  # the user's own mistake, then the fix
                kernel.execute("sales.groupby('regoin')['revenue'].sum()")
                reply = kernel.execute("%agent fix", timeout=900)
            else:
                reply = kernel.execute(f"%%agent --approve auto --wait\n{request}\n", timeout=900)
            seconds = time.monotonic() - started
            assistants = _assistants_since(kernel, before)
            window = kernel.ev("__import__('pi_notebook').get_agent().state.model.context_window")
            rows.append((number, request or "%agent fix", round(seconds, 1), assistants))
            print(f"{number:2d} {seconds:6.1f} s  " + "  ".join(
                f"in={a['input']} out={a['output']} {a['stop']}" for a in assistants), flush=True)
            assert reply["status"] in ("ok", "error"), reply
            for assistant in assistants:
                # inside the window, and never cut for lack of room (a reply caught in a loop is
                # cut on purpose, and says so)
                assert assistant["input"] + assistant["output"] <= window, (number, assistant)
                if assistant["stop"] == "length":
                    assert "repeating" in (assistant["error"] or ""), (number, assistant)
        # compaction keeps working to the end: the last requests' prompts are no larger than the
        # window allows with room for an answer
        inputs = [a["input"] for _, _, _, assistants in rows[-4:] for a in assistants if a["input"]]
        assert inputs and max(inputs) < window - 1024, inputs
        assert kernel.ev("1 + 1") == 2
    finally:
        kernel.shutdown()
