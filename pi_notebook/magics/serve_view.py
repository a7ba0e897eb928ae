"""How an outside ``execute`` shows in the notebook: a live view like an agent run's.

Each call gets an :class:`~pi_notebook.widgets.view.AgentView` in the ``%agent serve`` cell
(its task runs in that cell's context, turns.py): the user started serving there, so that is
where they look for what outside agents do, and a new display anywhere else would attach to
whatever cell ran last. The view shows who called, the code and its output as they stream,
and under ``ask`` the Run / Skip / Always panel the outside agent waits for. Its Abort
cancels the call (the client gets a result saying so). When the call ends, the view is
frozen to its Markdown transcript, as a run's is.

Only when someone sits at the notebook (serve_command.py decides): a headless kernel shows
nothing (nobody looks, and nbclient would save every widget model); the audit line records
the call either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..agent.types import AgentToolResult, ToolExecutionEndEvent, ToolExecutionStartEvent, ToolExecutionUpdateEvent
from ..ai.abort import AbortController
from ..serve.server import CallRecord, CallView
from ..tools.trust.approval import ApprovalRequest
from ..tools.kernel.kernel_host import ParentHeader
from ..tools.trust.policy import ApprovalChoice
from .display import DisplayedView

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["NotebookCallView", "ServeViews"]


class NotebookCallView(CallView):
    def __init__(self, runtime: Runtime, record: CallRecord, abort: Callable[[], None],
                 parent: ParentHeader | None = None) -> None:
        self._record = record
        self._parent = parent
        loop = runtime.attach_loop()
        self._shown = DisplayedView.for_host(runtime.host, runtime.host.log_warning,
                                             f"MCP · {record.client}", loop, abort, lambda token: None, 0)
        self._last: AgentToolResult | None = None

    @property
    def view(self) -> DisplayedView:
        return self._shown

    def started(self, code: str) -> None:
        record = self._record
        self._shown.view.add_user_message(f"{record.client} called {record.tool} over MCP")
        self._shown.show(parent=self._parent)
        self._shown.view.handle_event(ToolExecutionStartEvent(tool_call_id=record.call_id, tool_name="python",
                                                              args={"code": code}))
        self._shown.view.set_status("running tool", "python")

    def update(self, result: AgentToolResult) -> None:
        self._last = result
        if result.content:  # the final result: it ends the card in finished()
            return
        self._shown.view.handle_event(ToolExecutionUpdateEvent(
            tool_call_id=self._record.call_id, tool_name="python", args={}, partial_result=result))

    def finished(self, record: CallRecord) -> None:
        result = self._last if self._last is not None and self._last.content else AgentToolResult(
            content=[], details={"approval": record.approval} if record.approval else None, is_error=True)
        self._shown.view.handle_event(ToolExecutionEndEvent(
            tool_call_id=record.call_id, tool_name="python", result=result, is_error=record.is_error))
        status = {"ran": "error" if record.is_error else "done", "cancelled": "aborted"}.get(record.outcome, "done")
        self._shown.freeze("done" if status == "done" else "aborted" if status == "aborted" else "error")

    async def ask(self, request: ApprovalRequest) -> ApprovalChoice:
        return await self._shown.view.request_approval(request)


class ServeViews:
    """The views of calls in flight, by call id: the gate asks through the one of its call."""

    def __init__(self, runtime: Runtime, aborts: Callable[[str], AbortController | None],
                 interactive: Callable[[], bool], parent: ParentHeader | None = None) -> None:
        self._runtime = runtime
        self._parent = parent  # the %agent serve cell's, where every call's view shows
        self._aborts = aborts
        self._interactive = interactive
        self._views: dict[str, NotebookCallView] = {}

    def view(self, record: CallRecord) -> CallView:
        if not self._interactive():
            return CallView()
        call_id = record.call_id

        def abort() -> None:  # the view's Abort button (maybe on another thread)
            controller = self._aborts(call_id)
            if controller is not None:
                controller.abort("aborted in the notebook")

        shown = _Tracked(self, NotebookCallView(self._runtime, record, abort, self._parent), call_id)
        self._views[call_id] = shown.inner
        return shown

    def forget(self, call_id: str) -> None:
        self._views.pop(call_id, None)

    async def ask(self, request: ApprovalRequest) -> ApprovalChoice:
        view = self._views.get(request.tool_call_id)
        if view is None:
            return "skip"
        return await view.ask(request)


class _Tracked(CallView):
    def __init__(self, owner: ServeViews, inner: NotebookCallView, call_id: str) -> None:
        self.owner, self.inner, self.call_id = owner, inner, call_id

    def started(self, code: str) -> None:
        self.inner.started(code)

    def update(self, result: AgentToolResult) -> None:
        self.inner.update(result)

    def finished(self, record: CallRecord) -> None:
        self.owner.forget(self.call_id)
        self.inner.finished(record)

