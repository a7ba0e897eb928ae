"""The notebook-context note reaches the model only: a model that quotes it (here a scripted one
that echoes the whole message it got, as notebooks/steering.ipynb's analyst did) shows it in
nothing a person reads: ``%agent history``, the export, the static transcript, the live view."""

from __future__ import annotations

import json

import pandas as pd
from magics_helpers import run_cell, runtime, settle

from pi_notebook.agent.types import AgentEndEvent, AgentStartEvent, MessageEndEvent, MessageStartEvent
from pi_notebook.ai.providers.faux import faux_assistant_message
from pi_notebook.ai.types import AssistantMessage, TextContent
from pi_notebook.magics.context import fix_block
from pi_notebook.session import build_notebook
from pi_notebook.tools.context.prompt_context import CONTEXT_HEADER, NOTE_BOUNDARY
from pi_notebook.widgets.blocks import ChunkedText, WidgetSet, _render_md
from pi_notebook.widgets.items import StreamText
from pi_notebook.widgets.transcript import Transcript
from pi_notebook.widgets.transcript_md import transcript_markdown


def _echo(context, options, state, model):
    last = context.messages[-1]
    said = " ".join(getattr(b, "text", "") for b in last.content)
    return faux_assistant_message(f'You said: "{said}". Switching to the mean.')


async def test_a_quoted_note_is_not_in_history_or_the_export(shell, faux, capsys):
    shell.user_ns["df"] = pd.DataFrame({"region": ["north"], "revenue": [1.5]})
    faux.set_responses([_echo])
    await run_cell(shell, "%%agent\nUse the mean monthly revenue\n")
    await settle()
    reply = runtime().agent.state.messages[-1].content[0].text
    assert CONTEXT_HEADER in reply  # the model did quote it (the session keeps the model's words)
    capsys.readouterr()
    shell.run_line_magic("agent", "history")
    history = capsys.readouterr().out
    assert 'assistant: You said: "Use the mean monthly revenue". Switching to the mean.' in history
    assert "Notebook context" not in history and NOTE_BOUNDARY not in history and "revenue: float64" not in history
    exported = json.dumps(build_notebook(runtime().agent.state.messages))
    assert "Use the mean monthly revenue" in exported and "Switching to the mean" in exported
    assert "Notebook context" not in exported and NOTE_BOUNDARY not in exported


def _note() -> str:
    from pi_notebook.tools.context.prompt_context import _wrap

    return _wrap("Notebook variables (1):\n\ndf: DataFrame 1 x 2 (region: object, revenue: float64)")


def test_the_transcript_drops_a_quoted_note_and_its_fix_request():
    t = Transcript("faux/m")
    t.apply(AgentStartEvent())
    text = f"Before. {_note()}\n\n{fix_block('cell [3]: KeyError')}\n\nAfter."
    message = AssistantMessage(api="faux", provider="faux", model="m", content=[TextContent(text=text)])
    t.apply(MessageStartEvent(message=message))
    t.apply(MessageEndEvent(message=message))
    t.apply(AgentEndEvent(messages=[]))
    md = transcript_markdown(t)
    assert "Before." in md and "After." in md
    assert NOTE_BOUNDARY not in md and "Notebook context" not in md and "KeyError" not in md


def test_a_note_quoted_in_words_that_mention_its_end_is_cut_at_its_real_end():
    from pi_notebook.widgets.markdown import without_notes

    # the note's own rule line names "[end <boundary>]": only the closing line ends it
    assert without_notes(f"A {_note()} B") == "A B"
    assert without_notes(f"cut: {_note()[:170]}") == "cut: "  # a note cut short runs to the end
    assert without_notes("plain (boundary pn-xyz) text") == "plain (boundary pn-xyz) text"


def test_the_live_view_never_shows_a_streaming_note():
    widgets = WidgetSet()
    stream = StreamText("")
    chunks = ChunkedText(stream, _render_md, lambda s: s.rfind("\n\n") + 2 if "\n\n" in s else 0, widgets, 200)
    shown = []
    for piece in ("Here: ", _note()[:120], _note()[120:], " and the answer.\n\n", "More text " * 30):
        stream.append(piece)
        chunks.sync()
        shown.append("".join(w.value for w in chunks.widgets))
    stream.final = True
    chunks.sync()
    shown.append("".join(w.value for w in chunks.widgets))
    for html in shown[2:]:  # from the moment the boundary arrived, never any of the note
        assert NOTE_BOUNDARY not in html and "Notebook context" not in html and "revenue: float64" not in html
    assert "and the answer." in shown[-1] and "More text" in shown[-1]
    widgets.close_all()
