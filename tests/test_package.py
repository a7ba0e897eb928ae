"""What the sdist and the wheel hold: the package with its quickstart and data, the sources a
packager builds from, and nothing of a developer's machine (environments, caches, outputs)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import pi_notebook

ROOT = Path(__file__).resolve().parents[1]

# the built files must hold these (paths inside the archive, after its top folder for the sdist)
SDIST_MUST = ["pyproject.toml", "README.md", "CHANGELOG.md", "pi_notebook/__init__.py", "pi_notebook/py.typed",
              "pi_notebook/examples/quickstart.ipynb", "pi_notebook/examples/data/sales.csv",
              "pi_notebook/ai/data/models.json", "tests/conftest.py", "docs/design/architecture.md",
              "docs/benchmarks.md", "notebooks/steering.ipynb", "notebooks/data/sales.csv", ".ci/run"]
WHEEL_MUST = ["pi_notebook/__init__.py", "pi_notebook/py.typed", "pi_notebook/examples/quickstart.ipynb",
              "pi_notebook/examples/data/sales.csv", "pi_notebook/ai/data/models.json"]
# ...and never these (a path containing any of them, anywhere)
NEVER = [".venv", "__pycache__", ".pyc", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".git/",
         ".pi_notebook/", ".ipynb_checkpoints", ".executed.ipynb", "bench/results", ".egg-info"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, list[str]]:
    if importlib.util.find_spec("build") is None or importlib.util.find_spec("hatchling") is None:
        reason = 'building needs the dev extra\'s build and hatchling (pip install -e ".[dev]")'
        if os.environ.get("PI_NOTEBOOK_CI") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: the backend comes from this environment, so the build needs no network
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel",
                           "--outdir", str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    with tarfile.open(sdist) as tar:
        names = [m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name]
    with zipfile.ZipFile(wheel) as zf:
        wheel_names = zf.namelist()
    return {"sdist": names, "wheel": wheel_names, "files": [sdist.name, wheel.name]}


def test_the_built_files_carry_the_version(built):
    version = pi_notebook.__version__
    assert built["files"] == [f"pi_notebook-{version}.tar.gz", f"pi_notebook-{version}-py3-none-any.whl"]


def test_the_sdist_holds_the_sources_and_nothing_else(built):
    names = built["sdist"]
    assert not [m for m in SDIST_MUST if m not in names], names
    assert not [n for n in names if any(bad in n for bad in NEVER)]
    # every module of the package is in it
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "pi_notebook").rglob("*.py")}
    assert not modules - set(names)


def test_the_wheel_holds_the_package_its_quickstart_and_data(built):
    names = built["wheel"]
    assert not [m for m in WHEEL_MUST if m not in names], names
    assert not [n for n in names if any(bad in n for bad in NEVER)]
    assert not [n for n in names if n.startswith(("tests/", "docs/", "notebooks/", "bench/"))]
