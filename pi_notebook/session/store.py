"""Durable session files: one JSON object per line (JSONL).

Line 1 is a header, ``{"type":"session","version":1,"model":"provider/id",
"startedAt":ms,"name":...}``; every further line is one message in pi's JSON shape.

Crash safety comes from the write pattern, not from locking: each message is
serialised first and written with a single ``write`` call on a file opened in
append mode, then flushed and fsynced. A crash can therefore tear only the line
being written, which the loader skips with a warning, and a writer reopening the
file cuts that torn tail off before appending.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..agent.types import CheckMessage
from ..ai.private_files import open_private
from ..ai.types import AssistantMessage, ToolResultMessage, UserMessage, now_ms
from .jsonline import encode_line
from .repair import repair_transcript

__all__ = [
    "FORMAT_VERSION", "SUPPORTED_VERSIONS", "SessionFormatError", "SessionWriteError", "SessionPathError", "SessionHeader", "SessionWriter",
    "LoadedSession", "SessionInfo", "load_session", "list_sessions", "write_session",
    "default_session_dir", "session_name_for", "current_notebook_path", "new_session_path", "find_session",
    "latest_session", "resolve_inside", "message_to_json", "message_from_json",
]

FORMAT_VERSION = 1
# the versions load_session reads (and SessionWriter appends to); see docs/design/sessions.md
SUPPORTED_VERSIONS = frozenset({1})
SESSION_SUFFIX = ".jsonl"

_MESSAGE_CLASSES: dict[str, type[UserMessage | AssistantMessage | ToolResultMessage]] = {
    "user": UserMessage, "assistant": AssistantMessage, "toolResult": ToolResultMessage,
}


class SessionFormatError(ValueError):
    """A session file that cannot be read safely (newer version, malformed line)."""


class SessionWriteError(OSError):
    """Appending to a session file failed (disk full, file gone); the file is left as it
    was before the failed append and the writer accepts nothing more."""


class SessionPathError(ValueError):
    """A user-supplied path that points outside the working directory."""


# --- paths -------------------------------------------------------------------------------

def default_session_dir(cwd: str | os.PathLike[str]) -> Path:
    return Path(cwd) / ".pi_notebook" / "sessions"


def resolve_inside(base: str | os.PathLike[str], user_path: str | os.PathLike[str]) -> Path:
    """Resolve ``user_path`` (relative to ``base``) and refuse anything outside ``base``.

    Symlinks and ``..`` are resolved first, so neither can be used to escape.
    """
    root = Path(base).resolve()
    candidate = Path(os.path.expanduser(os.fspath(user_path)))
    if not candidate.is_absolute():
        candidate = root / candidate
    resolved = candidate.resolve()
    if resolved != root and root not in resolved.parents:
        raise SessionPathError(f"path is outside the working directory {root}: {user_path}")
    return resolved


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def session_name_for(notebook_path: str | os.PathLike[str] | None = None,
                     kernel_id: str | None = None) -> str:
    """A file-name-safe session name: the notebook's stem, else ``kernel-<id>``.

    A single positional argument that does not look like a notebook path is taken
    as a kernel id, so ``session_name_for(kernel_id)`` also works.
    """
    if notebook_path and kernel_id is None and not _looks_like_notebook(notebook_path):
        kernel_id = os.fspath(notebook_path)
        notebook_path = None
    if notebook_path:
        stem = Path(os.fspath(notebook_path)).stem
        name = _UNSAFE.sub("_", stem).strip("._")
        if name:
            return name
    if kernel_id:
        return "kernel-" + (_UNSAFE.sub("_", kernel_id)[:8] or "unknown")
    return "session"


def current_notebook_path(namespace: Mapping[str, Any] | None = None) -> str | None:
    """The notebook's path when the frontend provides it: ``__session__`` in the user
    namespace (set by ipykernel from JupyterLab), else ``JPY_SESSION_NAME``."""
    value = (namespace or {}).get("__session__") or os.environ.get("JPY_SESSION_NAME")
    return str(value) if value else None


def _looks_like_notebook(value: str | os.PathLike[str]) -> bool:
    text = os.fspath(value)
    return text.endswith(".ipynb") or "/" in text or os.sep in text


def new_session_path(directory: str | os.PathLike[str], name: str,
                     started_at: int | None = None) -> Path:
    """``<directory>/<name>-<UTC yyyymmdd-hhmmss>.jsonl``, made unique if it exists."""
    import time

    ms = started_at if started_at is not None else now_ms()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(ms / 1000))
    base = Path(directory) / f"{name}-{stamp}"
    path = base.with_name(base.name + SESSION_SUFFIX)
    counter = 2
    while path.exists():
        path = base.with_name(f"{base.name}-{counter}{SESSION_SUFFIX}")
        counter += 1
    return path


# --- serialisation -------------------------------------------------------------------------

def message_to_json(message: Any) -> dict[str, Any]:
    """pi's JSON shape of a message: pydantic messages dumped, dicts as they are."""
    if hasattr(message, "model_dump"):
        return message.model_dump()
    if isinstance(message, Mapping):
        return dict(message)
    raise TypeError(
        f"cannot save a {type(message).__name__} in a session: messages must be pydantic "
        "messages or dicts"
    )


def message_from_json(data: Mapping[str, Any]) -> Any:
    """The pydantic message for a pi role; custom roles come back as plain dicts. A user
    turn the product wrote (a ``CheckMessage``, saved with its ``author``) comes back as one,
    so it keeps its label wherever it is shown."""
    role = data.get("role")
    if role == "user" and isinstance(data.get("author"), str):
        return CheckMessage.model_validate(data)
    cls = _MESSAGE_CLASSES.get(role) if isinstance(role, str) else None
    return cls.model_validate(data) if cls is not None else dict(data)


# --- header --------------------------------------------------------------------------------

@dataclass
class SessionHeader:
    model: str | None = None
    started_at: int = field(default_factory=now_ms)
    name: str | None = None
    version: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": "session", "version": self.version}
        if self.model is not None:
            data["model"] = self.model
        data["startedAt"] = self.started_at
        if self.name is not None:
            data["name"] = self.name
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Any, source: str = "session file") -> SessionHeader:
        """Check line 1 strictly: a pi_notebook header of a version this code reads."""
        supported = _supported_text()
        if not isinstance(data, Mapping):
            raise SessionFormatError(
                f"{source}: line 1 is a JSON {_json_kind(data)}, not a session header object "
                f"(found no format version; this pi_notebook reads version {supported})")
        if data.get("type") != "session":
            if "role" in data:
                where = "line 1 is not a session header but a message (the header is missing)"
            else:
                keys = ", ".join(sorted(str(k) for k in data)[:6]) or "none"
                where = f"line 1 is not a pi_notebook session header (keys: {keys})"
            raise SessionFormatError(
                f"{source}: {where}; found no format version, this pi_notebook reads "
                f"version {supported}")
        version = data.get("version")
        if "startedAt" not in data and ("cwd" in data or "id" in data):
            # pi's coding agent writes {"type":"session","version":N,"id","cwd",...} headers
            raise SessionFormatError(
                f"{source}: this is a session file of another program (pi's coding agent, "
                f"format version {version!r}), not a pi_notebook session; this pi_notebook "
                f"reads version {supported}")
        if not isinstance(version, int) or isinstance(version, bool):
            found = "none" if version is None else repr(version)
            raise SessionFormatError(
                f"{source}: the session header has no valid format version (found {found}); "
                f"this pi_notebook reads version {supported}")
        if version > FORMAT_VERSION:
            raise SessionFormatError(
                f"{source}: session format version {version} is newer than this pi_notebook "
                f"supports (version {supported}); upgrade pi_notebook to open it"
            )
        if version not in SUPPORTED_VERSIONS:
            raise SessionFormatError(
                f"{source}: unknown session format version {version}; this pi_notebook reads "
                f"version {supported}")
        known = {"type", "version", "model", "startedAt", "name"}
        started = data.get("startedAt")
        return cls(model=data.get("model") if isinstance(data.get("model"), str) else None,
                   started_at=started if isinstance(started, int) and not isinstance(started, bool)
                   else 0,
                   name=data.get("name") if isinstance(data.get("name"), str) else None,
                   version=version,
                   extra={k: v for k, v in data.items() if k not in known})


def _supported_text() -> str:
    return ", ".join(str(v) for v in sorted(SUPPORTED_VERSIONS))


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool) or value is None:
        return "literal"
    return "number"


# --- writing -------------------------------------------------------------------------------

class SessionWriter:
    """Appends one line per finished message; every append is fsynced.

    A new (or empty) file gets the header first. An existing file must have a
    readable header of a supported version (nothing is appended otherwise); a torn
    last line left by a crash is cut off before the first append.
    """

    def __init__(self, path: str | os.PathLike[str], *, model: str | None = None,
                 name: str | None = None, started_at: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # a folder we create is private
        self.warnings: list[str] = []
        self.failure: OSError | None = None
        created = not self.path.exists() or self.path.stat().st_size == 0
        if created:
            self.header = SessionHeader(model=model, name=name,
                                        started_at=started_at if started_at is not None else now_ms())
        else:
            self.header = _read_header(self.path)
            self._cut_torn_tail()
        self._fd: int | None = open_private(self.path)  # a conversation is private: 0600, not through a link
        if created:
            self._write(encode_line(self.header.to_json()))
            _fsync_directory(self.path.parent)

    def append(self, message: Any) -> None:
        """Write ``message`` as one line; it is on disk when this returns."""
        self._write(encode_line(message_to_json(message)))

    def append_many(self, messages: Iterable[Any]) -> None:
        for message in messages:
            self.append(message)

    def on_agent_event(self, event: Any) -> None:
        """An Agent listener: save each message as it ends (``message_end``)."""
        if getattr(event, "type", None) == "message_end":
            self.append(event.message)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def closed(self) -> bool:
        return self._fd is None

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            raise ValueError(f"session writer for {self.path} is closed")
        if self.failure is not None:
            raise SessionWriteError(f"{self.path}: autosave stopped after an earlier write "
                                    f"error ({self.failure})")
        start = os.lseek(self._fd, 0, os.SEEK_END)
        view = memoryview(data)
        try:
            # One write call in practice; loop only for the rare short write.
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
        except OSError as exc:
            # Disk full, quota, file gone: cut the partial line off, so the file still ends
            # after the last whole message, and accept nothing more.
            self.failure = exc
            try:
                os.ftruncate(self._fd, start)
            except OSError:
                pass  # the loader skips a torn last line anyway
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise SessionWriteError(
                f"{self.path}: could not save a message ({reason}); the file keeps every "
                "message before it") from exc

    def _cut_torn_tail(self) -> None:
        with open(self.path, "rb+") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            # find the start of the unterminated last line
            chunk = 4096
            pos = size
            start = 0
            while pos > 0:
                step = min(chunk, pos)
                pos -= step
                f.seek(pos)
                block = f.read(step)
                newline = block.rfind(b"\n")
                if newline != -1:
                    start = pos + newline + 1
                    break
            f.seek(start)
            tail = f.read()
            try:
                json.loads(tail)
            except ValueError:
                f.truncate(start)
                self.warnings.append(
                    f"{self.path}: removed a torn last line ({len(tail)} bytes) left by a crash")
            else:  # complete message, only its newline is missing
                f.seek(size)
                f.write(b"\n")
            f.flush()
            os.fsync(f.fileno())


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_session(path: str | os.PathLike[str], messages: Iterable[Any], *,
                  model: str | None = None, name: str | None = None,
                  started_at: int | None = None, overwrite: bool = False) -> Path:
    """Write a whole session at once (``%agent save``): to a temporary file, then renamed,
    so an existing file is either fully replaced or left untouched."""
    target = Path(path)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} already exists")
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    header = SessionHeader(model=model, name=name,
                           started_at=started_at if started_at is not None else now_ms())
    lines = [encode_line(header.to_json())]
    lines.extend(encode_line(message_to_json(m)) for m in messages)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as f:
            f.write(b"".join(lines))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_directory(target.parent)
    return target


# --- reading -------------------------------------------------------------------------------

@dataclass
class LoadedSession:
    header: SessionHeader
    messages: list[Any]
    warnings: list[str]
    path: Path | None = None
    # one line saying how the transcript was made valid (session/repair.py), else None
    repair_notice: str | None = None


_BOM = b"\xef\xbb\xbf"


def _decode(line: bytes, line_no: int, source: str, warnings: list[str]) -> str:
    """A line as text; invalid UTF-8 (a file touched by another tool) becomes U+FFFD."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        warnings.append(f"{source}: line {line_no} is not valid UTF-8; the bad bytes were "
                        "replaced with U+FFFD")
        return line.decode("utf-8", errors="replace")


def _parse_header(first: bytes, source: str) -> SessionHeader:
    if first.startswith(_BOM):
        first = first[len(_BOM):]
    text = first.decode("utf-8", errors="replace")
    if not text.strip():
        raise SessionFormatError(
            f"{source}: line 1 is empty, the session header must be the first line (found no "
            f"format version; this pi_notebook reads version {_supported_text()})")
    try:
        data = json.loads(text)
    except ValueError:
        raise SessionFormatError(
            f"{source}: line 1 is not JSON, so this is not a pi_notebook session file (found no "
            f"format version; this pi_notebook reads version {_supported_text()})") from None
    return SessionHeader.from_json(data, source)


def _read_header(path: Path) -> SessionHeader:
    with open(path, "rb") as f:
        first = f.readline()
    return _parse_header(first.rstrip(b"\r\n"), str(path))


def load_session(path: str | os.PathLike[str], *, repair: bool = True) -> LoadedSession:
    """Read a session file; raises ``SessionFormatError`` with a one-line reason.

    A torn last line (a crash while writing) is skipped with a warning; any other bad
    line is an error naming its number. With ``repair`` (the default) the messages are a
    valid transcript: every tool call has one result (session/repair.py), and
    ``repair_notice`` says what changed; ``repair=False`` gives the file's messages as
    they are. See docs/design/sessions.md.
    """
    path = Path(path)
    source = str(path)
    raw = path.read_bytes()
    if not raw.strip():
        raise SessionFormatError(f"{path}: the file is empty")
    lines = raw.split(b"\n")
    ends_with_newline = raw.endswith(b"\n")
    if ends_with_newline:
        lines.pop()  # the empty string after the final newline
    header = _parse_header(lines[0].rstrip(b"\r"), source)

    messages: list[Any] = []
    warnings: list[str] = []
    last = len(lines) - 1
    for index in range(1, len(lines)):
        line_no = index + 1
        line = lines[index]
        if not line.strip():
            continue
        torn = index == last and not ends_with_newline
        text = _decode(line, line_no, source, [] if torn else warnings)
        try:
            data = json.loads(text)
        except ValueError:
            if torn:
                warnings.append(f"{path}: skipped a torn last line (line {line_no}, "
                                f"{len(line)} bytes), probably cut off by a crash")
                continue
            raise SessionFormatError(f"{path}: line {line_no} is not valid JSON") from None
        if isinstance(data, dict) and data.get("type") == "session" and "role" not in data:
            raise SessionFormatError(
                f"{path}: line {line_no} is a second session header; a session file has one "
                "header, on line 1 (were two files joined?)")
        if not isinstance(data, dict) or "role" not in data:
            raise SessionFormatError(f"{path}: line {line_no} is not a message (no role)")
        try:
            messages.append(message_from_json(data))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise SessionFormatError(
                f"{path}: line {line_no} is not a valid {data['role']} message "
                f"({where}: {first.get('msg')})"
            ) from None
    notice = None
    if repair:
        repaired = repair_transcript(messages)
        messages, notice = repaired.messages, repaired.notice
    return LoadedSession(header=header, messages=messages, warnings=warnings, path=path,
                         repair_notice=notice)


@dataclass
class SessionInfo:
    name: str
    path: Path
    started_at: int
    message_count: int
    model: str | None


def list_sessions(directory: str | os.PathLike[str]) -> list[SessionInfo]:
    """Saved sessions in ``directory``, newest first. Files that are not readable
    sessions (foreign files, newer versions) are left out."""
    root = Path(directory)
    if not root.is_dir():
        return []
    found: list[SessionInfo] = []
    for path in root.glob(f"*{SESSION_SUFFIX}"):
        try:
            header = _read_header(path)
            with open(path, "rb") as f:
                count = sum(1 for line in f if line.strip()) - 1
        except (OSError, SessionFormatError):
            continue
        found.append(SessionInfo(name=header.name or path.stem, path=path,
                                 started_at=header.started_at, message_count=max(count, 0),
                                 model=header.model))
    found.sort(key=lambda info: (info.started_at, info.path.name), reverse=True)
    return found


def latest_session(directory: str | os.PathLike[str], name: str) -> SessionInfo | None:
    """The newest session saved under ``name`` (for ``--resume``)."""
    return next((s for s in list_sessions(directory) if s.name == name), None)


def find_session(name_or_path: str, directory: str | os.PathLike[str],
                 cwd: str | os.PathLike[str]) -> Path:
    """Resolve ``%agent load NAME|PATH``: a path (checked to be inside ``cwd``), a file
    stem in ``directory``, or a session name (its newest file)."""
    looks_like_path = (name_or_path.endswith(SESSION_SUFFIX) or "/" in name_or_path
                       or os.sep in name_or_path)
    if looks_like_path:
        path = resolve_inside(cwd, name_or_path)
        if not path.is_file():
            raise FileNotFoundError(f"no session file at {path}")
        return path
    stem_match = Path(directory) / f"{name_or_path}{SESSION_SUFFIX}"
    if stem_match.is_file():
        return stem_match
    newest = latest_session(directory, name_or_path)
    if newest is None:
        raise FileNotFoundError(f"no session named {name_or_path!r} in {directory}")
    return newest.path
