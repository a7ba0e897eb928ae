"""Shared helpers of the magics' unit tests."""

from __future__ import annotations

import asyncio
from typing import Any

from IPython.core.interactiveshell import InteractiveShell


class FakeView:
    """A RunView that records every call the runtime makes; approvals answer from
    ``approval_answer``."""

    instances: list[FakeView] = []

    def __init__(self, model_label: str, loop: Any, on_abort: Any, on_remove_queued: Any) -> None:
        self.model_label = model_label
        self.loop = loop
        self.on_abort = on_abort
        self.on_remove_queued = on_remove_queued
        self.calls: list[tuple[Any, ...]] = []
        self.events: list[Any] = []
        self.approval_answer = "run"
        FakeView.instances.append(self)

    def handle_event(self, event: Any) -> None:
        self.events.append(event)

    def add_user_message(self, text: str, kind: str = "prompt") -> None:
        self.calls.append(("user", kind, text))

    def show_queued(self, kind: str, text: str, token: str) -> None:
        self.calls.append(("queued", kind, text, token))

    def remove_queued(self, token: str) -> None:
        self.calls.append(("unqueued", token))

    def deliver_queued(self, token: str, text: str, kind: str) -> None:
        self.calls.append(("delivered", token, text, kind))

    def set_policy(self, policy: str) -> None:
        self.calls.append(("policy", policy))

    def set_model_label(self, label: str) -> None:
        self.calls.append(("label", label))
        self.model_label = label

    def close(self) -> None:
        self.calls.append(("close",))

    async def request_approval(self, request: Any) -> Any:
        self.calls.append(("approval", request))
        return self.approval_answer

    def set_status(self, status: str, detail: str = "") -> None:
        self.calls.append(("status", status, detail) if detail else ("status", status))

    def show_notice(self, text: str, level: str = "info") -> None:
        self.calls.append(("notice", level, text))

    def set_context_usage(self, used: int | None, window: int | None = None) -> None:
        self.calls.append(("context", used, window))

    def finish(self, status: str | None = None) -> None:
        self.calls.append(("finish", status))

    def to_markdown(self) -> str:
        return "transcript"

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        return {"text/plain": "fake view"}

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
    task = rt.runs.latest.task if rt.runs.latest is not None else None
    if task is not None:
        await asyncio.wait_for(asyncio.shield(task), timeout)
