"""Terminal IPython through a pty: a ``%%agent`` cell is entered like ``%%timeit``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")

REPO = Path(__file__).resolve().parents[2]
STARTUP = """\
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message
faux = register_faux_provider(tokens_per_second=None)
faux.set_responses([faux_assistant_message("The terminal answer is 42.")])
"""


def _ipython(tmp_path: Path, *flags: str, startup_code: str = STARTUP, approval: str = "deny"):
    ipython_dir = tmp_path / "ipython"
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-faux.py").write_text(startup_code)
    env = {**os.environ, "IPYTHONDIR": str(ipython_dir), "PYTHONPATH": str(REPO),
           "PI_NOTEBOOK_APPROVAL": approval, "TERM": "xterm"}
    child = pexpect.spawn(sys.executable, ["-m", "IPython", "--no-banner", "--colors=nocolor",
                                           "--HistoryManager.hist_file=:memory:", *flags],
                          cwd=str(tmp_path), env=env, encoding="utf-8", timeout=30,
                          dimensions=(40, 200))
    return child


@pytest.mark.parametrize("flags", [("--simple-prompt",), ()], ids=["simple-prompt", "prompt-toolkit"])
def test_agent_cell_is_continued_then_answered(tmp_path, flags):
    child = _ipython(tmp_path, *flags)
    try:
        child.expect(r"In \[1\]:")
        child.sendline("%load_ext pi_notebook")
        child.expect(r"In \[2\]:")
        child.sendline("%%agent -m faux/faux-1")
        # Enter continues the cell (a continuation prompt), it does not run an empty prompt
        index = child.expect([r"\.\.\.:", "the cell body is the prompt", r"In \[3\]:"])
        assert index == 0, child.before
        child.sendline("What is the answer?")
        child.expect(r"\.\.\.:")
        child.sendline("")  # blank lines end a cell magic (two with --simple-prompt, as for %%timeit)
        if child.expect([r"\.\.\.:", "The terminal answer is 42."]) == 0:
            child.sendline("")
            child.expect("The terminal answer is 42.")
        child.expect(r"In \[3\]:")
        child.sendline("print('PROMPT:', __import__('pi_notebook').get_agent().state.messages[0].content[0].text)")
        child.expect(r"PROMPT: What is the answer\?")
        child.expect(r"In \[4\]:")
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


TERMINAL_RUNS = """\
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message, faux_tool_call
faux = register_faux_provider(tokens_per_second=None)
rows = list(range(200))
faux.set_responses([
    faux_assistant_message('', stop_reason='error', error_message='upstream exploded (HTTP 500)'),
    faux_assistant_message([faux_tool_call('python', {'code': 'len(rows) * 1'})], stop_reason='toolUse'),
    faux_assistant_message('There are 200 rows.'),
    faux_assistant_message([faux_tool_call('python', {'code': 'steered = 7\\n1/0'})], stop_reason='toolUse'),
    faux_assistant_message([faux_tool_call('python', {'code': 'skipped = 1'})], stop_reason='toolUse'),
    faux_assistant_message('Steered.'),
])
"""


def _until_prompt(child, number: int) -> str:
    child.expect(rf"In \[{number}\]:")
    return child.before.replace("\r\n", "\n")


def test_terminal_errors_once_values_shown_and_approval_asked_at_the_terminal(tmp_path):
    child = _ipython(tmp_path, "--simple-prompt", startup_code=TERMINAL_RUNS, approval="ask")
    try:
        _until_prompt(child, 1)
        child.sendline("%load_ext pi_notebook")
        _until_prompt(child, 2)
        child.sendline("%%agent -m faux/faux-1\nDo it.\n\n")
        failed = _until_prompt(child, 3)
        # the error once (not again in the cell's error line), no bare status line
        assert failed.count("upstream exploded") == 1, failed
        assert "\n[error]\n" not in failed and "AgentRunError" in failed
        child.sendline("%%agent -m faux/faux-1 --approve auto\nHow many rows?\n\n")
        answered = _until_prompt(child, 4)
        # the value of the call's last expression is shown, before the call's status line
        assert "len(rows) * 1" in answered
        assert answered.index("200\n[python done]") > answered.index("len(rows) * 1"), answered
        # %steer with no run starts one under `ask`: the approval is asked here
        child.sendline("%steer set steered")
        child.expect(r"Run this python call\? \[y\]es / \[N\]o")
        child.sendline("y")
        child.expect(r"Run this python call\? \[y\]es / \[N\]o")
        first_call = child.before.replace("\r\n", "\n")
        assert "ZeroDivisionError" in first_call and "[python failed]" in first_call  # the exception, shown
        child.sendline("n")
        steered = _until_prompt(child, 5)
        assert "[python skipped]" in steered and "Steered." in steered
        assert "declined" not in steered  # the reason is advice to the model, not for the user
        child.sendline("print('values:', steered, 'skipped' in globals())")
        child.expect("values: 7 False")
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
