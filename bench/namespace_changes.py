"""Overhead per agent python call of the namespace review (before/after bookkeeping, copies for
undo), as a ratio against the same call without it, measured in the same run.

Two namespaces:
- 1,000 names of the kinds a notebook holds (ints, floats, strings, lists, dicts, small arrays,
  small DataFrames);
- one big DataFrame (``--big-mb``, default 256 MB; ``--big-mb 1024`` for the 1 GB case: above
  the default 512 MB undo budget, so it is fingerprinted by sample and not copied).

For each, three calls of agent code: one that touches no user name (``x = 1``), one that reads
(a sum), and one that changes a name in place. "first call" starts a new run every time (the
copies for undo are taken then: the worst case); "later call" is a further call in the same run
(names already saved, and the last call's after-snapshot reused as its before-snapshot while no
user cell ran in between). Baseline: ``run_code`` alone, the same code, interleaved with the
reviewed calls. Each reviewed call is timed twice, interleaved: as it runs (only the names the
call can reach are fingerprinted, ``review/reach.py``) and with every name fingerprinted and
small values copied (``reachable`` forced to "every name": the bookkeeping without that
shortcut). Prints the median times, the ratios, the median and least overheads (the fastest
reviewed call against the fastest baseline), and the copies' memory against the budget.

Run: ``python bench/namespace_changes.py [--names N] [--big-mb MB] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from IPython.core.interactiveshell import InteractiveShell

import pi_notebook.review.watch as watch_module
from pi_notebook.review.watch import review_for
from pi_notebook.tools.kernel.capture import install_capture, uninstall_capture
from pi_notebook.tools.python.namespace_review import finish_call, watch_call
from pi_notebook.tools.python.python_tool import run_code
from pi_notebook.tools.python.python_types import PythonToolSettings


def many_names(n: int) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    for i in range(n):
        kind = i % 7
        ns[f"v{i}"] = (i, i * 0.5, f"label {i}", list(range(i % 50)), {"k": i, "rows": [i, i]},
                       np.arange(i % 100, dtype=float),
                       pd.DataFrame({"a": range(i % 20), "b": [1.5] * (i % 20)}))[kind]
    ns["target"] = [1, 2, 3]
    return ns


def big_frame(mb: int) -> dict[str, Any]:
    rows = mb * 2**20 // (8 * 8)
    return {"target": pd.DataFrame(np.zeros((rows, 8)), columns=[f"c{i}" for i in range(8)], copy=False)}


async def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


def every_name(*_: object) -> None:
    return None  # reachable()'s answer for code that can reach any name


async def measure(shell: InteractiveShell, code: str, settings: PythonToolSettings, repeat: int,
                  new_run: bool) -> tuple[float, float, float, float, float]:
    review = review_for(shell)

    async def plain() -> None:
        await run_code(shell, code, route_fd_output=False)

    async def reviewed() -> None:
        if new_run:
            shell.execution_count += 1  # as a %%agent cell does: the snapshot is taken afresh
            review.start_run("bench")
        watch = watch_call(shell, code, settings)
        await run_code(shell, code, route_fd_output=False)
        finish_call(shell, watch)

    reach = watch_module.reachable

    async def reviewed_all() -> None:
        watch_module.reachable = every_name  # type: ignore[assignment]  # the same signature, ignoring its inputs
        try:
            await reviewed()
        finally:
            watch_module.reachable = reach

    review.start_run("bench")
    base, with_review, with_all = [], [], []
    # each way keeps its own last after-snapshot (a later call's before-snapshot)
    lasts: dict[str, Any] = {"reached": None, "every": None}

    async def one(way: str, fn: Callable[[], Any]) -> float:
        review._last = lasts[way]
        took = await timed(fn)
        lasts[way] = review._last
        del review.stack.runs[:-2]  # keep the bench's own copies from piling up
        return took

    for _ in range(repeat):
        base.append(await timed(plain))
        with_all.append(await one("every", reviewed_all))
        with_review.append(await one("reached", reviewed))
    # the minimum overheads too: on a loaded machine the medians carry other processes' time
    best = min(with_review) - min(base)
    best_all = min(with_all) - min(base)
    return (statistics.median(base), statistics.median(with_review), statistics.median(with_all),
            best, best_all)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--names", type=int, default=1000)
    parser.add_argument("--big-mb", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    shell = InteractiveShell.instance()
    settings = PythonToolSettings()
    real_out = sys.stdout
    sys.stdout = io.StringIO()
    install_capture(shell)
    rows: list[str] = []
    try:
        cases = [(f"{args.names:,} names", many_names(args.names), "target.append(4)"),
                 (f"one {args.big_mb:,} MB DataFrame", big_frame(args.big_mb), "target.loc[0, 'c0'] = 1.0")]
        for label, ns, change in cases:
            shell.user_ns.update(ns)
            for what, code in (("touches nothing", "x = 1"), ("reads", "s = target[0] if isinstance(target, list) "
                                                             "else float(target['c0'].iloc[:1000].sum())"),
                               ("changes in place", change)):
                for new_run in (True, False):
                    base, reviewed, every, best, best_all = await measure(shell, code, settings, args.repeat,
                                                                          new_run)
                    held = review_for(shell).stack.held_bytes
                    rows.append(f"{label:<26} {what:<17} {'first call' if new_run else 'later call':<11} "
                                f"{base * 1000:9.2f} ms {reviewed * 1000:9.2f} ms  x{reviewed / base:6.2f}  "
                                f"{every * 1000:9.2f} ms  x{every / base:6.2f}  "
                                f"{(reviewed - base) * 1000:7.2f} / {(every - base) * 1000:7.2f} ms  "
                                f"{best * 1000:6.2f} / {best_all * 1000:7.2f} ms  "
                                f"copies {held / 2**20:8.1f} MB of {settings.undo_budget / 2**20:.0f} MB")
            for name in ns:
                shell.user_ns.pop(name, None)
            review_for(shell).stack.runs.clear()
    finally:
        uninstall_capture(shell)
        sys.stdout = real_out
    print(f"{'namespace':<26} {'agent code':<17} {'call':<11} {'without':>12} {'reached names':>13}  ratio "
          f"{'every name':>12}  ratio   overhead reached / every  (least: reached / every)")
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
