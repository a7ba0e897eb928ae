"""Shared bits of the tools tests (in-process shell)."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

from pi_notebook.tools.context.history import ExecutionHistory
from pi_notebook.tools.kernel.capture import install_capture, uninstall_capture


def get_shell() -> InteractiveShell:
    return InteractiveShell.instance()


@contextlib.contextmanager
def routed(shell: Any = None) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """Install the proxies over fresh StringIO "real" streams, inside the test body.

    (pytest swaps sys.stdout between setup/call/teardown, so a fixture could not do this.)
    """
    shell = shell or get_shell()
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        install_capture(shell)
        try:
            yield out, err
        finally:
            uninstall_capture(shell)
    finally:
        sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def recording() -> Iterator[tuple[InteractiveShell, ExecutionHistory]]:
    """The shell with a cell history installed and sys.stdout/stderr swapped for buffers; the
    names the test's cells made are taken out of the namespace after."""
    shell = get_shell()
    history = ExecutionHistory()
    history.install(shell)
    names = set(shell.user_ns)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    try:
        yield shell, history
    finally:
        sys.stdout, sys.stderr = saved
        history.uninstall()
        for name in set(shell.user_ns) - names:
            del shell.user_ns[name]


@contextlib.contextmanager
def names_kept(shell: InteractiveShell) -> Iterator[InteractiveShell]:
    """The shared test shell's namespace as it was before the block (names the block's code or
    its test defined are removed, so no later test finds them, e.g. in a KeyError hint)."""
    before = set(shell.user_ns)
    try:
        yield shell
    finally:
        for name in set(shell.user_ns) - before:
            shell.user_ns.pop(name, None)


def flat(details: dict[str, Any]) -> dict[str, Any]:
    """A dumped ``PythonCallDetails`` seen as joined streams, displays, value and error
    (what many assertions want; the ordered ``outputs`` stay under ``"outputs"``)."""
    outputs = details["outputs"]
    error = next((o for o in outputs if o["kind"] == "error"), None)
    value = next((o for o in outputs if o["kind"] == "result"), None)
    return {
        **details,
        "stdout": "".join(o["text"] for o in outputs if o["kind"] == "stream" and o["name"] == "stdout"),
        "stderr": "".join(o["text"] for o in outputs if o["kind"] == "stream" and o["name"] == "stderr"),
        "displays": [o for o in outputs if o["kind"] == "display"],
        "value": value,
        "error": None if error is None else {**error, "traceback": "\n".join(error["traceback"])},
    }
