"""Any text the model sends is safe to count and store: a lone surrogate (which no UTF-8 or
UTF-16 codec accepts by default) in an answer must not break the token estimate, the session
file, the export or any later request of the conversation."""

from __future__ import annotations

import json

import nbformat
from magics_helpers import run_cell, runtime, settle

from pi_notebook.ai.options import estimate_text_tokens, text_length
from pi_notebook.ai.providers.faux import faux_assistant_message
from pi_notebook.session.export import export_notebook


def test_the_token_estimate_counts_a_lone_surrogate_as_one_code_unit():
    assert text_length("a\ud800b") == 3
    assert text_length("\udfff\U0001F600") == 3  # a lone low surrogate, then a pair
    assert estimate_text_tokens("x" * 7 + "\ud800") == 2


async def test_a_conversation_continues_after_an_answer_with_a_lone_surrogate(shell, faux, tmp_path):
    faux.set_responses([faux_assistant_message("broken \ud800 text"), faux_assistant_message("fine")])
    await run_cell(shell, "%%agent\nfirst\n")
    await settle()
    rt = runtime()
    assert rt.runs.latest.status != "error", rt.runs.latest.error
    await run_cell(shell, "%%agent\nsecond\n")
    await settle()
    run = rt.runs.latest
    assert run.status != "error", run.error  # the next request estimated the whole context
    messages = rt.get_agent().state.messages
    assert [m.content[0].text for m in messages if m.role == "assistant"] == ["broken \ud800 text", "fine"]
    # the session file holds both answers as valid JSON lines
    files = list((tmp_path / "sessions").rglob("*.jsonl"))
    assert files, "no session file written"
    lines = [json.loads(line) for f in files for line in f.read_text("utf-8").splitlines()]
    assert any("broken" in json.dumps(line) for line in lines)
    # the export is a valid UTF-8 notebook with the surrogate replaced, not a crash
    written = export_notebook(messages, tmp_path / "out.ipynb")
    text = written.read_text("utf-8")
    nb = nbformat.reads(text, as_version=4)
    assert "broken \ufffd text" in "".join(c.source for c in nb.cells)
