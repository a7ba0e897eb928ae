"""Synchronous agent code on a worker thread (in-process shell; kernel-level tests are in
test_interrupt_kernel.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from typing import Any

import pytest

from pi_notebook.ai.abort import AbortController
from pi_notebook.tools.kernel.interrupt import ToolInterrupt, _sigint_handler, forward_sigint
from pi_notebook.tools.python.python_tool import run_code
from helpers.shell import get_shell, routed


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
    # (put back when no worker runs: checked in a fresh kernel, test_interrupt_kernel.py;
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


class _RequestKernel:
    """ipykernel's per-request SIGINT bookkeeping (kernelbase.pre/post_handler_hook)."""

    saved_sigint_handler: Any = None

    def pre_handler_hook(self) -> None:
        self.saved_sigint_handler = signal.signal(signal.SIGINT, signal.default_int_handler)

    def post_handler_hook(self) -> None:
        signal.signal(signal.SIGINT, self.saved_sigint_handler)


async def _spin_with_kernel(kernel: _RequestKernel, during: Any) -> Any:
    """Run `while True: pass` as agent code with ``shell.kernel = kernel``; ``during()`` runs
    on the loop once the code spins; returns the result (an Abort ends a missed Stop)."""
    shell = get_shell()
    had = "kernel" in shell.__dict__
    old = shell.__dict__.get("kernel")
    shell.kernel = kernel
    controller = AbortController()
    try:
        with routed():
            task = asyncio.ensure_future(run_code(shell, "spin_started = True\nwhile True: pass",
                                                  signal=controller.signal))
            while not shell.user_ns.get("spin_started"):
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.1)
            during()
            done, _ = await asyncio.wait({task}, timeout=10)
            if not done:
                controller.abort()  # the Stop was lost: end the code, then fail
            result = await task
    finally:
        shell.user_ns.pop("spin_started", None)
        if had:
            shell.kernel = old
        else:
            del shell.__dict__["kernel"]
    assert done, "the Stop did not reach the code (ended by an Abort after 10 s)"
    assert "kernel interrupt" in result.error.evalue, result.error
    return result


async def test_stop_reaches_code_that_started_during_a_request_which_then_ended() -> None:
    # The tool started inside a request: when the request ended, ipykernel put back the idle
    # handler it had saved (SIG_IGN) over ours, and every Stop was ignored.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # ipykernel while idle
    kernel = _RequestKernel()
    try:
        kernel.pre_handler_hook()  # a request begins (the tool starts within it)

        def request_ends_then_stop() -> None:
            kernel.post_handler_hook()
            os.kill(os.getpid(), signal.SIGINT)

        result = await _spin_with_kernel(kernel, request_ends_then_stop)
        assert result.interrupted
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # the idle handler is back
        assert "pre_handler_hook" not in vars(kernel) and "post_handler_hook" not in vars(kernel)
    finally:
        signal.signal(signal.SIGINT, previous)


async def test_stop_during_a_request_interrupts_the_code_and_the_request() -> None:
    # A Stop that landed while the kernel handled any request (a `%agent status`, a comm
    # message, a frontend's poll: a fifth of the time measured in a kernel) only raised in
    # that request; the agent code kept running.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    kernel = _RequestKernel()
    seen: list[str] = []
    try:
        def stop_during_a_request() -> None:
            kernel.pre_handler_hook()
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1.0)  # the handler runs here, in the request
            except KeyboardInterrupt:
                seen.append("request interrupted")
            finally:
                kernel.post_handler_hook()

        result = await _spin_with_kernel(kernel, stop_during_a_request)
        assert result.interrupted and seen == ["request interrupted"]  # as ipykernel does
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
