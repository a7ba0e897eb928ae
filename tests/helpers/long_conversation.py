"""One long conversation with the embedded model in a kernel, as a user has it: fifteen requests
of one analysis (several draw figures), then an error of the user's and ``%agent fix``.

Shared by the ``local_model`` test (test_long_session_local_kernel.py) and the benchmark
(bench/long_session.py), which both read the rows: per request, its seconds and, per model
call, the prompt tokens, how many of them the server's prompt cache gave, the answer tokens and
the stop reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

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
FIX = "%agent fix"

_STATS = """__import__('json').dumps([
    {'stop': m.stop_reason, 'error': m.error_message, 'input': m.usage.input + m.usage.cache_read,
     'cached': m.usage.cache_read, 'output': m.usage.output}
    for m in __import__('pi_notebook').get_agent().state.messages[%d:] if m.role == 'assistant'])"""
_COUNT = "len(__import__('pi_notebook').get_agent().state.messages)"


@dataclass
class Call:
    """One model call: prompt tokens (``cached`` of them from the prompt cache), answer tokens."""

    input: int
    cached: int
    output: int
    stop: str
    error: str | None


@dataclass
class Row:
    number: int
    request: str
    seconds: float
    calls: list[Call] = field(default_factory=list)

    def line(self) -> str:
        return f"{self.number:2d} {self.seconds:6.1f} s  " + "  ".join(
            f"in={c.input} cached={c.cached} out={c.output} {c.stop}" for c in self.calls)


def run_conversation(kernel: Kernel, on_row: Callable[[Row], None] = lambda _row: None,
                     timeout: float = 900) -> list[Row]:
    """The conversation in ``kernel`` (with the extension not yet loaded); a row per request."""
    kernel.ok("%load_ext pi_notebook\n%config AgentMagics.autosave = False")
    kernel.ok(SETUP)
    rows: list[Row] = []
    for number, request in enumerate([*REQUESTS, FIX], 1):
        before = kernel.ev(_COUNT) if number > 1 else 0
        started = time.monotonic()
        if request == FIX:  # the user's own mistake, then the fix
            kernel.execute("sales.groupby('regoin')['revenue'].sum()")
            kernel.execute(FIX, timeout=timeout)
        else:
            kernel.execute(f"%%agent --approve auto --wait\n{request}\n", timeout=timeout)
        row = Row(number, request, time.monotonic() - started)
        row.calls = [Call(**c) for c in json.loads(kernel.ev(_STATS % before))]
        rows.append(row)
        on_row(row)
    return rows
