"""Trust classes that are a kernel's behaviour, in a real ipykernel (``kernel`` marker).

The python tool runs in a background task of the kernel loop (``start_tool`` of helpers/kernel_driver.py,
as the agent does); a canary key is in the kernel's environment. Every iopub message a
frontend would see is checked for it.
"""

from __future__ import annotations

import json
import time

import pytest

from helpers.kernel import Kernel, kernel_with_fd_capture, driver_result, load_driver
from helpers.shell import flat

pytestmark = pytest.mark.kernel

CANARY = "sk-proj-TRUSTKERNEL-7Hq3Nw8Zp1Ks6Vd0Lx5Jc7Bf2"


@pytest.fixture(scope="module")
def k():
    # the leak under test (fd output published raw in the current cell) needs ipykernel's fd
    # capture on, as in a notebook
    kernel = kernel_with_fd_capture(env={"OPENAI_API_KEY": CANARY,
                                         "MPLBACKEND": "module://matplotlib_inline.backend_inline"})
    assert kernel.ev("__import__('os').readlink('/proc/self/fd/1')").startswith("pipe:")  # fd capture on
    try:
        load_driver(kernel)
        yield kernel
    finally:
        kernel.shutdown()


def iopub_dump(k: Kernel, since: float = 0.0) -> list[tuple[str | None, str, str]]:
    return [(m["parent_header"].get("msg_id"), m["msg_type"], json.dumps(m["content"]))
            for m in k.messages(since) if m["msg_type"] not in ("status", "execute_input")]


def no_canary(k: Kernel) -> None:
    pieces = [CANARY[i:i + 8] for i in range(len(CANARY) - 7)]
    for _, kind, text in iopub_dump(k):
        assert not any(p in text for p in pieces), f"canary piece in iopub {kind}: {text[:300]}"


OS_CODE = "import os\nos.system('echo FD-LINE $OPENAI_API_KEY')\nos.system('echo FD-ERR >&2')"


def test_os_system_output_goes_to_the_tool_redacted_while_idle(k: Kernel) -> None:
    since = time.monotonic()
    k.ok("start_tool('os-idle', " + repr(OS_CODE) + ")")
    details = flat(driver_result(k, "os-idle")["result"]["details"])
    assert details["stdout"] == "FD-LINE [redacted]\n" and details["stderr"] == "FD-ERR\n"
    assert not [t for _, _, t in iopub_dump(k, since) if "FD-LINE" in t or "FD-ERR" in t]
    no_canary(k)


def test_os_system_output_does_not_land_in_a_running_user_cell(k: Kernel) -> None:
    code = "import os, time\ntime.sleep(0.5)\nfor i in range(3):\n    os.system(f'echo FD-AGENT-{i} $OPENAI_API_KEY')\n    time.sleep(0.1)"
    k.ok("start_tool('os-user', " + repr(code) + ")")
    user = k.ok("import asyncio\nfor i in range(10):\n    print('USER', i)\n    await asyncio.sleep(0.15)")
    details = flat(driver_result(k, "os-user")["result"]["details"])
    assert details["stdout"] == "".join(f"FD-AGENT-{i} [redacted]\n" for i in range(3))
    user_text = k.text_of(user["msg_id"])
    assert all(f"USER {i}" in user_text for i in range(10)) and "FD-AGENT" not in user_text
    assert not [t for _, _, t in iopub_dump(k) if "FD-AGENT" in t]
    # fd 1 works normally again for the user's own os.system
    k.ok("import os; os.system('echo USER-FD')")
    deadline = time.monotonic() + 10
    while not any("USER-FD" in t for _, _, t in iopub_dump(k)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert any("USER-FD" in t for _, _, t in iopub_dump(k)), (
        k.ev("{f: __import__('os').readlink('/proc/self/fd/' + f) for f in ('1', '2')}"),
        [t for _, kind, t in iopub_dump(k) if kind == "stream"][-4:])
    no_canary(k)


LATE_CODE = ("import threading, time, os\n"
             "def later():\n    for i in range(3):\n        time.sleep(0.2)\n"
             "        print('LATE', i, os.environ['OPENAI_API_KEY'])\n"
             "threading.Thread(target=later, daemon=True).start()\nprint('ON-TIME')")


def test_late_thread_output_is_labelled_and_redacted(k: Kernel) -> None:
    since = time.monotonic()
    k.ok("start_tool('late', " + repr(LATE_CODE) + ")")
    details = flat(driver_result(k, "late")["result"]["details"])
    assert details["stdout"] == "ON-TIME\n"
    deadline = time.monotonic() + 10
    text = ""
    while text.count("[redacted]") < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
        # All stream text, not only messages that say LATE: the late sink coalesces writes by
        # time, so one print() can reach iopub as two messages ("...LATE" and " 2 [redacted]\n").
        late = [t for _, kind, t in iopub_dump(k, since) if kind == "stream"]
        text = "".join(json.loads(t)["text"] for t in late)
    assert text.count("[late output of agent code] LATE") == 3 and text.count("[redacted]") == 3
    no_canary(k)


def test_redirect_stdout_does_not_take_a_running_user_cells_output(k: Kernel) -> None:
    code = ("import contextlib, io, asyncio\nagent_buf = io.StringIO()\n"
            "with contextlib.redirect_stdout(agent_buf):\n"
            "    for i in range(10):\n        print('AGENT', i)\n        await asyncio.sleep(0.1)\n"
            "import sys\nsys.stdout = io.StringIO()  # never restored by the code\nprint('lost?')")
    k.ok("start_tool('swap', " + repr(code) + ")")
    user = k.ok("import asyncio\nfor i in range(8):\n    print('USER-SWAP', i)\n    await asyncio.sleep(0.1)")
    driver_result(k, "swap")
    user_text = k.text_of(user["msg_id"])
    assert all(f"USER-SWAP {i}" in user_text for i in range(8)) and "AGENT" not in user_text
    assert k.ev("agent_buf.getvalue()") == "".join(f"AGENT {i}\n" for i in range(10))
    later = k.ok("print('later cell')")
    assert k.text_of(later["msg_id"]) == "later cell\n"
    assert k.ev("type(__import__('sys').stdout).__name__") == "RoutedStream"


def test_display_error_is_in_the_result_not_a_stray_error(k: Kernel) -> None:
    since = time.monotonic()
    code = "class Bad:\n    def _repr_html_(self):\n        raise ValueError('html broke')\nBad()"
    k.ok("start_tool('display-error', " + repr(code) + ")")
    details = flat(driver_result(k, "display-error")["result"]["details"])
    assert "ValueError: html broke" in details["stderr"] and details["value"] is not None
    assert not [t for _, kind, t in iopub_dump(k, since) if kind == "error" or "html broke" in t]


def test_surrogates_and_bad_bytes_never_break_the_result(k: Kernel) -> None:
    code = "import os\nprint('a\\ud800b')\nos.write(1, b'\\xff\\xfe raw\\n')\nraise ValueError('v\\udcff')"
    k.ok("start_tool('surrogate', " + repr(code) + ")")
    data = driver_result(k, "surrogate")
    details = flat(data["result"]["details"])
    assert details["stdout"] == "a\ufffdb\n\ufffd\ufffd raw\n"
    assert details["error"]["evalue"] == "v\ufffd"


def test_endless_repr_is_bounded_and_stop_ends_the_listing(k: Kernel) -> None:
    k.ok("class Endless:\n    def __repr__(self):\n        while True:\n            pass\n"
         "endless_value = Endless()\nplain_value = 7")
    k.ok("start_variables('bounded', repr_timeout_s=0.5)")
    text = driver_result(k, "bounded", timeout=10)["result"]["content"][0]["text"]
    assert "repr took too long (> 0.5 s)" in text and "plain_value | int | 7" in text
    # with a long limit, the kernel's Stop button ends the call; the kernel stays usable
    k.ok("start_variables('stopped', repr_timeout_s=60)")
    k.wait_for("'stopped:start' in MARKS")
    time.sleep(0.3)
    k.km.interrupt_kernel()
    data = driver_result(k, "stopped", timeout=10)
    assert data["result"]["isError"] is True and "Stopped" in data["result"]["content"][0]["text"]
    assert k.ev("MARKS['stopped:end'] - MARKS['stopped:start']") < 5
    assert k.ok("1 + 1")["status"] == "ok"
