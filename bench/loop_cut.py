"""Work per delta of the loop check (``local/repeat.py``) on a reply without a loop.

A reply of table rows and prose is streamed delta by delta into ``loop_start`` at the
cadence ``cut_loops`` checks it (every ``CHECK_EVERY`` characters or at a line break). In
one run it times

* ``loop_start``: the search for the periods a loop could have;
* the rule written out: every period up to ``MAX_PERIOD`` tested with its copies built
  (what the search replaces, and what the tests check it against);

for 2,048 and 8,192 deltas. It prints microseconds a delta and the search's time over the
rule's (lower is better); then one check of the whole 8k reply over one of the whole 2k
reply (about 1: the check's work does not grow with the reply).

    PYTHONPATH=. python bench/loop_cut.py
"""

from __future__ import annotations

import time
import timeit
from collections.abc import Callable

from pi_notebook.local.repeat import CHECK_EVERY, MAX_PERIOD, MIN_REPEATS, MIN_SPAN, loop_start


def every_period(text: str) -> tuple[int, int] | None:
    size = len(text)
    for period in range(1, min(MAX_PERIOD, size // MIN_REPEATS) + 1):
        copies = max(MIN_REPEATS, -(-MIN_SPAN // period))
        block = text[size - period:]
        if copies * period <= size and text.endswith(block * copies) and any(c.isalnum() for c in block):
            return size - (copies - 1) * period, copies
    return None


def deltas(count: int) -> list[str]:
    names = ("price", "total", "quantity")
    return [f"| row {n} | {n * 37 % 101} | {names[n % 3]} |\n" if n % 5 == 0 else f" word{n * 7 % 53}"
            for n in range(count)]


def per_delta_us(check: Callable[[str], object], words: list[str]) -> float:
    best = float("inf")
    for _ in range(3):
        text, checked = "", 0
        start = time.perf_counter()
        for word in words:
            text += word
            if len(text) - checked >= CHECK_EVERY or "\n" in word:
                checked = len(text)
                if check(text) is not None:
                    raise SystemExit("the bench text must hold no loop")
        best = min(best, time.perf_counter() - start)
    return best / len(words) * 1e6


def main() -> None:
    results = {}
    for count in (2048, 8192):
        words = deltas(count)
        results[count] = (per_delta_us(loop_start, words), per_delta_us(every_period, words))
        search, rule = results[count]
        print(f"{count:5d} deltas: search {search:6.1f} us/delta, every period {rule:6.1f} us/delta, "
              f"ratio {search / rule:.3f}")
    whole = {count: "".join(deltas(count)) for count in (2048, 8192)}
    one = {count: min(timeit.repeat(lambda t=text: loop_start(t), number=500, repeat=3))
           for count, text in whole.items()}
    print(f"one check, 8k reply / 2k reply: {one[8192] / one[2048]:.2f} (about 1: bounded)")


if __name__ == "__main__":
    main()
