"""The embedded small model (docs/design/local-model.md): llama-server with a packaged GGUF,
and what makes a 1.5B model useful in a notebook.

Modules, from the wire up: ``setup`` (build and weights; ``python -m pi_notebook.local.setup``),
``server`` / ``supervisor`` (one shared llama-server per model), ``provider`` (the ``local/<id>``
stream), ``tool_calls`` (request shaping, the GBNF grammar, reply parsing), ``intent`` (what a
request names), ``repeat`` (cutting a reply caught in a loop), ``profile`` (which models are
small and what they get), ``checks`` (the run checks) and ``apply`` (the profile on an Agent).

Importing the package registers ``local/<id>`` with the catalogue and the ``llama-server`` API
with ``stream()``; both load the heavy modules only when a local model is asked for.
"""

from __future__ import annotations

from ..ai.models import register_model_factory
from ..ai.stream import add_provider_extension
from ..ai.types import Model

__all__ = ["register"]


def _model(model_id: str) -> Model:
    from .provider import local_model

    return local_model(model_id)


def _register_api() -> None:
    from .provider import register as register_provider

    register_provider()


def register() -> None:
    """``get_model("local/<id>")`` and ``stream()`` of such a model, from now on."""
    register_model_factory("local", _model)  # provider.LOCAL_PROVIDER (not imported: it is heavy)
    add_provider_extension(_register_api)


register()
