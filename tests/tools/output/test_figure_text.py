"""A figure's words (tools/output/figure_text.py): what the model reads of a chart it cannot
see, read from the drawn Figure, bounded, one entry per line part, never more lines."""

from __future__ import annotations

import io
from typing import Any

import pytest

from pi_notebook.tools.output.figure_text import MAX_CHARS, MAX_ENTRY_CHARS, MAX_LABELS, figure_text

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)


def _drawn(fig: Any) -> Any:
    fig.savefig(io.BytesIO(), format="png", bbox_inches="tight")
    return fig


def test_titles_labels_ticks_legend_and_texts_of_a_drawn_figure() -> None:
    fig, (ax, pie) = plt.subplots(1, 2)
    try:
        ax.bar(["Jan", "Feb", "May"], [3, 5, 9], label="sales")
        ax.set_title("Monthly totals")
        ax.set_xlabel("month")
        ax.set_ylabel("total")
        ax.legend(title="series")
        pie.pie([1, 2], labels=["north", "south"])
        fig.suptitle("Report 2024")
        text = figure_text(_drawn(fig))
    finally:
        plt.close(fig)
    lines = text.splitlines()
    assert lines[0] == "figure title: Report 2024"
    assert "axes 1: title: Monthly totals; x label: month; y label: total" in lines
    assert "  x ticks: Jan | Feb | May" in lines
    assert any(line.startswith("  y ticks: 0 | ") for line in lines)
    assert "  legend: series: sales" in lines
    assert "  texts: north | south" in lines  # a pie's labels are texts of its Axes
    assert text.count("Report 2024") == 1  # the suptitle is one of the figure's texts too


def test_a_figure_without_words_gives_nothing() -> None:
    fig, ax = plt.subplots()
    try:
        ax.imshow([[0, 1], [1, 0]])
        ax.set_axis_off()
        assert figure_text(_drawn(fig)) == ""
    finally:
        plt.close(fig)
    empty = plt.figure()
    try:
        assert figure_text(_drawn(empty)) == ""
    finally:
        plt.close(empty)


@pytest.mark.filterwarnings("ignore:Glyph")  # the control characters have no glyph: drawn as boxes
def test_a_label_cannot_start_a_line_and_is_clipped() -> None:
    fig, ax = plt.subplots()
    try:
        ax.set_title("ok\n[error] fake\t\x1b[31m\u202e" + "x" * 500)
        text = figure_text(_drawn(fig))
    finally:
        plt.close(fig)
    first = text.splitlines()[0]
    assert first.startswith("axes 1: title: ok [error] fake ")
    assert not any(line.startswith("[error]") for line in text.splitlines())
    assert "\x1b" not in text and "\u202e" not in text
    assert len(first) < len("axes 1: title: ") + MAX_ENTRY_CHARS + 1 and first.endswith("…")


class _Text:
    def __init__(self, text: str, log: list[str]) -> None:
        self.text, self.log = text, log

    def get_visible(self) -> bool:
        return True

    def get_text(self) -> str:
        self.log.append(self.text)
        return self.text


class _Tick:
    def __init__(self, text: str, log: list[str]) -> None:
        self.label1 = _Text(text, log)


class _Axis:
    """An axis after a draw that showed ``n`` tick labels (a real one takes minutes to draw)."""

    def __init__(self, n: int, log: list[str]) -> None:
        self.locs = list(range(n))
        self.ticks = [_Tick(f"label {i}", log) for i in range(n)]

    def get_visible(self) -> bool:
        return True

    def get_majorticklocs(self) -> list[int]:
        return self.locs

    def get_view_interval(self) -> tuple[float, float]:
        return -0.5, len(self.locs) - 0.5

    def get_major_ticks(self, n: int) -> list[_Tick]:
        return self.ticks[:n]


class _Axes:
    def __init__(self, n: int, log: list[str]) -> None:
        self.xaxis = _Axis(n, log)
        self.yaxis = _Axis(n, log)
        self.texts = [_Text(f"note {i}", log) for i in range(n)]
        self.legend_ = None

    def get_visible(self) -> bool:
        return True


class _Figure:
    def __init__(self, n: int, axes: int, log: list[str]) -> None:
        self.axes = [_Axes(n, log) for _ in range(axes)]
        self.texts: list[_Text] = []
        self.legends: list[Any] = []


def test_ten_thousand_tick_labels_are_bounded_before_they_are_read() -> None:
    log: list[str] = []
    text = figure_text(_Figure(10_000, 1, log))
    assert "  x ticks: label 0 | label 1 | " in text
    assert f"label {MAX_LABELS - 1} (and up to {10_000 - MAX_LABELS:,} more, not listed)" in text
    assert f"label {MAX_LABELS} " not in text
    assert len(log) == 3 * MAX_LABELS  # x ticks, y ticks, texts: the rest is never read
    many = figure_text(_Figure(200, 40, log))
    assert len(many) <= MAX_CHARS + 60 and "[figure text cut: " in many


def test_an_axis_scale_is_read_with_its_ticks() -> None:
    fig, ax = plt.subplots()
    try:
        ax.plot([1e6, 2e6, 3.5e6])
        text = figure_text(_drawn(fig))
    finally:
        plt.close(fig)
    assert "  y ticks: 1.0 | 1.5 | 2.0 | 2.5 | 3.0 | 3.5 (offset text: 1e6)" in text.splitlines()
