"""Build time of the per-prompt namespace summary on a big namespace, vs. a plain walk.

The namespace: 5,000 variables (ints, floats, short strings, lists, dicts, small arrays,
functions defined "in the notebook") plus a 1 GiB DataFrame (16,777,216 x 8 float64; the
zeros are allocated lazily by the OS, so the run does not need 1 GiB of free memory).

- baseline: a plain ``dir()``-style walk: for each name, ``type(value).__name__`` (the least any
  summary must do);
- summary: ``namespace_summary(ns, token_budget)``.

Run: ``python bench/namespace_summary.py [--vars N] [--budget TOKENS] [--repeat R]``. Prints
the median times, the ratio summary / baseline and the summary's estimated tokens. The goal
is under 50 ms for the summary.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import pandas as pd

from pi_notebook.ai.options import estimate_text_tokens
from pi_notebook.tools.context.namespace import namespace_summary


def make_namespace(n: int) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    exec("def clean(frame, column):\n    return frame", ns)  # a function "defined here"
    ns["clean"].__module__ = "__main__"
    del ns["__builtins__"]
    for i in range(n):
        kind = i % 6
        ns[f"var_{i}"] = (i, i * 0.5, f"label {i}", list(range(i % 50)),
                          {"k": i}, np.arange(i % 100, dtype=float))[kind]
    ns["big"] = pd.DataFrame(np.zeros((16_777_216, 8)), columns=[f"c{i}" for i in range(8)], copy=False)
    ns["sales"] = pd.DataFrame({"month": ["jan"], "region": ["n"], "revenue": [1.0]})
    return ns


def baseline(ns: dict[str, Any]) -> list[str]:
    return [f"{name}: {type(ns[name]).__name__}" for name in dir_like(ns)]


def dir_like(ns: dict[str, Any]) -> list[str]:
    return sorted(ns)


def median_s(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vars", type=int, default=5000)
    parser.add_argument("--budget", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    ns = make_namespace(args.vars)
    gib = ns["big"].memory_usage(deep=False).sum() / 2**30
    namespace_summary(ns, args.budget)  # warm caches (redaction matcher, imports)
    base = median_s(lambda: baseline(ns), args.repeat)
    summ = median_s(lambda: namespace_summary(ns, args.budget), args.repeat)
    text = namespace_summary(ns, args.budget)
    print(f"namespace: {len(ns)} names incl. a {gib:.2f} GiB DataFrame; budget {args.budget} tokens")
    print(f"baseline (dir walk + type names): {base * 1000:.2f} ms")
    print(f"namespace_summary:                {summ * 1000:.2f} ms  (goal < 50 ms)")
    print(f"ratio summary / baseline:         {summ / base:.2f}")
    print(f"summary: {estimate_text_tokens(text)} tokens, {len(text.splitlines())} lines")


if __name__ == "__main__":
    main()
