"""Secrets registered by a test (``${VAR}`` values, header values) are forgotten after it."""

from __future__ import annotations

import importlib

import pytest


@pytest.fixture(autouse=True)
def _forget_registered_secrets(monkeypatch):
    redact = importlib.import_module("pi_notebook.tools.trust.redact")  # (the package exports a function of that name)
    monkeypatch.setattr(redact, "_explicit", set(redact._explicit))
