"""The kernel's Stop button while an agent run is active but no agent code executes.

Before, such a Stop met the idle kernel's ``SIG_IGN`` and was lost: pressed while the model
streamed, it did nothing, and pressed a moment before the model's code started, the code then
ran on (CI saw this as a flaky ``test_stop_under_load``). Now the Stop aborts the run, as the
Abort button does; a Stop during the user's own request is that request's, and the run goes on.
"""

from __future__ import annotations

import time

import pytest
from helpers.kernel import RUNTIME, Kernel, faux_setup

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

AGENT = "__import__('pi_notebook').get_agent()"
SPIN = "spins = 0\nwhile True:\n    spins += 1"
LONG = "word " * 400  # at 40 tokens/s: about 10 s of streaming


def _tool_results_complete(kernel: Kernel) -> bool:
    """Every tool call the next request sends has its result (a valid transcript: an aborted
    assistant message, partial calls and all, is never sent again; ai/transform.py)."""
    return kernel.ev(
        f"(lambda ms: {{c.id for m in ms if m.role == 'assistant' and m.stop_reason not in ('aborted', 'error')"
        f" for c in m.content if c.type == 'toolCall'}}"
        f" <= {{m.tool_call_id for m in ms if m.role == 'toolResult'}})({AGENT}.state.messages)")


@pytest.fixture
def kernel():
    k = Kernel()
    try:
        k.ok(faux_setup(40.0))
        yield k
    finally:
        k.shutdown()


def test_stop_while_the_model_streams_aborts_the_run(kernel: Kernel):
    kernel.ok(f"faux.set_responses([faux_assistant_message({LONG!r})])")
    kernel.ok("%%agent -m faux/faux-1 --approve auto --no-wait\nwrite a lot\n")
    kernel.wait_for(f"{AGENT}.state.is_streaming and len(str({AGENT}.state.streaming_message or '')) > 50",
                    timeout=30)
    sent = time.monotonic()
    kernel.interrupt()
    kernel.wait_for(f"not {AGENT}.state.is_streaming", timeout=10)
    assert time.monotonic() - sent < 10
    assert kernel.ev(f"{RUNTIME}.runs.latest.status") == "aborted"
    assert kernel.ok("1 + 1")["status"] == "ok"


def test_a_stop_just_before_the_code_starts_keeps_the_code_from_running_on(kernel: Kernel):
    """The tool call streams slowly (its arguments are long): the Stop lands before the code
    runs. The run ends aborted, the call has a result, and no loop is left spinning."""
    padding = "# " + "x" * 1600 + "\n"  # about 10 s of streamed arguments: the Stop lands first
    kernel.ok("spins = None")
    kernel.ok("faux.set_responses([faux_assistant_message([faux_tool_call('python', "
              f"{{'code': {padding + SPIN!r}}}, id='spin')], stop_reason='toolUse'), "
              "faux_assistant_message('done')])")
    kernel.ok("%%agent -m faux/faux-1 --approve auto --no-wait\nspin\n")
    kernel.wait_for(f"{AGENT}.state.is_streaming and {AGENT}.state.streaming_message is not None", timeout=30)
    kernel.interrupt()
    kernel.wait_for(f"not {AGENT}.state.is_streaming", timeout=15)
    assert kernel.ev(f"{RUNTIME}.runs.latest.status") == "aborted"
    assert _tool_results_complete(kernel)
    assert kernel.ev(f"{AGENT}.state.messages[-1].stop_reason") == "aborted"
    first = kernel.ev("spins")
    time.sleep(0.5)
    assert kernel.ev("spins") == first, "agent code runs on after the Stop"
    assert kernel.ok("1 + 1")["status"] == "ok"


def test_a_stop_during_a_request_of_the_users_leaves_the_run_alone(kernel: Kernel):
    kernel.ok(f"faux.set_responses([faux_assistant_message({LONG!r})])")
    kernel.ok("%%agent -m faux/faux-1 --approve auto --no-wait\nwrite a lot\n")
    kernel.wait_for(f"{AGENT}.state.is_streaming", timeout=30)
    # A request the kernel handles beside the run (a plain cell would wait for the run:
    # a Stop there aborts the run on purpose, docs/design/waiting.md): a frontend's poll.
    poll = kernel.start("", silent=True, store_history=False,
                        user_expressions={"x": "__import__('time').sleep(2.0)"})
    time.sleep(0.7)
    kernel.interrupt()
    reply = kernel.wait_reply(poll, timeout=30)
    assert reply["user_expressions"]["x"]["ename"] == "KeyboardInterrupt"
    assert kernel.ev(f"{AGENT}.state.is_streaming"), "the Stop of the user's cell aborted the run"
    kernel.wait_for(f"not {AGENT}.state.is_streaming", timeout=60)
    assert kernel.ev(f"{RUNTIME}.runs.latest.status") == "done"


def test_after_the_run_the_kernel_ignores_a_stop_while_idle_again(kernel: Kernel):
    kernel.ok("faux.set_responses([faux_assistant_message('short')])")
    kernel.ok("%%agent -m faux/faux-1 --approve auto --no-wait\nhi\n")
    kernel.wait_for(f"{RUNTIME}.runs.latest.status == 'done'", timeout=30)
    # what ipykernel puts back after each request: the idle kernel's SIG_IGN, not ours
    assert kernel.ev("repr(get_ipython().kernel.saved_sigint_handler)") == repr(__import__("signal").SIG_IGN)
    kernel.interrupt()
    time.sleep(0.3)
    assert kernel.ok("1 + 1")["status"] == "ok"
