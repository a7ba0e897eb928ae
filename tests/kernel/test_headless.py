"""Headless execution (nbclient, like ``jupyter execute`` / papermill): ``%%agent`` blocks."""

from __future__ import annotations

import tempfile
from pathlib import Path

import nbformat
import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

from kernel_helpers import make_kernelspec

pytestmark = pytest.mark.kernel

SETUP = """\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message, faux_tool_call
faux = register_faux_provider(tokens_per_second=400)
faux.set_responses([
    faux_assistant_message([faux_tool_call('python', {'code': 'answer = 6 * 7\\nprint(answer)'})],
                           stop_reason='toolUse'),
    faux_assistant_message('The answer is 42, computed in your kernel.'),
])
"""


def execute(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    with tempfile.TemporaryDirectory() as tmp:
        name = make_kernelspec(Path(tmp))
        km = KernelManager(kernel_name=name,
                           kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(Path(tmp) / "kernels")]))
        client = NotebookClient(nb, km=km, timeout=60, allow_errors=True,
                                resources={"metadata": {"path": tmp}})
        client.execute()
    return nb


def _markdown_outputs(cell) -> str:
    return "".join(o.get("data", {}).get("text/markdown", "") for o in cell.outputs)


def _text(cell) -> str:
    parts = []
    for o in cell.outputs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif o.output_type == "error":
            parts.append(f"{o.ename}: {o.evalue}")
    return "".join(parts)


def test_agent_cell_blocks_and_later_cell_sees_what_the_agent_computed():
    nb = execute([SETUP, "%%agent -m faux/faux-1 --approve auto\nCompute the answer.\n",
                  "print('seen', answer)"])
    setup, agent, after = nb.cells
    assert not [o for o in setup.outputs if o.output_type == "error"]
    # the saved cell holds the whole transcript as Markdown (display updated by id)
    transcript = _markdown_outputs(agent)
    assert "The answer is 42, computed in your kernel." in transcript
    assert "answer = 6 * 7" in transcript
    assert _text(after) == "seen 42\n"


def test_headless_ask_policy_fails_closed_without_hanging():
    nb = execute([SETUP, "%%agent -m faux/faux-1\nCompute the answer.\n", "print('seen', answer)"])
    _, agent, after = nb.cells
    transcript = _markdown_outputs(agent)
    assert "not interactive" in transcript  # the notice says why the code did not run
    assert "NameError" in _text(after)  # the code never ran
