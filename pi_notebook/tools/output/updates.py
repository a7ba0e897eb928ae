"""The typed records the ``python`` tool hands to the layers above it.

One vocabulary for three readers: the live view (tool card), the text view, and the
notebook export. Live updates go out while the code runs, one :data:`ToolOutput` per
``on_update`` call as the partial result's ``details``; the final result's ``details``
is a :class:`PythonCallDetails`, whose ``outputs`` keep every output in the order it
was produced (already redacted, cut only by the generous per-call detail budget, never
by the model's budget). Session files store ``details`` as JSON, so readers accept
either the model or its dumped dict: use :func:`parse_output` / :func:`parse_call_details`.

No IPython or ipywidgets imports here: ``widgets/`` and ``session/`` read this module.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .figure_text import FIGURE_TEXT_MIME

__all__ = [
    "FIGURE_TEXT_MIME", "IMAGE_MIMES", "MODEL_IMAGE_MIMES", "StreamOutput", "DisplayOutput", "ResultOutput", "ErrorOutput", "ToolOutput",
    "PythonCallDetails", "parse_output", "parse_call_details",
]


# The image types of an output, in order of preference: the views and the transcript show
# them inline (validated base64). The model gets the first two only, because
# tools/output/format.py:prepare_image downscales by re-encoding as PNG or JPEG.
IMAGE_MIMES: tuple[str, ...] = ("image/png", "image/jpeg", "image/gif")
MODEL_IMAGE_MIMES: tuple[str, ...] = IMAGE_MIMES[:2]


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


StreamName = Literal["stdout", "stderr"]


class StreamOutput(_Record):
    """Text written to ``sys.stdout`` / ``sys.stderr`` by agent code."""

    kind: Literal["stream"] = "stream"
    name: StreamName = "stdout"
    text: str


class DisplayOutput(_Record):
    """A rich display (``display()``, a figure): a MIME bundle."""

    kind: Literal["display"] = "display"
    data: dict[str, Any]
    metadata: dict[str, Any] = Field(default_factory=dict)


class ResultOutput(_Record):
    """The value of the cell's last expression (``Out``), as a MIME bundle."""

    kind: Literal["result"] = "result"
    data: dict[str, Any]
    metadata: dict[str, Any] = Field(default_factory=dict)


class ErrorOutput(_Record):
    """An exception raised by agent code (traceback lines as the user should see them)."""

    kind: Literal["error"] = "error"
    ename: str
    evalue: str
    traceback: list[str] = Field(default_factory=list)


ToolOutput = Annotated[Union[StreamOutput, DisplayOutput, ResultOutput, ErrorOutput],
                       Field(discriminator="kind")]

_OUTPUT: TypeAdapter[ToolOutput] = TypeAdapter(ToolOutput)


class PythonCallDetails(_Record):
    """``details`` of a finished ``python`` call."""

    code: str = ""
    outputs: list[ToolOutput] = Field(default_factory=list)
    elapsed_s: float = 0.0  # execution only, not the approval wait
    interrupted: bool = False
    timed_out: bool = False
    aborted: bool = False
    # what the call did to the user's names, one line each (review/changes.py)
    namespace: list[str] = Field(default_factory=list)
    # the approval gate's decision (tools/trust/approval.py ApprovalRecord.as_details), added after the call
    approval: dict[str, Any] | None = None


def parse_output(details: Any) -> ToolOutput | None:
    """A live update's ``details`` as a :data:`ToolOutput`, or None if it is not one."""
    if isinstance(details, (StreamOutput, DisplayOutput, ResultOutput, ErrorOutput)):
        return details
    if not isinstance(details, dict):
        return None
    try:
        return _OUTPUT.validate_python(details)
    except ValidationError:
        return None


def parse_call_details(details: Any) -> PythonCallDetails | None:
    """A final result's ``details`` (model or stored dict), or None if it is not one."""
    if isinstance(details, PythonCallDetails):
        return details
    if not isinstance(details, dict) or "outputs" not in details:
        return None
    try:
        return PythonCallDetails.model_validate(details)
    except ValidationError:
        return None
