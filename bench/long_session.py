"""A whole conversation with the embedded model in one kernel, as a user has it.

Fifteen requests of one analysis in one conversation, several of them drawing figures, then an
error and ``%agent fix``: the conversation grows past the 8k window and compaction keeps it
inside. Prints seconds and prompt/answer tokens per request, and exits 1 when a reply was cut
for lack of room or a prompt left no room for an answer.

    python bench/long_session.py

A run takes 25-45 minutes on 2 cores: once compaction starts, each request's prompt differs
from the last one early on, so llama-server's prompt cache misses and the whole prompt
(5-6k tokens) is read again. That is why this is a benchmark and not part of the test suite;
the arithmetic it checks is tested in tests/session/test_session_compaction.py and
tests/ai/test_options.py.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the helpers package

from helpers.kernel import Kernel

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


def main() -> int:
    kernel = Kernel()
    problems: list[str] = []
    try:
        kernel.ok("%load_ext pi_notebook\n%config AgentMagics.autosave = False")
        kernel.ok(SETUP)
        inputs: list[int] = []
        for number, request in enumerate([*REQUESTS, None], 1):
            before = kernel.ev("len(__import__('pi_notebook').get_agent().state.messages)") if number > 1 else 0
            started = time.monotonic()
            if request is None:  # the user's own mistake, then the fix
                kernel.execute("sales.groupby('regoin')['revenue'].sum()")
                kernel.execute("%agent fix", timeout=1800)
            else:
                kernel.execute(f"%%agent --approve auto --wait\n{request}\n", timeout=1800)
            seconds = time.monotonic() - started
            assistants = _assistants_since(kernel, before)
            window = kernel.ev("__import__('pi_notebook').get_agent().state.model.context_window")
            print(f"{number:2d} {seconds:6.1f} s  " + "  ".join(
                f"in={a['input']} out={a['output']} {a['stop']}" for a in assistants), flush=True)
            for assistant in assistants:
                inputs.append(assistant["input"])
                if assistant["input"] + assistant["output"] > window:
                    problems.append(f"request {number}: outside the window: {assistant}")
                if assistant["stop"] == "length" and "repeating" not in (assistant["error"] or ""):
                    problems.append(f"request {number}: a reply cut for lack of room: {assistant}")
        if inputs and max(inputs[-8:]) >= window - 1024:
            problems.append(f"the last prompts leave no room for an answer: {inputs[-8:]}")
    finally:
        kernel.shutdown()
    for problem in problems:
        print("PROBLEM", problem)
    print("ok" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
