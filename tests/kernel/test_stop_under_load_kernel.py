"""The kernel's Stop ends agent ``while True: pass`` every time, under load.

The failure checked for (1 run in 6, the code left running for over 15 s): a Stop that lands
while the kernel handles a shell request (here: a frontend's poll that takes a moment) only
interrupts that request. Two CPU-burning processes load the machine while six Stops are sent, alternately
while the kernel is idle and while it handles a request. Each must end the code (its loop
counter stops), give the tool an interrupted result and leave the kernel answering.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from helpers.kernel import Kernel, faux_setup

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(400)]

BOUND_S = 15.0  # generous: the goal is about a second; a lost Stop never ends
SPIN = "spins = 0\nwhile True:\n    spins += 1"
AGENT = "__import__('pi_notebook').get_agent()"


@pytest.fixture
def load():
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def _results(kernel: Kernel) -> dict[str, str]:
    return kernel.ev(f"{{m.tool_call_id: ''.join(getattr(c, 'text', '') for c in m.content) "
                     f"for m in {AGENT}.state.messages if m.role == 'toolResult'}}")


def test_stop_ends_a_busy_loop_every_time_under_load(load):
    kernel = Kernel()
    try:
        kernel.ok(faux_setup(None))
        timings = []
        for attempt in range(6):
            key = f"spin-{attempt}"
            kernel.ok("faux.set_responses([faux_assistant_message([faux_tool_call('python', "
                      f"{{'code': {SPIN!r}}}, id={key!r})], stop_reason='toolUse'), "
                      "faux_assistant_message('done')])")
            # The counter of the attempt before stays > 0: clear it, or the Stop below can land
            # before this attempt's code has started (a Stop then has no agent code to stop,
            # and the code that starts after it spins on; CI saw that as a lost Stop).
            kernel.ok("spins = None")
            kernel.ok("%%agent -m faux/faux-1 --approve auto --no-wait\nspin\n")
            kernel.wait_for("__import__('builtins').isinstance(globals().get('spins'), int) and spins > 0",
                            timeout=60)
            during_request = attempt % 2 == 1
            poll = None
            if during_request:  # a frontend's request that the kernel is handling right now
                poll = kernel.start("", silent=True, store_history=False,
                                    user_expressions={"x": "__import__('time').sleep(1.5)"})
                time.sleep(0.5)
            sent = time.monotonic()
            kernel.interrupt()
            if poll is not None:  # (read first: the client drops replies it does not wait for)
                reply = kernel.wait_reply(poll, timeout=30)
                assert reply["user_expressions"]["x"]["ename"] == "KeyboardInterrupt"  # as always
            kernel.wait_for(f"not {AGENT}.state.is_streaming", timeout=BOUND_S)
            timings.append(time.monotonic() - sent)
            text = _results(kernel)[key]
            assert "[interrupted]" in text and "kernel interrupt" in text, text
            first = kernel.ev("spins")
            time.sleep(0.3)
            assert kernel.ev("spins") == first, "the loop still runs after its tool ended"
            assert kernel.ok("1 + 1")["status"] == "ok"
        print("Stop -> run ended (s):", [round(t, 2) for t in timings])
        assert max(timings) < BOUND_S
        assert kernel.ev("repr(get_ipython().kernel.saved_sigint_handler)") == repr(__import__("signal").SIG_IGN)
    finally:
        kernel.shutdown()
