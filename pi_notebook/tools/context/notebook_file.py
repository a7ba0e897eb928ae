"""The kernel's notebook file: where it is, and a read-only tool that shows it to the model.

Where (``locate_notebook``), first match wins:

1. an explicit path (the user's setting or argument);
2. ``__vsc_ipynb_file__`` in the user namespace (VS Code sets it);
3. ``__session__`` in the user namespace (ipykernel copies ``JPY_SESSION_NAME`` there);
4. the ``JPY_SESSION_NAME`` environment variable (Jupyter Server sets it when it starts a kernel
   for a notebook: an absolute path, or a path relative to the server root).

A relative path is tried against the kernel's working directory, then by its file name alone
(the kernel usually runs in the notebook's directory, the server root may be above it).

What (``render_notebook`` / the ``read_notebook`` tool): Markdown cells (the user's own
explanations), code cells with their *saved* text outputs (streams, ``text/plain``-like
values, error name and message; images are named, not sent), cell indices, ids and execution
counts, optionally a range. The file is what was last saved: unsaved edits in the editor are
not in it, and the text says when the file was saved. Read-only: nothing here writes.

Every text is redacted (tools/trust/redact.py) before it is cut. The tool stops adding cells when its
budget is spent and says which range to ask for next, rather than cutting cells in half.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...agent.types import AgentTool, AgentToolResult
from ...ai.types import TextContent
from ..trust.credentials import redact_all as redact
from ..output.format import bundle_text, clip, cut, strip_ansi
from .project_files import open_project_file, read_project_file

__all__ = ["NotebookLocation", "locate_notebook", "make_notebook_file_tool", "markdown_cells",
           "render_notebook"]

_SOURCE_CHARS = 3000
_OUTPUT_CHARS = 1200
_TOTAL_CHARS = 12000
_TRACEBACK_LINES = 4
_MAX_FILE_BYTES = 256 * 2 ** 20  # past this the file is not parsed at all
_CHILD_BYTES = 2 * 2 ** 20  # files over this are parsed in a child process
_WINDOW_CELLS = 400  # cells handed back per read (the text budget shows far fewer)
READ_TIMEOUT_S = 30.0  # the parse is given up after this (the child is killed)


def _select(nb: Any, start: Any, end: Any, cell_id: Any, limit: int) -> dict[str, Any]:
    """The cells one read shows, from a parsed notebook: ``{"total", "first", "last", "cells"}``
    (``first`` None: no cell with ``cell_id``). Self-contained (only builtins): a child process
    runs its source for big files."""
    if not isinstance(nb, dict):
        raise ValueError("not a notebook (the JSON is not an object)")
    major = nb.get("nbformat")
    if not isinstance(major, int) or major < 4:
        return {"old": True}
    raw = nb.get("cells")
    if not isinstance(raw, list):
        raise ValueError("not a notebook (no 'cells' list)")
    cells = [c for c in raw if isinstance(c, dict)]
    total = len(cells)
    if cell_id is not None:
        found = [i for i, c in enumerate(cells) if c.get("id") == cell_id]
        first = last = found[0] if found else None
    else:
        first = 0 if start is None else max(0, start if start >= 0 else total + start)
        last = total - 1 if end is None else min(total - 1, end if end >= 0 else total + end)
    window = [] if first is None or last is None or first > last else cells[first:min(last, first + limit - 1) + 1]

    def bound(value: Any) -> Any:  # a 20 MB output is not handed back whole (head and tail)
        if isinstance(value, str) and len(value) > 200_000:
            return value[:130_000] + "\n[... cut on reading ...]\n" + value[-70_000:]
        if isinstance(value, list):
            if value and all(isinstance(v, str) for v in value) and sum(len(v) for v in value) > 200_000:
                return bound("".join(value))
            return [bound(v) for v in value[:2000]]
        if isinstance(value, dict):
            return {k: bound(v) for k, v in value.items()}
        return value

    return {"total": total, "first": first, "last": last, "cells": [bound(c) for c in window]}


_CHILD = """
import json, sys
from typing import Any
{source}
args = json.loads(sys.argv[1])
import os
with os.fdopen(args["fd"], "rb") as f:
    nb = json.load(f)
sys.stdout.write(json.dumps(_select(nb, args["start"], args["end"], args["cell_id"], args["limit"])))
"""


def _window(path: Path, start: int | None, end: int | None, cell_id: str | None,
            limit: int = _WINDOW_CELLS) -> dict[str, Any]:
    """``_select`` on the file. The file is plain JSON to us (nbformat's validation took 7.6-11 s
    on a 27 MB, 100,000-cell file); over ``_CHILD_BYTES`` it is parsed in a child process, since
    ``json.loads`` holds the GIL for its whole run (1.6 s on that file) and the kernel would not
    answer meanwhile. Pre-v4 files go through nbformat's converter."""
    import subprocess
    import sys

    fd, info, _ = open_project_file(path)  # a project file: regular, in its tree, non-blocking
    with os.fdopen(fd, "rb") as f:
        size = info.st_size
        if size > _MAX_FILE_BYTES:
            raise ValueError(f"the file is {size / 2 ** 20:.0f} MB, over the {_MAX_FILE_BYTES // 2 ** 20} MB "
                             "this tool reads")
        if size <= _CHILD_BYTES:
            window = _select(json.loads(f.read(_CHILD_BYTES + 1)), start, end, cell_id, limit)
        else:
            import inspect

            # the child reads the very file that was checked: its fd, not its path again
            args = json.dumps({"fd": f.fileno(), "start": start, "end": end, "cell_id": cell_id, "limit": limit})
            code = _CHILD.format(source=inspect.getsource(_select))
            try:
                done = subprocess.run([sys.executable, "-I", "-c", code, args], capture_output=True,
                                      timeout=READ_TIMEOUT_S, check=False, pass_fds=(f.fileno(),))
            except subprocess.TimeoutExpired:
                raise ValueError(f"reading it took over {READ_TIMEOUT_S:g} s") from None
            if done.returncode != 0:
                last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["?"])[-1]
                raise ValueError(last[:300])
            window = json.loads(done.stdout)
    if window.get("old"):
        import nbformat

        old = read_project_file(path, _CHILD_BYTES, redacted=False)  # redacted cell by cell below
        if old.cut:
            raise ValueError(f"a notebook of an old format over {_CHILD_BYTES // 2 ** 20} MB is not read")
        converted = nbformat.reads(old.text, as_version=4)
        window = _select(json.loads(nbformat.writes(converted)), start, end, cell_id, limit)
    return window


@dataclass(frozen=True)
class NotebookLocation:
    """Where the notebook is (``path`` None when not found) and how that was decided."""

    path: Path | None
    origin: str = ""  # "setting", "__vsc_ipynb_file__", "__session__", "JPY_SESSION_NAME"
    tried: tuple[str, ...] = field(default=())

    def describe_missing(self) -> str:
        if not self.tried:
            return ("This kernel does not know its notebook file: no path was set, and the "
                    "kernel was not started by a Jupyter server for a notebook (no "
                    "JPY_SESSION_NAME). The user can set the path explicitly.")
        return ("No saved notebook file found (tried: " + "; ".join(self.tried) + "). It may "
                "not have been saved yet, or it was moved or renamed.")


def locate_notebook(user_ns: Mapping[str, Any] | None = None, explicit: str | os.PathLike[str] | None = None,
                    env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
                    ) -> NotebookLocation:
    """Find the notebook file of this kernel (see the module docstring for the order)."""
    env = os.environ if env is None else env
    user_ns = user_ns or {}
    base = Path(cwd) if cwd is not None else Path.cwd()
    candidates: list[tuple[str, Any]] = [
        ("setting", explicit),
        ("__vsc_ipynb_file__", user_ns.get("__vsc_ipynb_file__")),
        ("__session__", user_ns.get("__session__")),
        ("JPY_SESSION_NAME", env.get("JPY_SESSION_NAME")),
    ]
    tried: list[str] = []
    seen: set[str] = set()
    for origin, value in candidates:
        if not value or not isinstance(value, (str, os.PathLike)):
            continue
        raw = os.fspath(value)
        if raw in seen:
            continue
        seen.add(raw)
        for path in _spellings(Path(raw).expanduser(), base):
            if path.is_file():
                return NotebookLocation(path=path, origin=origin, tried=tuple(tried))
        tried.append(f"{origin}={raw!s}")
        if origin == "setting":
            # an explicit path that does not exist is the answer, not a reason to guess
            return NotebookLocation(path=None, origin=origin, tried=tuple(tried))
    return NotebookLocation(path=None, tried=tuple(tried))


def _spellings(path: Path, base: Path) -> list[Path]:
    if path.is_absolute():
        return [path]
    return [base / path, base / path.name]


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return str(value or "")


def _output_text(output: Mapping[str, Any]) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        name = output.get("name", "stdout")
        text = strip_ansi(_text(output.get("text")))
        return text if name == "stdout" else f"[{name}] {text}"
    if kind in ("execute_result", "display_data"):
        data = output.get("data") or {}
        value = bundle_text(data)
        if value is not None:
            return strip_ansi(value)
        images = [m for m in data if m.startswith("image/")]
        if images:
            return f"[{images[0]} image]"
        return f"[{', '.join(sorted(data)) or 'empty'} output]"
    if kind == "error":
        lines = [strip_ansi(str(line)) for line in output.get("traceback") or []]
        tail = "\n".join(lines[-_TRACEBACK_LINES:]) if lines else ""
        head = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
        return head + ("\n" + tail if tail and head not in tail else "")
    return ""


def _cell_text(index: int, cell: Mapping[str, Any], with_outputs: bool) -> str:
    kind = cell.get("cell_type", "code")
    meta = [f"[{index}] {kind}"]
    if kind == "code":
        count = cell.get("execution_count")
        meta.append(f"In[{count}]" if count is not None else "not run")
    if cell.get("id"):
        meta.append(f"id {cell['id']}")
    source = cut(redact(_text(cell.get("source"))), _SOURCE_CHARS)
    parts = ["--- " + ", ".join(meta) + " ---", source]
    if kind == "code" and with_outputs:
        outputs = [t for t in (_output_text(o) for o in cell.get("outputs") or []) if t]
        if outputs:
            joined = "\n".join(t.rstrip("\n") for t in outputs)
            parts += ["output:", cut(redact(joined), _OUTPUT_CHARS)]
    return "\n".join(parts)


def render_notebook(path: str | os.PathLike[str], start: int | None = None, end: int | None = None,
                    cell_id: str | None = None, with_outputs: bool = True,
                    max_chars: int = _TOTAL_CHARS) -> str:
    """The saved notebook as compact text: cells ``start``..``end`` (0-based, inclusive)."""
    path = Path(path)
    try:
        window = _window(path, start, end, cell_id)
    except FileNotFoundError:
        return f"No saved notebook at {path} (it may not have been saved yet)."
    except Exception as exc:  # invalid JSON, an unknown format version, too big or too slow...
        return f"The notebook {path} could not be read: {type(exc).__name__}: {redact(str(exc))[:300]}"
    total, first, last, cells = window["total"], window["first"], window["last"], window["cells"]
    saved = _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    header = (f"Notebook {path.name}: {total} cells, saved {saved} (unsaved edits in the editor "
              "are not included).")
    if cell_id is not None:
        if first is None:
            return f"{header}\nNo cell with id {clip(cell_id, 80)!r}."  # an argument is echoed cut
    else:
        if total == 0:
            return f"{header}\nThe notebook has no cells."
        if first > last:
            return f"{header}\nNo cells in the range {start}..{end} (valid indices: 0..{total - 1})."
    parts = [header]
    used = len(header)
    for index in range(first, last + 1):
        offset = index - first
        text = _cell_text(index, cells[offset], with_outputs) if offset < len(cells) else None
        if text is None or (used + len(text) + 2 > max_chars and index > first):
            parts.append(f"[cells {index}..{last} not shown: over this tool's budget; "
                         f"call read_notebook with start={index}]")
            break
        parts.append(text)
        used += len(text) + 2
    return cut(redact("\n\n".join(parts)), max_chars)  # a secret could span two cells


def markdown_cells(path: str | os.PathLike[str], max_chars: int = 800) -> str | None:
    """The saved notebook's Markdown cells (the user's own plan and explanations), newest kept
    when over budget; None when the file cannot be read or has none. For a model that is not
    offered ``read_notebook`` (the small-model profile), in its prompt's context instead."""
    try:
        cells = _window(Path(path), None, None, None, limit=100_000)["cells"]
    except Exception:  # missing, unsaved or invalid: the prompt goes without it
        return None
    texts = [f"[{i}] {_text(c.get('source')).strip()}" for i, c in enumerate(cells)
             if c.get("cell_type") == "markdown" and _text(c.get("source")).strip()]
    if not texts:
        return None
    kept: list[str] = []
    used = 0
    for text in reversed(texts):  # the newest Markdown is the likeliest to be meant
        text = cut(redact(text), max_chars)
        if kept and used + len(text) > max_chars:
            break
        kept.append(text)
        used += len(text) + 1
    return "\n".join(reversed(kept))


def make_notebook_file_tool(get_path: Callable[[], NotebookLocation], max_chars: int = _TOTAL_CHARS) -> AgentTool:
    """``read_notebook(start, end, cell_id, outputs)``; ``get_path`` locates the file per call
    (the user may save or rename the notebook during a session)."""

    async def execute(tool_call_id: str, params: Any, signal: Any = None,
                      on_update: Any = None) -> AgentToolResult:
        params = params if isinstance(params, dict) else {}
        start, end, cell_id = params.get("start"), params.get("end"), params.get("cell_id")
        for name, value in (("start", start), ("end", end)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"read_notebook: {name!r} must be an integer cell index")
        if cell_id is not None and not isinstance(cell_id, str):
            raise ValueError("read_notebook: 'cell_id' must be a string")
        location = get_path()
        if location.path is None:
            text = location.describe_missing()
        else:
            # parsed off the kernel's loop (the kernel keeps answering), with a bounded wait
            work = asyncio.to_thread(render_notebook, location.path, start=start, end=end,
                                     cell_id=cell_id,
                                     with_outputs=params.get("outputs", True) is not False,
                                     max_chars=max_chars)
            try:
                text = await asyncio.wait_for(work, READ_TIMEOUT_S)
            except asyncio.TimeoutError:
                text = (f"The notebook {location.path.name} could not be read within "
                        f"{READ_TIMEOUT_S:g} s (it is very large); ask for it in parts later.")
        return AgentToolResult(content=[TextContent(text=text)],
                               details={"path": str(location.path) if location.path else None,
                                        "origin": location.origin})

    return AgentTool(
        name="read_notebook",
        label="Notebook",
        description=(
            "Read the saved notebook file (read-only): Markdown cells (the user's notes and "
            "plans) and code cells with their saved text outputs, each with its index, id and "
            "execution count (In[N]). Optionally a range of cell indices (0-based, inclusive) "
            "or one cell by id. Unsaved edits are not in the file."),
        parameters={
            "type": "object",
            "properties": {
                "start": {"type": "integer", "description": "First cell index (0-based; negative counts from the end)."},
                "end": {"type": "integer", "description": "Last cell index, inclusive."},
                "cell_id": {"type": "string", "description": "One cell by its id."},
                "outputs": {"type": "boolean", "default": True, "description": "Include saved outputs."},
            },
        },
        execute=execute,
    )
