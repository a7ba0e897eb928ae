"""Headless execution of the example notebooks (``notebooks/*.ipynb`` and the quickstart in
``pi_notebook/examples/``) with nbclient.

Each notebook runs in a copy of its folder (its data files included) inside the
test's temporary directory, so relative paths work and session autosaves stay out of
the repository. After the last cell, a *probe* cell (not part of the notebook) asks the
kernel for the agent's real transcript; the tests then check that the saved outputs
hold it, and that the cells after ``%%agent`` saw what the agent computed.

Every example notebook is expected to run the agent at least once (that is what they are
for). Markers: ``kernel`` for every execution; ``local_model`` as well for notebooks that run
the embedded model (``-m local/...``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import pytest

from make_notebooks import EXAMPLES_DIR, NOTEBOOKS, NOTEBOOKS_DIR, path_of, render

ALL_NOTEBOOKS = sorted(p.name for folder in (NOTEBOOKS_DIR, EXAMPLES_DIR) for p in folder.glob("*.ipynb")
                       if not p.name.endswith((".executed.ipynb", "-executed.ipynb")))
SALES = pd.read_csv(NOTEBOOKS_DIR / "data" / "sales.csv")

_PROBE_MARK = "@@pi-notebook-probe@@"
_PROBE = f"""
import json as _json
from pi_notebook import get_agent as _get_agent
def _texts(_m):
    _c = _m.content
    if isinstance(_c, str):
        return [_c]
    return [_b.text for _b in _c if getattr(_b, "type", "") == "text"]
print({_PROBE_MARK!r} + _json.dumps([
    {{"role": _m.role, "texts": _texts(_m), "stop_reason": getattr(_m, "stop_reason", None),
      "tool_name": getattr(_m, "tool_name", None)}}
    for _m in _get_agent().state.messages]))
"""


# --- helpers -----------------------------------------------------------------------------

def _uses_local_model(name: str) -> bool:
    nb = nbformat.read(path_of(name), as_version=4)
    return any(c.cell_type == "code" and re.search(r"-m\s+local/", c.source) for c in nb.cells)


def _params(names: list[str]) -> list[Any]:
    params = []
    for name in names:
        marks = [pytest.mark.kernel]
        if _uses_local_model(name):
            marks.append(pytest.mark.local_model)
        params.append(pytest.param(name, marks=marks, id=name.removesuffix(".ipynb")))
    return params


class Executed:
    """An executed notebook plus the agent's transcript read from the kernel afterwards."""

    def __init__(self, nb: nbformat.NotebookNode, transcript: list[dict[str, Any]]) -> None:
        self.nb = nb
        self.transcript = transcript

    def code_cells(self) -> list[nbformat.NotebookNode]:
        return [c for c in self.nb.cells if c.cell_type == "code"]

    def cell(self, startswith: str, after: int = -1) -> tuple[int, nbformat.NotebookNode]:
        for index, cell in enumerate(self.nb.cells):
            if index > after and cell.cell_type == "code" and cell.source.startswith(startswith):
                return index, cell
        raise AssertionError(f"no code cell starting with {startswith!r}")

    def agent_cells(self) -> list[tuple[int, nbformat.NotebookNode]]:
        return [(i, c) for i, c in enumerate(self.nb.cells)
                if c.cell_type == "code" and c.source.startswith("%%agent")]

    def all_output_text(self) -> str:
        return "\n".join(output_text(c) for c in self.code_cells())

    def final_assistant_texts(self) -> list[str]:
        """The text blocks of every assistant message that ended a turn without tool calls."""
        return [t for m in self.transcript
                if m["role"] == "assistant" and m["stop_reason"] == "stop" for t in m["texts"]]


def output_text(cell: nbformat.NotebookNode) -> str:
    parts = []
    previous = None
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            # one print() can arrive as several stream outputs when the kernel flushes between
            # its writes (seen on ipykernel 6 under load: "thinking level:" + " high\n"); the
            # pieces of one stream are one text, not lines of their own
            if previous is not None and previous.output_type == "stream" and previous.name == output.name:
                parts[-1] += output.text
            else:
                parts.append(output.text)
        elif output.output_type == "error":
            parts.append(f"{output.ename}: {output.evalue}")
        else:
            data = output.get("data", {})
            parts.append(str(data.get("text/markdown", "")))
            parts.append(str(data.get("text/plain", "")))
        previous = output
    return "\n".join(parts)


def _normalise(text: str) -> str:
    return " ".join(text.split())


def _unquote(markdown: str) -> str:
    """Markdown block quotes (how the transcript shows user messages) back to plain lines."""
    return "\n".join(re.sub(r"^>\s?", "", line) for line in markdown.splitlines())


def _kernel_env() -> dict[str, str]:
    """The test's environment without any provider key: the notebooks must run without one
    (and a key in the developer's shell must not turn a test into a paid request)."""
    from pi_notebook.ai.env import env_var_names
    from pi_notebook.ai.models import get_providers

    secret = {n for provider in get_providers() for n in env_var_names(provider)}
    return {k: v for k, v in os.environ.items() if k not in secret}


def execute(name: str, tmp_path: Path, timeout: int = 600) -> Executed:
    """Run the notebook top to bottom in a copy of its directory; raise on any cell error."""
    from nbclient import NotebookClient

    workdir = tmp_path / "notebooks"
    shutil.copytree(path_of(name).parent, workdir,
                    ignore=shutil.ignore_patterns(".pi_notebook", ".ipynb_checkpoints",
                                                  "*.executed.ipynb", "*-executed.ipynb"))
    nb = nbformat.read(workdir / name, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}})
    probe = nbformat.v4.new_code_cell(_PROBE)
    cells = list(nb.cells)
    with client.setup_kernel(env=_kernel_env()):
        for index, cell in enumerate(cells):
            client.execute_cell(cell, index)  # raises CellExecutionError on an error output
        nb.cells.append(probe)  # nbclient writes the executed cell back into nb.cells
        try:
            client.execute_cell(probe, len(cells))
        finally:
            nb.cells.pop()
    nbformat.write(nb, tmp_path / name.replace(".ipynb", ".executed.ipynb"))
    probe_out = output_text(probe)
    assert _PROBE_MARK in probe_out, probe_out
    transcript = json.loads(probe_out.split(_PROBE_MARK, 1)[1].strip().splitlines()[0])
    return Executed(nb, transcript)


_executions: dict[str, Executed | BaseException] = {}


def executed(name: str, tmp_path_factory: pytest.TempPathFactory) -> Executed:
    """One execution per notebook per test session, shared by the generic and specific tests."""
    if name not in _executions:
        try:
            _executions[name] = execute(name, tmp_path_factory.mktemp(name.removesuffix(".ipynb")),
                                        timeout=900)
        except BaseException as exc:  # report the same failure to every test that needs it
            _executions[name] = exc
    result = _executions[name]
    if isinstance(result, BaseException):
        raise result
    return result


def check_common(run: Executed) -> None:
    """What every notebook must satisfy after a clean headless run."""
    assert run.transcript, "the agent never ran"
    for output in (o for c in run.code_cells() for o in c.outputs):
        assert output.output_type != "error", output
    texts = run.all_output_text()
    finals = run.final_assistant_texts()
    assert finals, run.transcript
    # The saved outputs hold the agent's final answers (the full transcript, not a stub).
    for final in finals:
        assert _normalise(final) in _normalise(texts), f"final answer missing from the outputs: {final!r}"
    for _, cell in run.agent_cells():
        check_agent_cell(cell)


def check_agent_cell(cell: nbformat.NotebookNode) -> None:
    """A blocking %%agent cell keeps a static transcript of its run: the prompt and the status."""
    if "--no-wait" in cell.source.splitlines()[0]:
        return  # its run ends after the cell: nbclient ignores the late display update
    markdown = [o.data["text/markdown"] for o in cell.outputs
                if o.output_type in ("display_data", "execute_result") and "text/markdown" in o.get("data", {})]
    assert markdown, f"no Markdown transcript under {cell.source.splitlines()[0]!r}"
    prompt = _normalise(cell.source.split("\n", 1)[1])
    assert any(prompt in _normalise(_unquote(m)) or prompt in _normalise(_reader_text(m)) for m in markdown), markdown
    header = _first_text_line(markdown[-1])
    assert " done " in f" {header} ".replace("·", " "), header


def _reader_text(md: str) -> str:
    """What a reader sees of a static transcript: it is framed in HTML with a stylesheet
    (the live view's frame), which a reader does not see; Markdown quotes undone."""
    import html

    text = re.sub(r"(?s)<style>.*?</style>", "", md)
    text = re.sub(r"</(div|p|pre|li|tr|summary|h\d)>|<br>", "\n", text)
    return _unquote(html.unescape(re.sub(r"<[^>]+>", "", text)))


def _first_text_line(md: str) -> str:
    """The transcript's header as a reader sees it: model, status, time."""
    return next((line.strip() for line in _reader_text(md).splitlines() if line.strip()), "")


# --- every notebook -------------------------------------------------------------------------

@pytest.mark.parametrize("name", _params(ALL_NOTEBOOKS))
def test_notebook_runs_headless(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Any notebook in notebooks/ (new ones included) runs top to bottom without an error."""
    check_common(executed(name, tmp_path_factory))


# --- what each notebook demonstrates --------------------------------------------------------

@pytest.mark.kernel
@pytest.mark.local_model
def test_quickstart_answers_its_question_and_checks_the_answer(tmp_path_factory: pytest.TempPathFactory) -> None:
    run = executed("quickstart.ipynb", tmp_path_factory)
    check_common(run)
    index, agent_cell = run.agent_cells()[0]
    # asked in plain words: the model wrote and ran the code itself
    assert "python" not in agent_cell.source.split("\n", 1)[1].lower()
    tools = [m["tool_name"] for m in run.transcript if m["role"] == "toolResult"]
    assert "python" in tools, run.transcript
    # the notebook's last cell checked the agent's answer against the data (and would have raised)
    monthly = SALES.groupby("month")["revenue"].sum()
    _, last = run.cell("import pi_notebook", after=index)
    assert f"Checked: {monthly.idxmax()} had the highest total revenue ({monthly.max():.1f})" in output_text(last)


@pytest.mark.kernel
def test_steering_lands_where_documented(tmp_path_factory: pytest.TempPathFactory) -> None:
    run = executed("steering.ipynb", tmp_path_factory)
    check_common(run)
    roles = [m["role"] for m in run.transcript]
    users = [i for i, r in enumerate(roles) if r == "user"]
    assert len(users) == 3, roles
    steer, followup = users[1], users[2]
    assert "mean" in run.transcript[steer]["texts"][0]
    # at a turn boundary: after the first tool batch (or with the prompt, if it arrived before
    # the first model call), and always before the next model call
    assert roles[steer - 1] in ("toolResult", "user") and roles[steer + 1] == "assistant", roles
    assert run.transcript[followup - 1]["stop_reason"] == "stop", roles  # after an answer
    assert "units" in run.transcript[followup]["texts"][0]
    assert followup > steer
    # later cells see what the agent computed, with the steering applied (mean, not sum)
    mean = SALES.groupby("region")["revenue"].mean().round(1)
    _, cell = run.cell("from pi_notebook import get_agent")
    assert f"north    {mean['north']}" in output_text(cell)
    units = SALES.groupby("region")["units"].sum()
    _, cell = run.cell("units_by_region")
    assert f"south    {units['south']}" in output_text(cell)
    _, history = run.cell("%agent history")
    assert "Use the mean monthly revenue instead of the sum" in output_text(history)
    # the notebook-context note travels with each prompt for the model only: no output shows it
    shown = run.all_output_text()
    assert "Notebook context" not in shown and "(boundary pn-" not in shown


@pytest.mark.kernel
def test_custom_tool_called_by_the_agent(tmp_path_factory: pytest.TempPathFactory) -> None:
    run = executed("custom-tools.ipynb", tmp_path_factory)
    check_common(run)
    north = SALES[SALES.region == "north"].groupby("month")["revenue"].sum()
    growth = round(100 * (north.iloc[-1] - north.iloc[0]) / north.iloc[0], 1)
    assert [m["tool_name"] for m in run.transcript if m["role"] == "toolResult"] == ["growth"]
    assert f"**{growth} %**" in run.final_assistant_texts()[0]
    _, cell = run.cell("tool_result = next(")
    assert f"'growth_pct': {growth}" in output_text(cell)
    # the standalone Agent streamed its events to the listener
    units = SALES.groupby("month")["units"].sum()
    units_growth = round(100 * (units.iloc[-1] - units.iloc[0]) / units.iloc[0], 1)
    _, cell = run.cell("from pi_notebook.agent import Agent")
    text = output_text(cell)
    assert "[calling growth({'column': 'units'})]" in text
    assert f"Units grew by **{units_growth} %** overall" in text


@pytest.mark.kernel
def test_providers_without_keys(tmp_path_factory: pytest.TempPathFactory) -> None:
    run = executed("providers.ipynb", tmp_path_factory)
    check_common(run)
    text = run.all_output_text()
    assert "OPENAI_API_KEY" in text and "not set" in text
    assert "Model: ollama/qwen2.5-coder:7b" in text
    assert "'max' runs as 'high'" in text and "['off']  'max' runs as 'off'" in text
    _, cell = run.cell("from pi_notebook import get_agent")
    assert "thinking level: high" in output_text(cell)
    assert "['thinking', 'text']" in output_text(cell)
    _, cell = run.cell("from pi_notebook.ai import Usage")
    assert "= $0.0570" in output_text(cell)  # 12k in @3 + 30k cache read @0.3 + 800 out @15, per M


@pytest.mark.kernel
def test_mcp_server_tools_for_the_agent_and_the_namespace(tmp_path_factory: pytest.TempPathFactory) -> None:
    run = executed("mcp.ipynb", tmp_path_factory)
    check_common(run)
    results = [m for m in run.transcript if m["role"] == "toolResult"]
    assert [m["tool_name"] for m in results] == ["warehouse__orders"], run.transcript
    _, cell = run.cell("%agent mcp tools warehouse")
    assert "warehouse__orders [autoApprove]" in output_text(cell)
    _, cell = run.cell("import pandas as pd\nimport pi_notebook")
    south = SALES[SALES.region == "south"]
    text = output_text(cell)
    assert "south" in text and f"{south.revenue.iloc[0]}" in text


@pytest.mark.kernel
def test_jupyter_execute_cli(tmp_path: Path) -> None:
    """The command a user types: ``jupyter execute`` on the notebooks that need no local model."""
    names = [n for n in ALL_NOTEBOOKS if not _uses_local_model(n)]
    assert names
    workdir = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS_DIR, workdir, ignore=shutil.ignore_patterns(
        ".pi_notebook", ".ipynb_checkpoints", "*.executed.ipynb", "*-executed.ipynb"))
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "execute", "--output={notebook_name}-executed", *names],
        cwd=workdir, env=_kernel_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    for name in names:
        nb = nbformat.read(workdir / name.replace(".ipynb", "-executed.ipynb"), as_version=4)
        run = Executed(nb, [])
        agent_cells = run.agent_cells()
        assert agent_cells, name
        for _, cell in agent_cells:
            check_agent_cell(cell)


# --- the committed files -------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_NOTEBOOKS)
def test_committed_notebook_is_clean(name: str) -> None:
    nb = nbformat.read(path_of(name), as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    assert "widgets" not in nb.metadata
    assert sum(c.cell_type == "markdown" for c in nb.cells) >= 3  # explained, not just code


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_generator_matches_committed(name: str) -> None:
    """make_notebooks.py and the committed notebooks do not drift apart."""
    assert path_of(name).read_text(encoding="utf-8") == render(name), (
        f"{path_of(name)} differs from tests/notebooks/make_notebooks.py; regenerate or update both")
