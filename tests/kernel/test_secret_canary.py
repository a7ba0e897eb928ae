"""A key canary through a whole notebook session: no 8-character piece of it gets out.

The key is in the kernel's environment (as a user's OPENAI_API_KEY would be) and in a user
variable and a DataFrame cell. A scripted model makes the agent print it, write it at the OS
level, raise it in an exception, list and inspect the variables holding it, and then the
conversation is exported. Everything a frontend, a file or a person could see is then
searched: every iopub message (which holds all widget state), the context each request sent
to the model, the session file, the export and the kernel's own log.
"""

from __future__ import annotations

import json

import pytest

from helpers.kernel import RECORDING_MODEL, faux_setup, kernel_with_fd_capture

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

CANARY = "sk-canary-" + "Zq7Xw2Lp9Rt4Vb6Nm8Hj3Kd5Fg1Sa0Qe7Wy2Ur4Io6Pl8Mk3Jn5Bh9Gv1Cf7Dx"  # 72 chars

SCRIPT = RECORDING_MODEL + r'''
import json, os

code = """import os, sys
key = os.environ['OPENAI_API_KEY']
print('printed', key)
print('stderr', key, file=sys.stderr)
os.system('echo os-level $OPENAI_API_KEY')
display({'text/plain': 'display ' + key, 'text/html': '<b>' + key + '</b>'}, raw=True)
raise ValueError('boom ' + key)
"""
faux.set_responses([
    answer(faux_assistant_message([faux_tool_call('python', {'code': code})], stop_reason='toolUse')),
    answer(faux_assistant_message([faux_tool_call('list_variables', {})], stop_reason='toolUse')),
    answer(faux_assistant_message([faux_tool_call('inspect_variable', {'name': 'my_token'}),
                                   faux_tool_call('inspect_variable', {'name': 'frame'})],
                                  stop_reason='toolUse')),
    answer(faux_assistant_message('All done.')),
])
'''


def _fragments(secret: str, size: int = 8) -> set[str]:
    return {secret[i:i + size] for i in range(len(secret) - size + 1)}


def _leaks(text: str) -> list[str]:
    return sorted(f for f in _fragments(CANARY) if f in text)


@pytest.fixture
def kernel(tmp_path):
    k = kernel_with_fd_capture(cwd=tmp_path / "work", env={"OPENAI_API_KEY": CANARY},
                               log_path=tmp_path / "kernel.log")
    yield k
    k.shutdown()


def test_no_fragment_of_a_key_gets_out(kernel, tmp_path):
    kernel.ok(faux_setup(2000) + SCRIPT)
    kernel.ok("import os, pandas as pd\nmy_token = os.environ['OPENAI_API_KEY']\n"
              "frame = pd.DataFrame({'name': ['a', 'b'], 'secret': [my_token, 'x']})")
    kernel.ok("%agent model faux/faux-1")
    kernel.ok("%%agent --approve auto --wait\nShow me what is in my kernel.")
    assert kernel.ev("faux.get_pending_response_count()") == 0  # the whole script ran
    assert kernel.ev("len(RECEIVED)") == 4
    export = tmp_path / "work" / "exported.ipynb"
    kernel.ok(f"%agent export {export}")

    places: dict[str, str] = {
        "iopub messages (outputs and widget state)": json.dumps(
            [{k: m[k] for k in ("msg_type", "content")} for m in kernel.messages()]),
        "what the model received": "\n".join(kernel.ev("RECEIVED")),
        "export": export.read_text(),
    }
    sessions = list((tmp_path / "work" / ".pi_notebook" / "sessions").glob("*.jsonl"))
    assert sessions, "autosave wrote no session file"
    places["session file"] = "\n".join(p.read_text() for p in sessions)

    kernel.shutdown()
    places["kernel log"] = (tmp_path / "kernel.log").read_text(errors="replace")

    found = {where: _leaks(text) for where, text in places.items()}
    assert not any(found.values()), {w: len(f) for w, f in found.items() if f}
    # and the run really handled the key: the model saw redacted results of every tool
    model_view = places["what the model received"]
    assert model_view.count("[redacted]") >= 5 and "boom" in model_view and "os-level" in model_view
