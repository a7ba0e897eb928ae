"""Sessions across kernel restarts and crashes (autosave from the magics)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from helpers.kernel import Kernel, faux_setup

from pi_notebook.tools.context.prompt_context import CONTEXT_HEADER

pytestmark = pytest.mark.kernel

RECORD = """\
contexts = []
def recorded(message):
    def step(context, options, state, model):
        contexts.append([m.model_dump() for m in context.messages])
        return message
    return step
"""


def _without_notes(message: dict) -> dict:
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list):
        return message
    kept = [b for b in content if not (b.get("type") == "text" and b["text"].startswith(CONTEXT_HEADER))]
    return {**message, "content": kept}


def _restart(kernel: Kernel) -> None:
    kernel.restart()


def test_restart_then_load_gives_the_model_the_same_context():
    kernel = Kernel()
    try:
        kernel.ok(faux_setup(None) + RECORD)
        kernel.ok("faux.set_responses([faux_assistant_message([faux_tool_call('python', "
                  "{'code': 'v = 21 * 2\\nv'})], stop_reason='toolUse'), faux_assistant_message('v is 42'), "
                  "recorded(faux_assistant_message('still 42'))])")
        kernel.ok("%%agent -m faux/faux-1 --approve auto\ncompute v\n")  # headless: blocks
        saved = kernel.ev("[m.model_dump() for m in __import__('pi_notebook').get_agent().state.messages]")
        kernel.ok("%agent save snapshot.jsonl")
        kernel.ok("%followup and again?")  # without a restart: what the model gets next
        expected = kernel.ev("contexts[0]")
        _restart(kernel)
        kernel.ok(faux_setup(None) + RECORD)
        kernel.ok("faux.set_responses([recorded(faux_assistant_message('still 42'))])")
        kernel.ok("%agent load snapshot.jsonl")
        # the restored transcript equals the saved one, field by field
        restored = kernel.ev("[m.model_dump() for m in __import__('pi_notebook').get_agent().state.messages]")
        assert restored == saved and len(saved) == 4
        kernel.ok("%%agent -m faux/faux-1\nand again?\n")
        resumed = kernel.ev("contexts[0]")
        # the model receives the same context it would have without the restart, apart from
        # the per-prompt notebook-context notes, which describe a kernel state and are never
        # saved (docs/design/notebook-context.md)
        assert [_without_notes(m) for m in resumed[:-1]] == [_without_notes(m) for m in expected[:-1]]
        assert _without_notes(resumed[-1])["content"] == _without_notes(expected[-1])["content"]
        assert any(b["text"].startswith(CONTEXT_HEADER) for b in expected[0]["content"])
    finally:
        kernel.shutdown()


def test_resume_continues_the_newest_session_after_restart():
    kernel = Kernel()
    try:
        kernel.ok(faux_setup(None))
        kernel.ok("faux.set_responses([faux_assistant_message('remembered: blue')])")
        kernel.ok("%%agent -m faux/faux-1\nmy colour is blue\n")
        _restart(kernel)
        kernel.ok(faux_setup(None))
        kernel.ok("faux.set_responses([faux_assistant_message('it was blue')])")
        kernel.ok("%%agent -m faux/faux-1 --resume\nwhat was my colour?\n")
        texts = kernel.ev("[(m.role, ''.join(getattr(b, 'text', '') for b in m.content)) "
                          "for m in __import__('pi_notebook').get_agent().state.messages]")
        assert texts == [["user", "my colour is blue"], ["assistant", "remembered: blue"],
                         ["user", "what was my colour?"], ["assistant", "it was blue"]]
    finally:
        kernel.shutdown()


def test_sigkill_mid_stream_keeps_every_completed_message():
    kernel = Kernel()
    try:
        kernel.connect_frontend()
        kernel.ok(faux_setup(30))
        kernel.ok("faux.set_responses([faux_assistant_message('first answer'), "
                  "faux_assistant_message('never finished ' * 300)])")
        kernel.ok("%%agent -m faux/faux-1\nquestion one\n")
        kernel.wait_for("not __import__('pi_notebook.magics', fromlist=['_']).current_runtime().is_running()")
        kernel.ok("%%agent\nquestion two\n")
        kernel.wait_for("__import__('pi_notebook').get_agent().state.streaming_message is not None "
                        "and __import__('pi_notebook').get_agent().state.streaming_message.role == 'assistant'")
        path = kernel.ev("str(__import__('pi_notebook.magics', fromlist=['_']).current_runtime().session_path)")
        os.kill(kernel.km.provisioner.pid, signal.SIGKILL)
        time.sleep(0.5)
        from pi_notebook.session.store import load_session

        loaded = load_session(path)
    finally:
        kernel.shutdown()
    texts = [(m.role, "".join(getattr(b, "text", "") for b in m.content)) for m in loaded.messages]
    assert texts == [("user", "question one"), ("assistant", "first answer"), ("user", "question two")]
