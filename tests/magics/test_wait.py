"""The input transformer: which cells block, and on what."""

from __future__ import annotations

import asyncio

from pi_notebook.ai.providers.faux import faux_assistant_message
from pi_notebook.magics.runtime import IN_AGENT_RUN
from pi_notebook.magics.wait import agent_cell_transformer, has_widget_frontend, should_wait

from magics_helpers import run_cell, runtime, settle

PREFIX = "await __import__('pi_notebook.magics.wait', fromlist=['_']).wait_for_active_run()\n"


async def test_plain_cells_wait_only_while_a_run_is_active(shell, faux):
    assert agent_cell_transformer(["x = 1\n"]) == ["x = 1\n"]
    faux.set_responses([faux_assistant_message("w " * 300)])
    await run_cell(shell, "%%agent\ngo\n")
    assert runtime().is_running()
    assert agent_cell_transformer(["x = 1\n", "print(x)\n"]) == [PREFIX, "x = 1\n", "print(x)\n"]
    # agent magics, cell magics, extension commands and comment-only cells never wait
    for cell in (["%steer more\n"], ["%followup later\n"], ["%agent abort\n"], ["%%agent\n", "q\n"],
                 ["%%timeit\n", "1+1\n"], ["%unload_ext pi_notebook\n"], ["# just a note\n"]):
        assert agent_cell_transformer(cell) == cell, cell
    # code the agent itself runs is never rewritten (it would wait for its own run)
    token = IN_AGENT_RUN.set(True)
    try:
        assert agent_cell_transformer(["x = 1\n"]) == ["x = 1\n"]
    finally:
        IN_AGENT_RUN.reset(token)
    runtime().settings.wait_for_runs = False
    assert agent_cell_transformer(["x = 1\n"]) == ["x = 1\n"]
    runtime().settings.wait_for_runs = True
    # the waiting cell really runs after the run ended
    result = await run_cell(shell, "n = len(__import__('pi_notebook').get_agent().state.messages)")
    assert result.success and shell.user_ns["n"] == 2
    await settle()


async def test_agent_cell_rewritten_only_when_it_must_wait(shell):
    rt = runtime()
    rt.settings.wait = "never"
    assert agent_cell_transformer(["%%agent\n", "q\n"]) == ["%%agent\n", "q\n"]
    rewritten = agent_cell_transformer(["%%agent --wait -m faux/faux-1\n", "q 'quoted'\n"])
    assert rewritten == ["await __import__('pi_notebook.magics.wait', fromlist=['_'])"
                         ".run_and_wait('--wait -m faux/faux-1', \"q 'quoted'\\n\")\n"]
    rt.settings.wait = "always"
    assert agent_cell_transformer(["%%agent --no-wait\n", "q\n"]) == ["%%agent --no-wait\n", "q\n"]
    assert agent_cell_transformer(["%%agent\n", "q\n"])[0].startswith("await ")
    # a bad line is left for the magic to report as a UsageError
    assert agent_cell_transformer(["%%agent --bogus\n", "q\n"]) == ["%%agent --bogus\n", "q\n"]
    assert agent_cell_transformer(["%%agentx\n", "q\n"]) == ["%%agentx\n", "q\n"]


def test_frontend_detection(shell, monkeypatch):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert has_widget_frontend(shell) is False
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/me/analysis.ipynb")
    assert has_widget_frontend(shell) is True
    monkeypatch.delenv("JPY_SESSION_NAME")
    shell.user_ns["__vsc_ipynb_file__"] = "/x.ipynb"
    assert has_widget_frontend(shell) is True
    del shell.user_ns["__vsc_ipynb_file__"]
    # overrides: explicit flag > AgentMagics.wait > detection; no kernel: always block
    assert should_wait(False, "always", shell) is False
    assert should_wait(None, "always", shell) is True
    assert should_wait(None, "never", shell) is False
    assert should_wait(None, "auto", shell) is True  # no frontend detected: block

    class NoKernel:
        user_ns: dict = {}

    assert should_wait(False, "never", NoKernel()) is True


async def test_waiting_cell_cancelled_aborts_the_run(shell, faux):
    from pi_notebook.magics.wait import wait_for_active_run

    from pi_notebook.ai.providers.faux import register_faux_provider

    slow = register_faux_provider(provider="slowwait", tokens_per_second=100)
    try:
        slow.set_responses([faux_assistant_message("v " * 2000)])
        rt = runtime()
        rt.agent.state.model = slow.get_model()
        await run_cell(shell, "%%agent\nlong\n")
        waiter = asyncio.ensure_future(wait_for_active_run())
        await asyncio.sleep(0.1)
        waiter.cancel()  # what a kernel interrupt does to the waiting cell
        try:
            await waiter
        except asyncio.CancelledError:
            pass
        await settle(3)
        assert rt.agent.state.messages[-1].stop_reason == "aborted"
    finally:
        slow.unregister()
