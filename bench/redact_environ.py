"""Redaction cost with a big environment (2,500 variables, a Kubernetes pod's normal).

Two figures, each against a baseline measured in the same run:

1. one ``redact()`` call on a short text: the old full ``os.environ`` rescan on every call vs
   the cached secret set (refreshed when the environment's raw mapping changes);
2. a trivial cell (``x = 1; print(x)``) run by IPython with the history recorder installed and
   the history read back as the next prompt would (``render`` + ``last_error_note``): what
   the recorder and the context add per cell, with the rescan vs with the cache. Target:
   < 2 ms per cell at 2,500 variables.

    PYTHONPATH=. python bench/redact_environ.py
"""

from __future__ import annotations

import importlib
import io
import os
import sys
import time

r = importlib.import_module("pi_notebook.tools.trust.redact")

N_VARS = 2500
CALLS = 200
CELLS = 60


def per_call(calls: int = CALLS) -> float:
    start = time.perf_counter()
    for i in range(calls):
        r.redact(f"x = {i}\nprint(x)")
    return (time.perf_counter() - start) / calls


def per_cell(shell, history, cells: int = CELLS) -> float:
    saved = sys.stdout
    sys.stdout = io.StringIO()
    try:
        start = time.perf_counter()
        for i in range(cells):
            shell.run_cell(f"x = {i}\nprint(x)", store_history=True)
            history.render(last=3)
            history.last_error_note()
        return (time.perf_counter() - start) / cells
    finally:
        sys.stdout = saved


def main() -> None:
    from IPython.testing.globalipapp import start_ipython

    from pi_notebook.tools.context.history import ExecutionHistory

    for i in range(N_VARS):
        os.environ[f"POD_SERVICE_{i}_PORT"] = f"tcp://10.0.{i % 250}.{i % 200}:8080"
    os.environ["POD_API_TOKEN"] = "tok-" + "z" * 30
    shell = start_ipython()
    bare = per_cell(shell, ExecutionHistory())  # no recorder installed: the cell alone
    history = ExecutionHistory()
    history.install(shell)
    cached_fn = r._environ_secrets
    r._environ_secrets = r._scan_environ  # the old behaviour: every call rescans
    try:
        call_base = per_call()
        cell_base = per_cell(shell, history)
    finally:
        r._environ_secrets = cached_fn
    call_new = per_call()
    cell_new = per_cell(shell, history)
    history.uninstall()
    print(f"{N_VARS} env vars")
    print(f"redact() call: rescan {call_base * 1e3:.3f} ms, cached {call_new * 1e3:.4f} ms "
          f"(ratio {call_base / call_new:.0f}x)")
    print(f"trivial cell: bare {bare * 1e3:.2f} ms; recorder + context with rescan "
          f"+{(cell_base - bare) * 1e3:.2f} ms, with cache +{(cell_new - bare) * 1e3:.2f} ms")
    os.environ["POD_API_TOKEN"] = "tok-" + "y" * 30  # a change is still seen at once
    assert "y" * 30 not in r.redact("tok-" + "y" * 30)


if __name__ == "__main__":
    main()
