"""Wire-API adapters and the faux test provider.

Each built-in adapter module exposes ``register()``; ``register_builtin_providers``
imports them lazily, on the first ``stream()`` call, so that importing the package
stays cheap.
"""

from __future__ import annotations

import importlib

_BUILTIN_MODULES = ("openai_completions", "openai_responses", "anthropic", "google", "local")


def register_builtin_providers() -> None:
    for name in _BUILTIN_MODULES:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:  # adapter not built yet in this checkout
            if exc.name == f"{__name__}.{name}":
                continue
            raise
        module.register()
