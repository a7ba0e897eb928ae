"""Side paths of agent code (in-process shell): exceptions, stream swaps, late output,
OS-level output, figures, bad text, display errors, slow reprs, approvals."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
import time
from typing import Any

import pytest
from helpers.shell import get_shell, routed

from pi_notebook.agent.types import BeforeToolCallContext
from pi_notebook.ai.abort import AbortController
from pi_notebook.ai.types import ToolCall
from pi_notebook.tools import (
    APPROVAL_ENV,
    APPROVAL_POLICIES,
    make_approval_hook,
    make_notebook_tools,
)
from pi_notebook.tools.kernel.capture import LATE_LABEL, RoutedStream
from pi_notebook.tools.python.python_tool import PythonToolSettings, make_python_tool, run_code
from pi_notebook.tools.output.updates import StreamOutput

CANARY = "sk-trust-canary-6Hq3Nw8Zp1Ks6Vd0Lx5J"


def stream_text(result: Any, name: str = "stdout") -> str:
    return "".join(o.text for o in result.details.outputs if o.kind == "stream" and o.name == name)


# --- exceptions are results ------------------------------------------------------------------

@pytest.mark.parametrize("code, ename", [
    ("import asyncio\nraise asyncio.CancelledError('from the code')", "CancelledError"),
    ("import asyncio\nawait asyncio.sleep(0)\nraise asyncio.CancelledError()", "CancelledError"),
    ("import asyncio\nasync def g():\n    f = asyncio.get_running_loop().create_future()\n"
     "    f.cancel()\n    await f\nawait g()", "CancelledError"),
    ("raise SystemExit(3)", "SystemExit"),
    ("raise KeyboardInterrupt('not an abort')", "KeyboardInterrupt"),
    ("raise GeneratorExit()", "GeneratorExit"),
])
async def test_base_exceptions_of_the_code_are_its_error_result(code: str, ename: str) -> None:
    tool = make_python_tool(get_shell(), PythonToolSettings())
    with routed():
        result = await tool.execute("c1", {"code": code}, None, None)
    assert result.is_error is True
    error = result.details.outputs[-1]
    assert error.kind == "error" and error.ename == ename
    assert not result.details.interrupted and not result.details.aborted


async def test_a_cancelled_caller_still_propagates() -> None:
    with routed():
        task = asyncio.ensure_future(run_code(get_shell(), "import asyncio\nawait asyncio.sleep(10)"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_abort_sets_aborted_and_elapsed_is_execution_time() -> None:
    controller = AbortController()
    tool = make_python_tool(get_shell(), PythonToolSettings())
    asyncio.get_running_loop().call_later(0.3, controller.abort)
    with routed():
        result = await tool.execute("c1", {"code": "while True: pass"}, controller.signal, None)
    assert result.details.aborted and result.details.interrupted and not result.details.timed_out
    assert 0.2 < result.details.elapsed_s < 3


# --- stream swaps ------------------------------------------------------------------------------

async def test_redirect_stdout_in_agent_code_stays_in_the_call() -> None:
    shell = get_shell()
    code = ("import contextlib, io, asyncio\nbuf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n"
            "    for i in range(5):\n        print('AGENT', i)\n        await asyncio.sleep(0.02)\n"
            "print('after', len(buf.getvalue()))")

    async def user_cell() -> None:
        for i in range(5):
            print("USER", i)
            await asyncio.sleep(0.02)

    with routed(shell) as (out, _):
        result, _ = await asyncio.gather(run_code(shell, code), user_cell())
        assert isinstance(sys.stdout, RoutedStream)
    user = out.getvalue()
    assert all(f"USER {i}" in user for i in range(5)) and "AGENT" not in user
    assert shell.user_ns["buf"].getvalue() == "".join(f"AGENT {i}\n" for i in range(5))
    assert result.stdout == "after 40\n"


async def test_assigning_sys_stdout_does_not_break_later_cells() -> None:
    shell = get_shell()
    with routed(shell) as (out, _):
        first = await run_code(shell, "import sys, io\nsink = io.StringIO()\nsys.stdout = sink\n"
                                      "print('into sink')\nsys.stdout.getvalue()")
        print("user after")
        second = await run_code(shell, "print('second call')")
        assert isinstance(sys.stdout, RoutedStream)
    assert first.value.data["text/plain"] == "'into sink\\n'"
    assert out.getvalue() == "user after\n" and second.stdout == "second call\n"


async def test_capture_output_in_agent_code_keeps_the_publisher_routed() -> None:
    shell = get_shell()
    with routed(shell):
        proxy = shell.display_pub
        result = await run_code(shell, "from IPython.utils.capture import capture_output\n"
                                       "from IPython.display import display\n"
                                       "with capture_output() as cap:\n    print('hidden')\n    display('shown?')\n"
                                       "len(cap.outputs), cap.stdout")
        assert shell.display_pub is proxy
    assert result.value.data["text/plain"] == "(1, 'hidden\\n')"
    assert result.stdout == ""


# --- late output -------------------------------------------------------------------------------

LATE_CODE = ("import threading, time, os\n"
             "def later():\n    time.sleep(0.3)\n    print('late line', os.environ['TRUST_API_KEY'])\n"
             "threading.Thread(target=later).start()\nprint('on time')")


async def test_late_output_goes_to_the_handler_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRUST_API_KEY", CANARY)
    late: list[tuple[str, Any]] = []
    tool = make_notebook_tools(get_shell(), PythonToolSettings(),
                               on_late_output=lambda call_id, rec: late.append((call_id, rec)))[0]
    with routed() as (out, err):
        result = await tool.execute("call-7", {"code": LATE_CODE}, None, None)
        await asyncio.sleep(0.8)
    assert stream_text(result) == "on time\n"
    assert late and all(call_id == "call-7" and isinstance(rec, StreamOutput) for call_id, rec in late)
    text = "".join(rec.text for _, rec in late)
    assert text == "late line [redacted]\n"
    assert CANARY not in out.getvalue() + err.getvalue() and "late line" not in out.getvalue()


async def test_late_output_without_a_handler_is_labelled_and_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRUST_API_KEY", CANARY)
    with routed() as (out, _):
        await make_python_tool(get_shell(), PythonToolSettings()).execute("c", {"code": LATE_CODE}, None, None)
        await asyncio.sleep(0.8)
    assert out.getvalue() == f"{LATE_LABEL}late line [redacted]\n"


# --- OS-level output -----------------------------------------------------------------------------

@pytest.mark.skipif(os.name != "posix", reason="fd routing is POSIX only")
async def test_fd_output_is_routed_to_the_call_and_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRUST_API_KEY", CANARY)
    code = ("import os, subprocess, sys\nos.system('echo FD-OUT $TRUST_API_KEY')\n"
            "subprocess.run(['sh', '-c', 'echo FD-ERR >&2'])\nos.write(1, b'raw \\xff bytes\\n')")
    saved = os.dup(1)
    try:
        with routed():
            result = await run_code(get_shell(), code)
    finally:
        os.close(saved)
    assert result.stdout == "FD-OUT [redacted]\nraw \ufffd bytes\n"
    assert result.stderr == "FD-ERR\n"
    assert os.fstat(1).st_ino == os.fstat(1).st_ino  # fd 1 is usable again
    print("fd 1 works after the call")


# --- figures, bad text, display errors ---------------------------------------------------------

async def test_figures_are_capped_per_call() -> None:
    plt = pytest.importorskip("matplotlib.pyplot")
    shell = get_shell()
    code = "import matplotlib.pyplot as plt\nfor i in range(40):\n    plt.figure()\n    plt.plot([i, 1])"
    tool = make_python_tool(shell, PythonToolSettings(max_figures=4))
    with routed(shell):
        started = time.monotonic()
        result = await tool.execute("c", {"code": code}, None, None)
        elapsed = time.monotonic() - started
    images = [o for o in result.details.outputs if o.kind == "display" and "image/png" in o.data]
    assert len(images) == 4 and plt.get_fignums() == []
    text = result.content[0].text
    assert "36 more figures" in text and "at most 4 per call" in text
    print(f"40 figures, 4 drawn: {elapsed:.2f} s")


async def test_lone_surrogates_are_replaced_at_capture() -> None:
    with routed():
        result = await make_python_tool(get_shell(), PythonToolSettings()).execute(
            "c", {"code": "print('a\\ud800b')\nraise ValueError('x\\udcff')"}, None, None)
    dumped = json.dumps(result.model_dump(mode="json"), ensure_ascii=False)
    dumped.encode("utf-8")  # would raise on a lone surrogate
    assert stream_text(result) == "a\ufffdb\n" and "x\ufffd" in result.details.outputs[-1].evalue


async def test_a_raising_display_formatter_is_reported_in_the_call() -> None:
    shell = get_shell()
    shell.user_ns["Bad"] = type("Bad", (), {"_repr_html_": lambda self: 1 / 0, "__repr__": lambda self: "Bad()"})
    with routed(shell) as (out, err):
        result = await run_code(shell, "Bad()")
    assert "ZeroDivisionError" in result.stderr and "Error while formatting" in result.stderr
    assert result.value.data["text/plain"] == "Bad()"
    assert out.getvalue() == "" and err.getvalue() == ""


# --- slow and raising reprs --------------------------------------------------------------------

class SlowInC:
    def __repr__(self) -> str:
        time.sleep(30)  # does not return to Python: the worker is left behind
        return "never"


class Busy:
    def __repr__(self) -> str:
        while True:
            pass


class Raising:
    def __repr__(self) -> str:
        raise ValueError("boom")


@pytest.fixture
def odd_namespace():
    shell = get_shell()
    names = {"a_slow": SlowInC(), "b_busy": Busy(), "c_raising": Raising(), "d_fine": 42}
    shell.user_ns.update(names)
    yield shell
    for name in names:
        shell.user_ns.pop(name, None)


async def test_list_variables_is_bounded_and_reports_bad_reprs(odd_namespace) -> None:
    _, listing, inspect = make_notebook_tools(odd_namespace, PythonToolSettings(repr_timeout_s=0.5))
    with routed(odd_namespace):
        started = time.monotonic()
        text = (await listing.execute("c", {}, None, None)).content[0].text
        elapsed = time.monotonic() - started
        raising = (await inspect.execute("c", {"name": "c_raising"}, None, None)).content[0].text
        started = time.monotonic()
        busy = (await inspect.execute("c", {"name": "b_busy"}, None, None)).content[0].text
        busy_s = time.monotonic() - started
    rows = {line.split(" | ")[0]: line for line in text.splitlines()[1:]}
    assert "repr took too long (> 0.5 s)" in rows["a_slow"]
    assert "repr took too long (> 0.5 s)" in rows["b_busy"]
    assert "repr failed: ValueError: boom" in rows["c_raising"] and rows["d_fine"].endswith("| 42")
    assert elapsed < 4.0, elapsed  # two stuck values, each at most limit + grace
    assert "repr failed: ValueError: boom" in raising
    assert "repr took too long" in busy and busy_s < 2.0
    print(f"listing with two stuck reprs: {elapsed:.2f} s")


async def test_list_variables_stops_on_abort(odd_namespace) -> None:
    _, listing, _ = make_notebook_tools(odd_namespace, PythonToolSettings(repr_timeout_s=20))
    controller = AbortController()
    asyncio.get_running_loop().call_later(0.3, controller.abort)
    with routed(odd_namespace):
        started = time.monotonic()
        result = await listing.execute("c", {}, controller.signal, None)
    assert result.is_error and "aborted" in result.content[0].text
    assert time.monotonic() - started < 2.0


# --- approvals ---------------------------------------------------------------------------------

def _Ctx() -> BeforeToolCallContext:
    call = ToolCall(id="c1", name="python", arguments={"code": "print(1)"})
    return BeforeToolCallContext(assistant_message=None, tool_call=call, args={"code": "print(1)"}, context=None)


async def test_approval_fails_closed_when_the_frontend_goes_away() -> None:
    state = {"interactive": True}
    notes: list[str] = []

    async def never(request: Any) -> str:
        await asyncio.sleep(60)
        return "run"

    hook = make_approval_hook(lambda: "ask", never, lambda: state["interactive"], notify=notes.append)
    hook.recheck_s = 0.05
    asyncio.get_running_loop().call_later(0.2, state.update, {"interactive": False})
    started = time.monotonic()
    result = await hook(_Ctx(), None)
    assert result.block and "not interactive" in result.reason and notes
    assert time.monotonic() - started < 1.0


async def test_approval_timeout_and_raising_detector() -> None:
    async def never(request: Any) -> str:
        await asyncio.sleep(60)
        return "run"

    hook = make_approval_hook(lambda: "ask", never, lambda: True, timeout_s=0.2)
    result = await hook(_Ctx(), None)
    assert result.block and "nobody answered" in result.reason

    def broken() -> bool:
        raise RuntimeError("no comm")

    result = await make_approval_hook(lambda: "ask", never, broken)(_Ctx(), None)
    assert result.block and "not interactive" in result.reason


def test_approval_constants_live_in_one_place() -> None:
    import pathlib

    import pi_notebook

    assert APPROVAL_POLICIES == ("ask", "auto", "deny") and APPROVAL_ENV == "PI_NOTEBOOK_APPROVAL"
    root = pathlib.Path(pi_notebook.__file__).parent / "tools"
    defined = [p.name for p in root.rglob("*.py")
               if "APPROVAL_POLICIES = " in p.read_text() or 'environ.get("PI_NOTEBOOK_APPROVAL"' in p.read_text()]
    assert defined == []  # approval.py spells them through the Literal and APPROVAL_ENV


def test_stdout_proxy_reads_go_to_the_replacement_only_inside_the_call() -> None:
    with routed() as (out, _):
        assert isinstance(sys.stdout, RoutedStream)
        sys.stdout.write("plain\n")
        assert not isinstance(sys.stdout, io.StringIO)
    assert out.getvalue() == "plain\n"
