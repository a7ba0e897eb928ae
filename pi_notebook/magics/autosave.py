"""Autosave: every finished message of the conversation is appended to a session file.

The file is opened at the first finished message of a conversation (it then receives
the whole transcript so far) and closed by a reset or a load. A failure stops autosave
for the conversation, with one notice, and never breaks a run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..agent.types import AgentMessage
    from ..session.store import SessionWriter

__all__ = ["Autosave", "session_dir", "session_name", "kernel_id"]


def session_dir(configured: str) -> Path:
    """``AgentMagics.session_dir``, else ``.pi_notebook/sessions`` in the working directory."""
    from ..session.store import default_session_dir

    return Path(configured) if configured else default_session_dir(os.getcwd())


def session_name(user_ns: Mapping[str, object]) -> str:
    """The notebook's name (from the frontend's variables) and the kernel id."""
    from ..session.store import current_notebook_path, session_name_for

    return session_name_for(current_notebook_path(user_ns), kernel_id())


def kernel_id() -> str | None:
    try:
        from ipykernel.connect import get_connection_file

        name = os.path.basename(get_connection_file())
    except Exception:  # not in a kernel (terminal IPython, tests)
        return None
    stem = name[:-len(".json")] if name.endswith(".json") else name
    # jupyter_server names it kernel-<id>.json; other launchers use any name
    return stem[len("kernel-"):] if stem.startswith("kernel-") else (stem or None)


class Autosave:
    """Appends finished messages; everything it needs arrives as callables."""

    def __init__(self, *, enabled: Callable[[], bool], directory: Callable[[], Path],
                 name: Callable[[], str], transcript: Callable[[], list[AgentMessage]],
                 model_spec: Callable[[], str], warn: Callable[[str], None]) -> None:
        self._enabled = enabled
        self._directory = directory
        self._name = name
        self._transcript = transcript
        self._model_spec = model_spec
        self._warn = warn
        self._writer: SessionWriter | None = None
        self._failed = False
        self.path: Path | None = None  # the current conversation's file, once written

    def message_ended(self, message: AgentMessage) -> None:
        if self._failed or not self._enabled():
            return
        try:
            if self._writer is None:
                self._open()  # the new file already holds the transcript up to this message
                return
            self._writer.append(message)
        except Exception as exc:  # autosave must never break a run
            self._failed = True
            self._warn(f"Autosave stopped: {exc}")

    def _open(self) -> None:
        from ..session.store import SessionWriter, new_session_path

        name = self._name()
        path = new_session_path(self._directory(), name)
        self._writer = SessionWriter(path, model=self._model_spec(), name=name)
        self.path = path
        self._writer.append_many(list(self._transcript()))

    def close(self) -> None:
        """A new conversation starts: the next finished message opens a new file."""
        writer, self._writer = self._writer, None
        self._failed = False
        self.path = None
        if writer is not None:
            writer.close()
