"""Project instructions: ``AGENTS.md`` files and ``AgentMagics.instructions``, added to the
system prompt of new conversations.

Which files: ``AGENTS.md`` in the notebook's folder and in its parents up to the repository
root (tools/context/project.py), in the prompt from the outermost to the nearest ("nearest last":
the most specific words come last and win). ``AgentMagics.instructions`` comes after them.

Budget: ``MAX_CHARS`` in all (about 3k tokens); a file beyond what is left is cut at a line
end with a marker, and a notice says so. A file that cannot be read (permissions, not
UTF-8, a dangling link, a link out of the project, not a regular file) is a one-line notice;
nothing here ever fails a run. Every file is read through tools/context/project_files.py (inside the
project tree, regular, non-blocking, bounded, cut on a character boundary, redacted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..tools.context.project import project_dirs
from ..tools.context.project_files import ProjectFileError, read_project_file
from ..tools.trust.redact import redact

__all__ = ["Instructions", "InstructionFile", "load_instructions", "FILE_NAME", "MAX_CHARS"]

FILE_NAME = "AGENTS.md"
MAX_CHARS = 12_000
_READ_LIMIT = 1_000_000  # bytes read of one file at most: a huge file costs no memory
# A file is read only as far as the budget can use: 8 bytes a character covers any UTF-8 text
# (and keeps the redaction of a huge file from costing seconds at a conversation's start)
_BYTES_PER_CHAR = 8
_HEADER = ("Project instructions (from the user's AGENTS.md files and settings; follow them "
           "unless the user says otherwise in the conversation):")


@dataclass(frozen=True)
class InstructionFile:
    path: Path
    size: int  # bytes on disk
    used_chars: int  # characters that went into the prompt (0: none)


@dataclass
class Instructions:
    text: str = ""  # the block for the system prompt ("" : none)
    files: list[InstructionFile] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    extra_chars: int = 0  # from AgentMagics.instructions

    def status_lines(self) -> list[str]:
        lines = [f"instructions: {f.path} ({_size(f.size)}"
                 + (")" if f.used_chars else ", not used)") for f in self.files]
        if self.extra_chars:
            lines.append(f"instructions: AgentMagics.instructions ({self.extra_chars} characters)")
        return lines


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} kB"


def _cut(text: str, room: int) -> str:
    head = text[:room]
    at = head.rfind("\n")
    return (head[:at] if at > room // 2 else head).rstrip() + "\n[... cut: the instructions budget is spent]"


def load_instructions(start_dir: str | Path, extra: str = "", max_chars: int = MAX_CHARS) -> Instructions:
    """The instructions block for a new conversation (module docstring)."""
    out = Instructions()
    folders = project_dirs(start_dir)
    found: list[Path] = []
    for folder in reversed(folders):  # outermost first, nearest last
        candidate = folder / FILE_NAME
        if candidate.exists() or candidate.is_symlink():
            found.append(candidate)
    root = folders[-1] if folders else None
    room = max_chars
    sections: list[str] = []
    for path in found:
        try:
            read = read_project_file(path, min(_READ_LIMIT, _BYTES_PER_CHAR * max_chars), root)
        except ProjectFileError as exc:
            out.notices.append(f"{path} was not added to the instructions: {exc}.")
            continue
        size, text = read.size, read.text.strip()  # a cut read is far over the budget below
        if not text:
            out.files.append(InstructionFile(path, size, 0))
            continue
        if room <= 200:
            out.notices.append(f"{path} ({_size(size)}) was not added: the instructions budget "
                               f"({max_chars} characters) is spent.")
            out.files.append(InstructionFile(path, size, 0))
            continue
        if len(text) > room:
            out.notices.append(f"{path} is {_size(size)}; only its first {room} characters were "
                               f"added to the instructions.")
            text = _cut(text, room)
        room -= len(text)
        sections.append(f"## {path}\n{text}")  # redacted when read
        out.files.append(InstructionFile(path, size, len(text)))
    extra = extra.strip()
    if extra:
        if len(extra) > max(room, 0) + max_chars // 4:  # the setting gets a little extra room
            out.notices.append(f"AgentMagics.instructions is {len(extra)} characters; only its first "
                               f"{max(room, 1000)} were added.")
            extra = _cut(extra, max(room, 1000))
        sections.append(f"## AgentMagics.instructions\n{redact(extra)}")
        out.extra_chars = len(extra)
    if sections:
        out.text = _HEADER + "\n\n" + "\n\n".join(sections)
    return out
