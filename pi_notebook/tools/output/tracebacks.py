"""Every shortening of a traceback: one set of rules for what is the user's own code and what a
folded run of library frames says, used by the model's text and by the view.

``trim_traceback(frames, cell_files, exc)`` (user cells, for the model): cell and user frames one
line each, each run of library frames folded into one line naming the packages and the innermost
frame. ``frames`` from ``traceback.extract_tb``,
``cell_files`` maps IPython's cell file names to execution counts (``shell.compile._filename_map``:
``<ipython-input-3-…>`` in a terminal, ``/tmp/ipykernel_…/….py`` under ipykernel). A frame is a
library frame when its file is under the interpreter's stdlib or site-packages directories (or is
a compiled extension's source such as ``pandas/_libs/index.pyx``); any other file is the user's
own code and is shown.

``shorten_traceback(text, max_lines=..., max_chars=None, library_summary=False)`` (an already
formatted traceback: IPython's or Python's text, as the python tool and the view have it): whole
up to ``max_lines`` lines; longer, the headline of the last exception of a chain, the innermost
frame of the user's code and the exception lines, with (``library_summary``) the library frames
after it folded into trim_traceback's one line; ``max_chars`` then keeps the end. The python
tool's result text uses it (40 lines, 3000 characters, with the summary), the tool cards and the
transcript export (widgets/toolcall.py ``fold_traceback``: 12 lines; the full traceback is shown
folded beside it).
"""

from __future__ import annotations

import os
import re
import sysconfig
import traceback

from .format import strip_ansi
from ..trust.redact import redact, strip_unsafe_head

__all__ = ["safe_str", "trim_traceback", "shorten_traceback"]


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


_OTHER_STDLIB_RE = re.compile(r"[/\\]lib[/\\]python\d[\d.]*[/\\]([^/\\]+)")


def _other_stdlib_name(filename: str) -> str | None:
    """The module of a frame under another interpreter's ``lib/pythonX.Y`` (a formatted traceback
    need not come from this one)."""
    match = _OTHER_STDLIB_RE.search(filename)
    return match.group(1).removesuffix(".py") if match else None


def _short_path(filename: str) -> str:
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def _folded_line(folded: list[traceback.FrameSummary]) -> str:
    """One line for a run of library frames: how many, their packages, the innermost."""
    packages = sorted({_library_name(f.filename) or _other_stdlib_name(f.filename) or "?" for f in folded})
    inner = folded[-1]
    return (f"... {len(folded)} library frame{'s' if len(folded) != 1 else ''} in "
            f"{', '.join(packages)} (innermost: {_short_path(inner.filename)}:{inner.lineno} "
            f"in {inner.name})")


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
        if folded:
            lines.append(_folded_line(folded))
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




# --- formatted tracebacks ---------------------------------------------------------------------

# A frame's first line: ``File "x.py", line 3, in f`` (Python), ``File /x.py:3, in f(a)`` and
# ``Cell In[2], line 3`` (IPython 8), ``Input In [2], in <cell line: 3>()`` (IPython 7).
_FRAME_START_RE = re.compile(r"^\s*(File\s|Cell In\[|Input In \[)")
_FRAME_FILE_RE = re.compile(r'^\s*File\s+(?:"(?P<quoted>[^"]+)", line (?P<qline>\d+)|(?P<path>.+?):(?P<line>\d+))'
                            r"(?:, in (?P<name>[^(]+))?")
# Library frames whatever interpreter printed them (its stdlib need not be ours): installed
# packages, a stdlib directory, compiled extensions, frozen modules.
_LIBRARY_TEXT_RE = re.compile(r"site-packages|dist-packages|[/\\]lib[/\\]python\d|\.pyx\b|\.pxi\b|<frozen |"
                              r"Could not get source")
_EXCEPTION_RE = re.compile(r"^[A-Za-z_][\w.]*(:|$)")
_HEADLINE_RE = re.compile(r"Traceback \(most recent call last\)")


def _text_frame(header: str) -> traceback.FrameSummary | None:
    """The library frame a frame's first line names, or None for the user's own code."""
    match = _FRAME_FILE_RE.match(header)
    filename = (match.group("quoted") or match.group("path")) if match else None
    if not _LIBRARY_TEXT_RE.search(header) and (filename is None or _library_name(filename) is None):
        return None
    if match is None or filename is None:
        return traceback.FrameSummary("?", None, "?", lookup_line=False)
    lineno = int(match.group("qline") or match.group("line"))
    return traceback.FrameSummary(filename, lineno, (match.group("name") or "<module>").strip(),
                                  lookup_line=False)


def shorten_traceback(text: str, *, max_lines: int, max_chars: int | None = None,
                      library_summary: bool = False) -> tuple[str, bool]:
    """(the traceback to show first, whether anything was left out); see the module docstring."""
    text = text.strip("\n")
    lines = text.split("\n")
    short = text
    if len(lines) > max_lines:
        short = _fold(lines, library_summary) or "\n".join(
            ["[... earlier traceback lines cut ...]", *lines[-max_lines:]])
    if max_chars is not None and len(short) > max_chars:
        short = "[... cut ...]" + strip_unsafe_head(short[-max_chars:])
    return short, short != text


def _fold(lines: list[str], library_summary: bool) -> str | None:
    """The headline, the innermost user frame and the exception lines of the last exception of
    a chain (None when no frame is found)."""
    start = 0
    for i, line in enumerate(lines):
        if _HEADLINE_RE.search(line):
            start = i
    frames: list[list[str]] = []
    current: list[str] | None = None
    for line in lines[start + 1:]:
        if _FRAME_START_RE.match(line):
            current = [line]
            frames.append(current)
        elif current is not None:
            current.append(line)
    if not frames:
        return None
    # The exception lines end the traceback: from the last line of the last frame that starts
    # in column 0 with a name (``KeyError: 'b'``, ``mod.CustomError``), to the end.
    last = frames[-1]
    tail: list[str] = []
    for j in range(len(last) - 1, 0, -1):
        if _EXCEPTION_RE.match(last[j]):
            tail = last[j:]
            del last[j:]
            break
    kinds = [_text_frame(frame[0]) for frame in frames]
    user = [i for i, kind in enumerate(kinds) if kind is None]
    shown = lines[start:start + 1]
    if user:
        frame = frames[user[-1]]
        while frame and not frame[-1].strip():
            frame = frame[:-1]
        shown += frame
    if library_summary:
        inner = [kind for kind in kinds[user[-1] + 1 if user else 0:] if kind is not None]
        if inner:
            shown.append(_folded_line(inner))
    return "\n".join([*shown, "", *tail]).strip("\n")
