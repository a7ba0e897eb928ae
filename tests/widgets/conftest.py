"""Fixtures for AgentView tests: a real ipywidgets object graph whose comms record
every message instead of talking to a kernel (no kernel needed)."""

from __future__ import annotations

import asyncio
from typing import Any

import comm
import pytest
from comm import DummyComm

from pi_notebook.widgets.view import AgentView

from widget_helpers import CommLog


@pytest.fixture
def comms(monkeypatch: pytest.MonkeyPatch) -> CommLog:
    log = CommLog()

    class RecordingComm(DummyComm):
        def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None,
                        buffers: Any = None, **keys: Any) -> None:
            log.messages.append((self.comm_id, msg_type, data))

    monkeypatch.setattr(comm, "create_comm", lambda *a, **k: RecordingComm(*a, **k))
    return log


@pytest.fixture
async def view(comms: CommLog):
    aborts: list[Any] = []
    removed: list[Any] = []
    v = AgentView("faux/test-model", asyncio.get_running_loop(), on_abort=lambda: aborts.append(True),
                  on_remove_queued=removed.append)
    v.aborts = aborts  # type: ignore[attr-defined]
    v.removed = removed  # type: ignore[attr-defined]
    yield v
    v.close()


