"""The python tool's plain data: its settings (built by the magics layer) and the outcome
of one ``run_code``. Their own module so that ``model_text.py`` (what the model sees of a
call) and ``python_tool.py`` (running it) both import them without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

from ..output.updates import ErrorOutput, PythonCallDetails, ResultOutput, ToolOutput

__all__ = ["ExecutionResult", "PythonToolSettings", "SettingsSource", "resolve_settings"]


@dataclass
class PythonToolSettings:
    """Budgets and switches of the notebook tools (built by the magics layer)."""

    max_output_chars: int = 8000  # stdout + stderr text sent to the model
    max_value_chars: int = 4000  # the value / display texts sent to the model
    max_images: int = 3  # images per call sent to the model
    image_pixel_budget: int = 1_000_000  # pixels per image (downscaled above)
    timeout_s: float | None = 300.0  # per call; None or 0 disables
    model_accepts_images: bool | Callable[[], bool] = True
    max_detail_chars: int = 200_000  # per stream kept in details (view/transcript/export)
    stream_interval_s: float = 0.1  # coalescing of live stream updates
    max_figures: int = 10  # images kept and drawn per call; further new figures are closed
    repr_timeout_s: float = 3.0  # list_variables (per value) / inspect_variable deadline
    route_fd_output: bool = True  # route fd 1/2 written during agent code to the call
    undo_budget: int = 512 * 2**20  # bytes of copies kept for %agent undo; 0: no copies
    protect: tuple[str, ...] = ()  # names any change of which is asked for, even under auto

    def accepts_images(self) -> bool:
        value = self.model_accepts_images
        try:
            return bool(value()) if callable(value) else bool(value)
        except Exception:
            return False


SettingsSource = Union[PythonToolSettings, Callable[[], PythonToolSettings], None]


def resolve_settings(settings: SettingsSource) -> PythonToolSettings:
    """A settings object, or a callable returning one (read at each call), or None."""
    if settings is None:
        return PythonToolSettings()
    if isinstance(settings, PythonToolSettings):
        return settings
    if callable(settings):
        value = settings()
        if isinstance(value, PythonToolSettings):
            return value
    raise TypeError("settings must be a PythonToolSettings, a callable returning one, or None")


@dataclass
class ExecutionResult:
    """The outcome of one ``run_code`` (all text already redacted)."""

    stdout: str = ""
    stderr: str = ""
    displays: list[dict[str, Any]] = field(default_factory=list)  # {"data", "metadata"} (sink.py's)
    value: ResultOutput | None = None  # the last expression's MIME bundle
    value_text: str | None = None  # model text of the value (_repr_llm_, DataFrame summary...)
    error: ErrorOutput | None = None
    elapsed_s: float = 0.0
    interrupted: bool = False
    timed_out: bool = False
    aborted: bool = False
    stdout_total: int = 0  # characters written, including any dropped from the middle
    stderr_total: int = 0
    displays_dropped: int = 0
    figures_dropped: int = 0  # figures or images beyond max_figures (closed, not drawn/kept)
    code: str = ""
    outputs: list[ToolOutput] = field(default_factory=list)  # streams and displays, in order

    @property
    def is_error(self) -> bool:
        return self.error is not None or self.interrupted

    def details(self, namespace: list[str] | None = None) -> PythonCallDetails:
        outputs = list(self.outputs)
        if self.value is not None:
            outputs.append(self.value)
        if self.error is not None:
            outputs.append(self.error)
        return PythonCallDetails(
            code=self.code, outputs=outputs, elapsed_s=round(self.elapsed_s, 3),
            interrupted=self.interrupted, timed_out=self.timed_out, aborted=self.aborted,
            namespace=list(namespace or []),
        )
