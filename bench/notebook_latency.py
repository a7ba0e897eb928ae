"""Notebook latency while an agent streams at full speed, in a real kernel.

Prints:
- ``%load_ext pi_notebook`` time in a fresh kernel (target <= 0.3 s), and which heavy
  modules it pulled in;
- the median / p90 execute round trip (client send -> execute_reply) of a ``%steer`` cell
  and of ``1+1`` while a faux model streams unpaced (target <= 50 ms), next to the same
  ``1+1`` on an idle kernel.

The kernel gets ipywidgets' control comm opened, like JupyterLab does, so ``%%agent``
returns at once and its view streams; ``AgentMagics.wait_for_runs`` is turned off so
``1+1`` measures the kernel rather than "wait for the run first".

Usage: ``python bench/notebook_latency.py [--n 30]``
(``PI_NOTEBOOK_KERNEL_PYTHON`` picks the kernel's interpreter, e.g. an ipykernel 6.29 venv).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the helpers package

from helpers.kernel import Kernel  # noqa: E402

RUNTIME = "__import__('pi_notebook.magics', fromlist=['_']).current_runtime()"
HEAVY = ["httpx", "pandas", "matplotlib", "numpy", "ipywidgets", "markdown_it", "pygments",
         "pi_notebook.agent", "pi_notebook.widgets.view", "pi_notebook.ai.providers.anthropic",
         "pi_notebook.ai.providers.openai_completions"]


def round_trip(kernel: Kernel, code: str) -> float:
    start = time.perf_counter()
    msg_id = kernel.kc.execute(code)
    kernel.wait_reply(msg_id, timeout=30)
    return time.perf_counter() - start


def summary(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    return f"median {statistics.median(ms):6.1f} ms   p90 {p90:6.1f} ms   (n={len(ms)})"


def load_time() -> None:
    kernel = Kernel()
    try:
        kernel.ok("import time as _t, sys as _s\n_before = set(_s.modules)\n_t0 = _t.perf_counter()\n"
                  "get_ipython().run_line_magic('load_ext', 'pi_notebook')\n"
                  "_load_s = _t.perf_counter() - _t0")
        seconds = kernel.ev("_load_s")
        pulled = kernel.ev(f"[m for m in {HEAVY!r} if m in _s.modules and m not in _before]")
        print(f"%load_ext pi_notebook: {seconds * 1000:.0f} ms (target <= 300 ms; "
              f"ratio {seconds / 0.3:.2f})")
        print(f"  heavy modules imported by the load: {pulled or 'none'}")
        # the first %%agent cell pays for the lazy imports (agent core, tools, widgets)
        kernel.ok("import ipywidgets")
        kernel.open_widget_control_comm()
        kernel.wait_for("__import__('ipywidgets').widgets.widget.Widget._control_comm is not None")
        kernel.ok("from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message\n"
                  "faux = register_faux_provider()\n"
                  "faux.set_responses([faux_assistant_message('hi')] * 2)\n"
                  "%config AgentMagics.model = 'faux/faux-1'")
        first = round_trip(kernel, "%%agent\nhello\n")
        kernel.wait_for(f"not {RUNTIME}.is_running()")
        second = round_trip(kernel, "%%agent\nhello again\n")
        print(f"first %%agent cell round trip (lazy imports): {first * 1000:.0f} ms; "
              f"second: {second * 1000:.0f} ms")
    finally:
        kernel.shutdown()


def streaming_latency(n: int) -> None:
    kernel = Kernel()
    try:
        kernel.ok("import ipywidgets")
        kernel.open_widget_control_comm()
        kernel.wait_for("__import__('ipywidgets').widgets.widget.Widget._control_comm is not None")
        idle = [round_trip(kernel, "1+1") for _ in range(n)]
        kernel.ok("%load_ext pi_notebook\n"
                  "%config AgentMagics.wait_for_runs = False\n"
                  "from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message\n"
                  "faux = register_faux_provider(tokens_per_second=None)\n"  # unpaced: full speed
                  "faux.set_responses([faux_assistant_message('streaming token ' * 20000)] * 200)")
        kernel.ok("%agent model faux/faux-1")
        kernel.ok("%%agent\nstream as fast as you can\n")
        steer, plain = [], []
        for i in range(n):
            steer.append(round_trip(kernel, f"%steer note {i}"))
            plain.append(round_trip(kernel, "1+1"))
        still_running = kernel.ev(f"{RUNTIME}.is_running()")
        flushes = kernel.ev(f"{RUNTIME}.runs.latest.view.flush_count")
        kernel.ok("%agent abort")
        print(f"idle kernel, 1+1:            {summary(idle)}")
        print(f"while streaming, %steer:     {summary(steer)}   target <= 50 ms "
              f"(ratio {statistics.median(steer) / 0.05:.2f})")
        print(f"while streaming, 1+1:        {summary(plain)}   target <= 50 ms "
              f"(ratio {statistics.median(plain) / 0.05:.2f})")
        print(f"  agent still streaming at the end: {still_running}; view flushes so far: {flushes}")
    finally:
        kernel.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30, help="samples per measurement")
    args = parser.parse_args()
    versions = Kernel()
    try:
        print("kernel:", versions.ev("{m: __import__(m).__version__ for m in ('ipykernel', 'IPython', 'ipywidgets')}"))
    finally:
        versions.shutdown()
    load_time()
    streaming_latency(args.n)


if __name__ == "__main__":
    main()
