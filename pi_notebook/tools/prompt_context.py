"""The notebook-context seam of the magics: the per-prompt block and the context tools.

- ``make_context_tools(shell, get_notebook_path=None) -> [notebook_history, read_notebook]``
  (installs the shell's history recorder if the extension has not yet);
- ``context_for_prompt(shell, prompt, token_budget=500, notebook_path=None) -> str | None``:
  ``notebook_context`` for a live shell;
- ``notebook_context(prompt, history, user_ns, ...)``: the block itself.

The block built for each ``%%agent`` prompt:

``notebook_context(prompt, history, user_ns, ...) -> str | None`` joins, in this order:

1. the last-error note, when the user's latest code cell raised (tools/history.py);
2. the references the prompt makes (``In[3]``, "the last cell"...; tools/references.py), and
   the files it names (tools/prompt_files.py: exists or not, the first line of a CSV);
3. the namespace summary (tools/namespace.py), ordered by what recent cells assigned;
4. one line naming the notebook file when it is known (the agent reads it with
   ``read_notebook``); when that tool is not offered (``offered``, the small-model profile),
   the file's Markdown cells instead when the prompt points at them ("step 2 of the plan").

Tools are named only when offered: a small model asked to use a tool it does not have calls
the one it has with made-up arguments, or answers from the name (measured: "df has 1 row").

The namespace summary gets what is left of ``token_budget`` after the note and the notebook
line; references are budgeted separately (``reference_chars``), since the user asked for them.
The block is meant to travel as a transient note on the prompt message (session/prompt_notes.py),
not as the user's text. Returns None when there is nothing to say.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ..agent.types import AgentTool
from ..ai.options import estimate_text_tokens
from .history import ExecutionHistory, install_history, installed_history
from .history_tool import make_history_tool
from .namespace import namespace_summary
from .notebook_file import NotebookLocation, locate_notebook, make_notebook_file_tool, markdown_cells
from .prompt_files import file_notes
from .redact import redact
from .references import reference_block

__all__ = ["CONTEXT_HEADER", "context_for_prompt", "make_context_tools", "notebook_context"]

PathSetting = Callable[[], "str | os.PathLike[str] | None"]

# A prompt that points at the user's own text ("step 2 of the plan", "the notes above"); only
# then do the Markdown cells travel with it (measured: the quickstart's long Markdown in every
# prompt turned the 0.5B's call into a made-up DataFrame literal)
_MARKDOWN_REFERENCE = re.compile(r"\b(?:plan|steps?|markdown|notes?|outline|instructions?|above|todo)\b",
                                 re.IGNORECASE)

CONTEXT_HEADER = "[Notebook context for this prompt, added by pi_notebook; the user did not type it]"


def notebook_context(prompt: str, history: ExecutionHistory | None, user_ns: Mapping[str, Any], *,
                     hidden: Mapping[str, Any] | None = None, token_budget: int = 500,
                     reference_chars: int = 4000, notebook: NotebookLocation | None = None,
                     offered: Collection[str] | None = None) -> str | None:
    """``offered``: the names of the tools the model has (None: all of them)."""
    def has(tool: str) -> bool:
        return offered is None or tool in offered

    parts: list[str] = []
    note = history.last_error_note() if history is not None else None
    if note:
        how = " (notebook_history shows the cell and its traceback.)" if has("notebook_history") else ""
        parts.append(f"Last error: {note}.{how}")
    refs = reference_block(prompt, history, user_ns, max_chars=reference_chars)
    if refs:
        parts.append(refs)
    files = file_notes(prompt)
    if files:
        parts.append(files)
    tail = None
    if notebook is not None and notebook.path is not None:
        if has("read_notebook"):
            tail = f"Notebook file: {notebook.path.name} (read_notebook shows its cells and saved outputs)."
        elif _MARKDOWN_REFERENCE.search(prompt):
            cells = markdown_cells(notebook.path)
            tail = f"Markdown cells of the notebook {notebook.path.name}:\n{cells}" if cells else None
    used = estimate_text_tokens(CONTEXT_HEADER) + sum(estimate_text_tokens(p) for p in parts if p is not refs)
    used += estimate_text_tokens(tail) if tail else 0
    remaining = token_budget - used
    if remaining > 40:
        recent = history.recent_names() if history is not None else []
        summary = namespace_summary(user_ns, token_budget=remaining, recent=recent, hidden=hidden)
        if summary:
            parts.append(summary)
    if tail:
        parts.append(tail)
    if not parts:
        return None
    return redact(CONTEXT_HEADER + "\n" + "\n\n".join(parts))


def make_context_tools(shell: Any, get_notebook_path: PathSetting | None = None) -> list[AgentTool]:
    """``notebook_history`` and ``read_notebook`` bound to ``shell``. ``get_notebook_path`` reads
    the user's explicit path setting at each call (None or "" means: locate it)."""
    history = install_history(shell)

    def locate() -> NotebookLocation:
        explicit = get_notebook_path() if get_notebook_path is not None else None
        return locate_notebook(shell.user_ns, explicit=explicit or None)

    return [make_history_tool(history), make_notebook_file_tool(locate)]


def context_for_prompt(shell: Any, prompt: str, token_budget: int = 500,
                       notebook_path: str | os.PathLike[str] | None = None,
                       offered: Collection[str] | None = None) -> str | None:
    """The block for ``prompt`` from the live shell (its recorder, namespace and notebook)."""
    location = locate_notebook(shell.user_ns, explicit=notebook_path or None)
    return notebook_context(prompt, installed_history(shell), shell.user_ns,
                            hidden=getattr(shell, "user_ns_hidden", None), token_budget=token_budget,
                            notebook=location, offered=offered)
