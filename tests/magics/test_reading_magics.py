"""What a person reads, at the notebook layer: the final transcript's text/plain is the view's
plain text (no HTML tags), and a run check's turn is the product's in ``%agent history``."""

from __future__ import annotations

from magics_helpers import FakeView, run_cell, settle

from pi_notebook.ai.providers.faux import faux_assistant_message


async def test_the_final_transcript_carries_the_views_plain_text(shell, faux, monkeypatch):
    from IPython import display as ipd

    updates = []
    monkeypatch.setattr(ipd, "update_display", lambda obj, **kw: updates.append(obj))
    monkeypatch.setattr(FakeView, "to_text", lambda self: "You: hi\n\ndone", raising=False)
    faux.set_responses([faux_assistant_message("done")])
    await run_cell(shell, "%%agent\nhi\n")
    await settle()
    assert updates == [{"text/markdown": "transcript", "text/plain": "You: hi\n\ndone"}]


def test_history_names_a_check_turn_as_the_products():
    from pi_notebook.agent.types import CheckMessage
    from pi_notebook.magics.commands import _message_line

    line = _message_line(CheckMessage(content="Check: no figure was shown. Plot it with matplotlib.",
                                      shown="No figure was shown: the agent was asked to show one."))
    assert line == "         check: No figure was shown: the agent was asked to show one."


def test_help_fits_a_notebook_line_and_breaks_usage_between_options():
    import re

    from pi_notebook.magics.args import AGENT_USAGE
    from pi_notebook.magics.commands import help_text

    lines = help_text().splitlines()
    assert max(map(len, lines)) <= 90, max(lines, key=len)  # ~120 fit a stream line at 1400 px
    usage = [line for line in lines if line.startswith(("  %%agent", "          ["))]
    options = re.findall(r"\[[^\]]*\]", AGENT_USAGE)
    assert len(usage) >= 2 and all(any(o in line for line in usage) for o in options)  # none cut in two


def test_status_does_not_say_a_cell_blocks_when_it_returns_once_its_view_shows(tmp_path):
    from pi_notebook.magics.status import StatusSnapshot, status_lines

    def wait_line(mode):
        snapshot = StatusSnapshot(
            resolved=None, configured_model="faux/faux-1", base_url=None, running=False, run_cell=None,
            run_started=None, messages=0, queued_cells=0, queued_steering=0, queued_follow_ups=0,
            thinking="off", policy="ask", wait="auto", wait_mode=mode, autosave=False, session_path=None,
            session_dir=tmp_path, session_name="s")
        return next(line for line in status_lines(snapshot) if line.startswith("wait:"))

    # a fresh JupyterLab kernel: the cell returned when its view showed (Run All went on)
    assert "blocks" not in wait_line("run_or_frontend") and "view is on screen" in wait_line("run_or_frontend")
    assert "blocks until its run ends" in wait_line("run")  # headless, terminal: it does block
    assert "returns at once" in wait_line(None)
