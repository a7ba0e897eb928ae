"""StaticView: the view of a run nobody watches live (nbclient, papermill), with no widget.

nbclient stores every widget model it sees in the saved notebook (``metadata.widgets``),
closed or not, so a headless run must not create one. This view implements ``RunView``
on the same :class:`~pi_notebook.widgets.transcript.Transcript` as ``AgentView`` and
shows it as one Markdown output, which the displayer republishes under its display id
(``publish``) at most every ``interval`` seconds while the run changes it, and once more
at the end. So the output is current when the executor saves (papermill saves every 30 s)
or stops the cell on a timeout.

The figures the agent's code displayed are also offered as plain ``image/*`` bundles
(:meth:`StaticView.figure_bundles`), written as outputs of their own at the end: tools
that extract images (nbconvert, GitHub, papermill's readers) do not look inside Markdown.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from ._util import B64_RE
from ..tools.trust.policy import ApprovalChoice
from .protocol import Publish, RunStatus
from .transcript import Transcript, TranscriptViewMixin
from .transcript_md import transcript_markdown
from .transcript_text import transcript_text

if TYPE_CHECKING:
    from ..agent.types import AgentEvent
    from ..tools.trust.approval import ApprovalRequest

__all__ = ["StaticView", "REFRESH_INTERVAL"]

REFRESH_INTERVAL = 2.0  # seconds between republished transcripts (never one per delta)
_FIGURE_MIMES = ("image/png", "image/jpeg", "image/gif")

class StaticView(TranscriptViewMixin):
    def __init__(self, model_label: str, loop: asyncio.AbstractEventLoop | None, *,
                 context_window: int | None = None, interval: float = REFRESH_INTERVAL) -> None:
        self._loop = loop
        self._interval = interval
        self._publish: Publish | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._last = 0.0
        self._closed = False
        self.publish_count = 0
        self.transcript = Transcript(model_label, context_window=context_window, on_change=self._request)

    # --- showing ----------------------------------------------------------------------------
    def attach(self, publish: Publish) -> None:
        """Where the transcript goes from now on (an ``update_display`` by the displayer)."""
        self._publish = publish

    def display_bundle(self) -> dict[str, Any]:
        # text/plain is the transcript as text: a terminal, nbconvert --to markdown or an
        # agent reading the .ipynb takes it, and would otherwise see our HTML frame's tags
        return {"text/markdown": self.to_markdown(), "text/plain": self.to_text()}

    def _repr_mimebundle_(self, **_: object) -> dict[str, Any]:
        return self.display_bundle()

    def to_markdown(self) -> str:
        return transcript_markdown(self.transcript)

    def to_text(self) -> str:
        return transcript_text(self.transcript)

    def figure_bundles(self) -> list[dict[str, Any]]:
        """One bundle per image the run's tool calls displayed, in order (validated base64)."""
        bundles: list[dict[str, Any]] = []
        for item in self.transcript.tools.values():
            for out in item.outputs:
                if out.kind != "display":
                    continue
                for mime in _FIGURE_MIMES:
                    payload = out.data.get(mime)
                    if isinstance(payload, list):
                        payload = "".join(payload)
                    if isinstance(payload, str) and payload and B64_RE.match(payload):
                        name = item.tool_name or "tool"
                        bundles.append({mime: "".join(payload.split()),
                                        "text/plain": f"<figure {len(bundles) + 1} from the agent's "
                                                      f"{name} call>"})
                        break
        return bundles

    def _request(self) -> None:
        if self._closed or self._publish is None or self._handle is not None or self._loop is None:
            return
        delay = max(0.0, self._last + self._interval - time.monotonic())
        self._handle = self._loop.call_later(delay, self._refresh)

    def _refresh(self) -> None:
        self._handle = None
        if self._closed or self._publish is None:
            return
        self._last = time.monotonic()
        self.publish_count += 1
        self._publish(self.display_bundle())

    def flush(self) -> None:
        """Publish the transcript so far now (an interrupted cell is about to end)."""
        self._cancel()
        self._refresh()

    def _cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    # --- RunView ----------------------------------------------------------------------------
    def handle_event(self, event: AgentEvent) -> None:
        self.transcript.apply(event)

    async def request_approval(self, request: ApprovalRequest) -> ApprovalChoice:
        return "skip"  # nobody can answer; the approval hook refuses before asking

    def finish(self, status: RunStatus | None = None) -> None:
        self._cancel()
        self.transcript.finish(status)
        self._cancel()  # (finish changed the transcript: the displayer writes the last one)

    def close(self) -> None:
        self._closed = True
        self._cancel()
