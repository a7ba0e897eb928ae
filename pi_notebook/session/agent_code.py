"""The agent's work as one runnable cell: the ``python`` code of a run, failed attempts left out.

``runnable_code(messages) -> str`` reads a conversation (the messages of the latest run, see
``latest_run``): each ``python`` tool call of the assistant and its tool result. A call is kept
when its result says the code ran to the end: not ``is_error``, no ``ErrorOutput`` among the
outputs of its ``PythonCallDetails`` (tools/output/updates.py; stored sessions hold the dict form), not
interrupted, timed out or aborted. Calls without a result (an aborted run) are left out too.
Kept calls appear in execution order (the order of their results), each under a short comment,
after a header that says what was left out. The code is the code that ran
(``PythonCallDetails.code``, else the call's ``code`` argument), redacted.

A failed attempt may have changed state before it failed (half a loop, a file written): the
header says so, the user reviews the cell before running it.

``next_input_payload(text)`` is the payload IPython's ``shell.set_next_input(text)`` adds to the
execute reply (``{"source": "set_next_input", "text": ..., "replace": False}``): JupyterLab,
Notebook 7 and VS Code put ``text`` in a new cell below the one that ran.

Data only: no IPython import (the magics call ``shell.set_next_input``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..ai.types import get_field
from ..tools.trust.redact import redact
from ..tools.output.updates import ErrorOutput, parse_call_details

__all__ = ["PythonCall", "latest_run", "next_input_payload", "python_calls", "runnable_code"]

PYTHON_TOOL_NAME = "python"
Outcome = Literal["ok", "error", "interrupted", "timed out", "aborted", "no result"]


@dataclass(frozen=True)
class PythonCall:
    """One ``python`` call of the agent and how it ended."""

    tool_call_id: str
    code: str
    outcome: Outcome

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


def latest_run(messages: Sequence[Any]) -> list[Any]:
    """The messages from the last prompt on.

    A run starts with a user message that follows nothing or a finished assistant reply; a
    user message right after tool results is a ``%steer`` inside the run. (A ``%followup``
    follows a finished reply, so it counts as a new run; when the caller knows where the run
    started, pass ``messages[start:]`` to ``runnable_code`` instead.)
    """
    for index in range(len(messages) - 1, -1, -1):
        if get_field(messages[index], "role") != "user":
            continue
        previous = get_field(messages[index - 1], "role") if index > 0 else None
        if previous != "toolResult":
            return list(messages[index:])
    return list(messages)


def python_calls(messages: Iterable[Any]) -> list[PythonCall]:
    """Every ``python`` call in ``messages``: those with a result in result order, then the
    calls that never got one."""
    calls: dict[str, str] = {}
    order: list[str] = []
    outcomes: dict[str, tuple[Outcome, str | None]] = {}
    for message in messages:
        role = get_field(message, "role")
        if role == "assistant":
            for block in get_field(message, "content") or []:
                if get_field(block, "type") != "toolCall" or get_field(block, "name") != PYTHON_TOOL_NAME:
                    continue
                call_id = get_field(block, "id") or ""
                arguments = get_field(block, "arguments") or {}
                code = arguments.get("code") if isinstance(arguments, Mapping) else None
                calls[call_id] = code if isinstance(code, str) else ""
        elif role == "toolResult":
            call_id = get_field(message, "tool_call_id", "toolCallId") or ""
            if call_id in calls and call_id not in outcomes:
                outcomes[call_id] = _outcome(message)
                order.append(call_id)
    out = []
    for call_id in order:
        outcome, ran = outcomes[call_id]
        out.append(PythonCall(call_id, redact(ran or calls[call_id]), outcome))
    out += [PythonCall(cid, redact(code), "no result") for cid, code in calls.items() if cid not in outcomes]
    return out


def _outcome(result: Any) -> tuple[Outcome, str | None]:
    """How a python tool result ended, and the code it reports having run (if any)."""
    details = get_field(result, "details")
    parsed = parse_call_details(details)
    code = parsed.code if parsed is not None and parsed.code else None
    if parsed is not None:
        if parsed.aborted:
            return "aborted", code
        if parsed.timed_out:
            return "timed out", code
        if parsed.interrupted:
            return "interrupted", code
        if any(isinstance(o, ErrorOutput) for o in parsed.outputs):
            return "error", code
    elif isinstance(details, Mapping):
        # the python tool's older details dict: {"error": {...} | None, "interrupted", ...}
        if details.get("timed_out"):
            return "timed out", None
        if details.get("interrupted"):
            return "interrupted", None
        if details.get("error"):
            return "error", None
    if get_field(result, "is_error", "isError"):
        return "error", code
    return "ok", code


def runnable_code(messages: Iterable[Any]) -> str:
    """The kept calls as one cell with a header comment (``""`` when no call ran to the end)."""
    calls = python_calls(messages)
    kept = [c for c in calls if c.ok and c.code.strip()]
    if not kept:
        return ""
    left_out = [c for c in calls if not c.ok]
    header = [f"# Code the agent ran, in execution order ({len(kept)} "
              f"step{'s' if len(kept) != 1 else ''}). Review before running."]
    if left_out:
        counts: dict[str, int] = {}
        for call in left_out:
            counts[call.outcome] = counts.get(call.outcome, 0) + 1
        detail = ", ".join(f"{n} {what}" for what, n in counts.items())
        header.append(f"# Left out: {len(left_out)} failed attempt{'s' if len(left_out) != 1 else ''} "
                      f"({detail}); they may have changed state before failing.")
    body = []
    for index, call in enumerate(kept, 1):
        prefix = f"# step {index}\n" if len(kept) > 1 else ""
        body.append(prefix + _inline_cell_magic(call.code.strip("\n")))
    return "\n".join(header) + "\n\n" + "\n\n".join(body) + "\n"


def _inline_cell_magic(code: str) -> str:
    """A step that is a cell magic (``%%time``...) only works at the top of a cell; in the joined
    cell it becomes the call IPython itself turns a cell magic into."""
    if not code.startswith("%%"):
        return code
    first, _, body = code.partition("\n")
    name, _, line = first[2:].partition(" ")
    cell = body + "\n" if body else ""
    return f"get_ipython().run_cell_magic({name!r}, {line.strip()!r}, {cell!r})"


def next_input_payload(text: str, replace: bool = False) -> dict[str, Any]:
    """The execute-reply payload ``shell.set_next_input(text, replace)`` produces."""
    return {"source": "set_next_input", "text": text, "replace": replace}
