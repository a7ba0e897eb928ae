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


def _ipython(tmp_path: Path, *flags: str):
    ipython_dir = tmp_path / "ipython"
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-faux.py").write_text(STARTUP)
    env = {**os.environ, "IPYTHONDIR": str(ipython_dir), "PYTHONPATH": str(REPO),
           "PI_NOTEBOOK_APPROVAL": "deny", "TERM": "xterm"}
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
