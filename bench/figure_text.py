"""The cost of a figure's words (``tools/output/figure_text.py``) against the draw they follow.

The python tool draws each figure agent code leaves open to PNG (``savefig``, as
``tools/python/execution.py`` does) and reads its words right after; a figure the code shows
itself is drawn by IPython's image formatter, and read the same way. Here, for a few figures
of growing size, one run times the draw and the reading, and prints the reading's time over
the draw's (the words' share of what showing a figure already costs; lower is better).

    PYTHONPATH=. python bench/figure_text.py
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from pi_notebook.tools.output.figure_text import figure_text

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def monthly_bars() -> Any:
    fig, ax = plt.subplots()
    ax.bar(MONTHS, range(12), label="sales")
    ax.set_title("Monthly totals")
    ax.legend()
    return fig


def grid_of_lines() -> Any:
    fig, axes = plt.subplots(2, 2)
    for n, ax in enumerate(axes.flat):
        for k in range(3):
            ax.plot(range(50), [(i * (k + 1) + n) % 17 for i in range(50)], label=f"series {k}")
        ax.set_title(f"panel {n}")
        ax.legend()
    fig.suptitle("Four panels")
    return fig


def many_categories() -> Any:
    fig, ax = plt.subplots(figsize=(20, 4))
    ax.bar([f"c{n}" for n in range(500)], range(500))
    return fig


def timed(make: Callable[[], Any]) -> tuple[float, float, int]:
    draws, reads = [], []
    for _ in range(3):
        fig = make()
        start = time.perf_counter()
        fig.savefig(io.BytesIO(), format="png", bbox_inches="tight")
        drawn = time.perf_counter()
        words = figure_text(fig)
        reads.append(time.perf_counter() - drawn)
        draws.append(drawn - start)
        plt.close(fig)
    return min(draws), min(reads), len(words)


def main() -> None:
    for name, make in (("12 monthly bars", monthly_bars), ("2x2 panels, 12 lines", grid_of_lines),
                       ("500 category bars", many_categories)):
        draw, read, chars = timed(make)
        print(f"{name:22s} draw {draw * 1e3:8.1f} ms, words {read * 1e3:6.2f} ms ({chars:4d} chars), "
              f"ratio {read / draw:.4f}")


if __name__ == "__main__":
    main()
