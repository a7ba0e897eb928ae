"""Wire-API adapters and the faux test provider (the embedded local model is a package of
its own, ``pi_notebook/local/``, registered through ``stream.add_provider_extension``).

Each built-in adapter module exposes ``register()``; ``register_builtin_providers``
imports them lazily, on the first ``stream()`` call, so that importing the package
(and ``%load_ext pi_notebook``) stays cheap.
"""

from __future__ import annotations

import importlib

_BUILTIN_MODULES = ("openai_completions", "openai_responses", "anthropic", "google")


def register_builtin_providers() -> None:
    for name in _BUILTIN_MODULES:
        importlib.import_module(f"{__name__}.{name}").register()
