from __future__ import annotations

import asyncio
import base64
import os
import signal
import threading
import time
from typing import Any

import pytest

from pi_notebook.agent.types import AgentToolResult
from pi_notebook.ai.abort import AbortController
from pi_notebook.ai.types import ImageContent, TextContent
from pi_notebook.tools import make_notebook_tools
from pi_notebook.tools.python.python_tool import PythonToolSettings, make_python_tool, result_content, run_code
from pi_notebook.tools.output.updates import DisplayOutput, PythonCallDetails, ResultOutput, StreamOutput, parse_call_details
from helpers.shell import get_shell, names_kept, routed

CANARY = "sk-canary-python-tool-42424242"


def text_of(content: list[Any]) -> str:
    return "\n".join(c.text for c in content if isinstance(c, TextContent))


async def test_value_namespace_and_history_untouched() -> None:
    shell = get_shell()
    shell.user_ns["base"] = 20
    before = (shell.execution_count, list(shell.user_ns["In"]), dict(shell.user_ns["Out"]),
              shell.user_ns.get("_"))
    with routed(shell) as (out, _):
        result = await run_code(shell, "made_by_tool = base + 1\nprint('hi')\nmade_by_tool * 2")
    assert result.value == ResultOutput(data={"text/plain": "42"}, metadata={})
    assert result.stdout == "hi\n" and result.error is None and not result.is_error
    assert shell.user_ns["made_by_tool"] == 21
    after = (shell.execution_count, list(shell.user_ns["In"]), dict(shell.user_ns["Out"]),
             shell.user_ns.get("_"))
    assert after == before
    assert out.getvalue() == ""  # nothing leaked to the real stream


async def test_trailing_semicolon_hides_value() -> None:
    with routed():
        result = await run_code(get_shell(), "1 + 1;")
    assert result.value is None


async def test_top_level_await_and_streams() -> None:
    chunks: list[tuple[str, str]] = []
    code = "import asyncio\nfor i in range(3):\n    print(i)\n    await asyncio.sleep(0.01)\nawait asyncio.sleep(0, 'done')"
    with routed():
        result = await run_code(get_shell(), code, on_stream=lambda n, t: chunks.append((n, t)))
    assert result.stdout == "0\n1\n2\n"
    assert result.value.data["text/plain"] == "'done'"
    assert "".join(t for n, t in chunks if n == "stdout") == "0\n1\n2\n"


async def test_magics_run() -> None:
    with routed():
        result = await run_code(get_shell(), "%time 1 + 1\n")
    assert "Wall time" in result.stdout


async def test_stream_updates_are_coalesced() -> None:
    chunks: list[str] = []
    code = "import time\nfor i in range(400):\n    print('line', i)\n    time.sleep(0.001)\n"
    with routed():
        result = await run_code(get_shell(), code, on_stream=lambda n, t: chunks.append(t))
    assert "".join(chunks) == result.stdout
    assert result.stdout.count("\n") == 400
    # at most ~10 per second (plus the first and the final flush)
    assert len(chunks) <= result.elapsed_s * 10 + 3, (len(chunks), result.elapsed_s)


async def test_error_has_type_message_and_traceback() -> None:
    with routed():
        result = await run_code(get_shell(), "def inner():\n    raise ValueError('bad value')\ninner()")
    assert result.is_error and not result.interrupted
    err = result.error
    assert err.ename == "ValueError" and err.evalue == "bad value"
    traceback_text = "\n".join(err.traceback)
    assert "raise ValueError('bad value')" in traceback_text and "\x1b[" not in traceback_text
    assert "pi_notebook" not in traceback_text  # our own frames are cut
    text = text_of(result_content(result, PythonToolSettings()))
    assert "[error] ValueError: bad value" in text and "inner()" in text


async def test_syntax_error() -> None:
    with routed():
        result = await run_code(get_shell(), "def broken(:\n    pass")
    assert result.error.ename == "SyntaxError"


async def _interrupt_run(code: str, trigger: str) -> tuple[Any, float]:
    shell = get_shell()
    controller = AbortController()
    kwargs: dict[str, Any] = {}
    if trigger == "abort":
        threading.Timer(0.3, controller.abort).start()
        kwargs["signal"] = controller.signal
    elif trigger == "timeout":
        kwargs["timeout_s"] = 0.3
    elif trigger == "sigint":
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    started = time.monotonic()
    with routed():
        result = await run_code(shell, code, **kwargs)
    return result, time.monotonic() - started


_BUSY = "while True: pass"
_SLEEP = "import time\ntime.sleep(30)"
_AWAIT = "import asyncio\nawait asyncio.sleep(30)"


# A SIGINT (kernel interrupt) reaches tool code that is executing; awaiting code is left to the
# handler underneath (ipykernel ignores SIGINT while idle), so that pair is not listed.
@pytest.mark.parametrize(("code", "trigger"), [
    (_BUSY, "abort"), (_BUSY, "timeout"), (_BUSY, "sigint"),
    (_SLEEP, "abort"), (_SLEEP, "timeout"), (_SLEEP, "sigint"),
    (_AWAIT, "abort"), (_AWAIT, "timeout"),
])
async def test_interrupts(code: str, trigger: str) -> None:
    handler_before = signal.getsignal(signal.SIGINT)
    result, elapsed = await _interrupt_run(code, trigger)
    assert result.interrupted and result.is_error
    assert result.error.ename == "KeyboardInterrupt"
    assert result.timed_out == (trigger == "timeout")
    assert elapsed < 5, elapsed  # the goal is 1 s; this bound only catches hangs
    assert signal.getsignal(signal.SIGINT) is handler_before
    text = text_of(result_content(result, PythonToolSettings()))
    assert "[interrupted]" in text


async def test_abort_before_start_runs_nothing() -> None:
    shell = get_shell()
    shell.user_ns.pop("ran_anyway", None)
    controller = AbortController()
    controller.abort()
    with routed():
        result = await run_code(shell, "ran_anyway = True", signal=controller.signal)
    assert result.interrupted and "ran_anyway" not in shell.user_ns


async def test_interrupt_swallowing_code_is_kicked_again() -> None:
    # (multi-line inner loop: CPython 3.11 does not catch an interrupt of a one-line
    # `while True: pass` that sits inside try/except at module level)
    code = ("import time\ncaught = 0\nwhile True:\n    try:\n        while True:\n            n = 1\n"
            "    except KeyboardInterrupt:\n        caught += 1\n        if caught > 1: raise\n")
    with routed():
        result = await run_code(get_shell(), code, timeout_s=0.2)
    assert result.interrupted and get_shell().user_ns["caught"] == 2


async def test_late_signal_never_escapes_after_the_tool_finished() -> None:
    hits: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda *a: hits.append(1))
    try:
        controller = AbortController()
        with routed():
            result = await run_code(get_shell(), "x_late = 1", signal=controller.signal, timeout_s=0.05)
        controller.abort()  # after the run: nothing to interrupt, nothing raised
        await asyncio.sleep(0.2)  # the timeout watchdog would have fired by now
        assert result.error is None and hits == []
    finally:
        signal.signal(signal.SIGINT, previous)


async def test_cancelling_the_caller_propagates() -> None:
    with routed():
        task = asyncio.ensure_future(run_code(get_shell(), "import asyncio\nawait asyncio.sleep(30)"))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_matplotlib_figure_is_displayed_closed_and_sent_as_image() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    displays: list[dict] = []
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('tool fig')"
    with routed():
        result = await run_code(get_shell(), code, on_display=lambda d, m: displays.append(d))
    assert plt.get_fignums() == []
    assert len(displays) == 1 and "image/png" in displays[0]
    assert base64.b64decode(displays[0]["image/png"])[:4] == b"\x89PNG"
    content = result_content(result, PythonToolSettings(max_images=2))
    assert [type(c) for c in content] == [TextContent, ImageContent]
    assert content[1].mime_type == "image/png"
    no_images = result_content(result, PythonToolSettings(model_accepts_images=False))
    assert len(no_images) == 1 and "does not take images" in no_images[0].text


MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun"]
PLOT_MONTHS = ("totals = sales.groupby('month', sort=False)['total'].sum()\n"
               "fig, ax = plt.subplots()\nax.bar(totals.index, totals.values)\n"
               "ax.set_title('Monthly totals');")


@pytest.fixture(autouse=True)
def _names_kept() -> Any:
    # (the shell is shared by the whole suite: what a test's code defines must not reach the next)
    with names_kept(get_shell()):
        yield


def _monthly_sales(shell: Any) -> None:
    import pandas as pd

    shell.user_ns["sales"] = pd.DataFrame({"month": MONTHS * 2, "total": [3, 5, 2, 7, 9, 4] * 2})


async def test_a_figures_words_reach_the_model_beside_or_instead_of_its_image() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from pi_notebook.tools.output.figure_text import FIGURE_TEXT_MIME

    shell = get_shell()
    _monthly_sales(shell)
    displays: list[dict] = []
    code = "import matplotlib.pyplot as plt\n" + PLOT_MONTHS
    with routed():
        result = await run_code(shell, code, on_display=lambda d, m: displays.append(d))
    assert len(displays) == 1 and "image/png" in displays[0]
    assert "x ticks: Jan | Feb | Mar | Apr | May | Jun" in displays[0][FIGURE_TEXT_MIME]
    text_only = text_of(result_content(result, PythonToolSettings(model_accepts_images=False)))
    assert "does not take images" in text_only
    assert "[display 1: the figure's text]\naxes 1: title: Monthly totals" in text_only
    assert "x ticks: Jan | Feb | Mar | Apr | May | Jun" in text_only
    with_image = result_content(result, PythonToolSettings(max_images=2))
    assert [type(c) for c in with_image] == [TextContent, ImageContent]
    assert "x ticks: Jan | Feb | Mar | Apr | May | Jun" in text_of(with_image)


async def test_a_figure_without_words_is_shown_as_before() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from pi_notebook.tools.output.figure_text import FIGURE_TEXT_MIME

    code = ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.imshow([[0, 1], [1, 0]])\n"
            "ax.set_axis_off()\nplt.figure();")  # and a figure with no Axes at all
    displays: list[dict] = []
    with routed():
        result = await run_code(get_shell(), code, on_display=lambda d, m: displays.append(d))
    assert result.error is None and len(displays) == 2
    assert all("image/png" in d and FIGURE_TEXT_MIME not in d for d in displays)
    text = text_of(result_content(result, PythonToolSettings(model_accepts_images=False)))
    assert text.count("does not take images") == 2 and "the figure's text" not in text


async def test_a_figure_the_code_shows_itself_carries_its_words_only_in_agent_code() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from IPython.core.pylabtools import select_figure_formats
    from matplotlib.figure import Figure

    from pi_notebook.tools.output.figure_text import FIGURE_TEXT_MIME

    shell = get_shell()
    _monthly_sales(shell)
    png = shell.display_formatter.formatters["image/png"]
    code = ("import matplotlib.pyplot as plt\nfrom IPython.display import display\n" + PLOT_MONTHS
            + "\ndisplay(fig)\nplt.close(fig)")
    try:
        with routed():
            # what the inline backend sets up on pyplot's import, after %load_ext: display(fig)
            # draws (and every formatter's Figure printer is taken out first)
            select_figure_formats(shell, {"png"})
            result = await run_code(shell, code)
            own = plt.figure()
            own.add_subplot().set_title("the user's own")
            user_bundle, _ = shell.display_formatter.format(own)  # not agent code: no words
            plt.close(own)
    finally:
        png.pop(Figure, None)
    assert "image/png" in user_bundle and FIGURE_TEXT_MIME not in user_bundle
    text_only = text_of(result_content(result, PythonToolSettings(model_accepts_images=False)))
    assert "x ticks: Jan | Feb | Mar | Apr | May | Jun" in text_only
    assert FIGURE_TEXT_MIME not in shell.display_formatter.formatters  # removed with the capture


async def test_images_are_capped_and_downscaled() -> None:
    pytest.importorskip("PIL")
    from PIL import Image
    import io

    def png(w: int, h: int) -> str:
        buf = io.BytesIO()
        Image.new("RGB", (w, h), (200, 10, 10)).save(buf, format="PNG")
        return base64.b64encode(buf.getvalue()).decode()

    shell = get_shell()
    shell.user_ns["_pngs"] = [png(800, 600), png(20, 20), png(20, 20)]
    code = ("from IPython.display import display\nfor p in _pngs:\n"
            "    display({'image/png': p, 'text/plain': 'img'}, raw=True)")
    with routed():
        result = await run_code(shell, code)
    content = result_content(result, PythonToolSettings(max_images=2, image_pixel_budget=10_000))
    images = [c for c in content if isinstance(c, ImageContent)]
    assert len(images) == 2
    with Image.open(io.BytesIO(base64.b64decode(images[0].data))) as img:
        assert img.width * img.height <= 10_000 and abs(img.width / img.height - 800 / 600) < 0.05
    assert "at most 2 images" in text_of(content)


async def test_dataframe_value_summary() -> None:
    pd = pytest.importorskip("pandas")
    shell = get_shell()
    shell.user_ns["pd"] = pd
    with routed():
        result = await run_code(shell, "pd.DataFrame({'a': range(100), 'b': ['x'] * 100})")
    text = text_of(result_content(result, PythonToolSettings()))
    assert "100 rows x 2 columns" in text and "int64" in text and "first 5 and last 3 of 100 rows" in text
    assert "<table" not in text and "\n50 " not in text and "\n99 " in text  # head and tail, not the middle
    assert "text/html" in result.value.data  # the view still gets the rich bundle


async def test_value_preference_and_no_html() -> None:
    code = '''
class Rich:
    def _repr_html_(self): return "<b>HTML ONLY</b>"
    def _repr_markdown_(self): return "**markdown wins**"
class Llm(Rich):
    def _repr_llm_(self): return "llm text wins"
class HtmlOnly:
    def _repr_html_(self): return "<script>alert(1)</script>"
    def __repr__(self): return "HtmlOnly()"
'''
    shell = get_shell()
    with routed():
        await run_code(shell, code)
        rich = await run_code(shell, "Rich()")
        llm = await run_code(shell, "Llm()")
        html = await run_code(shell, "from IPython.display import HTML, display\ndisplay(HTML('<i>x</i>'))")
        js = await run_code(shell, "HtmlOnly()")
    settings = PythonToolSettings()
    assert "**markdown wins**" in text_of(result_content(rich, settings))
    assert "llm text wins" in text_of(result_content(llm, settings))
    html_text = text_of(result_content(html, settings))
    assert "<i>" not in html_text
    js_text = text_of(result_content(js, settings))
    assert "<script>" not in js_text and "HtmlOnly()" in js_text


async def test_output_budget_head_and_tail() -> None:
    code = "for i in range(5000):\n    print('row', i)"
    with routed():
        result = await run_code(get_shell(), code)
    text = text_of(result_content(result, PythonToolSettings(max_output_chars=2000)))
    assert "row 0\n" in text and "row 4999" in text and "characters" in text and "cut" in text
    assert len(text) < 2600
    assert result.stdout.count("\n") == 5000  # details keep everything (under their cap)


async def test_ansi_is_stripped_for_the_model() -> None:
    with routed():
        result = await run_code(get_shell(), "print('\\x1b[31mred\\x1b[0m plain')\nprint('a\\rb')")
    text = text_of(result_content(result, PythonToolSettings()))
    assert "\x1b" not in text and "red plain" in text and "\nb" in text


async def test_secrets_never_leave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SERVICE_API_KEY", CANARY)
    shell = get_shell()
    events: list[AgentToolResult] = []
    tool = make_python_tool(shell, PythonToolSettings())
    code = ("import os, sys\nprint(os.environ)\nsys.stdout.write(os.environ['FAKE_SERVICE_API_KEY'][:6])\n"
            "sys.stdout.write(os.environ['FAKE_SERVICE_API_KEY'][6:] + '\\n')\n"
            "from IPython.display import display\ndisplay({'text/plain': os.environ['FAKE_SERVICE_API_KEY']}, raw=True)\n"
            "raise RuntimeError(os.environ['FAKE_SERVICE_API_KEY'])")
    with routed() as (out, err):
        result = await tool.execute("call-1", {"code": code}, None, events.append)
        value = await tool.execute("call-2", {"code": "os.environ['FAKE_SERVICE_API_KEY']"}, None, events.append)
        # a figure's words: whole, and straddling the point where a long label is clipped
        figure = await tool.execute("call-3", {"code": (
            "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.title(os.environ['FAKE_SERVICE_API_KEY'])\n"
            "plt.xlabel('x' * 72 + os.environ['FAKE_SERVICE_API_KEY'])\nplt.plot([1, 2])")}, None, events.append)
    everything = (repr(result.model_dump()) + repr(value.model_dump()) + repr(figure.model_dump())
                  + repr([e.model_dump() for e in events]))
    assert "title: [redacted]" in figure.content[0].text
    assert CANARY[:4] not in everything
    assert CANARY not in everything and CANARY not in out.getvalue() + err.getvalue()
    stdout = "".join(o.text for o in result.details.outputs if o.kind == "stream" and o.name == "stdout")
    error = result.details.outputs[-1]
    assert "[redacted]" in stdout and error.kind == "error" and "[redacted]" in error.evalue
    assert value.details.outputs[-1].kind == "result"
    assert value.details.outputs[-1].data["text/plain"] == "'[redacted]'"


async def test_tool_updates_and_result_shape() -> None:
    events: list[AgentToolResult] = []
    tool = make_python_tool(get_shell(), PythonToolSettings())
    assert tool.name == "python" and tool.parameters["required"] == ["code"]
    code = ("print('out')\nfrom IPython.display import display\n"
            "display({'text/markdown': '# Title', 'text/plain': 'Title'}, raw=True)\n"
            "print('after', file=__import__('sys').stderr)\n7")
    with routed():
        result = await tool.execute("c1", {"code": code}, None, events.append)
    assert all(isinstance(e.details, (StreamOutput, DisplayOutput)) and e.content == [] for e in events)
    kinds = [e.details.kind for e in events]
    assert kinds.index("display") > 0 and set(kinds) == {"stream", "display"}
    first = kinds.index("display")
    assert "".join(e.details.text for e in events[:first]) == "out\n"
    assert events[first].details.data["text/markdown"] == "# Title"
    details = result.details
    assert isinstance(details, PythonCallDetails) and details.code == code
    # the real outputs, in the order they came: stream, display, stream, result
    assert [(o.kind, getattr(o, "name", None)) for o in details.outputs] == [
        ("stream", "stdout"), ("display", None), ("stream", "stderr"), ("result", None)]
    assert details.outputs[0].text == "out\n" and details.outputs[2].text == "after\n"
    assert details.outputs[3].data["text/plain"] == "7"
    assert not (details.interrupted or details.timed_out or details.aborted) and details.elapsed_s >= 0
    # the stored (JSON) form reads back as the same record
    assert parse_call_details(details.model_dump(mode="json")) == details
    assert result.is_error is False
    text = text_of(result.content)
    assert "[stdout]\nout" in text and "# Title" in text and "[value]\n7" in text and "elapsed" in text


async def test_bad_arguments_are_a_clear_error() -> None:
    tool = make_python_tool(get_shell())
    with pytest.raises(ValueError, match="code"):
        await tool.execute("c1", {"code": 3}, None, None)


async def test_make_notebook_tools_takes_typed_settings_or_a_callable() -> None:
    tools = make_notebook_tools(get_shell(), PythonToolSettings(max_output_chars=111))
    assert [t.name for t in tools] == ["python", "list_variables", "inspect_variable"]
    current = {"settings": PythonToolSettings(max_output_chars=300)}
    python = make_notebook_tools(get_shell(), lambda: current["settings"])[0]
    code = "print('x' * 5000)"
    with routed():
        first = await python.execute("c1", {"code": code}, None, None)
        current["settings"] = PythonToolSettings(max_output_chars=3000)
        second = await python.execute("c2", {"code": code}, None, None)
    # read at each call: the second call has the bigger budget
    assert len(text_of(first.content)) < 600 < 3000 < len(text_of(second.content))
    with pytest.raises(TypeError, match="PythonToolSettings"):
        make_notebook_tools(get_shell(), {"unused": True})[0].execute  # noqa: B018
        await make_notebook_tools(get_shell(), {"unused": True})[0].execute("c", {"code": "1"}, None, None)


async def test_kept_head_and_tail_leave_no_secret_fragment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGE_TOKEN", CANARY)
    shell = get_shell()
    # the secret straddles the end of the kept head (cap 1000) and the start of the kept tail
    code = ("import os\nk = os.environ['EDGE_TOKEN']\n"
            "print('a' * 990 + k + 'b' * 5000 + k[:5] + 'c' * 30 + k + 'z' * 10, end='')")
    with routed():
        result = await run_code(shell, code, max_detail_chars=1000)
    assert "not kept" in result.stdout
    for size in range(6, len(CANARY)):
        for start in range(len(CANARY) - size + 1):
            assert CANARY[start:start + size] not in result.stdout
    assert result.stdout.endswith("[redacted]" + "z" * 10)


async def test_exit_cannot_stop_the_kernel() -> None:
    shell = get_shell()
    asked: list[int] = []

    def ask_exit() -> None:  # what ipykernel's shell does: schedules the kernel's stop
        asked.append(1)

    shell.ask_exit = ask_exit  # the plain InteractiveShell has none
    try:
        with routed(shell):
            result = await run_code(shell, "get_ipython().ask_exit()")
            shell.ask_exit()  # outside agent code it still works
        assert asked == [1]
        assert result.error.ename == "SystemExit" and "keeps running" in result.error.evalue
        assert shell.__dict__["ask_exit"] is ask_exit  # the guard left with the proxies
    finally:
        del shell.ask_exit


async def test_huge_output_is_bounded_live_and_in_details() -> None:
    chunks: list[str] = []
    code = "for i in range(200_000):\n    print('some output line', i)"
    with routed():
        result = await run_code(get_shell(), code, on_stream=lambda n, t: chunks.append(t),
                                max_detail_chars=50_000)
    live = "".join(chunks)
    assert len(live) < 50_200 and "not shown live" in live
    assert len(result.stdout) < 100_200 and "not kept" in result.stdout
    assert result.stdout.startswith("some output line 0\n")
    assert result.stdout.endswith("some output line 199999\n")
    assert result.stdout_total > 4_000_000


async def test_parallel_calls_keep_their_own_output_and_interrupts() -> None:
    shell = get_shell()
    first, second = AbortController(), AbortController()
    code_a = "import asyncio\nfor i in range(4):\n    print('A', i)\n    await asyncio.sleep(0.05)\nawait asyncio.sleep(30)"
    code_b = "import asyncio\nfor i in range(4):\n    print('B', i)\n    await asyncio.sleep(0.05)\n'B done'"
    with routed() as (out, _):
        task_a = asyncio.ensure_future(run_code(shell, code_a, signal=first.signal))
        task_b = asyncio.ensure_future(run_code(shell, code_b, signal=second.signal))
        result_b = await task_b
        first.abort()
        result_a = await task_a
    assert result_a.stdout == "".join(f"A {i}\n" for i in range(4)) and result_a.interrupted
    assert result_b.stdout == "".join(f"B {i}\n" for i in range(4)) and not result_b.is_error
    assert result_b.value.data["text/plain"] == "'B done'"
    assert out.getvalue() == ""


async def test_the_model_learns_what_a_quiet_assignment_bound_and_which_key_was_meant() -> None:
    pd = pytest.importorskip("pandas")
    shell = get_shell()
    shell.user_ns["sales_df"] = pd.DataFrame({"region": ["north", "south"], "revenue": [3.5, 4.5]})
    tool = make_python_tool(shell, PythonToolSettings())
    try:
        with routed():
            quiet = await tool.execute("c1", {"code": "by_region = sales_df.groupby('region')['revenue'].sum()"})
            missed = await tool.execute("c2", {"code": "sales_df['revenu'].sum()"})
            shown = await tool.execute("c3", {"code": "also = 1\nprint('hi')"})
    finally:
        for name in ("sales_df", "by_region", "also"):
            shell.user_ns.pop(name, None)
    text = quiet.content[0].text
    assert text.startswith("(no output; assigned)\nby_region =\n") and "north" in text and "4.5" in text
    assert "[error] KeyError: 'revenu' (did you mean 'revenue' (a column of sales_df)?)" in missed.content[0].text
    assert "assigned" not in shown.content[0].text  # output was shown: nothing added
    # the user's copy (details) is the real output only
    assert "did you mean" not in str(missed.details) and "assigned" not in str(quiet.details)


async def test_the_result_keeps_typed_records_that_details_hands_on() -> None:
    # no dict round trip: the value and the error are the records the view and export read
    from pi_notebook.tools.output.updates import ErrorOutput

    with routed():
        ok = await run_code(get_shell(), "6 * 7")
        bad = await run_code(get_shell(), "raise KeyError('region')")
    assert isinstance(ok.value, ResultOutput) and ok.details().outputs[-1] is ok.value
    assert isinstance(bad.error, ErrorOutput) and bad.details().outputs[-1] is bad.error
    assert bad.error.ename == "KeyError" and any("KeyError" in line for line in bad.error.traceback)
