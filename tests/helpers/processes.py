"""Processes a test watches from outside."""

from __future__ import annotations


def alive(pid: int) -> bool:
    """Is ``pid`` running? A zombie (ended, not yet reaped) counts as gone. Reads /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            # the state follows the command name, which may itself hold ")"
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False
