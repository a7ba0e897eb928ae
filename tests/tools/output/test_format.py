from __future__ import annotations

import base64
import builtins
import io

import pytest

from pi_notebook.tools.output.format import bundle_text, cut, image_size, prepare_image, strip_ansi, terminal_text, value_text


def test_cut_keeps_head_and_tail_with_a_note() -> None:
    text = "".join(f"line {i}\n" for i in range(1000))
    out = cut(text, 300)
    assert out.startswith("line 0\n") and out.endswith("line 999\n")
    assert "characters" in out and "cut" in out and len(out) < 400
    assert cut("short", 300) == "short"


def test_ansi_and_carriage_returns() -> None:
    assert strip_ansi("\x1b[1;31mred\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07") == "red link"
    assert terminal_text("progress 10%\rprogress 100%\ndone\r\n") == "progress 100%\ndone\n"


def test_bundle_preference() -> None:
    assert bundle_text({"text/plain": "p", "text/markdown": "m", "text/llm+plain": "l"}) == "l"
    assert bundle_text({"text/plain": "p", "text/latex": "$x$"}) == "$x$"
    assert bundle_text({"application/json": {"a": 1}, "text/plain": "p"}).replace(" ", "").replace("\n", "") == '{"a":1}'
    assert bundle_text({"text/html": "<b>x</b>", "application/javascript": "alert(1)"}) is None


def test_value_text_prefers_repr_llm() -> None:
    class Thing:
        def _repr_llm_(self) -> str:
            return "for the model"

    assert value_text(Thing(), {"text/plain": "Thing()"}) == "for the model"


def test_image_sizes_from_headers() -> None:
    PIL = pytest.importorskip("PIL.Image")
    for fmt, mime in (("PNG", "image/png"), ("JPEG", "image/jpeg")):
        buf = io.BytesIO()
        PIL.new("RGB", (123, 45)).save(buf, format=fmt)
        assert image_size(buf.getvalue(), mime) == (123, 45)
    assert image_size(b"not an image", "image/png") is None


def test_oversized_image_without_pillow_is_a_placeholder(monkeypatch: pytest.MonkeyPatch) -> None:
    PIL = pytest.importorskip("PIL.Image")
    buf = io.BytesIO()
    PIL.new("RGB", (400, 400)).save(buf, format="PNG")
    b64 = base64.b64encode(buf.getvalue()).decode()
    real_import = builtins.__import__

    def no_pil(name, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pil)
    out = prepare_image(b64, "image/png", 10_000)
    assert isinstance(out, str) and "Pillow" in out and "400x400" in out
    small = prepare_image(b64, "image/png", 1_000_000)  # within budget: sent as is
    assert small == (b64, "image/png", "400x400")
    assert "not a valid image/png image" in prepare_image("%%%", "image/png", 10)


def test_short_pandas_results_are_shown_whole_and_long_ones_head_and_tail() -> None:
    pd = pytest.importorskip("pandas")
    from pi_notebook.tools.output.format import dataframe_summary, series_summary

    described = series_summary(pd.Series([95.0, 143.6, 120.0], name="revenue").describe())
    assert "max      143.6" in described and "values:" in described  # describe()'s 8 lines, all
    long = series_summary(pd.Series(range(100), name="n"))
    assert "first 10 and last 5 of 100 values:" in long and "\n99    99" in long and "\n50 " not in long
    frame = dataframe_summary(pd.DataFrame({"x": range(30)}))
    assert "first 5 and last 3 of 30 rows:" in frame and "29  29" in frame and "\n15 " not in frame
    assert "\nrows:\n" in dataframe_summary(pd.DataFrame({"x": range(12)}))
