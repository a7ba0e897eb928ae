"""What the user ran in this kernel: a ring of recent cells, recorded by IPython event hooks.

:class:`ExecutionHistory` registers ``pre_run_cell`` / ``post_run_cell`` on the shell and keeps
one :class:`CellRecord` per user cell, in execution order: execution count, source, what
came out (``Out[n]`` and, when IPython recorded it, printed output), whether it raised, and
for errors the exception type, message, the failing line and a trimmed traceback (cell
frames shown, library frames folded into one line per run). ``sys.last_exc`` keeps only the
newest error; the hook reads each cell's own exception from its ``ExecutionResult``.

What is *not* recorded as the user's code:

- the agent's ``python`` tool runs code without ``run_cell`` (tools/python/python_tool.py), so it
  fires no cell events; if agent code calls ``run_cell`` itself, the hook sees it inside the
  agent's capture context and skips it;
- ``%%agent`` cells and the ``%agent`` / ``%steer`` / ``%followup`` lines are recorded with
  ``kind`` "agent prompt" / "agent command": what the user asked, not code to fix;
- silent executions and ``store_history=False`` runs (frontend completions, widgets).

Printed output: IPython 9 tees ``sys.stdout``/``sys.stderr`` of each ``run_cell`` into
``history_manager.outputs`` (the data behind ``%notebook``); the hook reads it from there, so
recording costs no extra stream wrapper. Cells run through ``run_cell_async`` directly
(ipykernel does this for cells with top-level ``await``) are not teed: their printed output is
unknown, and the record says so.

Records are stored as they ran, unredacted (each text bounded to 50,000 characters, head and
tail), and redacted -- known secrets and credential shapes, tools/trust/credentials.py -- then cut to
the budgets when they are read (``records()``, cached until the set of secrets changes): a
secret that becomes known after the cell that printed it (print a token, then put it in
``os.environ``) is still redacted, and a cut never comes before the redaction. API:

- ``install_history(shell)`` / ``installed_history(shell)`` / ``uninstall_history(shell)``: the
  shell's one recorder (what the extension installs and the tools read);
- ``ExecutionHistory(max_cells=50, ...)``; ``.install(shell)`` / ``.uninstall()``;
  ``.records()``, ``.get(count)``, ``.last(code_only=True)``, ``.render(last, cell)``,
  ``.last_error_note()``, ``.recent_names()``.
- ``format_record(record)``: one cell as the compact text the model reads.

The ``notebook_history`` tool and the ``%agent fix`` prompt are in tools/context/history_tool.py,
traceback trimming in tools/output/tracebacks.py.
"""

from __future__ import annotations

import ast
import threading
import time
import traceback
import weakref
from collections import deque
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from ..kernel.capture import capture_active
from ..output.error_hints import error_hint
from ..trust.credentials import redact_all as redact
from ..output.format import bundle_text, cut, dataframe_summary, series_summary, strip_ansi
from ..kernel.kernel_host import kernel_host
from ..trust.redact import secrets_generation
from ..output.tracebacks import safe_str, trim_traceback

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = [
    "CellError", "CellKind", "CellRecord", "ExecutionHistory", "bounded_value_text", "cell_kind",
    "format_record", "indent", "install_history", "installed_history", "uninstall_history",
]

CellKind = Literal["code", "agent prompt", "agent command"]

_AGENT_LINE_MAGICS = ("%agent", "%steer", "%followup")
_INTERRUPTS = frozenset({"KeyboardInterrupt", "CancelledError"})


def cell_kind(source: str) -> CellKind:
    """``agent prompt`` for a ``%%agent`` cell, ``agent command`` for pi_notebook's line
    magics alone in a cell, else ``code``."""
    stripped = source.lstrip()
    first = stripped.split("\n", 1)[0].strip()
    if first.startswith("%%agent") and (len(first) == 7 or first[7].isspace()):
        return "agent prompt"
    lines = [ln.strip() for ln in stripped.splitlines() if ln.strip()]
    if lines and all(_is_agent_line(ln) for ln in lines):
        return "agent command"
    return "code"


def _is_agent_line(line: str) -> bool:
    for magic in _AGENT_LINE_MAGICS:
        if line == magic or (line.startswith(magic) and line[len(magic)].isspace()):
            return True
    return False


@dataclass(frozen=True)
class CellError:
    """An exception raised by a user cell (all texts redacted and cut)."""

    ename: str
    evalue: str
    lineno: int | None = None  # line in the cell where it was raised (innermost cell frame)
    line: str | None = None  # that line's source
    traceback: str = ""  # trimmed: cell / user frames, library frames folded
    before_exec: bool = False  # a SyntaxError or input-transform failure: nothing ran
    hint: str | None = None  # e.g. "did you mean 'region' (a column of df)?" (tools/output/error_hints.py)

    def headline(self) -> str:
        """One line: ``KeyError: 'revenu' at line 2: df['revenu'].sum()``."""
        evalue = " ".join(self.evalue.split())
        text = f"{self.ename}: {evalue[:200]}" if evalue else self.ename
        if self.hint:  # before the line: a model quoting the line must not quote the hint with it
            text += f" ({self.hint})"
        if self.lineno is not None:
            text += f" at line {self.lineno}"
            if self.line:
                text += f": {self.line}"
        return text


@dataclass(frozen=True)
class CellRecord:
    """One user cell as it ran."""

    execution_count: int | None
    kind: CellKind
    source: str
    cell_id: str | None = None
    result: str | None = None  # Out[n] as budgeted text
    stdout: str | None = None  # None: not recorded (see the module docstring)
    stderr: str | None = None
    error: CellError | None = None
    interrupted: bool = False
    elapsed_s: float = 0.0
    assigned: tuple[str, ...] = field(default=(), repr=False)  # top-level names the cell binds

    @property
    def raised(self) -> bool:
        return self.error is not None

    @property
    def label(self) -> str:
        return f"[{self.execution_count}]" if self.execution_count is not None else "[ ]"


@dataclass
class _Pending:
    raw: str
    cell_id: str | None
    started: float


class ExecutionHistory:
    """A ring of the user's recent cells, filled by IPython's cell events.

    Budgets are characters per record: ``max_source_chars`` for the source,
    ``max_output_chars`` for ``Out`` and for each printed stream, ``max_traceback_chars``.
    """

    def __init__(self, max_cells: int = 50, max_source_chars: int = 1500,
                 max_output_chars: int = 800, max_traceback_chars: int = 1500) -> None:
        self.max_source_chars = max_source_chars
        self.max_output_chars = max_output_chars
        self.max_traceback_chars = max_traceback_chars
        # the records as they ran, NOT redacted (bounded by _RAW_CHARS per text): a secret that
        # becomes known later (a token printed, then put in os.environ) must still be redacted
        # from them, so redaction and the budget cuts happen when a record is read
        self._records: deque[CellRecord] = deque(maxlen=max_cells)
        self._shown: dict[int, tuple[int, CellRecord, CellRecord]] = {}  # id -> (generation, raw, shown)
        self._pending: _Pending | None = None
        self._lock = threading.Lock()
        self.shell: InteractiveShell | None = None

    # --- hooks ----------------------------------------------------------------------------------
    def install(self, shell: InteractiveShell) -> None:
        """Register the cell hooks on ``shell`` (idempotent)."""
        if self.shell is shell:
            return
        if self.shell is not None:
            self.uninstall()
        shell.events.register("pre_run_cell", self.pre_run_cell)
        shell.events.register("post_run_cell", self.post_run_cell)
        self.shell = shell

    def uninstall(self) -> None:
        shell, self.shell = self.shell, None
        if shell is None:
            return
        for event, callback in (("pre_run_cell", self.pre_run_cell),
                                ("post_run_cell", self.post_run_cell)):
            try:
                shell.events.unregister(event, callback)
            except ValueError:
                pass

    def pre_run_cell(self, info: Any) -> None:
        if not _is_user_cell(info):
            return  # (a silent or agent run inside a user cell leaves that cell's start time)
        self._pending = _Pending(raw=getattr(info, "raw_cell", "") or "",
                                 cell_id=getattr(info, "cell_id", None), started=time.monotonic())

    def post_run_cell(self, result: Any) -> None:
        info = getattr(result, "info", None)
        if info is None or not _is_user_cell(info):
            return
        pending, self._pending = self._pending, None
        # A hook must never break the user's cell: a recording failure only loses the record.
        try:
            record = self._raw_record(result, info, pending)
        except Exception:
            return
        with self._lock:
            self._records.append(record)

    # --- building a record ----------------------------------------------------------------------
    def _raw_record(self, result: Any, info: Any, pending: _Pending | None) -> CellRecord:
        raw = getattr(info, "raw_cell", "") or ""
        elapsed = time.monotonic() - pending.started if pending is not None and pending.raw == raw else 0.0
        count = getattr(result, "execution_count", None)
        kind = cell_kind(raw)
        exc = getattr(result, "error_before_exec", None) or getattr(result, "error_in_exec", None)
        error = None
        interrupted = False
        if exc is not None:
            interrupted = type(exc).__name__ in _INTERRUPTS
            error = self._error(exc, count, before=getattr(result, "error_before_exec", None) is exc)
        stdout = stderr = out_text = None
        if kind == "code":
            # (an agent cell's teed output is the agent's own, printed while it ran)
            stdout, stderr, out_text = self._outputs(count, raw)
            value = getattr(result, "result", None)
            # pandas objects: shape, dtypes and 5 rows say more than 800 chars of the 60-row repr
            if value is not None and (out_text is None or _is_pandas(value)):
                out_text = bounded_value_text(value)
        return CellRecord(
            execution_count=count, kind=kind, source=_raw(raw),
            cell_id=getattr(info, "cell_id", None),
            result=_raw(out_text) if out_text is not None else None,
            stdout=stdout, stderr=stderr, error=error, interrupted=interrupted,
            elapsed_s=elapsed, assigned=_assigned_names(raw, self.shell) if kind == "code" else (),
        )

    def _outputs(self, count: int | None, raw: str) -> tuple[str | None, str | None, str | None]:
        """(stdout, stderr, Out text) from IPython's per-cell output log; None where unknown."""
        manager = getattr(self.shell, "history_manager", None)
        by_count = getattr(manager, "outputs", None)
        if by_count is None or count is None or not hasattr(by_count, "get"):
            return None, None, None  # IPython < 9 keeps no output log
        streams: dict[str, list[str]] = {"out_stream": [], "err_stream": []}
        result_text = None
        for entry in by_count.get(count, []):
            kind = getattr(entry, "output_type", "")
            bundle = getattr(entry, "bundle", {}) or {}
            if kind in streams:
                streams[kind].extend(str(part) for part in bundle.get("stream", []))
            elif kind == "execute_result":
                result_text = bundle_text(bundle)
        if self._not_teed(raw):
            return None, None, result_text
        # IPython tees every run_cell: no stream entry means nothing was printed.
        return self._stream_text(streams["out_stream"]), self._stream_text(streams["err_stream"]), result_text

    def _not_teed(self, raw: str) -> bool:
        """ipykernel runs cells with top-level ``await`` through ``run_cell_async`` directly,
        past IPython's stdout tee: for those "no stream entry" means "unknown", not "nothing"."""
        shell = self.shell
        if shell is None or not kernel_host(shell).has_kernel:
            return False
        if "await" not in raw and "async" not in raw:
            return False
        try:
            return bool(shell.should_run_async(raw))
        except Exception:
            return True

    def _stream_text(self, parts: list[str]) -> str:
        return _raw(strip_ansi("".join(parts)))

    def _error(self, exc: BaseException, count: int | None, before: bool) -> CellError:
        ename = type(exc).__name__
        if isinstance(exc, SyntaxError):
            line = (exc.text or "").strip() or None
            return CellError(ename=ename, evalue=_raw(exc.msg or ""), lineno=exc.lineno,
                             line=_raw(line) if line else None, before_exec=before)
        evalue = safe_str(exc)
        frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
        cell_files = self._cell_files()
        lineno = line = None
        for frame in reversed(frames):
            if cell_files.get(frame.filename) == count:
                lineno, line = frame.lineno, (frame.line or "").strip() or None
                break
        tb_text = trim_traceback(frames, cell_files, exc)
        user_ns = getattr(self.shell, "user_ns", None) or {}
        return CellError(ename=ename, evalue=_raw(evalue), lineno=lineno,
                         line=_raw(line) if line else None,
                         traceback=_raw(tb_text), before_exec=before,
                         hint=error_hint(ename, evalue, user_ns))

    def _cell_files(self) -> dict[str, int]:
        compiler = getattr(self.shell, "compile", None)
        mapping = getattr(compiler, "_filename_map", None)
        return dict(mapping) if isinstance(mapping, dict) else {}

    # --- reading ----------------------------------------------------------------------------------
    def records(self) -> list[CellRecord]:
        """The records as the model may read them: redacted with the secrets known *now*, then
        cut to the budgets (cached until the set of secrets changes)."""
        generation = secrets_generation()
        with self._lock:
            raw = list(self._records)
            cache = self._shown
            out = []
            for record in raw:
                hit = cache.get(id(record))
                if hit is None or hit[0] != generation or hit[1] is not record:
                    hit = (generation, record, self._present(record))
                    cache[id(record)] = hit
                out.append(hit[2])
            if len(cache) > 2 * len(raw) + 8:
                live = {id(r) for r in raw}
                self._shown = {k: v for k, v in cache.items() if k in live}
            return out

    def _present(self, record: CellRecord) -> CellRecord:
        def opt(text: str | None, budget: int) -> str | None:
            return _clip(text, budget) if text is not None else None

        error = record.error
        if error is not None:
            error = replace(error, evalue=_clip(error.evalue, 300), line=opt(error.line, 200),
                            traceback=_clip(error.traceback, self.max_traceback_chars),
                            hint=opt(error.hint, 300))
        return replace(record, source=_clip(record.source, self.max_source_chars),
                       result=opt(record.result, self.max_output_chars),
                       stdout=opt(record.stdout, self.max_output_chars),
                       stderr=opt(record.stderr, self.max_output_chars), error=error)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
            self._shown.clear()

    def get(self, execution_count: int) -> CellRecord | None:
        for record in reversed(self.records()):
            if record.execution_count == execution_count:
                return record
        return None

    def last(self, code_only: bool = True) -> CellRecord | None:
        """The most recent cell (of kind ``code`` unless ``code_only`` is False)."""
        for record in reversed(self.records()):
            if not code_only or record.kind == "code":
                return record
        return None

    def last_error(self) -> CellRecord | None:
        """The most recent code cell if it raised (not interrupted), else None."""
        record = self.last()
        if record is None or record.error is None or record.interrupted:
            return None
        return record

    def last_error_note(self) -> str | None:
        """One line for the next prompt's context when the user's latest code cell raised."""
        record = self.last_error()
        if record is None or record.error is None:
            return None
        return f"Cell {record.label} raised {record.error.headline()}"

    def recent_names(self, limit: int = 50) -> list[str]:
        """Names bound by recent code cells, newest first (for the namespace summary's order)."""
        seen: dict[str, None] = {}
        for record in reversed(self.records()):
            for name in reversed(record.assigned):
                if name not in seen:
                    seen[name] = None
                    if len(seen) >= limit:
                        return list(seen)
        return list(seen)

    def render(self, last: int = 10, cell: int | None = None, max_chars: int = 8000) -> str:
        """The history as compact text for the model (newest last)."""
        records = self.records()
        if cell is not None:
            found = [r for r in records if r.execution_count == cell]
            if not found:
                known = ", ".join(r.label for r in records[-10:]) or "none"
                return (f"No cell [{cell}] in the recorded history (recent cells: {known}). "
                        "Only cells run after pi_notebook was loaded are recorded; "
                        "read_notebook shows the saved notebook file.")
            records = found[-1:]
        elif last > 0:
            records = records[-last:]
        if not records:
            return ("No cells recorded yet: only cells run after pi_notebook was loaded are "
                    "recorded.")
        parts = [format_record(r) for r in records]
        header = f"{len(parts)} cell{'s' if len(parts) != 1 else ''} (oldest first):"
        # each part is redacted; the whole once more, for a secret spanning two parts
        return cut(redact(header + "\n\n" + "\n\n".join(parts)), max_chars)


def format_record(record: CellRecord) -> str:
    """One cell as compact text (its parts are already redacted and cut)."""
    status = "interrupted" if record.interrupted else "raised" if record.raised else "ok"
    meta = [record.kind, status]
    if record.elapsed_s >= 0.05:
        meta.append(f"{record.elapsed_s:.2f} s")
    if record.cell_id:
        meta.append(f"cell id {record.cell_id}")
    lines = [f"In {record.label} ({', '.join(meta)}):", indent(record.source)]
    if record.stdout:
        lines += ["stdout:", indent(record.stdout)]
    if record.stderr:
        lines += ["stderr:", indent(record.stderr)]
    if record.stdout is None and record.kind == "code":
        lines.append("(printed output not recorded for this cell)")
    if record.result is not None:
        lines.append(f"Out {record.label}: " + (record.result if "\n" not in record.result
                                                else "\n" + indent(record.result)))
    if record.error is not None:
        if record.interrupted:
            lines.append(f"interrupted ({record.error.ename})"
                         + (f" at line {record.error.lineno}" if record.error.lineno else ""))
        else:
            lines.append("error: " + record.error.headline())
            if record.error.traceback:
                lines += ["traceback (most recent call last):", indent(record.error.traceback)]
    return "\n".join(lines)


def indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()) or "    "


# --- helpers ------------------------------------------------------------------------------------

def _is_user_cell(info: Any) -> bool:
    if getattr(info, "silent", False) or not getattr(info, "store_history", False):
        return False
    # Agent code that calls run_cell itself runs inside the agent's capture context.
    return not capture_active()


def _clip(text: str | None, budget: int) -> str:
    """Redact, then cut to ``budget`` characters (never the other way round)."""
    if text is None:
        return ""
    return cut(redact(text), budget)


_RAW_CHARS = 50_000  # what a record keeps of each text before redaction (head and tail)


def _raw(text: str) -> str:
    """``text`` bounded for storage, unredacted: head and tail of ``_RAW_CHARS`` with the cut
    point in the middle, so the smaller head + tail a reader cuts to never shows the cut point
    (a secret the raw cut split stays whole on both sides the reader sees)."""
    if len(text) <= _RAW_CHARS:
        return text
    head = (_RAW_CHARS * 2) // 3
    tail = _RAW_CHARS - head
    return text[:head] + f"\n[... {len(text) - _RAW_CHARS} characters cut ...]\n" + text[-tail:]


def _is_pandas(value: Any) -> bool:
    cls = type(value)
    return cls.__module__.split(".", 1)[0] == "pandas" and cls.__name__ in ("DataFrame", "Series")


def bounded_value_text(value: Any) -> str:
    """Bounded text of an ``Out`` value when the displayhook left no text (no repr of big objects)."""
    cls = type(value)
    if cls.__module__.split(".")[0] == "pandas":
        try:
            if cls.__name__ == "DataFrame":
                return dataframe_summary(value)
            if cls.__name__ == "Series":
                return series_summary(value)
        except Exception as exc:
            return f"<{cls.__name__}: summary failed: {type(exc).__name__}>"
    import reprlib

    short = reprlib.Repr()
    short.maxstring = short.maxother = 400
    try:
        return short.repr(value)
    except Exception as exc:
        return f"<{cls.__name__}: repr failed: {type(exc).__name__}>"


def _assigned_names(raw: str, shell: InteractiveShell | None) -> tuple[str, ...]:
    """Top-level names a cell binds, in order (assignments, for/with targets, defs, imports)."""
    source = raw
    transform = getattr(shell, "transform_cell", None)
    if callable(transform):
        try:
            source = transform(raw)
        except Exception:
            return ()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    names: list[str] = []
    for node in tree.body:
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign,)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
        for target in targets:
            names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return tuple(dict.fromkeys(names))


_installed: weakref.WeakKeyDictionary[Any, ExecutionHistory] = weakref.WeakKeyDictionary()


def install_history(shell: InteractiveShell, **kw: Any) -> ExecutionHistory:
    """The shell's one recorder, installed on first call (``kw`` go to the constructor then)."""
    history = _installed.get(shell)
    if history is None:
        history = ExecutionHistory(**kw)
        history.install(shell)
        _installed[shell] = history
    return history


def installed_history(shell: InteractiveShell) -> ExecutionHistory | None:
    return _installed.get(shell)


def uninstall_history(shell: InteractiveShell) -> None:
    history = _installed.pop(shell, None)
    if history is not None:
        history.uninstall()
