"""``python -m pi_notebook quickstart``, and the README's set-up commands exactly as a newcomer
types them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kernel, pytest.mark.local_model, pytest.mark.timeout(3000)]

REPO = Path(__file__).resolve().parents[2]


def test_python_m_pi_notebook_quickstart_runs_from_an_empty_folder(tmp_path):
    """The packaged quickstart runs wherever the user is: its executed copy and the data it
    reads land in the current folder, and the command says where."""
    out = subprocess.run([sys.executable, "-m", "pi_notebook", "quickstart"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=850)
    assert out.returncode == 0, out.stdout + out.stderr
    executed = tmp_path / "quickstart.executed.ipynb"
    assert str(executed.resolve()) in out.stdout  # it says where the notebook went
    assert (tmp_path / "data" / "sales.csv").read_bytes() == (
        REPO / "pi_notebook" / "examples" / "data" / "sales.csv").read_bytes()
    nb = json.loads(executed.read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert "Checked: 2025-05 had the highest total revenue" in json.dumps(outputs)  # the answer is right


def test_quickstart_with_a_missing_notebook_is_a_one_line_error(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pi_notebook", "quickstart", "nope.ipynb"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().startswith("error: no notebook at nope.ipynb")
    assert "Traceback" not in out.stderr


def _readme_setup_commands() -> list[str]:
    """The commands of the README's install block for a clone, as a newcomer copies them."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Install", 1)[1].split("\n## ", 1)[0]
    block = section.split("From a clone", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]
    return [c for c in commands if c]


def test_the_readme_setup_commands_work_in_a_fresh_venv_with_empty_caches(tmp_path):
    """What a new user meets: a fresh copy, a fresh venv, no pip cache, an empty project cache.
    Only the compiled llama-server may come from the developer's cache (the build is slow and
    has its own tests); the install, the weight assembly and the quickstart all run cold."""
    from pi_notebook.local.setup import find_llama_server

    commands = _readme_setup_commands()
    assert len(commands) == 2 and commands[1] == "python -m pi_notebook quickstart", commands
    project = tmp_path / "pi_notebook"
    shutil.copytree(REPO, project, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "__pycache__", "*.executed.ipynb", ".pi_notebook", "build", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    cache = tmp_path / "cache"
    binary = find_llama_server()
    assert binary is not None
    (cache / "bin").mkdir(parents=True)
    shutil.copy2(binary, cache / "bin" / binary.name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PIP_NO_CACHE_DIR="1",
               PI_NOTEBOOK_CACHE=str(cache), PIP_DISABLE_PIP_VERSION_CHECK="1")
    timings = []
    for command in commands:
        started = time.monotonic()
        out = subprocess.run(command, shell=True, cwd=project, env=env, capture_output=True, text=True,
                             timeout=1500)
        timings.append(f"{command}: {time.monotonic() - started:.0f} s")
        assert out.returncode == 0, f"{command}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    print("fresh set-up:", "; ".join(timings))
    executed = project / "quickstart.executed.ipynb"  # where the command ran
    nb = json.loads(executed.read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert (cache / "models").is_dir()  # the weights were assembled into the empty cache


def test_quickstart_does_not_overwrite_a_different_data_file(tmp_path):
    (tmp_path / "data").mkdir()
    mine = tmp_path / "data" / "sales.csv"
    mine.write_text("my own numbers\n")
    out = subprocess.run([sys.executable, "-m", "pi_notebook", "quickstart"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.startswith("error: ") and "from another folder" in out.stderr
    assert mine.read_text() == "my own numbers\n" and not (tmp_path / "quickstart.executed.ipynb").exists()


def test_the_quickstart_kernel_waits_for_the_first_byte_as_long_as_a_cell_may_run(tmp_path):
    """A cold server on a busy machine reads the first prompt for over a minute: the command's
    kernel gives the model's first byte the per-cell bound, not the 60 s default."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "%load_ext pi_notebook\nfrom pi_notebook.magics import current_runtime\n"
        "print('first byte:', current_runtime().settings_now().first_byte_timeout)")])
    source = tmp_path / "probe.ipynb"
    nbformat.write(nb, source)
    out = subprocess.run([sys.executable, "-m", "pi_notebook", "quickstart", str(source), "--timeout", "420"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "first byte: 420.0" in (tmp_path / "probe.executed.ipynb").read_text()
