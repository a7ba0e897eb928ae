"""Cells that wait for an agent run, in real kernels: the user's cell is untouched, Stop says
one line, control cells are not held back, headless runs block and never hang on ``ask``,
and a dying kernel closes its views."""

from __future__ import annotations

import time

import nbformat
import pytest
from helpers.kernel import RUNTIME, Kernel, execute_notebook, faux_setup

pytestmark = pytest.mark.kernel

WAITING = "waiting for the agent run above to finish"
SLOW_RUN = "faux.set_responses([faux_assistant_message('slow ' * 400)])"


def interactive_kernel(env: dict[str, str] | None = None) -> Kernel:
    kernel = Kernel(env=env)
    kernel.connect_frontend()
    kernel.ok(faux_setup(20))  # 20 tokens/s: a 400-word answer streams for a long while
    kernel.ok("%agent model faux/faux-1")
    return kernel


@pytest.fixture
def kernel():
    k = interactive_kernel()
    yield k
    k.shutdown()


def wait_until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def waiting_line_shown(kernel: Kernel, msg_id: str) -> bool:
    return any(m["msg_type"] == "display_data" and WAITING in m["content"]["data"].get("text/plain", "")
               for m in kernel.outputs_of(msg_id))


def has_reply(kernel: Kernel, msg_id: str, replies: dict) -> bool:
    while True:
        try:
            message = kernel.kc.get_shell_msg(timeout=0.01)
        except Exception:
            break
        replies[message["parent_header"].get("msg_id")] = message
    return msg_id in replies


def test_waiting_cell_is_untouched_says_it_waits_and_names_the_users_lines(kernel):
    kernel.ok(SLOW_RUN.replace("400", "30"))
    kernel.ok("%%agent\ntalk\n")
    raw = "first = 1\nseen = len(get_agent().state.messages)\n1 / 0\n"
    cell = kernel.start("from pi_notebook import get_agent\n" + raw)
    wait_until(lambda: waiting_line_shown(kernel, cell), what="the waiting line")
    reply = kernel.wait_reply(cell, timeout=30)
    assert reply["status"] == "error" and reply["ename"] == "ZeroDivisionError"
    # the waiting line went away when the cell proceeded (before the cell's own output)
    kinds = [m["msg_type"] for m in kernel.outputs_of(cell)]
    assert kinds[:1] == ["display_data"] and "error" in kinds
    clears = [m for m in kernel.messages() if m["msg_type"] == "clear_output"
              and m["parent_header"].get("msg_id") == cell]
    assert len(clears) == 1
    traceback = "\n".join(reply["traceback"])
    assert "line 4" in traceback  # the user's own numbering (the cell has 4 lines)
    assert "pi_notebook.magics.wait" not in traceback and "wait_before_cell" not in traceback
    assert kernel.ev("In[-1]") == "from pi_notebook import get_agent\n" + raw.rstrip("\n")
    assert kernel.ev("_ih[-1]") == kernel.ev("In[-1]")
    assert kernel.ev("seen") == 2  # it ran after the run ended


def test_stop_while_waiting_aborts_the_run_in_one_line(kernel):
    kernel.ok(SLOW_RUN)
    kernel.ok("%%agent\ntalk slowly\n")
    cell = kernel.start("never_ran = 1\n")
    wait_until(lambda: waiting_line_shown(kernel, cell), what="the waiting line")
    kernel.interrupt()
    reply = kernel.wait_reply(cell, timeout=10)
    assert reply["status"] == "error"
    assert reply["traceback"] == [
        "Interrupted: this cell stopped waiting for the agent run above, and the run was aborted."]
    assert "CancelledError" not in reply["ename"] and "KeyboardInterrupt" not in reply["ename"]
    kernel.wait_for(f"not {RUNTIME}.is_running()", timeout=5)
    assert kernel.ev("__import__('pi_notebook').get_agent().state.messages[-1].stop_reason") == "aborted"
    assert kernel.ev("'never_ran' in globals()") is False
    assert kernel.ok("print('usable')")["status"] == "ok"


def test_control_cells_run_while_a_plain_cell_waits(kernel):
    kernel.ok(SLOW_RUN)
    kernel.ok("%%agent\ntalk slowly\n")
    count_before = kernel.ev("get_ipython().execution_count")
    waiting = kernel.start("print('after the run')\nresult = 'done'\nresult\n")
    wait_until(lambda: waiting_line_shown(kernel, waiting), what="the waiting line")
    started = time.monotonic()
    status = kernel.start("%agent status\n")
    replies: dict = {}
    wait_until(lambda: has_reply(kernel, status, replies), timeout=5, what="%agent status")
    assert time.monotonic() - started < 3  # at once, not after the ~20 s run
    assert waiting not in replies  # the plain cell still waits
    assert replies[status]["content"]["status"] == "ok"
    assert "run: active" in kernel.text_of(status)
    steer = kernel.start("%steer wrap it up?\n")
    wait_until(lambda: has_reply(kernel, steer, replies), timeout=5, what="%steer")
    reset = kernel.start("%agent reset\n")
    wait_until(lambda: has_reply(kernel, reset, replies), timeout=5, what="%agent reset")
    assert "Aborting the run" in kernel.text_of(reset)
    wait_until(lambda: has_reply(kernel, waiting, replies), timeout=10, what="the waiting cell")
    # counts: the waiting cell keeps its own number; the control cells got the next ones
    counts = {k: replies[k]["content"]["execution_count"] for k in (waiting, status, steer, reset)}
    assert counts == {waiting: count_before, status: count_before + 1, steer: count_before + 2,
                      reset: count_before + 3}
    # the waiting cell's own output went to the waiting cell, not to a control cell
    assert kernel.text_of(waiting).endswith("after the run\n'done'")
    assert "after the run" not in kernel.text_of(reset) + kernel.text_of(status)
    results = [m for m in kernel.outputs_of(waiting) if m["msg_type"] == "execute_result"]
    assert results[0]["content"]["execution_count"] == count_before
    assert kernel.ok("x = 1")["execution_count"] == count_before + 4
    assert kernel.ev(f"{RUNTIME}.get_agent().state.messages") == []  # reset after the abort


def test_abort_button_ends_a_blocking_agent_cell():
    kernel = Kernel()  # no frontend: %%agent blocks
    try:
        kernel.ok(faux_setup(20))
        kernel.ok(SLOW_RUN)
        cell = kernel.start("%%agent -m faux/faux-1\ntalk slowly\n")
        wait_until(lambda: kernel.buttons("Abort"), what="the Abort button")
        kernel.click(kernel.buttons("Abort")[0])
        reply = kernel.wait_reply(cell, timeout=10)
        assert reply["status"] == "ok"  # an Abort ends the cell normally
        assert kernel.ev("__import__('pi_notebook').get_agent().state.messages[-1].stop_reason") == "aborted"
    finally:
        kernel.shutdown()


def test_blocking_cell_returns_once_a_frontend_shows_its_view():
    kernel = Kernel(env={"JPY_SESSION_NAME": "/somewhere/inherited.ipynb"})
    try:
        kernel.ok(faux_setup(20))
        kernel.ok(SLOW_RUN)
        cell = kernel.start("%%agent -m faux/faux-1\ntalk slowly\n")

        def counted() -> list[str]:  # the view's widgets ask the frontend to count their views
            return [m["content"]["comm_id"] for m in kernel.messages() if m["msg_type"] == "comm_open"
                    and m["content"]["data"].get("state", {}).get("_view_count") == 0]

        wait_until(lambda: counted(), what="the view asking for a view count")
        time.sleep(0.5)
        replies: dict = {}
        assert not has_reply(kernel, cell, replies)  # no frontend showed it: still blocking
        # what @jupyter-widgets sends when it shows the view
        assert set(kernel.buttons("Abort")) <= set(counted())
        kernel.send_comm_msg(counted()[-1], {"method": "update", "state": {"_view_count": 1},
                                            "buffer_paths": []})
        wait_until(lambda: has_reply(kernel, cell, replies), timeout=5, what="the cell to return")
        assert kernel.ev(f"{RUNTIME}.is_running()") is True  # the run goes on in its view
        assert kernel.ev(f"{RUNTIME}.run.interactive") is True
        kernel.ok("%agent abort")
    finally:
        kernel.shutdown()


def test_shutdown_closes_the_live_view(kernel):
    kernel.ok(SLOW_RUN)
    kernel.ok("%%agent\ntalk slowly\n")
    models = {m["content"]["comm_id"] for m in kernel.messages() if m["msg_type"] == "comm_open"
              and m["content"].get("target_name") == "jupyter.widget"}
    buttons = set(kernel.buttons("Abort"))
    assert buttons <= models and buttons
    kernel.kc.shutdown()  # a shutdown_request, as a restart sends
    wait_until(lambda: buttons <= {m["content"]["comm_id"] for m in kernel.messages()
                                   if m["msg_type"] == "comm_close"},
               timeout=10, what="comm_close of the view's buttons")


# --- headless (nbclient) with a notebook session's environment inherited ----------------------
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


def execute(cells: list[str], env: dict[str, str]) -> nbformat.NotebookNode:
    return execute_notebook(cells, env=env)


def _text(cell) -> str:
    return "".join(o.text if o.output_type == "stream" else f"{o.ename}: {o.evalue}"
                   for o in cell.outputs if o.output_type in ("stream", "error"))


def _markdown(cell) -> str:
    return "".join(o.get("data", {}).get("text/markdown", "") for o in cell.outputs)


def test_nbclient_with_inherited_session_name_still_blocks():
    nb = execute([SETUP, "%%agent -m faux/faux-1 --approve auto\nCompute the answer.\n",
                  "print('seen', answer)"], env={"JPY_SESSION_NAME": "/home/me/parent.ipynb"})
    _, agent, after = nb.cells
    assert "The answer is 42" in _markdown(agent)
    assert _text(after) == "seen 42\n"


def test_ask_with_wait_always_refuses_instead_of_hanging():
    started = time.monotonic()
    nb = execute([SETUP, "%%agent -m faux/faux-1\nCompute the answer.\n", "print('seen', answer)"],
                 env={"JPY_SESSION_NAME": "/home/me/parent.ipynb", "PI_NOTEBOOK_WAIT": "always"})
    assert time.monotonic() - started < 50  # far below the executor's 60 s timeout
    _, agent, after = nb.cells
    assert "not interactive" in _markdown(agent)  # the notice says why the code did not run
    assert "NameError" in _text(after)  # and it never ran


def test_only_a_cell_wholly_of_control_lines_jumps_a_waiting_cell(kernel):
    """``%agent status`` followed by code, and a user magic ``%agentlog``, queue like any cell:
    the order the user ran them in is kept (B, C, A would be wrong)."""
    kernel.ok("order = []\n"
              "from IPython.core.magic import register_line_magic\n"
              "@register_line_magic\n"
              "def agentlog(line):\n"
              "    order.append('C')\n")
    kernel.ok(SLOW_RUN)
    kernel.ok("%%agent\ntalk slowly\n")
    a = kernel.start("order.append('A')\n")
    wait_until(lambda: waiting_line_shown(kernel, a), what="the waiting line")
    b = kernel.start("%agent status\norder.append('B')\n")
    c = kernel.start("%agentlog\n")
    replies: dict = {}
    time.sleep(1.0)  # had B or C jumped the queue, they would have replied by now
    has_reply(kernel, c, replies)
    assert b not in replies and c not in replies
    kernel.ok("%agent abort")  # a control cell still runs at once and ends the run
    wait_until(lambda: has_reply(kernel, c, replies), timeout=30, what="the queued cells")
    assert kernel.ev("order") == ["A", "B", "C"]
