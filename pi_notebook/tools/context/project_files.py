"""The one way the product reads a file on its own: only the user's project files, safely.

The product reads files nobody asked it to read in that cell: AGENTS.md, the MCP config, the
saved notebook, the first line of a file a prompt names. A cloned repository decides what
those paths are, so each read holds to the same rules (``read_project_file``):

* **Inside the project tree.** The path is resolved (every symlink followed) and must stay
  under ``root`` (the repository root, or the folder itself outside a repository:
  tools/context/project.py). ``AGENTS.md -> ~/.aws/credentials`` is refused, a link between two
  files of the project is fine. Paths in ``/proc``, ``/sys`` and ``/dev`` are refused
  whatever the root (``/proc/self/environ`` is a "regular" file there).
* **A regular file, opened without blocking.** ``lstat`` before, ``O_NOFOLLOW |
  O_NONBLOCK`` on the resolved path, ``fstat`` after: the opened file must be the one that
  was checked (same device and inode) and regular. A FIFO never blocks ``open()``; a file
  swapped for a link between the check and the open is refused.
* **Bounded.** At most ``limit`` bytes are read, whatever the file's size.
* **Decoded on character boundaries.** A read cut by the bound ends at the last complete
  UTF-8 character and says it was cut (``ProjectFile.cut``); only bytes that are not UTF-8
  make a file "not text".
* **Redacted like any output** (tools/trust/credentials.py ``redact_all``): known secrets and
  credential shapes, before anyone sees the text.

Refusals raise :class:`ProjectFileError` with one plain sentence for the user's notice.
"""

from __future__ import annotations

import codecs
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..trust.credentials import redact_all

__all__ = ["ProjectFile", "ProjectFileError", "ProjectFileMissing", "open_project_file", "project_root", "read_project_file",
           "read_project_bytes"]

_PSEUDO = (Path("/proc"), Path("/sys"), Path("/dev"))


class ProjectFileError(OSError):
    """A file the product will not read: why, in one sentence (``str(exc)``)."""


class ProjectFileMissing(ProjectFileError, FileNotFoundError):
    """The file does not exist (also a ``FileNotFoundError`` for callers that say so)."""


@dataclass(frozen=True)
class ProjectFile:
    """What one read gave: the redacted ``text``, the file's ``size`` in bytes, whether the
    bound ``cut`` it, and the ``resolved`` path that was read."""

    path: Path
    resolved: Path
    text: str
    size: int
    cut: bool


def project_root(folder: str | Path) -> Path:
    """The tree a file in ``folder`` may resolve into: the repository root above it, or the
    folder itself outside a repository (the same walk as AGENTS.md's, tools/context/project.py)."""
    from .project import project_dirs

    dirs = project_dirs(folder)
    return dirs[-1] if dirs else Path(os.path.abspath(folder))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def open_project_file(path: str | Path, root: str | Path | None = None) -> tuple[int, os.stat_result, Path]:
    """An fd (``O_RDONLY``, blocking mode restored) of ``path`` after every check of the
    module doc, its ``fstat`` and its resolved path; the caller closes the fd. ``root`` None:
    the project of the path's own folder."""
    given = Path(path).expanduser()
    given = given if given.is_absolute() else Path.cwd() / given
    try:
        resolved = given.resolve(strict=True)
    except FileNotFoundError:
        raise ProjectFileMissing(f"{given} does not exist") from None
    except (OSError, RuntimeError) as exc:
        raise ProjectFileError(f"{given} cannot be resolved ({getattr(exc, 'strerror', None) or exc})") from None
    tree = Path(root).resolve() if root is not None else project_root(given.parent)
    if any(_inside(resolved, pseudo) for pseudo in _PSEUDO):
        raise ProjectFileError(f"{given} leads to {resolved}, a system file, not a project file")
    if not _inside(resolved, tree):
        raise ProjectFileError(f"{given} leads to {resolved}, outside the project folder {tree}")
    try:
        before = os.lstat(resolved)
    except OSError as exc:
        raise ProjectFileError(f"{given}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(before.st_mode):
        raise ProjectFileError(f"{given} is not a regular file")
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ProjectFileError(f"{given}: {exc.strerror or exc}") from None
    try:
        after = os.fstat(fd)
        if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise ProjectFileError(f"{given} changed while it was opened; not read")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, after, resolved


def read_project_bytes(path: str | Path, limit: int, root: str | Path | None = None) -> tuple[bytes, int]:
    """At most ``limit`` bytes of a project file (module doc) and the file's size."""
    fd, info, _ = open_project_file(path, root)
    with os.fdopen(fd, "rb") as f:
        return f.read(limit), info.st_size


def _decode(raw: bytes, whole: bool) -> str:
    """UTF-8 text of ``raw``; when the read was cut (``whole`` False), a character split by
    the cut is left out instead of failing the file. Other bad bytes raise."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    return decoder.decode(raw, final=whole)


def read_project_file(path: str | Path, limit: int, root: str | Path | None = None, *,
                      redacted: bool = True) -> ProjectFile:
    """The redacted text of a project file, at most ``limit`` bytes of it (module doc).
    Raises :class:`ProjectFileError`; bytes that are not UTF-8 raise it too. ``redacted``
    False only for a file whose text reaches no one (a config the product parses: its
    header values must stay usable)."""
    fd, info, resolved = open_project_file(path, root)
    with os.fdopen(fd, "rb") as f:
        raw = f.read(limit + 1)  # one byte more: was there more than the bound?
    cut = len(raw) > limit
    raw = raw[:limit]
    try:
        text = _decode(raw, whole=not cut)
    except UnicodeDecodeError:
        raise ProjectFileError(f"{path} is not UTF-8 text") from None
    return ProjectFile(Path(path), resolved, redact_all(text) if redacted else text, info.st_size, cut)
