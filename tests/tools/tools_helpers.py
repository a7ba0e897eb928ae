"""Shared bits of the tools tests (in-process shell)."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

from pi_notebook.tools.capture import install_capture, uninstall_capture


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
