"""Durable sessions: the JSONL transcript file, notebook export and context compaction.

No IPython imports here; the magics call these functions.
"""

from .compaction import (
    CompactionInfo, estimate_tokens, extractive_summary, make_context_compactor,
    make_model_summarizer,
)
from .export import build_notebook, export_notebook
from .store import (
    FORMAT_VERSION, LoadedSession, SessionFormatError, SessionHeader, SessionInfo,
    SessionPathError, SessionWriter, current_notebook_path, default_session_dir, find_session,
    latest_session, list_sessions, load_session, new_session_path, resolve_inside,
    session_name_for, write_session,
)

__all__ = [
    "FORMAT_VERSION", "LoadedSession", "SessionFormatError", "SessionHeader", "SessionInfo",
    "SessionPathError", "SessionWriter", "current_notebook_path", "default_session_dir",
    "find_session", "latest_session", "list_sessions", "load_session", "new_session_path",
    "resolve_inside", "session_name_for", "write_session", "build_notebook", "export_notebook",
    "CompactionInfo", "estimate_tokens", "extractive_summary", "make_context_compactor",
    "make_model_summarizer",
]
