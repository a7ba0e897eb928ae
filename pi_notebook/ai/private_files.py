"""The product's own files are private: folders 0700, files 0600, never through a link.

Logs, session files and the shared model server's files can hold what a user would not show
other users of the machine (a server's stderr, a conversation). ``private_dir`` creates a
folder only its owner can use (and tightens one an earlier version made readable);
``open_private`` opens a file in it for writing, created 0600, refusing a symbolic link at the
last component, and tightens an existing file to 0600. The same rules as the model server's
files (local/server.py ``private_dir`` / ``write_private``), for every other writer.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["private_dir", "open_private"]


def private_dir(path: Path) -> Path:
    """``path`` as a folder only this user can use (created 0700; tightened to 0700 when it is
    ours; refused with ``PermissionError`` when it is a link, not ours, or others may write it)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise PermissionError(f"Refusing {path}: it is not a folder (a symbolic link or a file)")
    if info.st_uid != os.getuid():
        raise PermissionError(f"Refusing {path}: it belongs to user id {info.st_uid}, not to you")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def open_private(path: Path, flags: int = os.O_WRONLY | os.O_APPEND | os.O_CREAT) -> int:
    """An fd of ``path`` opened with ``flags``, the file 0600 and not a link (module doc)."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
            os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd
