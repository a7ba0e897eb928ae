"""One set of traceback rules (tools/output/tracebacks.py) for the model's tool result and the view.

``shorten_traceback`` folds a formatted traceback the way ``trim_traceback`` folds a cell's
frames: the user's frame kept, a run of library frames said in one line. The python tool's
result text and the view's ``fold_traceback`` both go through it.
"""

from __future__ import annotations

from pathlib import Path

from pi_notebook.tools.python.python_tool import PythonToolSettings, result_content
from pi_notebook.tools.python.python_types import ExecutionResult
from pi_notebook.tools.output.tracebacks import shorten_traceback
from pi_notebook.tools.output.updates import ErrorOutput
from pi_notebook.widgets.toolcall import fold_traceback

PANDAS = (Path(__file__).parents[2] / "widgets" / "data" / "pandas_keyerror_traceback.txt").read_text()

PYTHON_TB = """Traceback (most recent call last):
  File "<agent-1>", line 3, in <module>
    g()
  File "<agent-1>", line 2, in g
    json.loads("{")
  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads
    return _default_decoder.decode(s)
  File "/usr/lib/python3.11/json/decoder.py", line 337, in decode
    obj, end = self.raw_decode(s, idx=_w(s, 0).end())
  File "/usr/lib/python3.11/json/decoder.py", line 353, in raw_decode
    obj, end = self.scan_once(s, idx)
json.decoder.JSONDecodeError: Expecting property name: line 1 column 2 (char 1)"""


def _model_text(traceback: str) -> str:
    error = ErrorOutput(ename="KeyError", evalue="'b'", traceback=traceback.split("\n"))
    content = result_content(ExecutionResult(error=error), PythonToolSettings())
    return content[0].text


def test_model_sees_the_users_frame_a_library_line_and_the_exception() -> None:
    text = _model_text(PANDAS)
    assert "----> 3 df['b']" in text and text.rstrip().endswith("[elapsed 0.00 s]")
    assert "... 2 library frames in pandas (innermost: pandas/core/indexes/base.py:3823 in Index.get_loc)" in text
    assert "KeyError: 'b'" in text
    assert "site-packages" not in text and "Could not get source" not in text  # folded away


def test_the_view_keeps_its_summary_without_the_library_line() -> None:
    summary, folded = fold_traceback(PANDAS)
    assert folded and "library frame" not in summary
    assert summary.split("\n")[-1] == "KeyError: 'b'" and "File <agent-3>:3" in summary


def test_python_formatted_frames_fold_by_the_same_rules() -> None:
    short, folded = shorten_traceback(PYTHON_TB, max_lines=5, library_summary=True)
    assert folded
    assert short.split("\n") == [
        "Traceback (most recent call last):",
        '  File "<agent-1>", line 2, in g',
        '    json.loads("{")',
        "... 3 library frames in json (innermost: /usr/lib/python3.11/json/decoder.py:353 in raw_decode)",
        "",
        "json.decoder.JSONDecodeError: Expecting property name: line 1 column 2 (char 1)",
    ]


def test_short_tracebacks_are_kept_whole() -> None:
    assert shorten_traceback("\n" + PYTHON_TB + "\n", max_lines=40) == (PYTHON_TB, False)
    assert "raw_decode" in _model_text(PYTHON_TB) and "library frame" not in _model_text(PYTHON_TB)


def test_without_frames_the_end_is_kept_and_the_characters_are_capped() -> None:
    lines = [f"line {i}" for i in range(100)]
    short, folded = shorten_traceback("\n".join(lines), max_lines=40)
    assert folded and short.split("\n") == ["[... earlier traceback lines cut ...]", *lines[-40:]]
    long_value = "ValueError: " + "x" * 5000
    short, folded = shorten_traceback(PYTHON_TB.rsplit("\n", 1)[0] + "\n" + long_value, max_lines=40,
                                      max_chars=3000)
    assert folded and short.startswith("[... cut ...]") and len(short) <= 3000 + len("[... cut ...]")
    assert short.endswith("x" * 100)
