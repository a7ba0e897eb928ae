"""Approval of agent-run code, enforced through the loop's ``before_tool_call`` hook.

Policies: ``auto`` (run), ``deny`` (block, the model is told code execution is disabled),
``ask`` (ask the user; the default). Only tools in ``tools`` (default ``{"python"}``) need
approval.

``make_approval_hook(get_policy, ask, is_interactive, *, tools=..., notify=None)`` returns an
:class:`ApprovalHook`, usable as ``before_tool_call(ctx, signal)``:

- ``ask(ApprovalRequest) -> Awaitable["run" | "skip" | "always"]`` is called for ``ask`` (a
  coroutine, a Future, or a plain string); any other answer (e.g. ``"deny"``) counts as skip.
  ``ApprovalRequest`` has ``tool_call_id``, ``tool_name``, ``args`` and ``code`` (the python
  code, to show in the card). The wait never blocks the kernel: it awaits a
  future on the loop, so the view resolves it from a button handler (hopping to the loop with
  ``call_soon_threadsafe`` itself).
- ``"always"`` approves the rest of the run; the magics call ``hook.reset_run()`` when a run
  starts.
- Skip blocks with a reason telling the model the user declined.
- Abort during the wait stops waiting at once (the ask awaitable is cancelled, the hook
  returns ``None``; the loop then reports "Operation aborted").
- Headless (``is_interactive()`` false, or raising) with ``ask`` fails closed: blocks with a
  clear message, also passed to ``notify(message)`` (if given) so the notebook can print it,
  once per run and reason (every refused call's card already shows it).
  ``is_interactive`` is asked again every ``recheck_s`` while waiting: a frontend that goes
  away mid-wait ends the wait the same way. ``timeout_s`` (optional) bounds the wait; no
  answer in time blocks the call too. Never hangs.

The policy names (``APPROVAL_POLICIES``, the ``Literal`` ``ApprovalPolicy``) and their
environment default (``default_policy()`` reads ``APPROVAL_ENV``, ``PI_NOTEBOOK_APPROVAL``;
``ask`` when unset or invalid) are defined in the dependency-free ``policy.py`` and
re-exported here.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..agent.types import BeforeToolCallResult
from ..ai.types import get_field
from .policy import APPROVAL_ENV, APPROVAL_POLICIES, ApprovalPolicy, default_policy

__all__ = [
    "APPROVAL_ENV",
    "APPROVAL_POLICIES",
    "ApprovalPolicy",
    "ApprovalHook",
    "ApprovalRequest",
    "Decision",
    "default_policy",
    "make_approval_hook",
]

Decision = Literal["run", "skip", "always"]

DENIED_REASON = (
    "Code execution is disabled: the approval policy is 'deny', so this tool call was not run. "
    "Do not retry it; answer without running code or ask the user to change the policy."
)
SKIPPED_REASON = (
    "The user declined to run this code (skipped in the approval prompt). It was not executed. "
    "Do not retry the same call; ask the user how to proceed or continue without it."
)
HEADLESS_REASON = (
    "Code execution needs approval, but this run is not interactive (no notebook frontend to "
    "ask), so the call was blocked and not executed. To allow code in headless runs, set the "
    "approval policy to 'auto' (%%agent --approve auto, or PI_NOTEBOOK_APPROVAL=auto)."
)
TIMEOUT_REASON = (
    "Code execution needs approval, but nobody answered the approval prompt within {seconds:g} s, "
    "so the call was blocked and not executed. Do not retry it; ask the user how to proceed."
)


class _Headless(Exception):
    """The frontend went away while we waited for an answer."""


@dataclass
class ApprovalRequest:
    """What the view shows on its Run / Skip / Always buttons."""

    tool_call_id: str
    tool_name: str
    args: Any
    code: str | None = None  # the code of a python call, for display
    extra: dict[str, Any] = field(default_factory=dict)


class ApprovalHook:
    """``before_tool_call`` implementation (see the module docstring)."""

    def __init__(
        self,
        get_policy: Callable[[], str],
        ask: Callable[[ApprovalRequest], Awaitable[str]] | None,
        is_interactive: Callable[[], bool],
        *,
        tools: Iterable[str] = ("python",),
        notify: Callable[[str], Any] | None = None,
        timeout_s: float | None = None,
        recheck_s: float = 1.0,
    ) -> None:
        self.timeout_s = timeout_s
        self.recheck_s = recheck_s
        self._get_policy = get_policy
        self._ask = ask
        self._is_interactive = is_interactive
        self.tools = set(tools)
        self._notify = notify
        self._notified: set[str] = set()  # reasons already told to the user in this run
        self.always = False

    def reset_run(self) -> None:
        """Forget an "Always for this run" answer (call when a run starts)."""
        self.always = False
        self._notified.clear()

    async def __call__(self, ctx: Any, signal: Any = None) -> BeforeToolCallResult | None:
        tool_call = get_field(ctx, "tool_call")
        name = get_field(tool_call, "name", default="")
        if name not in self.tools:
            return None
        policy = (self._get_policy() or "ask").strip().lower()
        if policy == "auto":
            return None
        if policy == "deny":
            return BeforeToolCallResult(block=True, reason=DENIED_REASON)
        if policy != "ask":
            # Unknown policies fail closed.
            return BeforeToolCallResult(
                block=True, reason=f"Unknown approval policy {policy!r}; the call was not executed."
            )
        if self.always:
            return None
        if self._ask is None or not self._interactive():
            return self._fail_closed(HEADLESS_REASON)
        if signal is not None and signal.aborted:
            return None
        args = get_field(ctx, "args")
        request = ApprovalRequest(
            tool_call_id=get_field(tool_call, "id", default=""),
            tool_name=name,
            args=args,
            code=get_field(args, "code") if name == "python" else None,
        )
        try:
            decision = await asyncio.wait_for(self._wait(request, signal), self.timeout_s)
        except _Headless:
            return self._fail_closed(HEADLESS_REASON)
        except asyncio.TimeoutError:
            return self._fail_closed(TIMEOUT_REASON.format(seconds=self.timeout_s))
        if decision is None:  # aborted while waiting: the loop reports "Operation aborted"
            return None
        if decision == "always":
            self.always = True
            return None
        if decision == "run":
            return None
        return BeforeToolCallResult(block=True, reason=SKIPPED_REASON)

    def _interactive(self) -> bool:
        try:
            return bool(self._is_interactive())
        except Exception:  # cannot tell: fail closed
            return False

    def _fail_closed(self, reason: str) -> BeforeToolCallResult:
        # each refused call's card shows the reason; the run-level notice says it once per run
        if self._notify is not None and reason not in self._notified:
            self._notified.add(reason)
            try:
                self._notify(reason)
            except Exception:
                pass
        return BeforeToolCallResult(block=True, reason=reason)

    async def _wait(self, request: ApprovalRequest, signal: Any) -> str | None:
        assert self._ask is not None
        loop = asyncio.get_running_loop()
        pending = self._ask(request)
        if not inspect.isawaitable(pending):
            return pending  # a synchronous answer
        answer = asyncio.ensure_future(pending)
        try:
            return await self._wait_answer(answer, signal, loop)
        finally:
            if not answer.done():
                answer.cancel()  # the view takes its buttons down

    async def _wait_answer(self, answer: asyncio.Future[Any], signal: Any,
                           loop: asyncio.AbstractEventLoop) -> str | None:
        aborted = loop.create_future()
        loop_thread = threading.get_ident()

        def on_abort() -> None:
            # Listeners run on the thread that aborts (a widget handler may be a subshell).
            def settle() -> None:
                if not aborted.done():
                    aborted.set_result(None)

            if threading.get_ident() == loop_thread:
                settle()
            else:
                loop.call_soon_threadsafe(settle)

        remove = signal.add_listener(on_abort) if signal is not None else (lambda: None)
        try:
            while not answer.done() and not aborted.done():
                await asyncio.wait({answer, aborted}, timeout=self.recheck_s,
                                   return_when=asyncio.FIRST_COMPLETED)
                if not answer.done() and not aborted.done() and not self._interactive():
                    raise _Headless()
        finally:
            remove()
            aborted.cancel()
        if not answer.done():
            return None
        if signal is not None and signal.aborted:
            return None
        return answer.result()


def make_approval_hook(
    get_policy: Callable[[], str],
    ask: Callable[[ApprovalRequest], Awaitable[str]] | None,
    is_interactive: Callable[[], bool],
    *,
    tools: Iterable[str] = ("python",),
    notify: Callable[[str], Any] | None = None,
    timeout_s: float | None = None,
) -> ApprovalHook:
    """Build the ``before_tool_call`` hook of the approval policy (module docstring)."""
    return ApprovalHook(get_policy, ask, is_interactive, tools=tools, notify=notify, timeout_s=timeout_s)
