"""The approval gate of outside ``execute`` calls: the kernel's own gate, called as is.

An outside call passes the same :class:`~pi_notebook.tools.trust.approval.ApprovalHook` the agent's
``python`` calls pass, under the kernel's policy (``AgentMagics.approval`` /
``PI_NOTEBOOK_APPROVAL``): ``auto`` runs, ``deny`` refuses, ``ask`` asks through ``ask``
(the notebook's Run / Skip / Always) and refuses when nobody can answer (a headless kernel).
"Always" holds until the server stops. The decision is an :class:`ApprovalRecord`, the same
record an agent call keeps in its result, for the audit line (magics/serve_command.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..agent.types import AgentContext, BeforeToolCallContext
from ..ai.abort import AbortSignal
from ..ai.types import AssistantMessage, ToolCall
from ..tools.trust.approval import ApprovalHook, ApprovalRecord, ApprovalRequest
from ..tools.trust.policy import ApprovalChoice, ApprovalPolicy

__all__ = ["GateAnswer", "ServeGate"]


@dataclass(frozen=True)
class GateAnswer:
    record: ApprovalRecord | None
    refusal: str | None  # why the call was not run (None: it may run)

    @property
    def runs(self) -> bool:
        return self.refusal is None and (self.record is None or self.record.decision != "aborted")


class ServeGate:
    def __init__(self, policy: Callable[[], ApprovalPolicy],
                 ask: Callable[[ApprovalRequest], Awaitable[ApprovalChoice]] | None,
                 is_interactive: Callable[[], bool], timeout_s: Callable[[], float | None] = lambda: None) -> None:
        self._hook = ApprovalHook(policy, ask, is_interactive, tools=("python",))
        self._timeout_s = timeout_s  # AgentMagics.approval_timeout, read per call

    async def check(self, call_id: str, code: str, signal: AbortSignal | None = None) -> GateAnswer:
        args = {"code": code}
        call = ToolCall(id=call_id, name="python", arguments=args)
        ctx = BeforeToolCallContext(assistant_message=AssistantMessage(), tool_call=call, args=args,
                                    context=AgentContext())
        self._hook.timeout_s = self._timeout_s()
        blocked = await self._hook(ctx, signal)
        record = self._hook.records.pop(call_id, None)
        if blocked is not None and blocked.block:
            return GateAnswer(record, blocked.reason or "The call was refused.")
        if record is not None and record.decision == "aborted":
            return GateAnswer(record, "The call was cancelled in the notebook before it ran.")
        return GateAnswer(record, None)
