"""The magics in real kernels, driven exactly like a frontend drives them.

"Interactive" kernels get ipywidgets' control comm opened the way JupyterLab does on
connect, so ``%%agent`` returns at once; kernels without it behave like nbclient
(``%%agent`` blocks). Everything agent-side runs on a faux model registered in the kernel.
"""

from __future__ import annotations

import re
import time

import pytest

from helpers.kernel import RUNTIME, Kernel, faux_setup

pytestmark = pytest.mark.kernel


# A tool that sleeps cooperatively (aborts at once), and faux replies that record the
# context each model call received.
TOOLS_AND_RECORDER = """\
import asyncio
from pi_notebook import get_agent
from pi_notebook.agent import AgentTool, AgentToolResult
from pi_notebook.ai.types import TextContent
tool_log = []
async def _slow(tool_call_id, params, signal, on_update):
    tool_log.append('start')
    for _ in range(int(params.get('seconds', 1) * 50)):
        if signal is not None and signal.aborted:
            tool_log.append('aborted')
            break
        await asyncio.sleep(0.02)
    tool_log.append('end')
    return AgentToolResult(content=[TextContent(text='slept')])
get_agent().state.tools.append(AgentTool(name='slow', description='sleeps', execute=_slow,
    parameters={'type': 'object', 'properties': {'seconds': {'type': 'number'}}}))
contexts = []
def _text(m):
    c = m.content
    return c if isinstance(c, str) else ''.join(getattr(b, 'text', '') for b in c)
def recorded(message, delay=0.0):
    async def step(context, options, state, model):
        contexts.append([(m.role, _text(m)) for m in context.messages])
        if delay:
            await asyncio.sleep(delay)
        return message
    return step
def transcript_ok():
    msgs = get_agent().state.messages
    calls = [b.id for m in msgs if m.role == 'assistant' for b in m.content if b.type == 'toolCall']
    results = [m.tool_call_id for m in msgs if m.role == 'toolResult']
    return sorted(calls) == sorted(results)
"""


def interactive_kernel(tps: float | None = None) -> Kernel:
    kernel = Kernel()
    kernel.connect_frontend()
    kernel.ok(faux_setup(tps))
    kernel.ok("%agent model faux/faux-1")
    kernel.ok(TOOLS_AND_RECORDER)
    return kernel


@pytest.fixture
def kernel():
    k = interactive_kernel(tps=200)
    yield k
    k.shutdown()


def run_ended(kernel: Kernel, timeout: float = 10.0) -> None:
    kernel.wait_for(f"not {RUNTIME}.is_running()", timeout=timeout)


def test_cell_returns_at_once_and_run_continues_while_idle(kernel):
    kernel.ok("faux.set_responses([faux_assistant_message('streaming along ' * 60)])")
    reply = kernel.ok("%%agent\ntell me something\n")
    assert kernel.ev(f"{RUNTIME}.is_running()") is True  # the cell ended, the run did not
    after_reply = time.monotonic()
    time.sleep(1.0)  # no request in flight: the kernel is idle
    updates = kernel.comm_updates(since=after_reply)
    assert len(updates) > 3  # the view kept updating while the kernel was idle
    run_ended(kernel)
    assert kernel.ev("[m.role for m in get_agent().state.messages]") == ["user", "assistant"]
    # the cell keeps a static Markdown transcript in place of the widget
    finals = [m for m in kernel.messages() if m["msg_type"] == "update_display_data"]
    assert finals and "streaming along" in finals[-1]["content"]["data"]["text/markdown"]
    assert reply["status"] == "ok"


def test_steer_lands_after_tool_batch_before_next_model_call(kernel):
    kernel.ok("faux.set_responses([recorded(faux_assistant_message([faux_tool_call('slow', "
              "{'seconds': 1.5})], stop_reason='toolUse')), recorded(faux_assistant_message('ok'))])")
    kernel.ok("%%agent\nrun the slow tool\n")
    kernel.wait_for("tool_log == ['start']")
    kernel.ok("%steer please use {curly} and $HOME literally")
    assert kernel.ev("tool_log") == ["start"]  # queued, not yet delivered
    run_ended(kernel)
    contexts = kernel.ev("contexts")
    assert [r for r, _ in contexts[1]] == ["user", "assistant", "toolResult", "user"]
    # the model gets the steering text as typed, after its notebook-context note
    steer = contexts[1][-1][1]
    assert steer.startswith("[Notebook context") and steer.endswith("please use {curly} and $HOME literally")
    assert kernel.ev("transcript_ok()")


def test_followup_lands_after_final_answer(kernel):
    kernel.ok("faux.set_responses([recorded(faux_assistant_message('first answer ' * 30)), "
              "recorded(faux_assistant_message('second'))])")
    kernel.ok("%%agent\nfirst question\n")
    kernel.ok("%followup second question")
    run_ended(kernel)
    contexts = kernel.ev("contexts")
    assert len(contexts) == 2
    assert [r for r, _ in contexts[1]] == ["user", "assistant", "user"]
    assert contexts[1][1][1] == "first answer " * 30
    followup = contexts[1][2][1]  # as typed, after its notebook-context note
    assert followup.startswith("[Notebook context") and followup.endswith("second question")


def _click_abort(kernel: Kernel) -> None:
    buttons = kernel.buttons("Abort")
    assert buttons, "no Abort button seen on iopub"
    kernel.click(buttons[-1])


def test_abort_button_during_stream(kernel):
    kernel.ok("faux.set_responses([faux_assistant_message('word ' * 2000)])")
    kernel.ok("%%agent\ntalk a lot\n")
    kernel.wait_for("get_agent().state.streaming_message is not None")
    _click_abort(kernel)
    run_ended(kernel, timeout=5)
    assert kernel.ev("get_agent().state.messages[-1].stop_reason") == "aborted"
    assert kernel.ev("transcript_ok()")
    assert kernel.ok("1 + 1")["status"] == "ok"


def test_abort_button_during_tool(kernel):
    kernel.ok("faux.set_responses([faux_assistant_message([faux_tool_call('slow', {'seconds': 30}), "
              "faux_tool_call('slow', {'seconds': 30})], stop_reason='toolUse'), "
              "faux_assistant_message('never streamed')])")
    kernel.ok("%%agent\nsleep twice\n")
    kernel.wait_for("tool_log.count('start') == 2")
    _click_abort(kernel)
    run_ended(kernel, timeout=5)
    assert kernel.ev("tool_log.count('aborted')") == 2
    assert kernel.ev("transcript_ok()")
    assert kernel.ev("get_agent().state.messages[-1].stop_reason") == "aborted"


def test_abort_between_turns(kernel):
    # a listener holds the loop between the first turn's end and the next model call
    kernel.ok("between = []\n"
              "async def _hold(event):\n"
              "    if event.type == 'turn_end' and not between:\n"
              "        between.append('in')\n"
              "        await asyncio.sleep(1.5)\n"
              "        between.append('out')\n"
              "get_agent().subscribe(_hold)")
    kernel.ok("faux.set_responses([faux_assistant_message([faux_tool_call('slow', {'seconds': 0.05})], "
              "stop_reason='toolUse'), recorded(faux_assistant_message('never streamed'))])")
    kernel.ok("%%agent\nquick tool then think\n")
    kernel.wait_for("between == ['in']")
    _click_abort(kernel)
    run_ended(kernel, timeout=5)
    assert kernel.ev("transcript_ok()")
    messages = kernel.ev("[(m.role, getattr(m, 'stop_reason', None)) for m in get_agent().state.messages]")
    assert messages[-1] == ["assistant", "aborted"]
    assert "never streamed" not in kernel.ev("str([m.model_dump() for m in get_agent().state.messages])")


def test_abort_button_handler_from_non_main_thread_takes_effect_at_once(kernel):
    kernel.ok("faux.set_responses([faux_assistant_message('word ' * 2000)])")
    kernel.ok("%%agent\ntalk a lot\n")
    kernel.wait_for("get_agent().state.streaming_message is not None")
    # like ipykernel 7.0-7.3 under JupyterLab: the click handler runs on another thread
    # (an expression, not a cell: a plain cell would wait for the active run first)
    kernel.ev(f"__import__('threading').Thread(target={RUNTIME}.run.view.abort_button.click)"
              ".start()")
    # no further request is sent: the loop must wake up by itself and end the run
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if any(m["msg_type"] == "update_display_data" for m in kernel.messages()):
            break
        time.sleep(0.02)
    finals = [m for m in kernel.messages() if m["msg_type"] == "update_display_data"]
    assert finals, "the run did not end without another request"
    assert "aborted" in finals[-1]["content"]["data"]["text/markdown"]


def test_coalesced_updates_and_exact_final_text():
    kernel = Kernel()
    try:
        kernel.connect_frontend()
        # 1,000 deltas per second: one token (4 chars) per delta at 1,000 tokens/s
        kernel.ok("%load_ext pi_notebook\n"
                  "from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message\n"
                  "faux = register_faux_provider(tokens_per_second=1000, token_size=1)\n"
                  "text = ''.join(f'w{i:03d}' for i in range(1500))\n"
                  "faux.set_responses([faux_assistant_message(text)])")
        kernel.ok("%agent model faux/faux-1")
        started = time.monotonic()
        kernel.ok("%%agent\nstream\n")
        run_ended(kernel, timeout=30)
        flushes, seconds = kernel.ev(f"[{RUNTIME}.runs.latest.view.flush_count, {RUNTIME}.runs.latest.seconds()]")
        # the view's widgets are the only ones opened here; once the transcript replaced
        # the view they are all closed (no widget model outlives its run)
        view_ids = {m["content"]["comm_id"] for m in kernel.messages()
                    if m["msg_type"] == "comm_open" and m["content"].get("target_name") == "jupyter.widget"}
        closed = {m["content"]["comm_id"] for m in kernel.messages() if m["msg_type"] == "comm_close"}
        assert view_ids and view_ids <= closed
        updates = kernel.comm_updates(view_ids, since=started)
        assert seconds > 1.0  # the stream really lasted (1,500 deltas at 1,000/s)
        assert flushes / seconds <= 25
        # every flush may touch a few widgets (header, live text); never one per delta
        assert len(updates) < 1500 / 4
        # the final text is exact: the transcript's Markdown carries it verbatim
        assert kernel.ev(f"{RUNTIME}.runs.latest.view.to_markdown().count(text)") == 1
        states = kernel.widget_states()
        html = "".join(str(states[c].get("value", "")) for c in view_ids if c in states)
        expected = "".join(f"w{i:03d}" for i in range(1500))
        # what the frontend ends up with (last synced states) holds the exact text
        assert expected in re.sub(r"<[^>]+>", "", html)
    finally:
        kernel.shutdown()


def test_plain_cell_waits_for_active_run_and_interrupt_aborts(kernel):
    kernel.ok("faux.set_responses([faux_assistant_message('x ' * 300)])")
    kernel.ok("%%agent\nfirst\n")
    reply = kernel.ok("n_after = len(get_agent().state.messages)")
    assert kernel.ev("n_after") == 2  # the cell ran only after the run ended
    # Run All with an interrupt: the waiting cell is cancelled and the run aborted
    kernel.ok("faux.set_responses([faux_assistant_message([faux_tool_call('slow', {'seconds': 60})], "
              "stop_reason='toolUse')])")
    kernel.ok("%%agent\nsecond\n")
    waiting = kernel.start("never_set = 1")
    time.sleep(0.5)
    kernel.interrupt()
    result = kernel.wait_reply(waiting, timeout=10)
    assert result["status"] == "error"
    run_ended(kernel, timeout=5)
    assert kernel.ev("'never_set' in dir()") is False
    assert kernel.ev("transcript_ok()")
    assert reply["status"] == "ok"


def test_unload_leaves_no_task_hook_or_proxy(kernel):
    kernel.ok("import sys")
    kernel.ok("faux.set_responses([faux_assistant_message('y ' * 3000)])")
    kernel.ok("%%agent\nlong\n")
    kernel.ok("%unload_ext pi_notebook")
    time.sleep(0.3)
    state = kernel.ev(
        "{'tasks': [t.get_name() for t in __import__('asyncio').all_tasks() "
        "if 'pi_notebook' in t.get_name() or 'pi_notebook' in repr(t.get_coro())], "
        "'transformers': [getattr(f, '__module__', '') for f in get_ipython().input_transformers_cleanup "
        "if 'pi_notebook' in (getattr(f, '__module__', '') or '')], "
        "'magics': [n for n in ('agent', 'steer', 'followup') "
        "if n in get_ipython().magics_manager.magics['line']], "
        "'cell': 'agent' in get_ipython().magics_manager.magics['cell'], "
        "'configurables': [type(c).__name__ for c in get_ipython().configurables "
        "if type(c).__module__.startswith('pi_notebook')], "
        "'streams': (type(sys.stdout).__name__, type(sys.stderr).__name__, "
        "type(get_ipython().display_pub).__name__), "
        "'runtime_gone': __import__('pi_notebook.magics', fromlist=['_']).current_runtime() is None}")
    assert state["tasks"] == []
    assert state["transformers"] == []
    assert state["magics"] == [] and state["cell"] is False
    assert state["configurables"] == []
    assert state["runtime_gone"] is True
    # the tools' routing proxies are gone: plain ipykernel streams and publisher again
    assert all("Routed" not in name for name in state["streams"]), state["streams"]
    assert kernel.ok("print('still fine')")["status"] == "ok"


def test_final_transcript_is_addressed_to_the_agent_cell(kernel):
    # other requests run while the agent streams (on ipykernel 6 the kernel's parent
    # header is global and would point at the latest of them)
    kernel.ok("faux.set_responses([faux_assistant_message('z ' * 400)])")
    agent_cell = kernel.ok("%%agent\nwrite\n")["msg_id"]
    kernel.ok("%steer one more thing")
    run_ended(kernel)
    finals = [m for m in kernel.messages() if m["msg_type"] == "update_display_data"]
    assert finals
    assert {m["parent_header"]["msg_id"] for m in finals} == {agent_cell}


def test_extension_loaded_from_config_at_kernel_start():
    kernel = Kernel(extra_args=["--InteractiveShellApp.extensions=pi_notebook"])
    try:
        assert kernel.ev(f"{RUNTIME} is not None") is True
        kernel.ok("from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message\n"
                  "faux = register_faux_provider()\n"
                  "faux.set_responses([faux_assistant_message('configured hello')])\n"
                  "%config AgentMagics.model = 'faux/faux-1'")
        reply = kernel.ok("%%agent\nhi\n")  # headless here: the cell blocks until the end
        assert "configured hello" in "".join(
            m["content"]["data"].get("text/markdown", "") for m in kernel.messages()
            if m["msg_type"] == "update_display_data")
        assert kernel.ev("[m.role for m in __import__('pi_notebook').get_agent().state.messages]") == [
            "user", "assistant"]
        assert reply["status"] == "ok"
    finally:
        kernel.shutdown()


def test_approval_run_button_clicked_via_comm_runs_the_code(kernel):
    kernel.ok("%config AgentMagics.approval = 'ask'")
    kernel.ok("faux.set_responses([faux_assistant_message([faux_tool_call('python', "
              "{'code': 'approved_value = 7 * 6'})], stop_reason='toolUse'), "
              "faux_assistant_message('done')])")
    kernel.ok("%%agent\ncompute\n")
    deadline = time.monotonic() + 10
    while not kernel.buttons("Run") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kernel.ev("'approved_value' in dir()") is False  # waiting for the click
    kernel.click(kernel.buttons("Run")[-1])
    run_ended(kernel)
    assert kernel.ev("approved_value") == 42


def test_queued_followup_remove_button_via_comm(kernel):
    kernel.ok("faux.set_responses([recorded(faux_assistant_message('long ' * 600)), "
              "recorded(faux_assistant_message('never'))])")
    kernel.ok("%%agent\nfirst\n")
    kernel.ok("%followup drop this one")
    deadline = time.monotonic() + 5
    remove = []
    while not remove and time.monotonic() < deadline:
        remove = [cid for cid, s in kernel.widget_states().items()
                  if s.get("_model_name") == "ButtonModel" and s.get("tooltip") == "Remove from the queue"]
        time.sleep(0.05)
    assert remove, "no remove button for the queued follow-up"
    kernel.click(remove[-1])
    run_ended(kernel)
    assert len(kernel.ev("contexts")) == 1  # the follow-up never reached the model
    assert kernel.ev("[m.role for m in get_agent().state.messages]") == ["user", "assistant"]


def test_abort_while_waiting_for_approval(kernel):
    kernel.ok("%config AgentMagics.approval = 'ask'")
    kernel.ok("faux.set_responses([faux_assistant_message([faux_tool_call('python', "
              "{'code': 'should_not_exist = 1'})], stop_reason='toolUse'), "
              "faux_assistant_message('never streamed')])")
    kernel.ok("%%agent\ncompute\n")
    deadline = time.monotonic() + 10
    while not kernel.buttons("Run") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kernel.buttons("Run"), "no approval buttons"
    _click_abort(kernel)
    run_ended(kernel, timeout=5)
    assert kernel.ev("'should_not_exist' in dir()") is False
    assert kernel.ev("transcript_ok()")
    assert kernel.ev("get_agent().state.messages[-1].stop_reason") == "aborted"
