"""The python tool's side of the namespace review (``review/``, docs/design/review.md): the
shell's names in, lines for the model, the card and the approval panel out.

``watch_call(shell, code, settings)`` before a call and ``finish_call(shell, watch)`` after it:
the lines saying what the call changed (empty when nothing did). ``preview_call(shell, code,
protect)`` for the approval panel. None of them ever fails a call: a review that raises is
left out (the call's own result matters more than its bookkeeping).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...review.changes import visible_items
from ...review.watch import CallWatch, Preview, review_for
from ..trust.redact import redact

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from .python_types import PythonToolSettings

__all__ = ["finish_call", "preview_call", "watch_call"]


def _items(shell: InteractiveShell) -> list[tuple[str, object]]:
    return visible_items(shell.user_ns, getattr(shell, "user_ns_hidden", None) or {})


def _python(shell: InteractiveShell, code: str) -> str:
    """The code as Python (``%magic`` and ``!cmd`` lines transformed), as it will run."""
    from .execution import transform_source

    try:
        return transform_source(shell, code)
    except Exception:
        return code


def watch_call(shell: InteractiveShell, code: str, settings: PythonToolSettings) -> CallWatch | None:
    try:
        # a user cell that ran since the last call moved the execution count
        return review_for(shell).before_call(_python(shell, code), _items(shell), settings.protect,
                                             settings.undo_budget, epoch=shell.execution_count)
    except Exception:
        return None


def finish_call(shell: InteractiveShell, watch: CallWatch | None) -> list[str]:
    if watch is None:
        return []
    try:
        report = review_for(shell).after_call(watch, shell.user_ns, _items(shell))
    except Exception:
        return []
    return [redact(line) for line in report.lines()]


def preview_call(shell: InteractiveShell, code: str, settings: PythonToolSettings) -> Preview | None:
    try:
        preview = review_for(shell).preview(_python(shell, code), shell.user_ns, settings.protect,
                                            settings.undo_budget)
    except Exception:
        return None
    return Preview(tuple(redact(x) for x in preview.lines), preview.protected,
                   tuple(redact(x) for x in preview.unrestorable))
