"""Run All at the message level: every iopub message of a request carries that request's parent.

A frontend that shows widgets keeps talking to the kernel while cells run: JupyterLab reports
``_view_count`` for every view it renders, and a user clicks buttons. ipykernel 7 handles a
comm message that arrives while a cell holds the main shell beside that cell and afterwards
restores the shell parent it read on arrival; when the holding cell ended meanwhile and the
next queued cell started, that restore put the old cell's parent back under the new cell, whose
result and final ``idle`` then went out as the old cell's (JupyterLab left it at ``[*]``).

Here a client sends whole notebooks at once, as Run All does, while a frontend stand-in keeps
sending widget updates, and every request is checked: its busy, its outputs and its idle
carry its own msg_id, nothing but widget traffic follows its idle, and its result comes before
its reply.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from jupyter_client.session import Session
from helpers.kernel import Kernel, faux_setup

pytestmark = pytest.mark.kernel

OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")


class FrontendChatter:
    """Reports a rendered view (``_view_count`` 1) for widgets the kernel opened, a few every
    10 ms until stopped, as JupyterLab does while it renders: comm messages arrive across cell
    ends."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        # a client of its own (zmq sockets are not thread-safe, and the test's client sends the
        # cells) with a session of its own (the socket identity: replies go to the right client)
        session = Session(key=kernel.km.session.key, signature_scheme=kernel.km.session.signature_scheme)
        self.client = kernel.km.client(session=session)
        self.client.start_channels(iopub=False, stdin=False, hb=False, control=False)
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> FrontendChatter:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.client.stop_channels()

    def _widgets(self) -> list[str]:
        return [m["content"]["comm_id"] for m in self.kernel.messages()
                if m["msg_type"] == "comm_open" and m["content"].get("target_name") == "jupyter.widget"]

    def _run(self) -> None:
        rng = random.Random(7)
        while not self._stop.is_set():
            widgets = self._widgets()
            for comm_id in rng.sample(widgets, min(len(widgets), 3)):
                data = {"method": "update", "state": {"_view_count": 1}, "buffer_paths": []}
                self.client.shell_channel.send(
                    self.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data}))
                self.sent += 1
            time.sleep(0.01)


def _check_request(kernel: Kernel, msg_id: str, reply: dict[str, Any]) -> None:
    mine = [m for m in kernel.messages() if m["parent_header"].get("msg_id") == msg_id]
    kinds = [m["msg_type"] if m["msg_type"] != "status" else m["content"]["execution_state"] for m in mine]
    assert kinds.count("busy") == 1 and kinds.count("idle") == 1, kinds
    # a run that goes on after its cell returned updates its view (widget comm messages and
    # updates of its display by id, under the cell's parent); nothing else may follow the idle
    after_idle = kinds[kinds.index("idle") + 1:]
    assert kinds[0] == "busy", kinds
    assert all(kind.startswith("comm_") or kind == "update_display_data" for kind in after_idle), (
        msg_id, [kind for kind in kinds if not kind.startswith("comm_")])
    reply_time = reply["date"]
    for message in mine:
        if message["msg_type"] in OUTPUT_TYPES:
            assert message["header"]["date"] <= reply_time, (
                f"{message['msg_type']} of {msg_id} sent after its execute_reply")


def _run_all(kernel: Kernel, cells: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Send every cell at once (Run All) and wait for each reply and idle."""
    ids = [kernel.start(code) for code in cells]
    replies: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + 60
    while len(replies) < len(ids):
        assert time.monotonic() < deadline, f"replies missing: {set(ids) - set(replies)}"
        try:
            message = kernel.kc.get_shell_msg(timeout=0.5)
        except Exception:
            continue
        parent = message["parent_header"].get("msg_id")
        if parent in ids:
            replies[parent] = {"content": message["content"], "date": message["header"]["date"]}
    for msg_id in ids:
        end = time.monotonic() + 10
        while not kernel._idle_seen(msg_id):
            if time.monotonic() > end:
                stray = [m["parent_header"].get("msg_id") for m in kernel.messages()
                         if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"]
                raise AssertionError(f"no idle carries {msg_id} (idles went to {stray[-6:]}): "
                                     "the cell would stay at [*]")
            time.sleep(0.01)
    return [(msg_id, replies[msg_id]) for msg_id in ids]


NOTEBOOK = ["import ipywidgets",
            faux_setup(200),
            "faux.set_responses([faux_assistant_message('the answer is ' + 'forty-two ' * 30)"
            " for _ in range(2)])",
            "%%agent -m faux/faux-1\nwhat is the answer?\n",
            "x = 41\nx + 1",
            "print('third cell')"]


@pytest.mark.parametrize("attempt", range(10))
def test_run_all_twice_in_a_fresh_kernel_keeps_every_parent(attempt):
    """A fresh kernel has seen no frontend yet: the %%agent cell waits until its view is shown,
    and the ``_view_count`` update that shows it arrives while that cell holds the shell."""
    kernel = Kernel()
    try:
        with FrontendChatter(kernel) as chatter:
            for _ in range(2):  # Run All, then Run All again
                for msg_id, reply in _run_all(kernel, NOTEBOOK):
                    assert reply["content"]["status"] == "ok", reply["content"]
                    _check_request(kernel, msg_id, reply)
        assert chatter.sent > 0
        results = [m["content"]["data"]["text/plain"] for m in kernel.messages()
                   if m["msg_type"] == "execute_result"]
        assert results == ["42", "42"]
    finally:
        kernel.shutdown()
