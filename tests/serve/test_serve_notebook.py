"""notebooks/serve.ipynb, run headless: the outside client got the tools, no token was saved."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from test_notebooks import executed, output_text


@pytest.mark.kernel
def test_serve_notebook_connects_a_client_and_saves_no_token(tmp_path_factory: pytest.TempPathFactory) -> None:
    run = executed("serve.ipynb", tmp_path_factory)
    texts = [output_text(cell) for cell in run.code_cells()]
    joined = "\n".join(texts)
    assert "claude mcp add --transport http pi-notebook http://127.0.0.1:" in joined
    assert re.search(r"execute\s+runs code", joined) and re.search(r"list_variables\s+read-only", joined)
    assert "sales = pd.read_csv" in joined  # recent_cells read the user's cell
    assert "calls: 1" in joined  # the status after the client's one tool call
    assert "Stopped serving this kernel." in joined
    assert not re.search(r"Bearer [A-Za-z0-9_-]{40,}", joined), "a token was saved in the notebook"
