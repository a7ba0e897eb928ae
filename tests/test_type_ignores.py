"""Every ``# type: ignore`` in the package names its error code and says why on the same line
(an ignore without a reason is a question nobody can answer later)."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pi_notebook"
_IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")


def test_every_type_ignore_has_a_code_and_a_reason() -> None:
    bare = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = _IGNORE.search(line)
            if match and (not match.group("codes") or not re.search(r"[A-Za-z]", match.group("rest"))):
                bare.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert not bare, "\n".join(bare)
