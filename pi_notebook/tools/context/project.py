"""The folders a project-level file is looked up in: the notebook's folder and its parents,
up to the repository root.

``project_dirs(start)`` lists them nearest first. The walk stops at the first folder that
holds ``.git`` (the repository root, included). Outside a repository only ``start`` itself
counts: a notebook in ``/tmp/x`` must not pick up a stray ``/tmp/.pi_notebook/mcp.json`` or
``/AGENTS.md`` that belongs to nobody's project.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["project_dirs"]

_MAX_DEPTH = 64  # a bound, not a policy: symlink loops and odd mounts end the walk too


def project_dirs(start: str | Path) -> list[Path]:
    """``start`` and its parents up to the repository root, nearest first (module doc)."""
    try:
        here = Path(start).expanduser().resolve()
    except (OSError, RuntimeError):
        return []
    chain: list[Path] = []
    for _ in range(_MAX_DEPTH):
        chain.append(here)
        if (here / ".git").exists():
            return chain
        if here.parent == here:
            break
        here = here.parent
    return chain[:1]
