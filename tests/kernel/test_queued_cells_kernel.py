"""Run All in a real, interactive kernel: %%agent cells queued behind a busy run keep their
own options (model, approval) for the prompt they carry."""

from __future__ import annotations

import pytest
from helpers.kernel import RUNTIME, Kernel, faux_setup

pytestmark = pytest.mark.kernel



@pytest.fixture
def kernel():
    k = Kernel()
    k.connect_frontend()
    k.ok(faux_setup(200))
    k.ok("from pi_notebook import get_agent")
    k.ok("other = register_faux_provider(provider='fauxother', models=[{'id': 'other-1'}])")
    yield k
    k.shutdown()


def test_run_all_queued_cells_keep_their_model_and_approval(kernel):
    kernel.ok("faux.set_responses([faux_assistant_message('first answer ' * 80)])\n"
              "other.set_responses([\n"
              "    faux_assistant_message([faux_tool_call('python', {'code': 'ran_b = 1'})],\n"
              "                           stop_reason='toolUse'),\n"
              "    faux_assistant_message('B could not run code')])")
    first = kernel.ok("%%agent -m faux/faux-1 --approve auto\nA\n")
    second = kernel.ok("%%agent -m fauxother/other-1 --approve deny\nB\n")
    assert first["status"] == "ok" and second["status"] == "ok"  # queued, not refused
    assert kernel.ev(f"{RUNTIME}.is_running()") is True
    kernel.wait_for(f"not {RUNTIME}.is_running()", timeout=20)
    replies = kernel.ev("[(m.role, getattr(m, 'provider', None)) for m in get_agent().state.messages]")
    assert replies == [["user", None], ["assistant", "faux"], ["user", None], ["assistant", "fauxother"],
                       ["toolResult", None], ["assistant", "fauxother"]]
    # B's --approve deny held although A ran under auto: the code never ran
    assert kernel.ev("'ran_b' in globals()") is False
    assert kernel.ev("[m.is_error for m in get_agent().state.messages if m.role == 'toolResult']") == [True]
    finals = [m for m in kernel.messages() if m["msg_type"] == "update_display_data"]
    assert len(finals) == 2  # each cell got its own final transcript
    assert {m["parent_header"]["msg_id"] for m in finals} == {first["msg_id"], second["msg_id"]}
