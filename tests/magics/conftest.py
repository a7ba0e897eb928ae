"""Fixtures for the magics' unit tests: a real IPython InteractiveShell (no kernel) with
the extension loaded, a recording fake view and a faux model registered in-process."""

from __future__ import annotations

import signal
import types

import pytest
from IPython.core.interactiveshell import InteractiveShell
from magics_helpers import FakeView

from pi_notebook.ai.providers.faux import register_faux_provider
from pi_notebook.magics.resolve import ResolvedModel


@pytest.fixture
def faux():
    handle = register_faux_provider(tokens_per_second=None)
    yield handle
    handle.unregister()


@pytest.fixture
def shell(tmp_path, faux, monkeypatch):
    """A shell with pi_notebook loaded; a fake ``kernel`` attribute so runs go to the
    background unless told to wait (the real-kernel behaviour is in tests/kernel)."""
    import pi_notebook.magics as magics

    monkeypatch.chdir(tmp_path)
    ip = InteractiveShell.instance()
    ip.kernel = types.SimpleNamespace(io_loop=None)
    FakeView.instances.clear()
    ip.run_line_magic("load_ext", "pi_notebook")
    runtime = magics.current_runtime()
    runtime.view_factory = FakeView
    runtime.tools_factory = lambda rt: []
    runtime.on_agent_created = None  # no output-capture proxies in the test process
    runtime.settings.session_dir = str(tmp_path / "sessions")
    runtime.settings.wait = "never"
    agent = runtime.get_agent()
    model = faux.get_model()
    runtime.resolved = ResolvedModel(model, "explicit")
    agent.state.model = model
    yield ip
    ip.run_line_magic("unload_ext", "pi_notebook")
    del ip.kernel
    InteractiveShell.clear_instance()
    # A run's Stop guard puts back the SIGINT handler it found: here that is the handler of the
    # asyncio runner that ran the test body, which pytest-asyncio leaves behind when the guard
    # was left during another of its runs (a fixture's). Later tests that send SIGINT would meet
    # that stale handler; a kernel never has one.
    signal.signal(signal.SIGINT, signal.default_int_handler)


