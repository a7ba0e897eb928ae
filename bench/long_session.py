"""A whole conversation with the embedded model in one kernel, as a user has it.

Fifteen requests of one analysis in one conversation, several of them drawing figures, then an
error and ``%agent fix``: the conversation grows past the 8k window and compaction keeps it
inside. Prints seconds and prompt/answer tokens per request, and exits 1 when a reply was cut
for lack of room or a prompt left no room for an answer.

    python bench/long_session.py

Each request's prompt starts with the previous one's (compaction keeps the start unchanged
between its rare runs), so llama-server reads only the new tokens: ``cached`` is the part of
``in`` its prompt cache gave. The same conversation, with assertions, is the ``local_model``
test tests/kernel/test_long_session_local_kernel.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the helpers package

from helpers.kernel import Kernel
from helpers.long_conversation import run_conversation


def main() -> int:
    kernel = Kernel()
    problems: list[str] = []
    try:
        rows = run_conversation(kernel, on_row=lambda row: print(row.line(), flush=True), timeout=1800)
        window = kernel.ev("__import__('pi_notebook').get_agent().state.model.context_window")
    finally:
        kernel.shutdown()
    for row in rows:
        for call in row.calls:
            if call.input + call.output > window:
                problems.append(f"request {row.number}: outside the window: {call}")
            if call.stop == "length" and "repeating" not in (call.error or ""):
                problems.append(f"request {row.number}: a reply cut for lack of room: {call}")
    calls = [c for row in rows[1:] for c in row.calls if c.input]
    total = sum(row.seconds for row in rows)
    print(f"total {total:.0f} s; prompt tokens after the first request: {sum(c.input for c in calls)}, "
          f"from the cache: {sum(c.cached for c in calls)}")
    for problem in problems:
        print("PROBLEM", problem)
    print("ok" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
