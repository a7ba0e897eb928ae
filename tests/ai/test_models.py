"""Model catalogue, refs, cost and thinking levels (spec 1.3, 1.5; checklist 121, 126)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import messages

import pi_notebook.ai.models as models_module
from pi_notebook.ai.models import (UnknownModelError, calculate_cost, catalogue_date, clamp_thinking_level,
                                   get_model, get_models, get_providers, get_supported_thinking_levels,
                                   has_api, models_are_equal, parse_model_ref, register_models,
                                   suggest_model_ids, unregister_models)
from pi_notebook.ai.types import Model, ModelCost, ModelCostTier, Usage


def test_both_call_forms_give_the_same_model():
    a = get_model("anthropic", "claude-sonnet-4-5")
    b = get_model("anthropic/claude-sonnet-4-5")
    assert a == b
    assert a.api == "anthropic-messages" and a.base_url == "https://api.anthropic.com"
    assert a.reasoning and a.input == ["text", "image"]
    assert (a.cost.input, a.cost.output, a.cost.cache_read, a.cost.cache_write) == (3, 15, 0.3, 3.75)
    assert a.context_window == 1_000_000 and a.max_tokens == 64_000
    assert a.compat == {"supportsStrictTools": True}


def test_catalogue_facts_from_the_spec():
    mini = get_model("openai/gpt-4o-mini")
    assert mini.api == "openai-responses" and mini.base_url == "https://api.openai.com/v1"
    assert not mini.reasoning
    assert (mini.cost.input, mini.cost.output, mini.cost.cache_read, mini.cost.cache_write) == (0.15, 0.6, 0.075, 0)
    gpt54 = get_model("openai", "gpt-5.4")
    assert gpt54.cost.tiers and gpt54.cost.tiers[0].input_tokens_above == 272_000
    assert gpt54.thinking_level_map == {"off": "none", "minimal": None, "low": "low", "medium": "medium",
                                        "high": "high", "xhigh": "xhigh", "max": None}
    flash = get_model("google/gemini-2.5-flash")
    assert flash.api == "google-generative-ai"
    assert flash.base_url == "https://generativelanguage.googleapis.com/v1beta"
    assert flash.context_window == 1_048_576


@pytest.mark.parametrize("ref", [
    "openai/gpt-4o-mini", "openai/gpt-4.1", "openai/gpt-4.1-mini", "openai/gpt-5", "openai/gpt-5-mini",
    "anthropic/claude-opus-4-1", "anthropic/claude-haiku-4-5", "google/gemini-2.5-pro",
    "google/gemini-2.5-flash-lite", "groq/llama-3.3-70b-versatile", "xai/grok-4.3",
    "mistral/mistral-large-latest", "deepseek/deepseek-v4-flash", "openrouter/anthropic/claude-sonnet-4.5",
])
def test_listed_models_exist_with_sane_fields(ref):
    provider, model_id = parse_model_ref(ref)
    model = get_model(ref)
    assert (model.provider, model.id) == (provider, model_id)
    assert model in get_models(provider)
    assert model.context_window > 0 and model.max_tokens > 0 and model.base_url.startswith("https://")
    assert model.cost.input > 0 and model.cost.output > 0


@pytest.mark.parametrize("provider,url", [
    ("groq", "https://api.groq.com/openai/v1"), ("xai", "https://api.x.ai/v1"),
    ("mistral", "https://api.mistral.ai/v1"), ("deepseek", "https://api.deepseek.com"),
    ("openrouter", "https://openrouter.ai/api/v1"),
])
def test_compatible_providers_use_chat_completions(provider, url):
    models = get_models(provider)
    assert models and all(m.api == "openai-completions" and m.base_url == url for m in models)


def test_ids_with_slashes_split_on_the_first_slash_only():
    assert parse_model_ref("openrouter/anthropic/claude-sonnet-4.5") == ("openrouter", "anthropic/claude-sonnet-4.5")
    assert parse_model_ref(" OpenAI/gpt-4.1 ") == ("openai", "gpt-4.1")
    assert parse_model_ref("gpt-4.1") == (None, "gpt-4.1")
    model = get_model("openrouter/anthropic/claude-sonnet-4.5")
    assert model.provider == "openrouter" and model.id == "anthropic/claude-sonnet-4.5"


@pytest.mark.parametrize("provider,url", [
    ("ollama", "http://localhost:11434/v1"), ("llamacpp", "http://localhost:8080/v1"),
    ("vllm", "http://localhost:8000/v1"), ("lmstudio", "http://localhost:1234/v1"),
])
def test_local_providers_accept_any_id_at_zero_cost(provider, url):
    model = get_model(f"{provider}/qwen2.5-coder:0.5b-instruct")
    assert model.id == "qwen2.5-coder:0.5b-instruct" and model.provider == provider
    assert model.api == "openai-completions" and model.base_url == url
    assert model.compat == {"supportsDeveloperRole": False, "supportsReasoningEffort": False, "supportsStore": False}
    assert model.context_window > 0 and model.max_tokens > 0
    usage = Usage(input=1000, output=1000, total_tokens=2000)
    assert calculate_cost(model, usage).total == 0


def test_unknown_id_on_a_cloud_provider_is_usable():
    model = get_model("anthropic/claude-next-9")
    assert (model.id, model.provider, model.api) == ("claude-next-9", "anthropic", "anthropic-messages")
    assert model.base_url == "https://api.anthropic.com" and model.context_window > 0 and model.max_tokens > 0
    assert get_model("openrouter", "someone/new-model").api == "openai-completions"


def test_base_url_override():
    moved = get_model("anthropic/claude-haiku-4-5", base_url="http://proxy:8080")
    assert moved.base_url == "http://proxy:8080" and moved.api == "anthropic-messages"
    assert get_model("anthropic/claude-haiku-4-5").base_url == "https://api.anthropic.com"  # catalogue untouched
    custom = get_model("myserver", "llama-3-8b", base_url="http://gpu:9000/v1")
    assert (custom.provider, custom.api, custom.base_url) == ("myserver", "openai-completions", "http://gpu:9000/v1")
    bare = get_model("some-local-model", base_url="http://localhost:5000/v1")
    assert bare.provider == "openai-compatible" and bare.api == "openai-completions"
    assert get_model("ollama/llama3", base_url="http://box:11434/v1").base_url == "http://box:11434/v1"


def test_bare_known_id_is_found_across_providers():
    assert get_model("gpt-4o-mini").provider == "openai"
    assert get_model("claude-haiku-4-5").provider == "anthropic"


def test_unknown_provider_raises_keyerror_with_providers_and_suggestions():
    with pytest.raises(UnknownModelError) as info:
        get_model("antropic/claude-sonnet-4-5")
    err = info.value
    assert isinstance(err, KeyError)
    text = str(err)
    assert text.startswith("Unknown provider: antropic.") and "anthropic" in text and "ollama" in text
    assert err.suggestions == ["anthropic/claude-sonnet-4-5"]
    assert "anthropic/claude-sonnet-4-5" in text


def test_unknown_bare_id_and_missing_id_messages():
    with pytest.raises(UnknownModelError) as info:
        get_model("gpt-4o-mni")
    assert info.value.suggestions[0] == "openai/gpt-4o-mini"
    assert "Did you mean: openai/gpt-4o-mini" in str(info.value)
    with pytest.raises(UnknownModelError, match="Missing model id for provider ollama"):
        get_model("ollama")
    with pytest.raises(UnknownModelError, match="Missing model id"):
        get_model("openai/")


def test_suggest_model_ids():
    assert suggest_model_ids("anthropic/claude-sonet-4-5")[0] == "anthropic/claude-sonnet-4-5"
    assert suggest_model_ids("gemini-2.5-flsh")[0] == "google/gemini-2.5-flash"
    assert len(suggest_model_ids("gpt", n=2)) <= 2
    assert suggest_model_ids("zzzzzzzzzzzzzzzzzz") == []


def test_lookups_return_copies():
    model = get_model("openai/gpt-4.1")
    model.cost.input = 999
    model.compat["x"] = 1
    fresh = get_model("openai/gpt-4.1")
    assert fresh.cost.input == 2 and "x" not in (fresh.compat or {})


def test_register_and_unregister_runtime_models():
    faux = Model(id="faux-1", name="Faux", api="faux-api-123", provider="faux", reasoning=True)
    register_models("faux", [faux, Model(id="faux-2", api="faux-api-123", provider="faux")])
    try:
        assert "faux" in get_providers()
        got = get_model("faux/faux-1")
        assert got.api == "faux-api-123" and got.reasoning
        assert [m.id for m in get_models("faux")] == ["faux-1", "faux-2"]
        other = get_model("faux", "faux-unknown")  # borrows api/base_url from the registration
        assert other.api == "faux-api-123" and other.id == "faux-unknown"
        unregister_models("faux", ["faux-2"])
        assert [m.id for m in get_models("faux")] == ["faux-1"]
    finally:
        unregister_models("faux")
    assert "faux" not in get_providers()
    with pytest.raises(UnknownModelError):
        get_model("faux/faux-1")


def test_registration_overrides_a_catalogue_entry_of_the_same_id():
    register_models("ollama", [Model(id="tiny", api="openai-completions", provider="ollama",
                                     base_url="http://localhost:11434/v1", context_window=8192, max_tokens=512)])
    try:
        assert get_model("ollama/tiny").context_window == 8192
    finally:
        unregister_models("ollama")
    assert get_model("ollama/tiny").context_window == 32768


def test_catalogue_file_is_valid_and_dated():
    doc = json.loads((Path(models_module.__file__).parent / "data" / "models.json").read_text())
    assert "as of" in doc["about"] and doc["asOf"] == catalogue_date()
    for provider in doc["providers"]:
        for model in get_models(provider):
            assert isinstance(model, Model)


# --- cost ------------------------------------------------------------------------------------

def _model(**cost) -> Model:
    return messages.model(api="x", cost=ModelCost(**cost))


def test_cost_basic_and_total_identity():
    usage = Usage(input=1_000_000, output=500_000, cache_read=200_000, cache_write=100_000, total_tokens=1_800_000)
    cost = calculate_cost(_model(input=3, output=15, cache_read=0.3, cache_write=3.75), usage)
    assert cost is usage.cost
    assert cost.input == pytest.approx(3) and cost.output == pytest.approx(7.5)
    assert cost.cache_read == pytest.approx(0.06) and cost.cache_write == pytest.approx(0.375)
    assert cost.total == pytest.approx(3 + 7.5 + 0.06 + 0.375)


def test_anthropic_one_hour_cache_writes_cost_twice_the_input_rate():  # item 121
    model = _model(input=5, output=25, cache_read=0.5, cache_write=6.25)
    usage = Usage(cache_write=1_000_000, cache_write_1h=400_000)
    assert calculate_cost(model, usage).cache_write == pytest.approx(7.75)  # 0.6*6.25 + 0.4*10
    flat = Usage(cache_write=1_000_000)
    assert calculate_cost(model, flat).cache_write == pytest.approx(6.25)


def test_tiers_price_the_whole_request_with_the_highest_matching_threshold():
    model = _model(input=2.5, output=15, cache_read=0.25, tiers=[
        ModelCostTier(input_tokens_above=272_000, input=5, output=22.5, cache_read=0.5),
        ModelCostTier(input_tokens_above=100_000, input=4, output=20, cache_read=0.4),
    ])
    small = calculate_cost(model, Usage(input=100_000, output=1_000))
    assert small.input == pytest.approx(0.25) and small.output == pytest.approx(0.015)
    middle = calculate_cost(model, Usage(input=150_000, output=1_000))
    assert middle.input == pytest.approx(0.6)
    # input + cacheRead + cacheWrite decides; the tier prices every part
    big = calculate_cost(model, Usage(input=100_000, cache_read=200_000, output=1_000_000))
    assert big.input == pytest.approx(0.5) and big.cache_read == pytest.approx(0.1) and big.output == pytest.approx(22.5)
    gpt54 = get_model("openai/gpt-5.4")
    assert calculate_cost(gpt54, Usage(input=272_001)).input == pytest.approx(5 * 0.272001)
    assert calculate_cost(gpt54, Usage(input=272_000)).input == pytest.approx(2.5 * 0.272)


# --- thinking levels (item 126) ------------------------------------------------------------------

def test_non_reasoning_models_only_support_off():
    assert get_supported_thinking_levels(get_model("openai/gpt-4o-mini")) == ["off"]
    assert clamp_thinking_level(get_model("openai/gpt-4o-mini"), "high") == "off"


def test_xhigh_and_max_are_opt_in():
    plain = Model(id="r", api="x", provider="p", reasoning=True)
    assert get_supported_thinking_levels(plain) == ["off", "minimal", "low", "medium", "high"]
    assert clamp_thinking_level(plain, "max") == "high"
    assert clamp_thinking_level(plain, "xhigh") == "high"


def test_a_hole_at_xhigh_clamps_upwards_first():
    holed = Model(id="r", api="x", provider="p", reasoning=True, thinking_level_map={"xhigh": None, "max": "max"})
    assert get_supported_thinking_levels(holed) == ["off", "minimal", "low", "medium", "high", "max"]
    assert clamp_thinking_level(holed, "xhigh") == "max"


def test_catalogue_maps_clamp_like_pi():
    gpt54 = get_model("openai/gpt-5.4")
    assert get_supported_thinking_levels(gpt54) == ["off", "low", "medium", "high", "xhigh"]
    assert clamp_thinking_level(gpt54, "minimal") == "low"
    assert clamp_thinking_level(gpt54, "max") == "xhigh"
    gpt5 = get_model("openai/gpt-5")
    assert clamp_thinking_level(gpt5, "off") == "minimal"  # off: null -> nearest upwards
    assert clamp_thinking_level(gpt5, "bogus") == "minimal"


def test_models_are_equal_and_has_api():
    a, b = get_model("openai/gpt-4.1"), get_model("openai/gpt-4.1", base_url="http://x")
    assert models_are_equal(a, b)
    assert not models_are_equal(a, get_model("openai/gpt-4.1-mini"))
    assert not models_are_equal(a, None)
    assert has_api(a, "openai-responses") and not has_api(a, "openai-completions")
