"""Kernel-level tests of the notebook tools: a real ipykernel driven through jupyter_client.

The tool runs in a background task on the kernel loop (as the agent does) while the test
sends other requests. Measured latencies are printed (``-s`` shows them) and only checked
against a generous bound that catches hangs.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import pytest

from helpers.kernel import Kernel, driver_result, load_driver
from helpers.shell import flat

pytestmark = pytest.mark.kernel

CANARY = "sk-proj-CANARY-d41d8cd98f00b204e9800998ecf8427e"
HANG_BOUND_S = 5.0  # the goal is 1 s; this only catches a tool that does not stop


@pytest.fixture(scope="module")
def k():
    kernel = Kernel(env={"OPENAI_API_KEY": CANARY, "MPLBACKEND": "module://matplotlib_inline.backend_inline"})
    try:
        load_driver(kernel)
        yield kernel
    finally:
        kernel.shutdown()


def model_text(data: dict[str, Any]) -> str:
    return "\n".join(c["text"] for c in data["result"]["content"] if c["type"] == "text")


def iopub_texts(k: Kernel) -> list[tuple[str | None, str]]:
    """(parent msg_id, serialized content) of every output-bearing iopub message."""
    return [(m["parent_header"].get("msg_id"), json.dumps(m["content"])) for m in k.messages()
            if m["msg_type"] in ("stream", "display_data", "update_display_data", "execute_result", "error")]


def ipykernel_major(k: Kernel) -> int:
    return int(k.ev("__import__('ipykernel').__version__").split(".")[0])


def subshell(k: Kernel) -> str:
    request = k.kc.session.msg("create_subshell_request", {})
    k.kc.control_channel.send(request)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        reply = k.kc.get_control_msg(timeout=5)
        if reply["parent_header"].get("msg_id") == request["header"]["msg_id"]:
            return reply["content"]["subshell_id"]
    raise TimeoutError("no create_subshell_reply")


def execute_in_subshell(k: Kernel, subshell_id: str, code: str) -> dict[str, Any]:
    content = {"code": code, "silent": False, "store_history": False, "user_expressions": {},
               "allow_stdin": False, "stop_on_error": True}
    request = k.kc.session.msg("execute_request", content)
    request["header"]["subshell_id"] = subshell_id
    k.kc.shell_channel.send(request)
    return k.wait_reply(request["header"]["msg_id"], timeout=10)


# --- capture and semantics --------------------------------------------------------------------

TOOL_CODE = """\
import asyncio, sys
from IPython.display import display, HTML
for i in range(5):
    print('TOOL-OUT', i)
    await asyncio.sleep(0.1)
display(HTML('<b>TOOL-DISPLAY</b>'))
print('TOOL-ERR', file=sys.stderr)
'TOOL-VALUE'
"""

USER_CODE = """\
import asyncio
for i in range(5):
    print('USER-LINE', i)
    await asyncio.sleep(0.1)
'USER-RESULT'
"""


def test_no_cross_talk_with_a_concurrent_user_cell(k: Kernel) -> None:
    count_before = k.ev("get_ipython().execution_count")
    start = k.ok("start_tool('xtalk', " + repr(TOOL_CODE) + ")")
    user = k.ok(USER_CODE)
    data = driver_result(k, "xtalk")
    details = flat(data["result"]["details"])
    # the tool got exactly its own output
    assert details["stdout"] == "".join(f"TOOL-OUT {i}\n" for i in range(5))
    assert details["stderr"] == "TOOL-ERR\n"
    assert any("TOOL-DISPLAY" in d["data"].get("text/html", "") for d in details["displays"])
    assert details["value"]["data"]["text/plain"] == "'TOOL-VALUE'"
    # ...and streamed it live, in the shapes the view renders
    streamed = "".join(u["details"]["text"] for u in data["updates"] if u["details"]["kind"] == "stream"
                       and u["details"]["name"] == "stdout")
    assert streamed == details["stdout"]
    assert any(u["details"]["kind"] == "display" for u in data["updates"])
    # the user cell kept all of its output and none of the tool's
    user_text = k.text_of(user["msg_id"])
    assert all(f"USER-LINE {i}" in user_text for i in range(5)) and "USER-RESULT" in user_text
    assert "TOOL" not in user_text
    # the tool's output reached no iopub message at all
    assert not [t for _, t in iopub_texts(k) if "TOOL-" in t]
    assert k.text_of(start["msg_id"]) == ""
    # history and counters untouched by the tool
    assert k.ev("_") == "USER-RESULT"
    assert k.ev("get_ipython().execution_count") == count_before + 2
    assert k.ev("'TOOL-VALUE' not in Out.values()")
    # the two really overlapped: the tool finished after the user cell had started
    assert k.ev("MARKS['xtalk:end']") > k.ev("MARKS['xtalk:start']") + 0.3


def test_top_level_await_magics_and_shell_commands(k: Kernel) -> None:
    k.ok("start_tool('tla', 'import asyncio\\nawait asyncio.sleep(0.05)\\ntla_value = 6 * 7\\ntla_value')")
    data = driver_result(k, "tla")
    assert flat(data["result"]["details"])["value"]["data"]["text/plain"] == "42"
    assert k.ev("tla_value") == 42
    k.ok("start_tool('magic', '%timeit -n1 -r1 1\\n!echo hi-from-shell')")
    data = driver_result(k, "magic")
    stdout = flat(data["result"]["details"])["stdout"]
    assert "per loop" in stdout and "hi-from-shell" in stdout
    assert not [t for _, t in iopub_texts(k) if "hi-from-shell" in t or "per loop" in t]


def test_matplotlib_figure_is_an_image_and_does_not_leak(k: Kernel) -> None:
    k.ok("start_tool('fig', 'import matplotlib.pyplot as plt\\nplt.plot([1, 2, 3], [3, 1, 2])\\nplt.title(\"tool\")')")
    data = driver_result(k, "fig")
    images = [c for c in data["result"]["content"] if c["type"] == "image"]
    assert len(images) == 1 and images[0]["mimeType"] == "image/png"
    assert any(u["details"]["kind"] == "display" and "image/png" in u["details"]["data"]
               for u in data["updates"])
    assert k.ev("__import__('matplotlib.pyplot').pyplot.get_fignums()") == []
    after = k.ok("1")
    assert not [m for m in after["outputs"] if m["msg_type"] == "display_data"]


def test_a_figure_shown_with_plt_show_carries_its_words_and_a_users_figure_does_not(k: Kernel) -> None:
    code = "import matplotlib.pyplot as plt\\nplt.bar([\\'Jan\\', \\'May\\'], [1, 2])\\nplt.title(\\'shown\\')\\nplt.show()"
    k.ok(f"start_tool('show', '{code}')")
    data = driver_result(k, "show")
    assert "axes 1: title: shown" in model_text(data) and "x ticks: Jan | May" in model_text(data)
    user = k.ok("import matplotlib.pyplot as plt\nplt.bar(['Jan', 'May'], [1, 2])\nplt.show()")
    shown = [m["content"]["data"] for m in user["outputs"] if m["msg_type"] == "display_data"]
    assert len(shown) == 1 and "image/png" in shown[0]
    assert not any("figure-text" in mime for mime in shown[0])


def test_dataframe_summary_and_error(k: Kernel) -> None:
    k.ok("start_tool('df', 'import pandas as pd\\npd.DataFrame({\"a\": range(10), \"b\": list(\"abcdefghij\")})')")
    text = model_text(driver_result(k, "df"))
    assert "10 rows x 2 columns" in text and "\nrows:\n" in text and "<table" not in text
    k.ok("start_tool('err', 'def f():\\n    return 1 / 0\\nf()')")
    data = driver_result(k, "err")
    assert data["result"]["isError"] is True
    error = flat(data["result"]["details"])["error"]
    assert error["ename"] == "ZeroDivisionError" and "return 1 / 0" in error["traceback"]
    assert "ZeroDivisionError: division by zero" in model_text(data)
    assert not [m for m in k.messages() if m["msg_type"] == "error"]


def test_exit_in_tool_code_does_not_stop_the_kernel(k: Kernel) -> None:
    k.ok("start_tool('exit', 'exit()')")
    data = driver_result(k, "exit")
    assert flat(data["result"]["details"])["error"]["ename"] == "SystemExit"
    time.sleep(0.3)  # ipykernel would stop its loop 0.1 s after exit_now is set
    assert k.ev("get_ipython().exit_now") is False
    reply = k.ok("'still alive'")
    assert "still alive" in k.text_of(reply["msg_id"])


# --- interrupts -------------------------------------------------------------------------------

def _interrupted(k: Kernel, key: str) -> dict[str, Any]:
    data = driver_result(k, key, timeout=20)
    details = flat(data["result"]["details"])
    assert details["interrupted"] is True and data["result"]["isError"] is True
    assert details["error"]["ename"] == "KeyboardInterrupt"
    assert "[interrupted]" in model_text(data)
    return data


def _next_cell_is_normal(k: Kernel) -> None:
    reply = k.ok("print('next cell ok'); 40 + 2")
    assert "next cell ok" in k.text_of(reply["msg_id"]) and "42" in k.text_of(reply["msg_id"])
    assert not [m for m in k.messages() if m["msg_type"] == "error"]


def test_abort_interrupts_busy_loop(k: Kernel) -> None:
    if ipykernel_major(k) >= 7:
        # another execute request, on a subshell thread, sets the abort signal
        k.ok("start_tool('busy', 'while True: pass')")
        time.sleep(0.5)
        reply = execute_in_subshell(k, subshell(k), "abort('busy')")
        assert reply["status"] == "ok"
    else:
        # ipykernel 6.29 has no subshells: abort from another thread, like a widget handler
        k.ok("start_tool('busy', 'while True: pass'); abort_from_thread('busy', 0.5)")
    _interrupted(k, "busy")
    latency = k.ev("MARKS['busy:end'] - MARKS['busy:abort']")
    print(f"\n[measured] abort -> busy tool code stopped: {latency * 1000:.0f} ms")
    assert latency < HANG_BOUND_S
    _next_cell_is_normal(k)


def test_abort_interrupts_awaiting_code(k: Kernel) -> None:
    # the loop is free while the code awaits: a plain execute request delivers the abort
    k.ok("start_tool('waiting', 'import asyncio\\nawait asyncio.sleep(60)')")
    time.sleep(0.3)
    k.ok("abort('waiting')")
    data = _interrupted(k, "waiting")
    assert "await asyncio.sleep(60)" in flat(data["result"]["details"])["error"]["traceback"]
    latency = k.ev("MARKS['waiting:end'] - MARKS['waiting:abort']")
    print(f"\n[measured] abort -> awaiting tool code stopped: {latency * 1000:.0f} ms")
    assert latency < HANG_BOUND_S
    _next_cell_is_normal(k)


def test_kernel_interrupt_stops_tool_code(k: Kernel) -> None:
    k.ok("start_tool('stop', 'import time\\nwhile True:\\n    time.sleep(0.01)')")
    time.sleep(0.5)
    sent = time.time()
    k.interrupt()
    data = _interrupted(k, "stop")
    assert "kernel interrupt" in flat(data["result"]["details"])["error"]["evalue"]
    latency = k.ev("MARKS['stop:end']") - sent
    print(f"\n[measured] kernel interrupt -> tool code stopped: {latency * 1000:.0f} ms")
    assert latency < HANG_BOUND_S
    _next_cell_is_normal(k)
    # an interrupt while nothing runs is ignored as before (no stray KeyboardInterrupt)
    k.interrupt()
    time.sleep(0.3)
    _next_cell_is_normal(k)


def test_timeout(k: Kernel) -> None:
    k.ok("start_tool('slow', 'while True: pass', timeout_s=1.0)")
    data = _interrupted(k, "slow")
    assert flat(data["result"]["details"])["timed_out"] is True
    elapsed = k.ev("MARKS['slow:end'] - MARKS['slow:start']")
    print(f"\n[measured] 1.0 s timeout -> tool stopped after {elapsed:.2f} s")
    assert 0.9 < elapsed < 1.0 + HANG_BOUND_S
    _next_cell_is_normal(k)


def test_sigint_handler_is_restored(k: Kernel) -> None:
    k.ok("start_tool('plain', 'import time\\ntime.sleep(0.2)')")
    driver_result(k, "plain")
    # during this request ipykernel has its default_int_handler in place and keeps the idle
    # handler (SIG_IGN) to restore afterwards: neither may be ours
    assert k.ev("repr(__import__('signal').getsignal(2))") == repr(__import__("signal").default_int_handler)
    assert k.ev("repr(get_ipython().kernel.saved_sigint_handler)") == repr(__import__("signal").SIG_IGN)


# --- approval through a real agent loop ---------------------------------------------------------

def _agent(k: Kernel, key: str) -> dict[str, Any]:
    k.wait_for(f"AGENT[{key!r}].get('done')", timeout=30)
    state = k.ev(f"AGENT[{key!r}]")
    assert "raised" not in state, state.get("raised")
    return state


def _tool_end(state: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in state["events"] if e["type"] == "tool_execution_end")


def test_approval_ask_run(k: Kernel) -> None:
    k.ok("start_agent('ask-run', 'approved_value = 123\\nprint(\"ran\")', 'ask', True)")
    k.wait_for("'ask-run' in PENDING", timeout=20)
    assert k.ev("AGENT['ask-run']['asked']") == ['approved_value = 123\nprint("ran")']
    assert k.ev("'approved_value' in globals()") is False  # still waiting, nothing ran
    k.ok("answer('ask-run', 'run')")
    state = _agent(k, "ask-run")
    end = _tool_end(state)
    assert end["isError"] is False and flat(end["result"]["details"])["stdout"] == "ran\n"
    assert k.ev("approved_value") == 123


def test_approval_skip_tells_the_model(k: Kernel) -> None:
    k.ok("start_agent('ask-skip', 'skipped_value = 1', 'ask', True)")
    k.wait_for("'ask-skip' in PENDING", timeout=20)
    k.ok("answer('ask-skip', 'skip')")
    state = _agent(k, "ask-skip")
    assert _tool_end(state)["isError"] is True
    second_request = json.dumps(state["sent"][1])
    assert "declined" in second_request  # the model saw the reason
    assert k.ev("'skipped_value' in globals()") is False


def test_headless_ask_fails_closed(k: Kernel) -> None:
    started = time.monotonic()
    k.ok("start_agent('headless', 'headless_value = 1', 'ask', False)")
    state = _agent(k, "headless")
    assert time.monotonic() - started < 20
    assert state["asked"] == [] and len(state["notes"]) == 1 and "not interactive" in state["notes"][0]
    assert "not interactive" in json.dumps(state["sent"][1])
    assert k.ev("'headless_value' in globals()") is False


# --- secrets ------------------------------------------------------------------------------------

def test_key_canary_never_leaves_the_kernel(k: Kernel) -> None:
    digest = hashlib.sha256(CANARY.encode()).hexdigest()
    assert k.ev("__import__('hashlib').sha256(__import__('os').environ['OPENAI_API_KEY'].encode()).hexdigest()") == digest
    code = "import os\nprint(os.environ)\nraise RuntimeError(os.environ['OPENAI_API_KEY'])"
    k.ok(f"start_agent('canary', {code!r}, 'auto', False)")
    state = _agent(k, "canary")
    k.ok(f"start_tool('canary-tool', {code!r})")
    data = driver_result(k, "canary-tool")
    k.ok("start_tool('canary-value', 'os.environ[\"OPENAI_API_KEY\"]')")
    value = driver_result(k, "canary-value")
    end = _tool_end(state)
    assert end["isError"] is True and "[redacted]" in flat(end["result"]["details"])["stdout"]
    assert "[redacted]" in flat(end["result"]["details"])["error"]["evalue"]
    assert flat(value["result"]["details"])["value"]["data"]["text/plain"] == "'[redacted]'"
    everything = json.dumps(state) + json.dumps(data) + json.dumps(value)
    assert CANARY not in everything
    assert not [m for m in k.messages() if CANARY in json.dumps(m, default=str)]
