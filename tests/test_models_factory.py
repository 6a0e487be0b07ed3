"""make_model and parse_model_spec: spec forms, cache wiring, replay without keys."""

from __future__ import annotations

import sys

import pytest
from conftest_models import canary_keys_fixture, fake_server_fixture, make_request  # noqa: F401 - fixtures

from latte_lab.errors import CacheMissError, ConfigError, MissingAPIKeyError
from latte_lab.models import CachedModel, ResponseCache, make_model, parse_model_spec
from latte_lab.models.anthropic_client import AnthropicModel
from latte_lab.models.openai_client import OpenAIModel


@pytest.mark.parametrize(
    ("spec", "base_url", "expected"),
    [
        ("openai/gpt-4o", None, ("openai", "gpt-4o")),
        ("anthropic/claude-sonnet-4-5", None, ("anthropic", "claude-sonnet-4-5")),
        ("simulated", None, ("simulated", "default")),
        ("simulated/fast", None, ("simulated", "fast")),
        ("llama3.1:8b", "http://127.0.0.1:11434/v1", ("openai", "llama3.1:8b")),
        ("meta-llama/Llama-3-8B", "http://127.0.0.1:8000/v1", ("openai", "meta-llama/Llama-3-8B")),
    ],
)
def test_parse_model_spec(spec, base_url, expected):
    assert parse_model_spec(spec, base_url=base_url) == expected


@pytest.mark.parametrize("spec", ["gpt-4o", "google/gemini", "openai/", "", "scripted"])
def test_unknown_specs_list_the_accepted_forms(spec):
    with pytest.raises(ConfigError) as info:
        parse_model_spec(spec)
    message = str(info.value)
    assert "ScriptedModel" in message if spec == "scripted" else "openai/<model>" in message


def test_make_model_builds_cached_provider_clients(canary_keys, tmp_path):
    model = make_model("openai/gpt-4o", cache=tmp_path / "c.sqlite", max_retries=5, timeout_s=30)
    assert isinstance(model, CachedModel) and isinstance(model.inner, OpenAIModel)
    assert (model.inner.max_retries, model.inner.timeout_s, model.provider, model.model) == (5, 30, "openai", "gpt-4o")
    plain = make_model("anthropic/claude-x", cache_mode="off", send_temperature=False)
    assert isinstance(plain, AnthropicModel) and plain.send_temperature is False


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


def test_simulated_unavailable_is_a_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "latte_lab.models.simulated", None)  # import fails
    with pytest.raises(ConfigError, match="simulated model is unavailable"):
        make_model("simulated")


def test_simulated_spec_builds_the_simulated_model(tmp_path):
    simulated = pytest.importorskip("latte_lab.models.simulated", reason="the simulated model is not in this tree")
    model = make_model("simulated/default")
    assert isinstance(model, simulated.SimulatedModel)
    cached = make_model("simulated", cache=tmp_path / "c.sqlite")  # cached only when a cache is given
    assert isinstance(cached, CachedModel) and isinstance(cached.inner, simulated.SimulatedModel)
