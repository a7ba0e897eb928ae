"""One run's edges: feedback lines, status before the first run, failing blocking runs,
stream timeouts, model resolution off the loop thread, the displayed view."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from IPython.core.error import UsageError
from magics_helpers import FakeView, run_cell, runtime, settle

from pi_notebook.ai.providers.faux import faux_assistant_message
from pi_notebook.magics import resolve
from pi_notebook.magics.lifecycle import AgentRunError


async def test_steer_and_followup_say_in_their_cell_where_the_message_went(shell, faux, capsys):
    gate = asyncio.Event()

    async def slow(context, options, state, model):
        await gate.wait()
        return faux_assistant_message("a")

    faux.set_responses([slow, faux_assistant_message("b"), faux_assistant_message("c")])
    shell.execution_count = 7
    await run_cell(shell, "%%agent\nA\n")
    capsys.readouterr()
    shell.run_line_magic("steer", "look here")
    assert capsys.readouterr().out.strip() == "Queued as steering for the run in cell [7]."
    shell.run_line_magic("followup", "then this")
    assert capsys.readouterr().out.strip() == "Queued as a follow-up for the run in cell [7]."
    gate.set()
    await settle()
    capsys.readouterr()
    shell.run_line_magic("followup", "new start")
    assert capsys.readouterr().out.strip().endswith("Started a run (no run was active).")
    await settle()


async def test_status_before_any_run_is_complete(shell, monkeypatch, capsys, tmp_path):
    from pi_notebook.ai.env import env_var_names

    for provider, _ in resolve.CLOUD_DEFAULTS:
        for name in env_var_names(provider):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "z" * 30)
    rt = runtime()
    rt.resolved = None  # nothing chosen yet
    shell.run_line_magic("agent", "")
    out = capsys.readouterr().out
    assert "model (next run): openai/gpt-4.1 (key from environment) — OPENAI_API_KEY is set" in out
    assert "run: idle" in out
    assert "approval: ask" in out
    assert "wait: never (a %%agent cell returns at once here" in out
    assert f"session file: not yet written; goes to {tmp_path / 'sessions'}" in out
    assert "z" * 8 not in out
    assert rt.resolved is None  # a status never changes the model


async def test_status_says_when_no_model_can_be_found(shell, monkeypatch, capsys):
    def nothing(*a, **k):
        raise UsageError(resolve.NO_MODEL_MESSAGE)

    monkeypatch.setattr(resolve, "resolve_model", nothing)
    runtime().resolved = None
    shell.run_line_magic("agent", "status")
    assert "model: none. No model configured" in capsys.readouterr().out


async def test_blocking_run_that_failed_fails_its_cell_after_the_transcript(shell, faux):
    faux.set_responses([])  # the faux provider answers with an error
    await run_cell(shell, "%%agent\nhello\n")
    await settle()
    rt = runtime()
    run = rt.runs.latest
    assert run.status == "error" and run.error
    assert FakeView.instances[-1].kinds("finish") == [("finish", "error")]  # written first
    with pytest.raises(AgentRunError) as info:
        rt.check_run_outcome(run)
    assert "\n" not in str(info.value) and str(info.value).startswith("The agent run failed:")
    rt.settings.raise_on_error = False
    rt.check_run_outcome(run)  # opted out: no exception


async def test_a_run_that_ended_well_passes_the_outcome_check(shell, faux):
    faux.set_responses([faux_assistant_message("fine")])
    await run_cell(shell, "%%agent\nhello\n")
    await settle()
    runtime().check_run_outcome(runtime().runs.latest)


async def test_stream_requests_carry_the_first_byte_and_idle_timeouts(shell, faux):
    seen = []

    def record(context, options, state, model):
        seen.append((options.get("first_byte_timeout_ms"), options.get("idle_timeout_ms")))
        return faux_assistant_message("ok")

    faux.set_responses([record, record])
    await run_cell(shell, "%%agent\nhi\n")
    await settle()
    shell.run_line_magic("config", "AgentMagics.first_byte_timeout = 5")
    shell.run_line_magic("config", "AgentMagics.idle_timeout = 0")  # 0: no limit
    await run_cell(shell, "%%agent\nagain\n")
    await settle()
    # 0 travels as 0 (the transport's 'off'); left out, the transport's default would apply
    assert seen == [(60000, 120000), (5000, 0)]


async def test_automatic_model_choice_runs_off_the_loop_thread(shell, faux, monkeypatch):
    loop_thread = threading.get_ident()
    threads = []
    model = faux.get_model()

    def slow_resolution(explicit=None, configured=None, base_url=None, **_):
        threads.append(threading.get_ident())
        time.sleep(0.3)  # like a local server that is slow to list its models
        return resolve.ResolvedModel(model, "local-server", "a server listens on 127.0.0.1:1")

    monkeypatch.setattr(resolve, "resolve_model", slow_resolution)
    rt = runtime()
    rt.resolved = None
    faux.set_responses([faux_assistant_message("answered")])
    started = time.monotonic()
    await run_cell(shell, "%%agent\nhi\n")
    assert time.monotonic() - started < 0.25  # the magic returned before the probe ended
    view = FakeView.instances[-1]
    assert view.model_label == "choosing a model…"
    await settle()
    assert threads and threads[0] != loop_thread
    assert ("label", rt.resolved.label) in view.calls
    assert view.text() == "answered"


async def test_no_model_found_refuses_the_run_and_keeps_the_conversation(shell, faux, monkeypatch):
    def nothing(*a, **k):
        raise UsageError(resolve.NO_MODEL_MESSAGE)

    monkeypatch.setattr(resolve, "resolve_model", nothing)
    rt = runtime()
    rt.resolved = None
    result = await run_cell(shell, "%%agent\nhi\n")
    assert result.success  # the cell itself returned at once
    await settle()
    view = FakeView.instances[-1]
    assert view.kinds("finish") == [("finish", "error")]
    assert any(resolve.NO_MODEL_MESSAGE in n[2] for n in view.kinds("notice"))
    assert rt.agent.state.messages == []


async def test_model_id_typo_warns_before_any_request(shell, monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    await run_cell(shell, "%%agent -m anthropic/claude-sonet-4-5\nhi\n")
    view = FakeView.instances[-1]
    warnings = [n[2] for n in view.kinds("notice") if n[1] == "warning"]
    assert warnings and "did you mean anthropic/claude-sonnet-4-5?" in warnings[0].lower()
    await settle()
    assert runtime().agent.state.messages == []  # no key: refused, nothing sent


async def test_model_command_prints_the_typo_warning(shell, capsys):
    shell.run_line_magic("agent", "model anthropic/claude-sonet-4-5")
    out = capsys.readouterr().out
    assert "Model: anthropic/claude-sonet-4-5" in out and "claude-sonnet-4-5?" in out


async def test_frozen_view_is_replaced_by_markdown_and_closed(shell, faux, monkeypatch):
    from IPython import display as ipd

    updates = []
    monkeypatch.setattr(ipd, "update_display",
                        lambda obj, **kw: updates.append((obj, kw.get("display_id"))))
    faux.set_responses([faux_assistant_message("done")])
    await run_cell(shell, "%%agent\nhi\n")
    await settle()
    view = FakeView.instances[-1]
    assert len(updates) == 1 and updates[0][0]["text/markdown"] == "transcript"
    assert updates[0][1]  # under the display id the view was shown with
    assert view.calls[-2:] == [("finish", "done"), ("close",)]
