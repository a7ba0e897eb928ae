"""Headless execution (nbclient, like ``jupyter execute`` / papermill): ``%%agent`` blocks."""

from __future__ import annotations

import json
import time

import nbformat
import pytest

from helpers.kernel import execute_notebook

pytestmark = pytest.mark.kernel

SETUP = """\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message, faux_tool_call
faux = register_faux_provider(tokens_per_second=400)
faux.set_responses([
    faux_assistant_message([faux_tool_call('python', {'code': 'answer = 6 * 7\\nprint(answer)'})],
                           stop_reason='toolUse'),
    faux_assistant_message('The answer is 42, computed in your kernel.'),
])
"""


def execute(cells: list[str], **options) -> nbformat.NotebookNode:
    return execute_notebook(cells, env=None, **options)


def _markdown_outputs(cell) -> str:
    return "".join(o.get("data", {}).get("text/markdown", "") for o in cell.outputs)


def _text(cell) -> str:
    parts = []
    for o in cell.outputs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif o.output_type == "error":
            parts.append(f"{o.ename}: {o.evalue}")
    return "".join(parts)


def test_agent_cell_blocks_and_later_cell_sees_what_the_agent_computed():
    nb = execute([SETUP, "%%agent -m faux/faux-1 --approve auto\nCompute the answer.\n",
                  "print('seen', answer)"])
    setup, agent, after = nb.cells
    assert not [o for o in setup.outputs if o.output_type == "error"]
    # the saved cell holds the whole transcript as Markdown (display updated by id)
    transcript = _markdown_outputs(agent)
    assert "The answer is 42, computed in your kernel." in transcript
    assert "answer = 6 * 7" in transcript
    assert _text(after) == "seen 42\n"


def test_headless_ask_policy_fails_closed_without_hanging():
    nb = execute([SETUP, "%%agent -m faux/faux-1\nCompute the answer.\n", "print('seen', answer)"])
    _, agent, after = nb.cells
    transcript = _markdown_outputs(agent)
    assert "not interactive" in transcript  # the notice says why the code did not run
    assert "NameError" in _text(after)  # the code never ran


def test_interrupt_of_a_blocking_agent_cell_aborts_the_run():
    from helpers.kernel import Kernel

    kernel = Kernel()
    try:
        kernel.ok(SETUP.replace("tokens_per_second=400", "tokens_per_second=20")
                  .replace("faux.set_responses([", "faux.set_responses([faux_assistant_message('slow ' * 400),"))
        cell = kernel.start("%%agent -m faux/faux-1\ntalk slowly\n")  # headless: blocks
        # (no polling: the kernel answers nothing else while the cell blocks)
        # the view's first comm messages (its label, the prompt) come before the request is
        # sent; the model's words in one mean the prompt is in the conversation
        deadline = time.monotonic() + 10
        while not any(m["msg_type"] == "comm_msg" and "slow slow" in json.dumps(m["content"])
                      for m in kernel.messages()):
            assert time.monotonic() < deadline, "the view never started streaming"
            time.sleep(0.05)
        kernel.interrupt()
        reply = kernel.wait_reply(cell, timeout=10)
        assert reply["status"] == "error"  # the cell was interrupted ...
        kernel.wait_for("not __import__('pi_notebook.magics', fromlist=['_']).current_runtime().is_running()",
                        timeout=5)
        # ... and the run was aborted with it, leaving a valid transcript
        assert kernel.ev("__import__('pi_notebook').get_agent().state.messages[-1].stop_reason") == "aborted"
        assert kernel.ok("print('usable')")["status"] == "ok"
    finally:
        kernel.shutdown()


ERRORING = """\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message
faux = register_faux_provider(tokens_per_second=400)
faux.set_responses([faux_assistant_message('', stop_reason='error',
                                           error_message='upstream exploded (HTTP 500)')])
"""


def test_a_blocking_run_that_ends_in_error_fails_its_cell_after_writing_the_transcript():
    nb = execute([ERRORING, "%%agent -m faux/faux-1\nDo it.\n", "print('after')"])
    agent_cell = nb.cells[1]
    errors = [o for o in agent_cell.outputs if o.output_type == "error"]
    assert len(errors) == 1 and "upstream exploded" in errors[0].evalue
    # one line, no internals: a UsageError-style message without a pi_notebook traceback
    assert not any("pi_notebook" in line for line in errors[0].traceback)
    assert "upstream exploded" in _markdown_outputs(agent_cell)  # the transcript is there too


def test_raise_on_error_off_lets_the_notebook_go_on():
    nb = execute([ERRORING + "%config AgentMagics.raise_on_error = False\n",
                  "%%agent -m faux/faux-1\nDo it.\n", "print('after')"])
    assert not [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert "upstream exploded" in _markdown_outputs(nb.cells[1])


# --- a headless run creates no widget; every run-starting command blocks ----------------------
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
FIGURE_CODE = ("import base64\nfrom IPython.display import Image, display\n"
               f"display(Image(data=base64.b64decode('{PNG}')))\nanswer = 42")
FIGURE_SETUP = f"""\
%load_ext pi_notebook
%config AgentMagics.approval = "auto"
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message, faux_tool_call
faux = register_faux_provider(tokens_per_second=400)
faux.set_responses([
    faux_assistant_message([faux_tool_call('python', {{'code': {FIGURE_CODE!r}}})], stop_reason='toolUse'),
    faux_assistant_message('Here is the chart; answer is 42.'),
    faux_assistant_message([faux_tool_call('python', {{'code': 'fixed = 1'}})], stop_reason='toolUse'),
    faux_assistant_message('Fixed: the name is defined now.'),
    faux_assistant_message([faux_tool_call('python', {{'code': 'steered = 2'}})], stop_reason='toolUse'),
    faux_assistant_message('Steered.'),
])
"""


def _widget_models(nb) -> dict:
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return state.get("state", {})


def test_a_headless_notebook_has_no_widget_state_and_its_figures_are_png_outputs():
    nb = execute([FIGURE_SETUP, "%%agent -m faux/faux-1\nDraw it.\n", "print('seen', answer)"])
    _, agent, after = nb.cells
    assert _widget_models(nb) == {}  # no widget model in the saved file
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in agent.outputs)
    assert "Here is the chart; answer is 42." in _markdown_outputs(agent)
    pngs = [o for o in agent.outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1 and pngs[0].data["image/png"].strip() == PNG
    assert _text(after) == "seen 42\n"


def test_agent_fix_and_steer_with_no_run_block_headless_like_an_agent_cell():
    nb = execute([FIGURE_SETUP,
                  "%%agent -m faux/faux-1\nDraw it.\n", "print(undefined_name)", "%agent fix",
                  "print('seen', fixed)", "%steer set steered", "print('seen', steered)"])
    fix, after_fix, steer, after_steer = nb.cells[3:]
    assert "Fixed: the name is defined now." in _markdown_outputs(fix)
    assert "choosing a model" not in _markdown_outputs(fix) and "idle" not in _markdown_outputs(fix)
    assert _text(after_fix) == "seen 1\n"
    assert "Steered." in _markdown_outputs(steer)
    assert _text(after_steer) == "seen 2\n"
    assert _widget_models(nb) == {}


SLOW_SETUP = """\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message
faux = register_faux_provider(tokens_per_second=25)
faux.set_responses([faux_assistant_message('slowly ' * 600)])
"""


def test_a_cell_interrupted_by_the_executors_timeout_keeps_its_transcript():
    nb = execute([SLOW_SETUP, "%%agent -m faux/faux-1\ntalk slowly\n", "print('after')"],
                 timeout=6, interrupt_on_timeout=True)
    agent, after = nb.cells[1], nb.cells[2]
    md = _markdown_outputs(agent)
    assert "talk slowly" in md and "slowly slowly" in md  # the prompt and the text so far
    assert "aborted" in md and "0.0s" not in md
    assert any(o.output_type == "error" for o in agent.outputs)  # the cell says it was stopped
    assert _text(after) == "after\n"  # the kernel went on


def test_a_notebook_saved_mid_run_holds_the_transcript_so_far():
    """nbclient's timeout without interrupt stops the execution where it is: what it saves is
    the output as last republished while the run went on."""
    from nbclient.exceptions import CellTimeoutError

    nb = execute([SLOW_SETUP, "%%agent -m faux/faux-1\ntalk slowly\n"], timeout=8,
                 expect=CellTimeoutError)
    md = _markdown_outputs(nb.cells[1])
    assert "talk slowly" in md and "slowly slowly" in md
    assert "writing" in md and "idle" not in md


WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _bundle_updates(kernel, since=0.0):
    return [m["content"]["data"] for m in kernel.messages(since)
            if m["msg_type"] == "update_display_data" and WIDGET_MIME in m["content"]["data"]]


def test_a_live_view_nobody_renders_republishes_its_fallback_until_a_frontend_renders_it():
    """A client that allows stdin gets the widget view; while no frontend renders it, the
    static fallback it carries is republished (throttled) with the transcript so far. Once a
    frontend renders it, never again (JupyterLab re-creates the view for every update)."""
    from helpers.kernel import Kernel

    kernel = Kernel()
    try:
        kernel.ok(SLOW_SETUP)
        cell = kernel.start("%%agent -m faux/faux-1 --no-wait\ntalk slowly\n")
        kernel.wait_reply(cell, timeout=30)
        deadline = time.monotonic() + 30
        while not any("slowly slowly" in u["text/markdown"] for u in _bundle_updates(kernel)):
            assert time.monotonic() < deadline, "the fallback was never republished"
            time.sleep(0.1)
        updates = _bundle_updates(kernel)
        assert "talk slowly" in updates[-1]["text/markdown"]
        assert "writing" in updates[-1]["text/markdown"]
        # a frontend renders the view: ipywidgets' view count comes back on the view's comm
        model_id = updates[-1][WIDGET_MIME]["model_id"]
        kernel.send_comm_msg(model_id, {"method": "update", "state": {"_view_count": 1},
                                        "buffer_paths": []})
        time.sleep(1.0)  # let the count arrive
        rendered = time.monotonic()
        time.sleep(5.0)  # several refresh intervals
        assert _bundle_updates(kernel, since=rendered) == []
        kernel.ok("%agent abort")
    finally:
        kernel.shutdown()
