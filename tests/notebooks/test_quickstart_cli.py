"""The README's second set-up command, exactly as a newcomer types it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kernel, pytest.mark.local_model, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]


def test_python_m_pi_notebook_quickstart_writes_the_executed_notebook(tmp_path):
    shutil.copytree(REPO / "notebooks", tmp_path / "notebooks")
    out = subprocess.run([sys.executable, "-m", "pi_notebook", "quickstart"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=850)
    assert out.returncode == 0, out.stdout + out.stderr
    executed = tmp_path / "notebooks" / "quickstart.executed.ipynb"
    assert str(executed.resolve()) in out.stdout  # it says where the notebook went
    nb = json.loads(executed.read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert "image/png" in json.dumps(outputs)  # the agent's plot came back


def test_quickstart_with_a_missing_notebook_is_a_one_line_error(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pi_notebook", "quickstart", "nope.ipynb"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().startswith("error: no notebook at nope.ipynb")
    assert "Traceback" not in out.stderr
