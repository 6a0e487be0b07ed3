"""make_model and parse_model_spec: spec forms, cache wiring, replay without keys; one rule set shared
with TrialConfig."""

from __future__ import annotations

import pytest
from conftest_models import canary_keys_fixture, fake_server_fixture, make_request  # noqa: F401 - fixtures

from latte_lab.config import TrialConfig
from latte_lab.errors import CacheMissError, ConfigError, MissingAPIKeyError
from latte_lab.models import CachedModel, ResponseCache, SimulatedModel, make_model, parse_model_spec
from latte_lab.models.providers.anthropic import AnthropicModel
from latte_lab.models.providers.openai import OpenAIModel
from latte_lab.models.ratelimit import RateLimitedModel


@pytest.mark.parametrize(
    ("spec", "base_url", "expected"),
    [
        ("openai/gpt-4o", None, ("openai", "gpt-4o")),
        ("anthropic/claude-sonnet-4-5", None, ("anthropic", "claude-sonnet-4-5")),
        ("simulated", None, ("simulated", "default")),
        ("simulated/fast", None, ("simulated", "fast")),
        ("llama3.1:8b", "http://127.0.0.1:11434/v1", ("openai", "llama3.1:8b")),
        ("meta-llama/Llama-3-8B", "http://127.0.0.1:8000/v1", ("openai", "meta-llama/Llama-3-8B")),
        ("anthropic/claude-x", "http://127.0.0.1:8000", ("anthropic", "claude-x")),  # a proxy
        ("scripted", None, ("scripted", "scripted")),
        (" openai/gpt-4o ", None, ("openai", "gpt-4o")),
    ],
)
def test_parse_model_spec(spec, base_url, expected):
    assert parse_model_spec(spec, base_url=base_url) == expected


@pytest.mark.parametrize("spec", ["gpt-4o", "google/gemini", "openai/", "", "replay", "simulatedx"])
def test_unknown_specs_list_the_accepted_forms(spec):
    with pytest.raises(ConfigError, match="accepted forms: simulated; .*openai/<model>"):
        parse_model_spec(spec)


@pytest.mark.parametrize(
    ("spec", "base_url"),
    [("openai/gpt-4o", None), ("anthropic/claude-x", "http://proxy:8080"), ("llama3.1:8b", "http://h:11434/v1"),
     ("simulated/fast", None), ("scripted", None), ("gpt-4o", None), ("google/gemini", None), ("openai/", None),
     ("simulated", "http://h:1/v1"), ("scripted", "http://h:1/v1"), ("   ", None)],
)
def test_trial_config_and_make_model_follow_the_same_rules(spec, base_url):
    try:
        parse_model_spec(spec, base_url=base_url)
        accepted = True
    except ConfigError:
        accepted = False
    try:
        TrialConfig(task="debug", model=spec, base_url=base_url)
        config_accepts = True
    except ConfigError as exc:
        config_accepts = False
        assert str(exc).startswith("invalid TrialConfig: model: ")
    assert config_accepts == accepted


def test_base_url_with_a_local_model_is_refused_with_a_reason():
    with pytest.raises(ConfigError, match="runs locally; drop base_url"):
        make_model("simulated", base_url="http://127.0.0.1:8000/v1")


def test_scripted_is_a_label_not_a_buildable_spec():
    with pytest.raises(ConfigError, match=r"construct ScriptedModel\(replies\) and pass it to run_trial"):
        make_model("scripted")


def test_make_model_builds_cached_provider_clients(canary_keys, tmp_path):
    model = make_model("openai/gpt-4o", cache=tmp_path / "c.sqlite", max_retries=5, timeout_s=30)
    assert isinstance(model, CachedModel) and isinstance(model.inner, RateLimitedModel)  # paced inside the cache
    client = model.inner.inner
    assert isinstance(client, OpenAIModel)
    assert (client.max_retries, client.timeout_s, model.provider, model.model) == (5, 30, "openai", "gpt-4o")
    plain = make_model("anthropic/claude-x", cache_mode="off", send_temperature=False)
    assert isinstance(plain.inner, AnthropicModel) and plain.inner.send_temperature is False


def test_missing_key_is_reported_at_construction(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setattr("latte_lab.models.keys._env_loaded", True)
    with pytest.raises(MissingAPIKeyError, match="ANTHROPIC_API_KEY"):
        make_model("anthropic/claude-x", cache=tmp_path / "c.sqlite")


def test_replay_mode_needs_no_key_and_no_network(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr("latte_lab.models.keys._env_loaded", True)
    model = make_model("openai/gpt-4o", cache=tmp_path / "c.sqlite", cache_mode="replay")
    assert model.inner is None and model.model == "gpt-4o"
    with pytest.raises(CacheMissError, match="no stored request for this scope"):
        model.generate(make_request())


def test_cache_hit_through_make_model_skips_the_server(fake_server, canary_keys, tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    model = make_model("openai/gpt-4o", base_url=fake_server.openai_url, cache=cache)
    request = make_request(base_url=fake_server.openai_url)
    assert model.generate(request).cached is False
    assert model.generate(request).cached is True
    assert fake_server.hits == 1


def test_bad_arguments(tmp_path):
    with pytest.raises(ConfigError, match="unknown cache mode"):
        make_model("openai/gpt-4o", cache_mode="maybe")
    with pytest.raises(ConfigError, match="max_retries"):
        make_model("openai/gpt-4o", max_retries=-1)


def test_simulated_spec_builds_the_simulated_model(tmp_path):
    model = make_model("simulated/careful")
    assert isinstance(model, SimulatedModel) and model.profile.name == "careful"
    cached = make_model("simulated", cache=tmp_path / "c.sqlite")  # cached only when a cache is given
    assert isinstance(cached, CachedModel) and isinstance(cached.inner, SimulatedModel)
    with pytest.raises(ConfigError, match="unknown simulated profile 'genius'; known profiles: calibrated, careful, default, fast"):
        make_model("simulated/genius")


def test_defaults_have_one_home():
    import inspect

    from latte_lab import config
    from latte_lab.models import base, cache
    from latte_lab.models.providers import anthropic, openai

    with pytest.raises(ConfigError, match="use one of " + ", ".join(config.CACHE_MODES)):
        cache.CachedModel(None, None, "bogus")  # the rule is config's, not a copy
    assert TrialConfig.model_fields["cache"].annotation is config.CacheMode
    params = inspect.signature(make_model).parameters
    assert (params["cache_mode"].default, params["max_retries"].default, params["timeout_s"].default) == (
        config.DEFAULT_CACHE_MODE, config.DEFAULT_MAX_RETRIES, config.DEFAULT_TIMEOUT_S)
    for client in (openai.OpenAIModel, anthropic.AnthropicModel):
        params = inspect.signature(client).parameters
        assert (params["max_retries"].default, params["timeout_s"].default) == (
            config.DEFAULT_MAX_RETRIES, config.DEFAULT_TIMEOUT_S)
    fields = TrialConfig.model_fields
    assert (fields["temperature"].default, fields["max_tokens"].default, fields["max_retries"].default,
            fields["timeout_s"].default) == (base.DEFAULT_TEMPERATURE, base.DEFAULT_MAX_TOKENS,
                                             config.DEFAULT_MAX_RETRIES, config.DEFAULT_TIMEOUT_S)
