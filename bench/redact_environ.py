"""Redaction cost per call with a big environment (issue 20: 2,500 variables, a pod's normal).

Prints the time of one ``redact()`` call on a short text with the cached environment check
vs the old full rescan (``_scan_environ`` on each call), in the same run, and their ratio.
A trivial cell calls redact a few dozen times; the target is < 2 ms per cell.

    PYTHONPATH=. python bench/redact_environ.py
"""

from __future__ import annotations

import os
import time

import importlib

r = importlib.import_module("pi_notebook.tools.redact")

N_VARS = 2500
CALLS = 200


def per_call(fn: object, calls: int = CALLS) -> float:
    start = time.perf_counter()
    for i in range(calls):
        fn(f"x = {i}\nprint(x)")  # type: ignore[operator]  # a callable
    return (time.perf_counter() - start) / calls


def main() -> None:
    for i in range(N_VARS):
        os.environ[f"POD_SERVICE_{i}_PORT"] = f"tcp://10.0.{i % 250}.{i % 200}:8080"
    os.environ["POD_API_TOKEN"] = "tok-" + "z" * 30
    r.redact("warm up")

    def old_redact(text: str) -> str:
        r._scan_environ()  # what every call paid before the cache
        return r.redact(text)

    baseline = per_call(old_redact)
    cached = per_call(r.redact)
    # a cell: the history recorder and the tools call redact ~30 times
    print(f"{N_VARS} env vars: rescan per call {baseline * 1e3:.3f} ms, cached {cached * 1e3:.4f} ms, "
          f"ratio {baseline / cached:.0f}x; per cell (30 calls): {30 * baseline * 1e3:.1f} ms -> "
          f"{30 * cached * 1e3:.2f} ms")
    os.environ["POD_API_TOKEN"] = "tok-" + "y" * 30  # a change is still seen at once
    assert "y" * 30 not in r.redact("tok-" + "y" * 30)


if __name__ == "__main__":
    main()
