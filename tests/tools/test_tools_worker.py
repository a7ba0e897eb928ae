"""Synchronous agent code on a worker thread (in-process shell; kernel-level tests are in
test_tools_agent_interrupt.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from typing import Any

import pytest

from pi_notebook.ai.abort import AbortController
from pi_notebook.tools.interrupt import ToolInterrupt, _sigint_handler, forward_sigint
from pi_notebook.tools.python_tool import run_code
from tools_helpers import get_shell, routed


async def test_sync_statements_run_on_a_worker_await_statements_on_the_loop() -> None:
    shell = get_shell()
    code = ("import asyncio, threading\nbefore = threading.current_thread().name\n"
            "during = await asyncio.sleep(0, threading.current_thread().name)\n"
            "after = threading.current_thread().name\n(before, during, after)")
    with routed():
        result = await run_code(shell, code)
    assert result.error is None
    before, during, after = shell.user_ns["before"], shell.user_ns["during"], shell.user_ns["after"]
    assert before.startswith("pi-notebook-agent-code") and after.startswith("pi-notebook-agent-code")
    assert during == "MainThread"  # compiled per statement: only the awaiting one is on the loop
    assert before in result.value.data["text/plain"]


async def test_loop_stays_free_and_output_streams_while_sync_code_runs() -> None:
    chunks: list[tuple[float, str]] = []
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.02)

    code = "import time\nfor i in range(10):\n    print('line', i)\n    time.sleep(0.05)"
    tick_task = asyncio.ensure_future(ticker())
    try:
        with routed() as (out, _):
            started = time.monotonic()
            result = await run_code(get_shell(), code, stream_interval_s=0.05,
                                    on_stream=lambda n, t: chunks.append((time.monotonic(), t)))
            ended = time.monotonic()
    finally:
        tick_task.cancel()
    assert result.stdout == "".join(f"line {i}\n" for i in range(10)) and out.getvalue() == ""
    assert "".join(t for _, t in chunks) == result.stdout
    # the loop ran meanwhile, and text reached on_stream before the code ended
    assert len([t for t in ticks if started < t < ended]) >= 10
    assert len([t for t, _ in chunks if t < ended - 0.1]) >= 3


async def test_sigint_interrupts_awaiting_code_too() -> None:
    # the handler stays installed for the whole execution, not only while code executes
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    with routed():
        result = await run_code(get_shell(), "import asyncio\nawait asyncio.sleep(30)")
    assert result.interrupted and "kernel interrupt" in result.error.evalue


async def test_blocked_worker_is_abandoned_and_its_late_output_dropped() -> None:
    shell = get_shell()
    shell.user_ns.pop("late_done", None)
    controller = AbortController()
    threading.Timer(0.2, controller.abort).start()
    code = "import time\nprint('early')\ntime.sleep(1.2)\nprint('LATE')\nlate_done = True"
    with routed() as (out, err):
        started = time.monotonic()
        result = await run_code(shell, code, signal=controller.signal)
        elapsed = time.monotonic() - started
        await asyncio.sleep(1.3)  # the sleep has returned by now
    assert result.interrupted and "does not respond to interrupts" in result.error.evalue
    assert result.stdout == "early\n" and elapsed < 1.2
    # the pending interrupt fired when the call returned: the rest never ran, nothing leaked
    assert "late_done" not in shell.user_ns
    assert "LATE" not in out.getvalue() + err.getvalue() and "Traceback" not in err.getvalue()


async def test_cancelling_the_caller_stops_worker_code() -> None:
    shell = get_shell()
    shell.user_ns["spins"] = 0
    with routed():
        task = asyncio.ensure_future(run_code(shell, "while True:\n    spins += 1"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.1)
        spins = shell.user_ns["spins"]
        await asyncio.sleep(0.2)
    assert spins > 0 and shell.user_ns["spins"] == spins  # the loop stopped


class _FakeKernel:
    saved_sigint_handler: Any = None


async def test_sigint_guard_restores_the_previous_handler() -> None:
    def mine(*_: Any) -> None:
        pass

    previous = signal.signal(signal.SIGINT, mine)
    try:
        run = ToolInterrupt(asyncio.get_running_loop())
        with forward_sigint(run, _FakeKernel()):
            assert signal.getsignal(signal.SIGINT) is _sigint_handler
            with forward_sigint(ToolInterrupt(asyncio.get_running_loop())):  # a parallel call
                pass
            assert signal.getsignal(signal.SIGINT) is _sigint_handler
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, previous)


async def test_sigint_guard_ending_inside_a_request_fixes_the_kernels_saved_handler() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # ipykernel while idle
    try:
        kernel = _FakeKernel()
        run = ToolInterrupt(asyncio.get_running_loop())
        with forward_sigint(run, kernel):
            # a request starts: ipykernel's pre_handler_hook saves ours, installs its own
            kernel.saved_sigint_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
        # the tool ended during the request: ipykernel's handler stays, and after the request
        # ipykernel will put back the idle handler, not ours
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert kernel.saved_sigint_handler is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


async def test_switch_interval_is_shorter_while_a_worker_runs() -> None:
    # (put back when no worker runs: checked in a fresh kernel, test_tools_agent_interrupt.py;
    # here workers abandoned by earlier tests may still be sleeping)
    with routed():
        result = await run_code(get_shell(), "import sys\nsys.getswitchinterval()")
    assert float(result.value.data["text/plain"]) <= 0.0005


async def test_input_and_getpass_are_refused_with_a_clear_message() -> None:
    import builtins
    import getpass

    shell = get_shell()
    original = builtins.input, getpass.getpass
    with routed():
        asked = await run_code(shell, "input('your name? ')")
        secret = await run_code(shell, "import getpass\ngetpass.getpass()")
    for result in (asked, secret):
        assert result.error.ename == "StdinNotImplementedError"
        assert "not available to agent code" in result.error.evalue
    assert (builtins.input, getpass.getpass) == original  # put back with the proxies


async def test_future_imports_apply_to_the_rest_of_the_cell() -> None:
    code = ("from __future__ import annotations\n"
            "def annotated(x: NotDefinedAnywhere) -> None: pass\n"
            "annotated.__annotations__['x']")
    with routed():
        result = await run_code(get_shell(), code)
    assert result.error is None and result.value.data["text/plain"] == "'NotDefinedAnywhere'"
