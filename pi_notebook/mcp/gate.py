"""MCP calls pass the approval gate of Python calls (tools/trust/approval.py).

The agent's ``before_tool_call`` is the :class:`ApprovalHook`; the MCP tools are added to the
set of tools it gates, so under ``ask`` the card shows the call (server, tool, arguments as
pretty JSON) with Run / Skip / Always, ``deny`` refuses, and a headless ``ask`` refuses as for
Python. :class:`McpGate` sits in front of it and decides what only MCP knows, in this order:

1. The policy of the call: the server's config ``approval`` ("ask" | "auto" | "deny")
   instead of the run's, except that a run under ``deny`` stays denied (the user's word for
   the run wins over a config file). A server ``deny`` refuses (``server_deny``); a server
   ``auto`` under an ``ask`` run runs without asking (``server_auto``); a server ``ask``
   under an ``auto`` run asks (headless: refused, as for Python).
2. Under ``ask``: a tool in the server's ``autoApprove`` runs (``auto_approved``: the user's
   explicit word, it wins over everything below); a tool the user answered "Always for this
   tool" earlier in the run runs (``always_tool``); with ``AgentMagics.mcp_trust_annotations``
   a tool the server marks read-only and not destructive runs (``read_only_trusted``).
3. Else the hook asks. The request carries ``extra["mcp"]`` (server, tool, annotations,
   the scope of the third button) for the panel. For an MCP tool the third button means
   "Always for this tool" (the gate remembers the tool for the run and hands the hook a plain
   "run", so the hook's own run-wide "always" is not set); Python keeps "Always for this run".
   A tool the server marks destructive is asked every time under ``ask``: the panel has no
   third button, and a run-wide "Always" given at a Python call does not cover it.

"Always for this tool" is bound to what the tool was when it was given: its fingerprint
(title, description, input schema, annotations; tools.py ``tool_fingerprint``). A server that
announces the tool again changed (now destructive, a new description or schema) gets asked
again, and the request's ``extra["mcp"]["changed"]`` says what changed, for the panel.

:func:`namespace_refusal` decides for ``pi_notebook.mcp.call`` made by *agent code*: no card
can be shown for a call inside a Python call, so under ``ask`` a tool that is not
auto-approved is refused with advice to call it as a tool; the user's own cells are the user
acting and need no prompt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..agent.types import BeforeToolCallResult
from ..ai.types import get_field
from ..tools.output.format import clip
from ..tools.trust.approval import DENIED_REASON, ApprovalHook, ApprovalRecord, ApprovalRequest
from ..tools.trust.policy import APPROVAL_CHOICES, ApprovalChoice, ApprovalPolicy, parse_policy

if TYPE_CHECKING:
    from .tools import McpToolMeta

__all__ = ["McpGate", "gate_tools", "namespace_refusal", "effective_policy", "what_changed", "SERVER_DENIED"]

ASK_IN_CODE = ("This MCP call needs the user's approval (approval policy 'ask'), which cannot be "
               "asked from inside agent code. Call the tool {tool!r} directly instead, so the user "
               "can approve it, or ask the user to list it in the server's autoApprove.")
SERVER_DENIED = ("The MCP server {server!r} is set to approval 'deny' in the user's MCP config, so "
                 "this tool call was not run. Do not retry it; answer without this server's tools.")
_DESCRIPTION_CHARS = 300  # what the panel shows of the server's description (redacted, cut)


def _norm(policy: str | None) -> ApprovalPolicy:
    """A policy as the hook takes it; an unknown one fails closed (``deny``): values from
    the config are checked when it is read, so this only guards untyped callers."""
    try:
        return parse_policy(policy or "ask")
    except ValueError:
        return "deny"


def effective_policy(run_policy: str, server_approval: str | None) -> ApprovalPolicy:
    """The policy of one MCP call: the server's ``approval``, unless the run is ``deny``
    (or an unknown policy, which the hook refuses)."""
    run = _norm(run_policy)
    if server_approval is None or run not in ("ask", "auto"):
        return run
    return _norm(server_approval)


class McpGate:
    """``before_tool_call`` in front of the approval hook (module docstring)."""

    def __init__(self, approval: ApprovalHook, meta: Callable[[], dict[str, McpToolMeta]],
                 policy: Callable[[], ApprovalPolicy], trust_annotations: Callable[[], bool] = lambda: False) -> None:
        self.approval = approval
        self._meta = meta
        self._policy = policy
        self._trust = trust_annotations
        # "Always for this tool" answers of this run: agent name -> the tool as it was then
        self.always_tools: dict[str, McpToolMeta] = {}
        self._always_clicked: set[str] = set()  # call ids whose answer was "Always for this tool"
        self._override: ApprovalPolicy | None = None  # the policy of the MCP call the hook is deciding
        # The hook's two seams, given to its constructor: the policy it reads and the ask it
        # awaits. Wrapped once, so that an MCP call is decided under its own policy and its
        # request carries what the panel shows; Python calls see them unchanged.
        run_policy = approval._get_policy
        approval._get_policy = lambda: self._override if self._override is not None else run_policy()
        inner = approval._ask
        approval._ask = self._asking(inner) if inner is not None else None

    def _asking(self, inner: Callable[[ApprovalRequest], ApprovalChoice | Awaitable[ApprovalChoice]]
                ) -> Callable[[ApprovalRequest], Awaitable[ApprovalChoice]]:
        async def ask(request: ApprovalRequest) -> ApprovalChoice:
            meta = self._meta().get(request.tool_name)
            if meta is None:
                return await _answer(inner(request))
            request.extra["mcp"] = {**meta.hints(), "always": None if meta.destructive else "tool",
                                    "description": clip(meta.description, _DESCRIPTION_CHARS)}
            granted = self.always_tools.get(request.tool_name)
            if granted is not None and granted.fingerprint != meta.fingerprint:
                request.extra["mcp"]["changed"] = what_changed(granted, meta)
            answer = await _answer(inner(request))
            if answer == "always":
                if not meta.destructive:
                    self._always_clicked.add(request.tool_call_id)
                return "run"  # never the hook's run-wide "always" (module docstring)
            return answer
        return ask

    async def __call__(self, ctx: Any, signal: Any = None) -> Any:
        tool_call = get_field(ctx, "tool_call")
        name = get_field(tool_call, "name", default="")
        meta = self._meta().get(name)
        if meta is None or name not in self.approval.tools:
            return await self.approval(ctx, signal)
        call_id = get_field(tool_call, "id", default="") or ""
        run_policy = _norm(self._policy())
        policy = effective_policy(run_policy, meta.approval)
        if meta.approval is not None and policy != run_policy:
            if policy == "deny":
                self.approval.note(call_id, "server_deny", policy)
                record = self.approval.records.pop(call_id)  # a refused call has no after_tool_call
                return BeforeToolCallResult(block=True, reason=SERVER_DENIED.format(server=meta.server),
                                            details={"approval": record.as_details()})
            if policy == "auto":
                self.approval.note(call_id, "server_auto", policy)
                return None
        if policy == "ask":
            skip = ("auto_approved" if meta.auto_approved
                    else "always_tool" if self._still_always(name, meta)
                    else "read_only_trusted" if meta.trusted_read_only and self._trust() else None)
            if skip is not None:
                # recorded like every decision of the gate: "why did this run without asking?"
                self.approval.note(call_id, skip, policy)
                return None
        run_wide = self.approval.always
        self._override = policy
        if meta.destructive:
            self.approval.always = False  # asked every time (module docstring)
        try:
            result = await self.approval(ctx, signal)
        finally:
            self._override = None
            if meta.destructive:
                self.approval.always = run_wide
        if call_id in self._always_clicked:
            self._always_clicked.discard(call_id)
            self.always_tools[name] = meta
            clicked = self.approval.records.get(call_id)
            if isinstance(clicked, ApprovalRecord):
                self.approval.records[call_id] = dataclasses.replace(clicked, decision="clicked_always_tool")
        return result

    def _still_always(self, name: str, meta: McpToolMeta) -> bool:
        """An "Always for this tool" of this run that covers the tool as it is now: given
        for the same fingerprint, and the tool is not destructive (module docstring)."""
        granted = self.always_tools.get(name)
        return granted is not None and granted.fingerprint == meta.fingerprint and not meta.destructive

    def reset_run(self) -> None:
        """A new run: "Always for this tool" answers end with the run they were given in."""
        self.always_tools.clear()
        self._always_clicked.clear()


def what_changed(before: McpToolMeta, now: McpToolMeta) -> str:
    """Why a tool answered "Always" for is asked again: what its server says differently."""
    changes: list[str] = []
    if now.destructive is True and before.destructive is not True:
        changes.append("it is now marked destructive")
    elif before.read_only is True and now.read_only is not True:
        changes.append("it is no longer marked read-only")
    if now.description != before.description:
        changes.append("its description changed")
    if not changes:
        changes.append("its input schema or annotations changed")
    return ("The server announced this tool again since you chose Always for it: "
            + ", ".join(changes) + ". It is asked for again.")


async def _answer(pending: Any) -> ApprovalChoice:
    if hasattr(pending, "__await__"):
        pending = await pending
    for choice in APPROVAL_CHOICES:
        if pending == choice:
            return choice
    return "skip"  # anything else is no approval


def gate_tools(approval: ApprovalHook, base: set[str], mcp_names: set[str]) -> None:
    """Gate the notebook's own tools (``base``) and the MCP tools of this run."""
    approval.tools = set(base) | set(mcp_names)


def namespace_refusal(policy: str, auto_approved: bool, agent_name: str,
                      server_approval: str | None = None) -> str | None:
    """Why agent code may not make this namespace call now (None: it may)."""
    policy = effective_policy(policy, server_approval)
    if policy == "auto":
        return None
    if policy == "deny":
        return DENIED_REASON
    if auto_approved:
        return None
    return ASK_IN_CODE.format(tool=agent_name)
