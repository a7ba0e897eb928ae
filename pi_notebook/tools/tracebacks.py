"""Tracebacks of user cells, trimmed for the model: cell and user frames one line each, each run of
library frames folded into one line naming the packages and the innermost frame.

``trim_traceback(frames, cell_files, exc)``: ``frames`` from ``traceback.extract_tb``,
``cell_files`` maps IPython's cell file names to execution counts (``shell.compile._filename_map``:
``<ipython-input-3-…>`` in a terminal, ``/tmp/ipykernel_…/….py`` under ipykernel). A frame is a
library frame when its file is under the interpreter's stdlib or site-packages directories (or is
a compiled extension's source such as ``pandas/_libs/index.pyx``); any other file is the user's
own code and is shown.
"""

from __future__ import annotations

import os
import sysconfig
import traceback

from .format import strip_ansi
from .redact import redact

__all__ = ["safe_str", "trim_traceback"]


def safe_str(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception as err:
        text = f"<str() failed: {type(err).__name__}>"
    return strip_ansi(text)



_LIBRARY_ROOTS = tuple(sorted({os.path.realpath(p) + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib")
                               if (p := sysconfig.get_paths().get(key))}, key=len, reverse=True))


def _library_name(filename: str) -> str | None:
    """The package a library frame belongs to, or None for user code."""
    if filename.startswith("<"):
        return None  # <ipython-input-…>, <string>: cells and generated code
    marker = next((m for m in ("site-packages" + os.sep, "dist-packages" + os.sep) if m in filename), None)
    if marker is not None:
        rest = filename.split(marker, 1)[1]
        return rest.split(os.sep, 1)[0].removesuffix(".py")
    real = os.path.realpath(filename) if os.path.isabs(filename) else filename
    for root in _LIBRARY_ROOTS:
        if real.startswith(root):
            rest = real[len(root):]
            return rest.split(os.sep, 1)[0].removesuffix(".py") or "stdlib"
    if not os.path.isabs(filename) and filename.endswith((".pyx", ".pxi", ".pxd")):
        return filename.split("/", 1)[0]  # compiled extension sources (pandas/_libs/…)
    return None


def _short_path(filename: str) -> str:
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def trim_traceback(frames: list[traceback.FrameSummary], cell_files: dict[str, int],
                    exc: BaseException) -> str:
    """Cell and user frames one line each; each run of library frames folded into one line.

    The frames IPython itself adds above the first cell frame (``run_code``'s ``exec``) go.
    """
    first_cell = next((i for i, f in enumerate(frames) if f.filename in cell_files
                       or f.filename.startswith("<ipython-input")), 0)
    frames = frames[first_cell:]
    lines: list[str] = []
    folded: list[traceback.FrameSummary] = []

    def flush() -> None:
        if not folded:
            return
        packages = sorted({_library_name(f.filename) or "?" for f in folded})
        inner = folded[-1]
        lines.append(f"... {len(folded)} library frame{'s' if len(folded) != 1 else ''} in "
                     f"{', '.join(packages)} (innermost: {_short_path(inner.filename)}:{inner.lineno} "
                     f"in {inner.name})")
        folded.clear()

    for frame in frames:
        count = cell_files.get(frame.filename)
        if count is None and _library_name(frame.filename) is not None:
            folded.append(frame)
            continue
        flush()
        where = f"In[{count}]" if count is not None else _short_path(frame.filename)
        scope = "" if frame.name == "<module>" else f", in {frame.name}"
        source = (frame.line or "").strip()
        lines.append(f"{where} line {frame.lineno}{scope}" + (f": {source}" if source else ""))
    flush()
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is not None:
        text = f"{type(cause).__name__}: {safe_str(cause)}"
        if text != f"{type(exc).__name__}: {safe_str(exc)}":  # pandas re-raises the same KeyError
            link = "caused by" if exc.__cause__ is not None else "while handling"
            lines.append(f"({link} {text[:300]})")
    return redact("\n".join(lines))


