"""AgentView: the live widget under a ``%%agent`` cell (implements ``RunView``).

The state lives in a :class:`~pi_notebook.widgets.transcript.Transcript` (plain data);
this module owns the widgets that render it, the approval futures, the buttons and
the clock. The design is in ``docs/design/view.md``.

Threading: every public method is called on the kernel loop's thread. Button handlers
may run on another thread (some ipykernel versions handle comms on a subshell thread),
so they never touch state: they hop onto the loop with ``call_soon_threadsafe``.

Updates: ``handle_event`` only changes the transcript and asks the ``FlushScheduler``
for a flush; the flush (at most one per ~50 ms, plus a final one) syncs the blocks
whose items changed. Finished blocks are never re-sent; streaming text re-sends only
its live tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as W

from ..agent.types import AgentEndEvent, AgentStartEvent
from ._util import fmt_cost, fmt_seconds, fmt_tokens
from .blocks import (
    Block,
    MarkdownBlock,
    NoticeBlock,
    OtherMessageBlock,
    ThinkingBlock,
    UserBlock,
    WidgetSet,
    pill_html,
)
from .flush import DEFAULT_INTERVAL, FlushScheduler
from .input_form import FormRequestLike, FormValues, InputForm
from .items import Item, NoticeItem, OtherItem, QueuedRow, TextItem, ThinkingItem, UserItem
from .markdown import escape_text
from ..tools.trust.policy import APPROVAL_CHOICES, ApprovalChoice
from .protocol import Publish, RunStatus
from .theme import stylesheet
from .toolcall import ToolItem
from .toolcard import ToolCard
from .transcript import FINAL_STATUSES, LIVE_STATUSES, Transcript, TranscriptViewMixin
from .transcript_md import transcript_markdown
from .transcript_text import transcript_text

if TYPE_CHECKING:
    from ..agent.types import AgentEvent
    from ..tools.trust.approval import ApprovalRequest

__all__ = ["AgentView", "APPROVAL_CHOICES", "FALLBACK_TEXT"]

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
FALLBACK_TEXT = "pi_notebook agent view (live only while its kernel runs)"
_log = logging.getLogger(__name__)
FALLBACK_REFRESH_S = 2.0  # at most this often, while no frontend renders the view


class AgentView(TranscriptViewMixin, W.VBox):  # type: ignore[misc]  # ipywidgets ships no type hints: VBox is Any
    """Live transcript of one agent run: header, conversation, tool cards, queue, Abort.

    ``model_label`` is shown in the header; ``loop`` is the kernel loop all state lives
    on; ``on_abort`` is called on the loop when Abort is clicked; ``on_remove_queued``
    with a queued row's token when its remove button is clicked; ``context_window``
    (tokens) enables the context meter; ``flush_interval`` spaces the flushes.
    """

    def __init__(self, model_label: str, loop: asyncio.AbstractEventLoop,
                 on_abort: Callable[[], None],
                 on_remove_queued: Callable[[str], None] | None = None, *,
                 context_window: int | None = None,
                 flush_interval: float = DEFAULT_INTERVAL) -> None:
        self._loop = loop
        self._on_abort = on_abort
        self._on_remove_queued = on_remove_queued
        self._set = WidgetSet()
        self.transcript = Transcript(model_label, context_window=context_window, on_change=self._request)
        self._blocks: dict[int, Block[Item]] = {}  # item key -> block
        self._queue_widgets: dict[str, W.HBox] = {}
        # tool_call_id -> (request number, its answer); numbers bind clicks to their panel
        self._approvals: dict[str, tuple[int, asyncio.Future[ApprovalChoice]]] = {}
        self._approval_requests = 0
        # MCP input forms (elicitation): request number -> (form, its answer)
        self._forms: dict[int, tuple[InputForm, asyncio.Future[tuple[str, FormValues | None]]]] = {}
        self._form_requests = 0
        self._tick_handle: asyncio.TimerHandle | None = None
        self._closed = False
        self._publish: Publish | None = None  # see attach()
        self._published = time.monotonic()  # the display itself carried the first fallback

        style = self._set.html(stylesheet(), "pi-hidden-style")
        self._header = self._set.html(self._header_html())
        self._abort_button = self._set.add(W.Button(
            description="Abort", icon="stop", button_style="danger",
            tooltip="Stop the agent (the transcript stays valid)",
            layout=self._set.add(W.Layout(width="auto", flex="0 0 auto"))))
        self._abort_button.add_class("pi-abort")
        self._abort_button.on_click(lambda _b: self._hop(self._abort_clicked))
        head_row = self._set.add(W.HBox([self._header, self._abort_button], layout=self._set.add(
            W.Layout(justify_content="space-between", align_items="center"))))
        head_row.add_class("pi-head-row")  # wraps in a narrow notebook (theme.py)
        self._transcript_box = self._set.add(W.VBox([]))
        # A column-reverse scroller keeps the newest text in view as it grows, without
        # script; it has a maximum height (CSS) and its own scrollbar.
        scroller = self._set.add(W.Box([self._transcript_box]))
        scroller.add_class("pi-scroll")
        self._queue_box = self._set.add(W.VBox([]))
        self._forms_box = self._set.add(W.VBox([]))
        # While a call waits for a click: one line that stays at the bottom of the screen as
        # long as any of the view is on it (CSS sticky), so a card that opened below the
        # fold is not announced by the header's pill alone
        self._waiting_bar = self._set.html("", "pi-approval-bar", layout=W.Layout(display="none"))
        super().__init__([style, head_row, scroller, self._waiting_bar, self._forms_box, self._queue_box],
                         layout=self._set.add(W.Layout(width="100%")))
        self.add_class("pi-agent")
        self._scheduler = FlushScheduler(loop, self._flush, flush_interval)
        self._schedule_tick()

    # ------------------------------------------------------------------ reading

    @property
    def widget(self) -> AgentView:
        return self

    @property
    def abort_button(self) -> W.Button:
        return self._abort_button

    @property
    def flush_count(self) -> int:
        return self._scheduler.flush_count

    @property
    def blocks(self) -> list[Block[Any]]:
        return [self._block(item) for item in self.transcript.items]

    def tool_card(self, tool_call_id: str) -> ToolCard | None:
        item = self.transcript.tools.get(tool_call_id)
        block = self._block(item) if item is not None else None
        return block if isinstance(block, ToolCard) else None

    def queued_row(self, token: str) -> W.HBox | None:
        """The widget row of a queued item (after a flush)."""
        return self._queue_widgets.get(token)

    def __repr__(self) -> str:
        return f"{FALLBACK_TEXT}: {self.transcript.model_label} ({self.transcript.status})"

    def display_bundle(self) -> dict[str, Any]:
        """The MIME bundle to display: the widget view plus a static fallback (the
        fallback line and the transcript so far) for frontends without the live model,
        e.g. the notebook saved while the run was live and reopened without its kernel
        in nbconvert / nbviewer / GitHub, or untrusted in JupyterLab. Plain
        ``display(view)`` sends the same bundle (``_repr_mimebundle_``)."""
        md = self.to_markdown()
        return {
            WIDGET_VIEW_MIME: {"version_major": 2, "version_minor": 0, "model_id": self.model_id},
            "text/plain": f"{FALLBACK_TEXT}\n\n{self.to_text()}",
            "text/markdown": f"*{FALLBACK_TEXT}*\n\n{md}",
        }

    def attach(self, publish: Publish) -> None:
        """How to replace the displayed bundle (the displayer's ``update_display``): the
        fallback is republished, throttled, while no frontend renders the view (see
        ``_refresh_fallback``)."""
        self._publish = publish

    def _refresh_fallback(self) -> None:
        """Keep the static fallback current while nobody renders the view (a client without
        widgets saves what it was sent). Once a frontend renders it, never: JupyterLab
        re-creates a widget view for every update of its output ("Loading widget…", scroll
        position lost), so a rendered view keeps the fallback it was displayed with."""
        if self._publish is None or self._closed or self._view_count != 0:
            return  # not tracked (a frontend is known to render it) or rendered already
        now = time.monotonic()
        if now - self._published < FALLBACK_REFRESH_S:
            return
        self._published = now
        self._publish(self.display_bundle())

    def _repr_mimebundle_(self, **kwargs: object) -> dict[str, Any] | None:
        if self._closed or self.comm is None:
            return None
        return self.display_bundle()

    def to_markdown(self) -> str:
        """The static Markdown transcript (safe to render with raw HTML on)."""
        return transcript_markdown(self.transcript)

    def to_text(self) -> str:
        """The same transcript as plain text (the bundle's ``text/plain``: no markup)."""
        return transcript_text(self.transcript)

    # ------------------------------------------------------------------ RunView

    def handle_event(self, event: AgentEvent) -> None:
        t = self.transcript
        restarted = t.ended is not None and not t.finished and isinstance(event, AgentStartEvent)
        t.apply(event)
        if restarted:
            self._abort_button.disabled = False
            self._schedule_tick()
        if t.ended is not None and isinstance(event, AgentEndEvent):
            self.cancel_approvals()
            self._cancel_tick()
            self._scheduler.flush_now()

    def set_status(self, status: RunStatus, detail: str = "") -> None:
        if status == "aborting" or status in FINAL_STATUSES:
            # Nobody may be left waiting for a click once the run is stopping.
            self.cancel_approvals()
        super().set_status(status, detail)

    async def request_approval(self, request: ApprovalRequest) -> ApprovalChoice:
        """Show Run / Skip / Always on the call's card and wait for a click.

        Abort (button, ``set_status("aborting")``), ``finish``, ``cancel_approvals`` or a
        repeated request for the same call resolve it with ``"skip"``. If the awaiting task
        itself is cancelled (the approval hook does so when the run's signal aborts, from
        any thread), the panel is hidden and the ``CancelledError`` propagates.
        """
        t = self.transcript
        tool_call_id = request.tool_call_id
        tool_name = request.tool_name or "python"
        if t.finished or t.abort_requested or self._closed:
            return "skip"
        item = t.tool(tool_call_id, tool_name)
        item.request_approval(request.code)
        card = self._block(item)
        assert isinstance(card, ToolCard)
        card.on_approval_click = self._approval_clicked
        mcp = request.extra.get("mcp")
        # an MCP tool's panel: the server's annotations as badges, and what "Always" covers
        # ("tool": this tool for the run; None: no third button, e.g. a destructive tool)
        card.approval_hints = mcp if isinstance(mcp, dict) else None
        namespace = request.extra.get("namespace")
        card.approval_namespace = namespace if isinstance(namespace, dict) else None
        previous = self._approvals.pop(tool_call_id, None)
        if previous is not None and not previous[1].done():
            previous[1].set_result("skip")
        self._approval_requests += 1
        request_no = self._approval_requests
        card.approval_request = request_no
        future: asyncio.Future[ApprovalChoice] = self._loop.create_future()
        self._approvals[tool_call_id] = (request_no, future)
        t.changed(item)
        self.set_status("waiting for approval", tool_name)
        outcome: ApprovalChoice = "skip"
        try:
            try:
                outcome = await future
            except asyncio.CancelledError:
                task = asyncio.current_task()
                cancelling = getattr(task, "cancelling", None)
                if future.cancelled() and not (cancelling() if cancelling else False):
                    return "skip"  # only the future was cancelled, not the waiting task
                raise
            return outcome
        finally:
            if self._approvals.get(tool_call_id, (0, None))[1] is future:
                del self._approvals[tool_call_id]
            item.resolve_approval(outcome, t.clock())
            t.changed(item)
            if t.status == "waiting for approval" and not self._approvals:
                if outcome != "skip":
                    self.set_status("running tool", tool_name)
                else:  # a thinking detail is what the model's server is doing, not a tool
                    self.set_status("thinking")

    def cancel_approvals(self) -> None:
        """Resolve every pending approval with ``"skip"`` (e.g. the run is aborting), and
        every open input form with ``"cancel"``."""
        for _request, future in list(self._approvals.values()):
            if not future.done():
                future.set_result("skip")
        for _form, answer in list(self._forms.values()):
            if not answer.done():
                answer.set_result(("cancel", None))

    async def request_input(self, request: FormRequestLike) -> tuple[str, FormValues | None]:
        """An MCP server asks for input: show a form (widgets/input_form.py) below the
        transcript and wait for Submit (``("accept", values)``), Decline or Cancel. Abort,
        ``finish`` and ``close`` answer ``("cancel", None)``. What was typed is not kept in
        the transcript (a one-line notice says how it was answered)."""
        t = self.transcript
        if t.finished or t.abort_requested or self._closed:
            return "cancel", None
        self._form_requests += 1
        number = self._form_requests
        form = InputForm(request, self._set, lambda action: self._hop(self._resolve_form, number, action))
        answer: asyncio.Future[tuple[str, FormValues | None]] = self._loop.create_future()
        self._forms[number] = (form, answer)
        self._forms_box.children = (*self._forms_box.children, form.widget)
        server = request.server
        action = "cancel"
        try:
            action, values = await answer
            return action, values
        finally:
            self._forms.pop(number, None)
            form.disable()
            self._forms_box.children = tuple(w for w in self._forms_box.children if w is not form.widget)
            said = {"accept": "submitted", "decline": "declined"}.get(action, "cancelled")
            t.notice(f"MCP server {server!r} asked for input: {said}.", "info")

    def _resolve_form(self, number: int, action: str) -> None:
        pending = self._forms.get(number)
        if pending is None or pending[1].done():
            return
        form, answer = pending
        if action == "submit":
            values, problem = form.collect()
            if problem is not None:
                form.show_error(problem)
                return
            answer.set_result(("accept", values))
        elif action in ("decline", "cancel"):
            answer.set_result((action, None))

    def finish(self, status: RunStatus | None = None) -> None:
        """End of the run: final status, clock stopped, pending approvals skipped,
        unfinished tool cards marked aborted, Abort hidden, one final flush."""
        self.cancel_approvals()
        self.transcript.finish(status)
        self._cancel_tick()
        self._abort_button.disabled = True
        self._abort_button.layout.display = "none"
        if not self._closed:
            self._scheduler.flush_now()

    def flush(self) -> None:
        """Flush pending changes now (normally the scheduler does this)."""
        if not self._closed:
            self._scheduler.flush_now()

    def close(self) -> None:
        """Stop timers, answer pending approvals, disable every button, and close every
        widget model the view ever created (also chunks no longer in the tree)."""
        if self._closed:
            return
        self._closed = True
        self._scheduler.close()
        self._cancel_tick()
        self.cancel_approvals()
        for block in self._blocks.values():
            if isinstance(block, ToolCard):
                block.disable_buttons()
        for form, _answer in self._forms.values():
            form.disable()
        self._abort_button.disabled = True
        for row in self._queue_widgets.values():
            for child in row.children:
                if isinstance(child, W.Button):
                    child.disabled = True
        self._set.close_all()
        super().close()

    # ------------------------------------------------------------------ buttons (any thread)

    def _hop(self, fn: Callable[..., object], *args: object) -> None:
        """Run ``fn(*args)`` on the loop; safe from any thread."""
        with contextlib.suppress(RuntimeError):  # loop closed: the kernel is going away
            self._loop.call_soon_threadsafe(fn, *args)

    def _approval_clicked(self, tool_call_id: str, choice: str, request: int) -> None:
        self._hop(self._resolve_approval, tool_call_id, choice, request)

    def _resolve_approval(self, tool_call_id: str, choice: str, request: int) -> None:
        """Answer the pending request of this call, only if the click was made on its own
        panel (``request``): a late click from an earlier panel answers nothing."""
        pending = self._approvals.get(tool_call_id)
        if pending is None or pending[0] != request:
            return
        future = pending[1]
        if not future.done() and choice in APPROVAL_CHOICES:
            future.set_result(choice)

    def _abort_clicked(self) -> None:
        t = self.transcript
        if t.finished or t.status in FINAL_STATUSES or t.abort_requested:
            return
        t.abort_requested = True
        self._abort_button.disabled = True
        self.set_status("aborting")  # also answers pending approvals with "skip"
        self._on_abort()

    def _remove_clicked(self, token: str) -> None:
        self.remove_queued(token)
        if self._on_remove_queued is not None:
            self._on_remove_queued(token)

    # ------------------------------------------------------------------ clock

    def _schedule_tick(self) -> None:
        self._cancel_tick()
        self._tick_handle = self._loop.call_later(1.0, self._tick)

    def _cancel_tick(self) -> None:
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None

    def _tick(self) -> None:
        self._tick_handle = None
        t = self.transcript
        if not t.running or self._closed:
            return
        for item in t.tools.values():
            if item.running:
                t.dirty[item.key] = item
        t.changed(header=True)
        self._tick_handle = self._loop.call_later(1.0, self._tick)

    # ------------------------------------------------------------------ flush

    def _request(self) -> None:
        if not self._closed:
            self._scheduler.request()

    def _block(self, item: Item) -> Block[Item]:
        block = self._blocks.get(item.key)
        if block is None:
            block = _make_block(item, self._set)
            self._blocks[item.key] = block
        return block

    def _flush(self) -> None:
        t = self.transcript
        dirty = list(t.dirty.values())
        t.dirty.clear()
        for item in dirty:
            self._sync(self._block(item))
        if t.structure_dirty:
            blocks = [self._block(item) for item in t.items]
            for block in blocks:
                if block.widget is None:
                    self._sync(block)
            children = tuple(b.widget for b in blocks if b.widget is not None)
            if tuple(self._transcript_box.children) != children:
                self._transcript_box.children = children
            t.structure_dirty = False
        if t.queue_dirty:
            self._queue_box.children = tuple(self._queued_widget(q) for q in t.queued)
            t.queue_dirty = False
        if t.header_dirty:
            value = self._header_html()
            if self._header.value != value:
                self._header.value = value
            self._label_abort()
            t.header_dirty = False
        self._show_waiting()
        self._refresh_fallback()

    def _show_waiting(self) -> None:
        waiting = [i.tool_name or "tool" for i in self.transcript.tools.values() if i.approval_pending]
        if waiting and not self.transcript.finished and not self._closed:
            names = ", ".join(dict.fromkeys(waiting))
            calls = "a call" if len(waiting) == 1 else f"{len(waiting)} calls"
            value = (f'<div class="pi-approval-bar-text">⚠ Waiting for your approval: {calls} '
                     f"({escape_text(names)}). Run or Skip on its card in this view.</div>")
            if self._waiting_bar.value != value:
                self._waiting_bar.value = value
            self._waiting_bar.layout.display = ""
        elif self._waiting_bar.layout.display != "none":
            self._waiting_bar.layout.display = "none"

    def _label_abort(self) -> None:
        # A queued cell's button takes it out of the queue: it says so.
        queued = self.transcript.status == "queued"
        description, tooltip = (("Remove", "Remove this cell from the queue (it is not sent)") if queued
                                else ("Abort", "Stop the agent (the transcript stays valid)"))
        if self._abort_button.description != description:
            self._abort_button.description = description
            self._abort_button.tooltip = tooltip
            self._abort_button.icon = "times" if queued else "stop"

    @staticmethod
    def _sync(block: Block[Item]) -> None:
        # One broken block must not stop the rest of the view from updating.
        try:
            block.sync()
        except Exception:
            _log.exception("AgentView: could not render %s", type(block).__name__)

    def _queued_widget(self, row: QueuedRow) -> W.HBox:
        widget = self._queue_widgets.get(row.token)
        if widget is None:
            label = {"steer": "steer", "followup": "follow-up", "prompt": "cell"}.get(row.kind, row.kind)
            text = self._set.html(f'<div class="pi-queued"><span class="pi-pill">queued {escape_text(label)}'
                                  f"</span>{escape_text(row.text)}</div>",
                                  layout=W.Layout(flex="1 1 auto", min_width="0"))
            remove = self._set.add(W.Button(description="", icon="times", tooltip="Remove from the queue",
                                            layout=self._set.add(W.Layout(width="28px", height="22px",
                                                                          padding="0"))))
            remove.add_class("pi-remove")
            token = row.token
            remove.on_click(lambda _b: self._hop(self._remove_clicked, token))
            widget = self._set.add(W.HBox([text, remove]))
            widget.add_class("pi-queued-row")
            self._queue_widgets[row.token] = widget
        return widget

    # ------------------------------------------------------------------ header

    def _header_html(self) -> str:
        t = self.transcript
        live = t.status in LIVE_STATUSES and not t.finished
        label, colour, why = t.pill()
        bits = [f'<span class="pi-model">{escape_text(t.model_label)}</span>',
                pill_html(colour, live=live, label=label, title=why)]
        if t.policy:
            bits.append(f'<span class="pi-metric pi-policy" title="approval policy for this run">'
                        f"approval: {escape_text(t.policy)}</span>")
        if t.timed:  # (a run still in the queue, or removed from it, has no run time)
            bits.append(f'<span class="pi-metric" title="elapsed">{fmt_seconds(t.elapsed, precise=not t.running)}'
                        "</span>")
        tin, tout, cost = t.usage_now()
        if tin or tout:
            bits.append(f'<span class="pi-metric" title="tokens in / out">↑{fmt_tokens(tin)} '
                        f"↓{fmt_tokens(tout)}</span>")
        if cost > 0:
            bits.append(f'<span class="pi-metric" title="cost">{fmt_cost(cost)}</span>')
        if t.context_used and t.context_window:
            frac = max(0.0, min(1.0, t.context_used / t.context_window))
            cls = "pi-ctx-fill pi-full" if frac >= 0.9 else "pi-ctx-fill pi-warn" if frac >= 0.7 else "pi-ctx-fill"
            bits.append(f'<span class="pi-ctx" title="context window: {t.context_used:,} of '
                        f'{t.context_window:,} tokens"><span class="pi-ctx-bar"><span class="{cls}" '
                        f'style="width:{frac * 100:.0f}%"></span></span>{frac * 100:.0f}%</span>')
        return f'<div class="pi-head">{"".join(bits)}</div>'


def _make_block(item: Item, widgets: WidgetSet) -> Block[Item]:
    match item:
        case ToolItem():
            return ToolCard(item, widgets)
        case ThinkingItem():
            return ThinkingBlock(item, widgets)
        case TextItem():
            return MarkdownBlock(item, widgets)
        case UserItem():
            return UserBlock(item, widgets)
        case NoticeItem():
            return NoticeBlock(item, widgets)
        case OtherItem():
            return OtherMessageBlock(item, widgets)
    raise TypeError(f"no block for {type(item).__name__}")
