"""A long conversation with the embedded model stays inside its window and keeps using the
server's prompt cache (long_conversation.py: fifteen requests, several drawing figures, then
``%agent fix``).

Compaction keeps the prompt's start unchanged between its rare runs, so every request after
the first is mostly read from llama-server's prompt cache. The cached share of each prompt is
what is asserted (the server reports it; it does not depend on the machine's speed): a prompt
cache that missed on every request, as when compaction moved its cut point each time, made
each request read its whole 5-6k-token prompt again, minutes on two cores. Per-request
seconds and tokens are printed (``pytest -s``).
"""

from __future__ import annotations

import statistics

import pytest
from helpers.kernel import Kernel
from helpers.long_conversation import Row, run_conversation

# local_model only, not kernel: the ipykernel 6 pass of CI reruns the kernel tests in an
# environment without the embedded model, and one long conversation per CI run is enough
pytestmark = [pytest.mark.local_model, pytest.mark.timeout(1800)]


def test_a_long_conversation_keeps_room_for_every_answer_and_reuses_the_prompt_cache():
    kernel = Kernel()
    try:
        rows = run_conversation(kernel, on_row=lambda row: print(row.line(), flush=True))
        window = kernel.ev("__import__('pi_notebook').get_agent().state.model.context_window")
        assert kernel.ev("1 + 1") == 2
    finally:
        kernel.shutdown()
    assert len(rows) == 16
    for row in rows:
        assert row.calls, f"request {row.number} made no model call"
        for call in row.calls:
            # inside the window, and never cut for lack of room (a reply caught in a loop is cut
            # on purpose, and says so)
            assert call.input + call.output <= window, (row.number, call)
            if call.stop == "length":
                assert "repeating" in (call.error or ""), (row.number, call)
    # the prompt cache: after the first request, the typical call reads only what is new
    later = [c for row in rows[1:] for c in row.calls if c.input]
    shares = [c.cached / c.input for c in later]
    assert statistics.median(shares) >= 0.7, _table(rows)
    assert sum(s >= 0.5 for s in shares) >= 0.75 * len(shares), _table(rows)


def _table(rows: list[Row]) -> str:
    return "\n".join(row.line() for row in rows)
