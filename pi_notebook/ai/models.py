"""The model catalogue (spec 1.5, 1.3, 5.1): lookup, "provider/model" refs, cost, thinking levels.

The bundled catalogue lives in ``data/models.json`` (see its ``about`` field for where the
figures come from and their date). On top of pi's static ``getModel``:

* ``get_model("anthropic/claude-sonnet-4-5")`` splits on the first "/" (OpenRouter ids such
  as ``openrouter/anthropic/claude-sonnet-4.5`` keep theirs);
* local OpenAI-compatible servers (``ollama``, ``llamacpp``, ``vllm``, ``lmstudio``) accept
  any model id; an unknown id on a known cloud provider gets that provider's defaults;
* ``base_url=`` points any model at another endpoint; for an unknown provider it makes
  an ``openai-completions`` model;
* ``register_models`` adds models at runtime (the faux provider);
* ``register_model_factory`` serves a provider whose models are made from the id on demand
  (the embedded local model, ``pi_notebook/local/``: a packaged name or a .gguf path).

Lookups return copies, so callers may change a model without touching the catalogue.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from .types import THINKING_LEVELS, AgentThinkingLevel, Cost, Model, ModelCost, Usage

__all__ = [
    "UnknownModelError", "LOCAL_PROVIDERS", "THINKING_LEVELS", "get_model", "get_models",
    "get_providers", "parse_model_ref", "suggest_model_ids", "register_models", "unregister_models",
    "register_model_factory", "ModelFactory",
    "is_local_provider", "calculate_cost", "get_supported_thinking_levels", "clamp_thinking_level",
    "models_are_equal", "has_api", "catalogue_date", "is_answered_snapshot",
]

_DATA = Path(__file__).parent / "data" / "models.json"

LOCAL_PROVIDERS = frozenset({"ollama", "llamacpp", "vllm", "lmstudio"})
"""OpenAI-compatible servers on this machine: any model id, no key, no cost."""

CUSTOM_PROVIDER = "openai-compatible"
"""Provider name of a bare model id given with ``base_url`` and no provider."""

_CUSTOM_COMPAT = {"supportsDeveloperRole": False, "supportsReasoningEffort": False, "supportsStore": False}
_CUSTOM_DEFAULTS = {"reasoning": False, "input": ["text"], "contextWindow": 32768, "maxTokens": 8192,
                    "compat": _CUSTOM_COMPAT}


class UnknownModelError(KeyError):
    """No such provider, or a provider without the model id it needs.

    A ``KeyError`` so that mapping-style callers can catch it; ``str()`` is the plain
    message (``KeyError`` would quote it). ``suggestions`` holds close "provider/id" refs.
    """

    def __init__(self, message: str, *, provider: str | None = None, model_id: str | None = None,
                 suggestions: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.model_id = model_id
        self.suggestions = list(suggestions or [])

    def __str__(self) -> str:
        return self.message


@dataclass
class _ProviderEntry:
    name: str
    api: str
    base_url: str
    defaults: dict[str, Any]
    local: bool = False
    raw_models: dict[str, dict[str, Any]] = field(default_factory=dict)
    models: dict[str, Model] = field(default_factory=dict)  # validated lazily

    def model(self, provider: str, model_id: str) -> Model | None:
        hit = self.models.get(model_id)
        if hit is None and model_id in self.raw_models:
            raw = {"api": self.api, "baseUrl": self.base_url, **self.raw_models[model_id], "provider": provider}
            raw.setdefault("name", model_id)
            hit = self.models[model_id] = Model.model_validate(raw)
        return hit


_catalogue: dict[str, _ProviderEntry] | None = None
_catalogue_date = ""
_registered: dict[str, dict[str, Model]] = {}

ModelFactory = Callable[[str], Model]
_factories: dict[str, ModelFactory] = {}


def _load() -> dict[str, _ProviderEntry]:
    global _catalogue, _catalogue_date
    if _catalogue is None:
        doc = json.loads(_DATA.read_text(encoding="utf-8"))
        _catalogue_date = doc.get("asOf", "")
        catalogue = {}
        for name, entry in doc["providers"].items():
            catalogue[name] = _ProviderEntry(
                name=entry.get("name", name), api=entry["api"], base_url=entry["baseUrl"],
                defaults=entry.get("defaults", {}), local=bool(entry.get("local")),
                raw_models={m["id"]: m for m in entry.get("models", [])})
        _catalogue = catalogue
    return _catalogue


def catalogue_date() -> str:
    """The date the bundled prices and limits are as of (ISO ``YYYY-MM-DD``)."""
    _load()
    return _catalogue_date


def _copy(model: Model, base_url: str | None) -> Model:
    update = {"base_url": base_url} if base_url else None
    return model.model_copy(deep=True, update=update)


def _from_defaults(provider: str, model_id: str, api: str, base_url: str, defaults: dict[str, Any]) -> Model:
    raw = {"reasoning": False, "input": ["text"], **json.loads(json.dumps(defaults)),
           "id": model_id, "name": model_id, "api": api, "provider": provider, "baseUrl": base_url}
    return Model.model_validate(raw)


# --- refs and suggestions ---------------------------------------------------------------------

def parse_model_ref(ref: str) -> tuple[str | None, str]:
    """``"provider/model-id"`` -> ``(provider, model_id)``, split on the first "/".

    A ref without "/" gives ``(None, ref)``. Surrounding whitespace is ignored and the
    provider is lower-cased (model ids are case-sensitive).
    """
    text = ref.strip()
    if "/" not in text:
        return None, text
    provider, model_id = text.split("/", 1)
    return provider.strip().lower(), model_id.strip()


def _all_refs() -> list[str]:
    refs: list[str] = []
    for name, entry in _load().items():
        refs.extend(f"{name}/{mid}" for mid in entry.raw_models)
    for name, models in _registered.items():
        refs.extend(f"{name}/{mid}" for mid in models)
    return refs


def suggest_model_ids(ref: str, n: int = 3) -> list[str]:
    """Up to ``n`` known "provider/id" refs close to ``ref`` (for "did you mean ...")."""
    provider, model_id = parse_model_ref(ref)
    refs = _all_refs()
    if provider is not None and provider in get_providers():
        same = [r for r in refs if r.startswith(provider + "/")]
        ids = difflib.get_close_matches(model_id, [r.split("/", 1)[1] for r in same], n=n, cutoff=0.5)
        if ids:
            return [f"{provider}/{i}" for i in ids]
    if provider is None:
        by_id = {r.split("/", 1)[1]: r for r in reversed(refs)}
        ids = difflib.get_close_matches(model_id, list(by_id), n=n, cutoff=0.5)
        if ids:
            return [by_id[i] for i in ids]
    return difflib.get_close_matches(ref.strip(), refs, n=n, cutoff=0.5)


# --- lookup -------------------------------------------------------------------------------------

def get_providers() -> list[str]:
    """Catalogue providers in catalogue order, then providers registered at runtime."""
    names = list(_load())
    names.extend(p for p in _registered if p not in names)
    return names


def is_local_provider(provider: str) -> bool:
    return provider in LOCAL_PROVIDERS


def get_models(provider: str) -> list[Model]:
    """Every known model of ``provider`` (runtime registrations replace same-id entries)."""
    entry = _load().get(provider)
    out: dict[str, Model] = {}
    if entry is not None:
        for mid in entry.raw_models:
            model = entry.model(provider, mid)
            if model is not None:  # (never None for an id of raw_models)
                out[mid] = model
    out.update(_registered.get(provider, {}))
    return [m.model_copy(deep=True) for m in out.values()]


def _find_bare_id(model_id: str) -> Model | None:
    for models in _registered.values():
        if model_id in models:
            return models[model_id]
    for provider, entry in _load().items():
        hit = entry.model(provider, model_id)
        if hit is not None:
            return hit
    return None


def get_model(provider: str, model_id: str | None = None, *, base_url: str | None = None) -> Model:
    """Look up a model: ``get_model("openai", "gpt-4.1")`` or ``get_model("openai/gpt-4.1")``.

    A bare id (``get_model("gpt-4.1")``) is searched across providers. ``base_url``
    overrides the endpoint; with an unknown provider (or a bare unknown id) it yields an
    ``openai-completions`` model, so any OpenAI-compatible server works.

    Raises :class:`UnknownModelError` for an unknown provider (without ``base_url``), an
    unknown bare id, or a provider given without a model id.
    """
    base_url = base_url.strip() if isinstance(base_url, str) and base_url.strip() else None
    if model_id is None:
        parsed_provider, parsed_id = parse_model_ref(provider)
        if parsed_provider is None:
            return _bare(parsed_id, base_url)
        provider, model_id = parsed_provider, parsed_id
    else:
        provider = provider.strip().lower()
        model_id = model_id.strip()
    if not provider:
        return _bare(model_id, base_url)
    if not model_id:
        raise _missing_id(provider)

    factory = _factories.get(provider)
    if factory is not None:
        return factory(model_id)
    registered = _registered.get(provider, {})
    if model_id in registered:
        return _copy(registered[model_id], base_url)
    entry = _load().get(provider)
    if entry is not None:
        hit = entry.model(provider, model_id)
        if hit is not None:
            return _copy(hit, base_url)
        # Unknown id on a known provider (local servers take any id): provider defaults.
        return _from_defaults(provider, model_id, entry.api, base_url or entry.base_url, entry.defaults)
    if registered:
        first = next(iter(registered.values()))
        return first.model_copy(deep=True, update={
            "id": model_id, "name": model_id, "base_url": base_url or first.base_url})
    if base_url:
        return _from_defaults(provider, model_id, "openai-completions", base_url, _CUSTOM_DEFAULTS)
    raise _unknown_provider(provider, model_id)


def _bare(model_id: str, base_url: str | None) -> Model:
    if not model_id:
        raise UnknownModelError("Empty model reference; use 'provider/model-id'.")
    if model_id.lower() in get_providers():
        raise _missing_id(model_id.lower())
    hit = _find_bare_id(model_id)
    if hit is not None:
        return _copy(hit, base_url)
    if base_url:
        return _from_defaults(CUSTOM_PROVIDER, model_id, "openai-completions", base_url, _CUSTOM_DEFAULTS)
    suggestions = suggest_model_ids(model_id)
    hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
    raise UnknownModelError(
        f"Unknown model: {model_id}. Use 'provider/model-id' (providers: {', '.join(get_providers())})"
        f" or pass base_url for an OpenAI-compatible server.{hint}",
        model_id=model_id, suggestions=suggestions)


def _missing_id(provider: str) -> UnknownModelError:
    examples = [f"{provider}/{m.id}" for m in get_models(provider)[:3]]
    hint = f" e.g. {', '.join(examples)}" if examples else f" e.g. {provider}/<model-id>"
    return UnknownModelError(f"Missing model id for provider {provider}:{hint}", provider=provider,
                             suggestions=examples)


def _unknown_provider(provider: str, model_id: str) -> UnknownModelError:
    providers = get_providers()
    close = difflib.get_close_matches(provider, providers, n=3, cutoff=0.5)
    suggestions = [f"{p}/{model_id}" for p in close] or suggest_model_ids(f"{provider}/{model_id}")
    hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
    return UnknownModelError(
        f"Unknown provider: {provider}. Known providers: {', '.join(providers)}.{hint}"
        " For another OpenAI-compatible server pass base_url.",
        provider=provider, model_id=model_id, suggestions=suggestions)


# --- runtime registration -----------------------------------------------------------------------

def register_models(provider: str, models: list[Model]) -> None:
    """Add (or replace, by id) models for ``provider``; ``get_model("<provider>/<id>")`` finds them."""
    bucket = _registered.setdefault(provider, {})
    for model in models:
        bucket[model.id] = model


def register_model_factory(provider: str, factory: ModelFactory) -> None:
    """``get_model("<provider>/<id>")`` returns ``factory(id)``: for a provider whose models are
    not a list (the embedded model takes a packaged name or a path); a package above this layer
    registers itself here, so the catalogue never imports it."""
    _factories[provider] = factory


def unregister_models(provider: str, model_ids: list[str] | None = None) -> None:
    """Remove runtime-registered models of ``provider`` (all, or only ``model_ids``)."""
    if model_ids is None:
        _registered.pop(provider, None)
        return
    bucket = _registered.get(provider, {})
    for mid in model_ids:
        bucket.pop(mid, None)
    if not bucket:
        _registered.pop(provider, None)


# --- cost (1.3) -----------------------------------------------------------------------------------

def calculate_cost(model: Model, usage: Usage) -> Cost:
    """Fill ``usage.cost`` from the model's per-million rates; returns it.

    The tier with the highest ``input_tokens_above`` below the request's input tokens
    (input + cache read + cache write) prices the whole request. Anthropic's 1h cache
    writes (``cache_write_1h``, a subset of ``cache_write``) cost twice the input rate.
    """
    base = model.cost or ModelCost()
    rates: Any = base
    input_tokens = usage.input + usage.cache_read + usage.cache_write
    matched = -1
    for tier in base.tiers or []:
        if input_tokens > tier.input_tokens_above and tier.input_tokens_above > matched:
            rates = tier
            matched = tier.input_tokens_above
    long_write = usage.cache_write_1h or 0
    short_write = usage.cache_write - long_write
    cost = usage.cost
    cost.input = rates.input / 1_000_000 * usage.input
    cost.output = rates.output / 1_000_000 * usage.output
    cost.cache_read = rates.cache_read / 1_000_000 * usage.cache_read
    cost.cache_write = (rates.cache_write * short_write + rates.input * 2 * long_write) / 1_000_000
    cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write
    return cost


# --- thinking levels (1.5) ------------------------------------------------------------------------

def get_supported_thinking_levels(model: Model) -> list[AgentThinkingLevel]:
    """``["off"]`` for non-reasoning models; else the levels whose map entry is not null.

    ``xhigh`` and ``max`` are opt-in: they need an explicit (non-null) map entry.
    """
    if not model.reasoning:
        return ["off"]
    mapping = model.thinking_level_map or {}
    levels: list[AgentThinkingLevel] = []
    for level in THINKING_LEVELS:
        if level in mapping and mapping[level] is None:
            continue
        if level in ("xhigh", "max") and level not in mapping:
            continue
        levels.append(level)
    return levels


def clamp_thinking_level(model: Model, level: str) -> str:
    """``level`` if supported, else the nearest supported level above it, then below, else "off"."""
    available = get_supported_thinking_levels(model)
    if level in available:
        return level
    if level not in THINKING_LEVELS:
        return available[0] if available else "off"
    index = THINKING_LEVELS.index(level)
    for candidate in THINKING_LEVELS[index:]:
        if candidate in available:
            return candidate
    for candidate in reversed(THINKING_LEVELS[:index]):
        if candidate in available:
            return candidate
    return available[0] if available else "off"


def models_are_equal(a: Model | None, b: Model | None) -> bool:
    """Same id and provider (False when either is missing)."""
    if a is None or b is None:
        return False
    return a.id == b.id and a.provider == b.provider


def has_api(model: Model, api: str) -> bool:
    return model.api == api


def is_answered_snapshot(model: Model, answered_id: str) -> bool:
    """Whether ``answered_id`` is a dated snapshot the catalogue lists for the alias ``model.id``.

    Providers answer an alias with the id of the snapshot it currently points to, spelled
    differently (``claude-sonnet-4-0`` is answered as ``claude-sonnet-4-20250514``), so no
    rule on the spelling can tell; the catalogue's ``snapshots`` list does. The model's own
    provider is looked up first, then any catalogue provider of the same API (a proxy
    registered under another name serves the same ids).
    """
    catalogue = _load()
    entries = [catalogue[model.provider]] if model.provider in catalogue else []
    entries += [e for name, e in catalogue.items() if e.api == model.api and name != model.provider]
    for entry in entries:
        raw = entry.raw_models.get(model.id)
        if raw is not None:
            return answered_id in (raw.get("snapshots") or ())
    return False
