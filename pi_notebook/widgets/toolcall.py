"""One tool call as plain data: arguments, approval, live output, result.

The python tool's live updates and final details are typed (``tools/output/updates.py``):
a card shows those outputs, in order, exactly as produced; the text the *model*
got back (with its ``[value]`` / ``[elapsed …]`` markers and retry advice) is the
model's copy and is not shown. Other tools have no typed outputs: for them the
result text is the output.
"""

from __future__ import annotations

import json
from typing import Literal

from ..agent.types import AgentToolResult
from ..tools.output.tracebacks import shorten_traceback
from ..tools.output.updates import (
    DisplayOutput,
    ErrorOutput,
    PythonCallDetails,
    ResultOutput,
    StreamOutput,
    ToolOutput,
    parse_call_details,
    parse_output,
)
from ._util import content_text, strip_control
from .items import Item, StreamText
from .protocol import MimeBundle

__all__ = ["ToolItem", "OutputRun", "ToolStatus", "fold_traceback", "args_code", "read_output", "MAX_OUTPUT_CHARS",
           "CUT_CALL_TITLE"]

ToolStatus = Literal["preparing", "waiting for approval", "running", "done", "error", "skipped",
                     "aborted", "interrupted", "timed out"]
# Per tool call: output shown beyond this is counted, not displayed (the model gets
# its own budgeted copy from the tool; the browser stays fast).
MAX_OUTPUT_CHARS = 200_000
# A call whose name never arrived whole (the reply was cut mid-call, or the model wrote
# none) reaches the agent with an empty name or the local provider's placeholder; the card
# says what it is instead of showing the placeholder as if it were a tool.
CUT_CALL_TITLE = "cut tool call"
_PLACEHOLDER_NAMES = ("", "invalid_tool_call")


class OutputRun:
    """One entry of a card's output area: a run of one stream, a display, or an error."""

    def __init__(self, kind: Literal["stream", "display", "error"], *, name: str = "stdout",
                 data: MimeBundle | None = None, error: ErrorOutput | None = None) -> None:
        self.kind, self.name = kind, name
        self.stream = StreamText() if kind == "stream" else None
        self.data: MimeBundle = data or {}
        self.error = error


class ToolItem(Item):
    """State of one tool call; times come from the transcript's clock."""

    def __init__(self, tool_call_id: str, tool_name: str, args: object = None) -> None:
        super().__init__()
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.args: object = args  # the call's arguments as the model sent them (a dict, normally)
        self.status: ToolStatus = "preparing"
        self.started: float | None = None
        self.duration: float | None = None
        self.approval_code: str | None = None
        self.approval_pending = False
        self.approval_outcome: str | None = None
        self.outputs: list[OutputRun] = []
        self.shown_chars = 0
        self.dropped_chars = 0
        self.progress_text: str | None = None
        self.result: AgentToolResult | None = None
        self.details: PythonCallDetails | None = None
        self.is_error = False
        self.live_kinds: set[type] = set()  # the output types that arrived as live updates
        self.args_version = 0  # bumped when what the card shows as code changes

    @property
    def title(self) -> str:
        """The card's name for the call (``CUT_CALL_TITLE`` for one without a usable name;
        "tool" while the name may still be streaming in)."""
        if self.tool_name in _PLACEHOLDER_NAMES:
            return CUT_CALL_TITLE if self.tool_name or self.frozen else "tool"
        return self.tool_name

    @property
    def running(self) -> bool:
        return not self.frozen and self.started is not None

    def set_args(self, args: object) -> None:
        if args != self.args:
            self.args = args
            self.args_version += 1

    def start(self, args: object, now: float) -> None:
        if args is not None:
            self.set_args(args)
        if self.started is None:
            self.started = now
        if self.status in ("preparing", "waiting for approval") and not self.approval_pending:
            self.status = "running"

    def request_approval(self, code: str | None) -> None:
        self.approval_code = code
        self.args_version += 1
        self.approval_pending = True
        self.status = "waiting for approval"

    def resolve_approval(self, outcome: str, now: float) -> None:
        self.approval_pending = False
        self.args_version += 1
        if self.frozen:  # the run ended (or the call finished) while waiting
            return
        self.approval_outcome = outcome
        if outcome == "skip":
            self.status = "skipped"
        else:
            self.status = "running"
            self.started = now  # the clock counts execution, not the wait for a click

    def add_update(self, partial: AgentToolResult) -> None:
        output = read_output(partial.details)
        if output is None:
            # A generic tool's partial result: pi tools report progress as the latest
            # partial content, so it replaces the previous one.
            text = content_text(partial.content)
            self.progress_text = strip_control(text) if text else None
            return
        self.live_kinds.add(type(output))
        self._add_output(output)

    def _add_output(self, output: ToolOutput) -> None:
        match output:
            case StreamOutput(name=name, text=text):
                self._add_stream(name, strip_control(text))
            case DisplayOutput(data=data) | ResultOutput(data=data):
                self.outputs.append(OutputRun("display", data=dict(data)))
            case ErrorOutput():
                self.outputs.append(OutputRun("error", error=output))

    def _add_stream(self, name: str, text: str) -> None:
        if not text:
            return
        room = MAX_OUTPUT_CHARS - self.shown_chars
        if room <= 0:
            self.dropped_chars += len(text)
            return
        if len(text) > room:
            self.dropped_chars += len(text) - room
            text = text[:room]
        self.shown_chars += len(text)
        last = self.outputs[-1] if self.outputs else None
        if last is None or last.kind != "stream" or last.name != name or last.stream is None:
            last = OutputRun("stream", name=name)
            self.outputs.append(last)
        assert last.stream is not None
        last.stream.append(text)

    def end(self, result: AgentToolResult, is_error: bool, now: float) -> None:
        self.result = result
        self.is_error = is_error
        self.details = parse_call_details(result.details)
        details = self.details
        if details is not None:
            # The final details hold every output, in order. The tool sends streams and
            # displays live, but the last expression's value and the exception only here:
            # what did not arrive live is added now (all of it for a replayed session), so
            # code that prints and then raises shows its traceback too.
            for output in details.outputs:
                if type(output) not in self.live_kinds:
                    self._add_output(output)
            self.duration = details.elapsed_s
        elif self.started is not None and self.duration is None:
            self.duration = now - self.started
        if self.approval_outcome == "skip":
            self.status = "skipped"
            self.duration = None  # never executed: the time was the wait for a click
        elif details is not None and details.aborted:
            self.status = "aborted"
        elif details is not None and details.timed_out:
            self.status = "timed out"
        elif details is not None and details.interrupted:
            self.status = "interrupted"
        elif self.status != "aborted":
            self.status = "error" if is_error else "done"
        self._freeze()

    def not_run(self) -> None:
        """The call streamed but its message ended without it (the provider cut it unfinished,
        e.g. code caught in a loop: local/repeat.py): it never runs."""
        if not self.frozen:
            self.status = "skipped"
            self._freeze()

    def abort(self, now: float) -> None:
        """The run ended while this call had not finished."""
        if not self.frozen:
            if self.started is not None and self.duration is None and not self.approval_pending:
                self.duration = now - self.started
            self.status = "aborted"
            self._freeze()

    def _freeze(self) -> None:
        self.approval_pending = False
        self.progress_text = None
        for out in self.outputs:
            if out.stream is not None:
                out.stream.final = True
        self.frozen = True

    @property
    def result_text(self) -> str:
        """What the user sees of the result: nothing for a typed python call (its
        outputs are the real output; the result text is the model's copy)."""
        if self.details is not None or self.approval_outcome == "skip":
            # (a declined call's result is advice to the model; "skipped" says it all)
            return ""
        return strip_control(content_text(self.result.content if self.result is not None else None))

    def code(self) -> tuple[str, str]:
        """(source, language) to show for the call's arguments."""
        code, lang = args_code(self.tool_name, self.args)
        if not code and self.approval_code:
            return self.approval_code, "python"
        return code, lang


def read_output(details: object) -> ToolOutput | None:
    """A live update's typed output. The untyped ``{"event": "stream" | "display", ...}``
    dicts of earlier versions (old session files, a tool not yet switched) are read too."""
    if isinstance(details, dict) and details.get("event") in ("stream", "display") and "kind" not in details:
        details = {**details, "kind": details["event"]}
    return parse_output(details)


def args_code(tool_name: str, args: object) -> tuple[str, str]:
    if isinstance(args, dict) and isinstance(args.get("code"), str) and \
            (tool_name == "python" or set(args) == {"code"}):
        return args["code"], "python"
    if args in (None, {}):
        return "", "json"
    try:
        return json.dumps(args, indent=2, ensure_ascii=False, default=str), "json"
    except (TypeError, ValueError):
        return str(args), "text"


# --- tracebacks ---------------------------------------------------------------------------

SHORT_TRACEBACK_LINES = 12


def fold_traceback(text: str) -> tuple[str, bool]:
    """(what to show first, whether anything was left out): the last frame of the
    user's (agent's) code and the exception lines (tools/output/tracebacks.py's rules). Library
    frames are left for the full traceback, which the view shows folded."""
    return shorten_traceback(strip_control(text), max_lines=SHORT_TRACEBACK_LINES)
