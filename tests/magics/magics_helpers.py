"""Shared helpers of the magics' unit tests."""

from __future__ import annotations

import asyncio
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

class FakeView:
    """Records every call the runtime makes; approvals answer from ``approval_answer``."""

    instances: list["FakeView"] = []

    def __init__(self, model_label: str, loop: Any, on_abort: Any, on_remove_queued: Any) -> None:
        self.model_label = model_label
        self.loop = loop
        self.on_abort = on_abort
        self.on_remove_queued = on_remove_queued
        self.calls: list[tuple[Any, ...]] = []
        self.events: list[Any] = []
        self.widget = None  # displayed as None: nothing is published
        self.approval_answer = "run"
        FakeView.instances.append(self)

    def handle_event(self, event: Any) -> None:
        self.events.append(event)

    def add_user_message(self, text: str, kind: str) -> None:
        self.calls.append(("user", kind, text))

    def show_queued(self, kind: str, text: str, token: str) -> None:
        self.calls.append(("queued", kind, text, token))

    def remove_queued(self, token: str) -> None:
        self.calls.append(("unqueued", token))

    async def request_approval(self, request: Any) -> Any:
        self.calls.append(("approval", request))
        return self.approval_answer

    def set_status(self, status: str, *args: Any) -> None:
        self.calls.append(("status", status))

    def show_notice(self, text: str, level: str = "info") -> None:
        self.calls.append(("notice", level, text))

    def set_context_usage(self, used: int, window: int) -> None:
        self.calls.append(("context", used, window))

    def finish(self, status: str) -> None:
        self.calls.append(("finish", status))

    def to_markdown(self) -> str:
        return "transcript"

    def kinds(self, name: str) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0] == name]

    def text(self) -> str:
        return "".join(e.assistant_message_event.delta for e in self.events
                       if e.type == "message_update"
                       and getattr(e.assistant_message_event, "type", "") == "text_delta")


def runtime():
    import pi_notebook.magics as magics

    return magics.current_runtime()


async def run_cell(ip: InteractiveShell, code: str) -> Any:
    """Execute like ipykernel does: transform, then run (async when needed)."""
    transformed = ip.transform_cell(code)
    return await ip.run_cell_async(code, transformed_cell=transformed, store_history=True)


async def settle(timeout: float = 5.0) -> None:
    """Wait for the current run task (if any) to end."""
    rt = runtime()
    task = rt.last_task
    if task is not None:
        await asyncio.wait_for(asyncio.shield(task), timeout)
