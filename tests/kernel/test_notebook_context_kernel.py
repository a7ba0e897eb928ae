"""The notebook context in a real kernel: ``%agent fix`` after a user cell raised, and
``%agent code`` as the execute reply's ``set_next_input`` payload (what JupyterLab, Notebook 7
and VS Code turn into a new cell below)."""

from __future__ import annotations

import pytest

from helpers.kernel import RUNTIME, Kernel, faux_setup

pytestmark = pytest.mark.kernel


SETUP = """\
from pi_notebook import get_agent
seen = []
def _user_text(m):
    c = m.content
    return c if isinstance(c, str) else '\\n'.join(getattr(b, 'text', '') for b in c)
def recorded(message):
    def step(context, options, state, model):
        seen.append(_user_text([m for m in context.messages if m.role == 'user'][-1]))
        return message
    return step
def call(name, args):
    return faux_assistant_message([faux_tool_call(name, args)], stop_reason='toolUse')
"""


@pytest.fixture(scope="module")
def kernel():
    k = Kernel()
    k.ok(faux_setup(None))
    k.ok("%agent model faux/faux-1")
    k.ok("%config AgentMagics.approval = 'auto'")
    k.ok(SETUP)
    yield k
    k.shutdown()


def run_ended(kernel: Kernel, timeout: float = 60.0) -> None:
    kernel.wait_for(f"not {RUNTIME}.is_running()", timeout=timeout)


def test_agent_fix_reads_the_history_and_runs_the_corrected_line(kernel):
    kernel.ok("faux.set_responses([\n"
              "    recorded(call('notebook_history', {'last': 2})),\n"
              "    call('python', {'code': \"total = frame['revenue'].sum()\"}),\n"
              "    faux_assistant_message(\"Fixed: the column is 'revenue', not 'revenu'.\"),\n"
              "])")
    kernel.ok("import pandas as pd\nframe = pd.DataFrame({'revenue': [1, 2]})")
    failed = kernel.execute("total = frame['revenu'].sum()")
    assert failed["status"] == "error" and failed["ename"] == "KeyError"
    cell = failed["execution_count"]
    reply = kernel.execute("%agent fix")
    assert reply["status"] == "ok", reply
    run_ended(kernel)
    assert int(kernel.ev("int(total)")) == 3
    note = kernel.ev("seen[0]")
    # the model got the failing cell, the error and the instructions beside the short request
    assert f"Explain and fix the error in cell [{cell}]: KeyError: 'revenu'" in note
    assert "total = frame['revenu'].sum()" in note
    assert f"Cell [{cell}] raised KeyError" in note  # the per-prompt last-error note
    assert note.rstrip().endswith(f"Fix the error in cell [{cell}].")
    # the transcript keeps only the short line
    users = kernel.ev("[_user_text(m) for m in get_agent().state.messages if m.role == 'user']")
    assert users[-1] == f"Fix the error in cell [{cell}]."
    history = kernel.ev("[r.source for r in __import__('pi_notebook.tools.context.history', fromlist=['_'])"
                        ".installed_history(get_ipython()).records()]")
    assert "total = frame['revenue'].sum()" not in history  # the agent's fix is not a user cell


def test_agent_fix_without_an_error(kernel):
    kernel.ok("fine = 1")
    reply = kernel.execute("%agent fix")
    assert "The last cell did not raise an error." in kernel.text_of(reply["msg_id"])


def test_agent_code_payload_carries_the_runs_code_without_failed_attempts(kernel):
    kernel.ok("faux.set_responses([\n"
              "    call('python', {'code': 'step_one = 20'}),\n"
              "    call('python', {'code': 'step_one / missing_name'}),\n"
              "    call('python', {'code': 'step_two = step_one + 1\\nprint(step_two)'}),\n"
              "    faux_assistant_message('done'),\n"
              "])")
    reply = kernel.execute("%%agent\ncompute step two\n", timeout=120)
    assert reply["status"] == "ok", reply
    run_ended(kernel)
    assert int(kernel.ev("step_two")) == 21
    reply = kernel.execute("%agent code")
    payloads = [p for p in reply.get("payload", []) if p.get("source") == "set_next_input"]
    assert len(payloads) == 1 and payloads[0]["replace"] is False
    text = payloads[0]["text"]
    assert "step_one = 20" in text and "step_two = step_one + 1\nprint(step_two)" in text
    assert text.index("step_one = 20") < text.index("step_two")
    assert "missing_name" not in text and "Left out: 1 failed attempt (1 error)" in text
    compile(text, "<agent code>", "exec")  # one runnable cell
