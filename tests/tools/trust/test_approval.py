from __future__ import annotations

import asyncio
import threading
import time

import pytest

from pi_notebook.agent.types import BeforeToolCallContext, BeforeToolCallResult
from pi_notebook.ai.abort import AbortController
from pi_notebook.ai.types import ToolCall
from pi_notebook.tools.trust.approval import (
    HEADLESS_REASON,
    ApprovalRequest,
    default_policy,
    make_approval_hook,
)


def ctx(name: str = "python", code: str = "print(1)") -> BeforeToolCallContext:
    call = ToolCall(id="call-7", name=name, arguments={"code": code})
    return BeforeToolCallContext(assistant_message=None, tool_call=call, args={"code": code}, context=None)


class Asker:
    """A scripted user: answers from a list, records the requests."""

    def __init__(self, *answers: str, delay: float = 0.0) -> None:
        self.answers = list(answers)
        self.requests: list[ApprovalRequest] = []
        self.cancelled = 0
        self.delay = delay

    async def __call__(self, request: ApprovalRequest) -> str:
        self.requests.append(request)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return self.answers.pop(0)


async def test_auto_runs_and_other_tools_need_no_approval() -> None:
    asker = Asker()
    hook = make_approval_hook(lambda: "auto", asker, lambda: True)
    assert await hook(ctx(), None) is None
    hook = make_approval_hook(lambda: "deny", asker, lambda: True)
    assert await hook(ctx(name="list_variables"), None) is None
    assert asker.requests == []


async def test_deny_blocks_with_a_reason() -> None:
    hook = make_approval_hook(lambda: "deny", None, lambda: True)
    result = await hook(ctx(), None)
    assert isinstance(result, BeforeToolCallResult)
    assert result.block is True and "disabled" in result.reason and "'deny'" in result.reason


async def test_ask_run_skip_always() -> None:
    asker = Asker("run", "skip", "always")
    hook = make_approval_hook(lambda: "ask", asker, lambda: True)
    assert await hook(ctx(code="a = 1"), None) is None
    assert asker.requests[0].code == "a = 1" and asker.requests[0].tool_call_id == "call-7"
    skipped = await hook(ctx(), None)
    assert skipped.block and "declined" in skipped.reason
    assert await hook(ctx(), None) is None  # "always"
    assert await hook(ctx(), None) is None  # no question asked now
    assert len(asker.requests) == 3
    hook.reset_run()
    asker.answers.append("skip")
    assert (await hook(ctx(), None)).block
    assert len(asker.requests) == 4


async def test_unknown_answer_counts_as_skip() -> None:
    hook = make_approval_hook(lambda: "ask", Asker("deny"), lambda: True)
    assert (await hook(ctx(), None)).block


async def test_headless_ask_fails_closed_without_waiting() -> None:
    asker = Asker("run")
    notes: list[str] = []
    hook = make_approval_hook(lambda: "ask", asker, lambda: False, notify=notes.append)
    result = await asyncio.wait_for(hook(ctx(), None), 1)
    assert result.block and result.reason == HEADLESS_REASON and notes == [HEADLESS_REASON]
    assert "auto" in HEADLESS_REASON and asker.requests == []
    again = await hook(ctx(), None)  # refused again, and its card says so; the notice was once
    assert again.block and again.reason == HEADLESS_REASON and notes == [HEADLESS_REASON]
    hook.reset_run()  # a new run says it again
    await hook(ctx(), None)
    assert notes == [HEADLESS_REASON, HEADLESS_REASON]
    no_ask = make_approval_hook(lambda: "ask", None, lambda: True)
    assert (await no_ask(ctx(), None)).block


@pytest.mark.parametrize("from_thread", [False, True])
async def test_abort_while_waiting_stops_at_once(from_thread: bool) -> None:
    asker = Asker("run", delay=30)
    hook = make_approval_hook(lambda: "ask", asker, lambda: True)
    controller = AbortController()
    if from_thread:
        threading.Timer(0.1, controller.abort).start()
    else:
        asyncio.get_running_loop().call_later(0.1, controller.abort)
    started = time.monotonic()
    result = await hook(ctx(), controller.signal)
    assert result is None  # the loop sees the aborted signal and reports "Operation aborted"
    assert time.monotonic() - started < 5
    await asyncio.sleep(0)
    assert asker.cancelled == 1  # the view's question was withdrawn


async def test_already_aborted_does_not_ask() -> None:
    asker = Asker("run")
    hook = make_approval_hook(lambda: "ask", asker, lambda: True)
    controller = AbortController()
    controller.abort()
    assert await hook(ctx(), controller.signal) is None and asker.requests == []


async def test_resolved_from_another_thread_via_loop() -> None:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def ask(request: ApprovalRequest) -> asyncio.Future[str]:
        # what a button handler on a subshell thread does
        threading.Timer(0.05, lambda: loop.call_soon_threadsafe(future.set_result, "run")).start()
        return future

    hook = make_approval_hook(lambda: "ask", ask, lambda: True)
    assert await hook(ctx(), AbortController().signal) is None


async def test_policy_is_read_per_call() -> None:
    policy = ["deny"]
    hook = make_approval_hook(lambda: policy[0], Asker(), lambda: True)
    assert (await hook(ctx(), None)).block
    policy[0] = "auto"
    assert await hook(ctx(), None) is None
    policy[0] = "bogus"
    assert (await hook(ctx(), None)).block


def test_default_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PI_NOTEBOOK_APPROVAL", raising=False)
    assert default_policy() == "ask"
    monkeypatch.setenv("PI_NOTEBOOK_APPROVAL", " AUTO ")
    assert default_policy() == "auto"
    monkeypatch.setenv("PI_NOTEBOOK_APPROVAL", "yes-please")
    assert default_policy() == "ask"


async def test_synchronous_answer_is_accepted() -> None:
    hook = make_approval_hook(lambda: "ask", lambda request: "run", lambda: True)
    assert await hook(ctx(), AbortController().signal) is None
    hook = make_approval_hook(lambda: "ask", lambda request: "skip", lambda: True)
    assert (await hook(ctx(), None)).block
