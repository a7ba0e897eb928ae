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

Every decision is recorded (:class:`ApprovalRecord`: clicked Run, Always for this run -- the
click or an earlier one --, policy auto, policy deny, Skip, headless refusal, timeout, abort)
and stored with the call's result as ``details["approval"]`` (``decision``, ``policy``,
``ran``, ``waited_s``, ``line``): a refused call's result gets it from the block
(``BeforeToolCallResult.details``), an executed one from ``hook.after_tool_call`` (wire it as
the agent's ``after_tool_call``). The tool card shows ``line`` (``approval_line(details)``).
Any tool gated here (``tools``; MCP tools routed through the same hook) gets the record.

The policy names (``APPROVAL_POLICIES``, the ``Literal`` ``ApprovalPolicy``) and their
environment default (``default_policy()`` reads ``APPROVAL_ENV``, ``PI_NOTEBOOK_APPROVAL``;
``ask`` when unset or invalid) are defined in the dependency-free ``policy.py`` and
re-exported here.

Every field shown for approval (tool name, server name, description, arguments, code) must
look exactly like what will run: ``reveal_invisible`` writes invisible and text-direction
characters out as ``⟨U+202E⟩`` and ``invisible_fields`` says which field has which, for the
panel's warning. One rule for every field and every view (widgets/_util.py uses it too).
"""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ...agent.types import AfterToolCallContext, AfterToolCallResult, BeforeToolCallContext, BeforeToolCallResult
from ...ai.types import get_field
from .policy import (
    APPROVAL_CHOICES,
    APPROVAL_ENV,
    APPROVAL_POLICIES,
    ApprovalChoice,
    ApprovalPolicy,
    default_policy,
)

if TYPE_CHECKING:
    from ...ai.abort import AbortSignal
    from ...review.watch import Preview

__all__ = [
    "find_invisible",
    "invisible_fields",
    "reveal_invisible",
    "APPROVAL_ENV",
    "APPROVAL_POLICIES",
    "ApprovalPolicy",
    "APPROVAL_CHOICES",
    "ApprovalChoice",
    "ApprovalHook",
    "ApprovalRecord",
    "ApprovalRequest",
    "default_policy",
    "make_approval_hook",
]

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
PROTECTED_REASON = (
    "This code may change {names}, which the user protects (AgentMagics.protect): such a change "
    "needs the user's approval, and this run is not interactive, so the call was blocked and not "
    "executed. Leave {names} as they are: work on a copy under another name."
)
TIMEOUT_REASON = (
    "Code execution needs approval, but nobody answered the approval prompt within {seconds:g} s, "
    "so the call was blocked and not executed. Do not retry it; ask the user how to proceed."
)


class _Headless(Exception):
    """The frontend went away while we waited for an answer."""


# How each gate decision reads in the tool card and the session file: "why did this run
# without asking?" always has an answer.
_LINES = {
    "clicked_run": "approval: clicked Run",
    "clicked_always": "approval: clicked Always for this run",
    "always": "approval: Always for this run (given at an earlier call)",
    "auto": "approval: policy auto, ran without asking",
    "auto_approved": "approval: listed in the server's autoApprove, ran without asking",
    "clicked_always_tool": "approval: clicked Always for this tool",
    "always_tool": "approval: Always for this tool (given at an earlier call)",
    "read_only_trusted": ("approval: read-only by the server's annotations, trusted "
                          "(AgentMagics.mcp_trust_annotations), ran without asking"),
    "server_auto": "approval: the server's config says approval 'auto', ran without asking",
    "server_deny": "approval: the server's config says approval 'deny', not run",
    "skipped": "approval: clicked Skip, not run",
    "deny": "approval: policy deny, not run",
    "headless": "approval: no frontend to ask, refused, not run",
    "timeout": "approval: no answer in time, not run",
    "aborted": "approval: the run was aborted while asking",
    "unknown_policy": "approval: unknown policy, not run",
}


# Characters that change how text *looks* without being seen ("Trojan Source", ASCII
# smuggling): bidirectional overrides/isolates and marks (U+202A-U+202E, U+2066-U+2069,
# U+200E/U+200F, U+061C), zero-width characters (U+200B-U+200D, U+2060-U+2064, U+FEFF), the
# soft hyphen and the combining grapheme joiner (U+00AD, U+034F), the Mongolian vowel separator
# (U+180E), Hangul fillers (U+115F, U+1160, U+3164, U+FFA0) and Unicode tag characters
# (U+E0000-U+E007F, invisible copies of ASCII).
INVISIBLE_RE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e"
                          "\u2060-\u2064\u2066-\u2069\u3164\ufeff\uffa0\U000e0000-\U000e007f]")


def find_invisible(text: str) -> list[str]:
    """The distinct invisible / text-direction characters in ``text``, in order of appearance."""
    seen: dict[str, None] = {}
    for m in INVISIBLE_RE.finditer(text):
        seen.setdefault(m.group(0), None)
    return list(seen)


def reveal_invisible(text: str) -> str:
    """``text`` with every invisible or text-direction character written as ``⟨U+XXXX⟩``."""
    return INVISIBLE_RE.sub(lambda m: f"⟨U+{ord(m.group(0)):04X}⟩", text)


def invisible_fields(fields: dict[str, str | None]) -> dict[str, list[str]]:
    """For each named field shown for approval (``{"tool name": ..., "arguments": ...}``),
    the invisible characters it holds; fields without any are left out."""
    found = {label: find_invisible(text) for label, text in fields.items() if text}
    return {label: chars for label, chars in found.items() if chars}


@dataclass(frozen=True)
class ApprovalRecord:
    """One decision of the approval gate, as stored with the tool result
    (``details["approval"]``: ``as_details()``)."""

    decision: str  # a key of _LINES
    policy: str
    waited_s: float = 0.0

    @property
    def ran(self) -> bool:
        return self.decision in ("clicked_run", "clicked_always", "always", "auto", "auto_approved",
                                 "clicked_always_tool", "always_tool", "read_only_trusted", "server_auto")

    @property
    def line(self) -> str:
        return _LINES.get(self.decision, f"approval: {self.decision}")

    def as_details(self) -> dict[str, Any]:
        return {"decision": self.decision, "policy": self.policy, "ran": self.ran,
                "waited_s": round(self.waited_s, 3), "line": self.line}


def approval_line(details: Any) -> str | None:
    """The card's one line for a tool result's ``details`` (None when the call was not gated)."""
    record = details.get("approval") if isinstance(details, dict) else getattr(details, "approval", None)
    if not isinstance(record, dict):
        return None
    line = record.get("line")
    return line if isinstance(line, str) and line else None


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
        get_policy: Callable[[], ApprovalPolicy],
        ask: Callable[[ApprovalRequest], Awaitable[ApprovalChoice] | ApprovalChoice] | None,
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
        # tool_call_id -> the gate's decision, until after_tool_call moves it into the result
        self.records: dict[str, ApprovalRecord] = {}
        # code -> what it may do to the user's names (tools/python/namespace_review.py): shown on the
        # panel; a protected name among them is asked for even under auto or "Always"
        self.preview: Callable[[str], Preview | None] | None = None

    def reset_run(self) -> None:
        """Forget an "Always for this run" answer (call when a run starts)."""
        self.always = False
        self._notified.clear()

    async def __call__(self, ctx: BeforeToolCallContext,
                       signal: AbortSignal | None = None) -> BeforeToolCallResult | None:
        name = ctx.tool_call.name
        if name not in self.tools:
            return None
        call_id = ctx.tool_call.id or ""
        policy = self._get_policy()  # parsed at the edge (args.py, settings.py): an ApprovalPolicy
        started = time.monotonic()
        result = await self._decide(ctx, signal, name, policy)
        decision, answer = result
        record = ApprovalRecord(decision, policy, time.monotonic() - started)
        if len(self.records) > 1000:  # results that never came back (the run ended first)
            self.records.clear()
        self.records[call_id] = record
        if answer is not None:
            # a refused call never reaches after_tool_call: its details carry the record
            return BeforeToolCallResult(block=answer.block, reason=answer.reason, terminate=answer.terminate,
                                        details={"approval": record.as_details()})
        return None

    def note(self, call_id: str, decision: str, policy: ApprovalPolicy) -> None:
        """Record a decision taken in front of this gate (an MCP tool in its server's
        ``autoApprove``), so that its result says why it ran without asking too."""
        self.records[call_id] = ApprovalRecord(decision, policy)

    def after_tool_call(self, ctx: AfterToolCallContext,
                        signal: AbortSignal | None = None) -> AfterToolCallResult | None:
        """``after_tool_call``: the gate's decision joins the executed call's ``details`` (so it
        is in the session file and the card)."""
        record = self.records.pop(ctx.tool_call.id or "", None)
        if record is None:
            return None
        details = ctx.result.details
        if details is None:
            details = {}
        if isinstance(details, BaseModel) and "approval" in type(details).model_fields:
            # typed details that have room for it (the python tool's PythonCallDetails)
            return AfterToolCallResult(details=details.model_copy(update={"approval": record.as_details()}))
        if not isinstance(details, dict):
            return None  # other typed details are left as they are
        return AfterToolCallResult(details={**details, "approval": record.as_details()})

    async def _decide(self, ctx: BeforeToolCallContext, signal: AbortSignal | None, name: str,
                      policy: ApprovalPolicy) -> tuple[str, BeforeToolCallResult | None]:
        preview = self._preview(name, ctx.args) if policy != "deny" else None
        protected = bool(preview is not None and preview.protected)
        if policy == "auto" and not protected:
            return "auto", None
        if policy == "deny":
            return "deny", BeforeToolCallResult(block=True, reason=DENIED_REASON)
        if policy not in APPROVAL_POLICIES:
            # typed, yet a caller outside the type checker may hand anything: fail closed
            return "unknown_policy", BeforeToolCallResult(
                block=True, reason=f"Unknown approval policy {policy!r}; the call was not executed."
            )
        if self.always and not protected:
            return "always", None
        if self._ask is None or not self._interactive():
            if policy == "auto" and preview is not None:
                names = ", ".join(preview.protected)
                return "headless", self._fail_closed(PROTECTED_REASON.format(names=names))
            return "headless", self._fail_closed(HEADLESS_REASON)
        if signal is not None and signal.aborted:
            return "aborted", None
        args = ctx.args
        request = ApprovalRequest(
            tool_call_id=ctx.tool_call.id,
            tool_name=name,
            args=args,
            code=get_field(args, "code") if name == "python" else None,
        )
        if preview is not None:
            request.extra["namespace"] = {"lines": list(preview.lines), "undo": list(preview.unrestorable),
                                          "protected": list(preview.protected)}
        try:
            decision = await asyncio.wait_for(self._wait(request, signal), self.timeout_s)
        except _Headless:
            return "headless", self._fail_closed(HEADLESS_REASON)
        except asyncio.TimeoutError:
            return "timeout", self._fail_closed(TIMEOUT_REASON.format(seconds=self.timeout_s))
        if decision is None:  # aborted while waiting: the loop reports "Operation aborted"
            return "aborted", None
        if decision == "always":
            self.always = True
            return "clicked_always", None
        if decision == "run":
            return "clicked_run", None
        # "skip", or any other answer of an untyped asker (e.g. "deny")
        return "skipped", BeforeToolCallResult(block=True, reason=SKIPPED_REASON)

    def _preview(self, name: str, args: Any) -> Preview | None:
        code = get_field(args, "code") if name == "python" else None
        if self.preview is None or not isinstance(code, str):
            return None
        try:
            return self.preview(code)
        except Exception:  # the panel without the reading: the gate still decides
            return None

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

    async def _wait(self, request: ApprovalRequest, signal: AbortSignal | None) -> ApprovalChoice | None:
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

    async def _wait_answer(self, answer: asyncio.Future[ApprovalChoice], signal: AbortSignal | None,
                           loop: asyncio.AbstractEventLoop) -> ApprovalChoice | None:
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
    get_policy: Callable[[], ApprovalPolicy],
    ask: Callable[[ApprovalRequest], Awaitable[ApprovalChoice] | ApprovalChoice] | None,
    is_interactive: Callable[[], bool],
    *,
    tools: Iterable[str] = ("python",),
    notify: Callable[[str], Any] | None = None,
    timeout_s: float | None = None,
) -> ApprovalHook:
    """Build the ``before_tool_call`` hook of the approval policy (module docstring)."""
    return ApprovalHook(get_policy, ask, is_interactive, tools=tools, notify=notify, timeout_s=timeout_s)
