"""Keys go only where they belong (issue 34): OPENAI_API_KEY only to api.openai.com, ANTHROPIC_API_KEY only to
api.anthropic.com; a server named by base_url (or by the SDKs' OPENAI_BASE_URL / ANTHROPIC_BASE_URL) gets
LATTE_BASE_URL_API_KEY or a placeholder. The local server records the headers it receives."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
from conftest_models import FakeProvider, ProtocolServer, Reply, fake_server_fixture, make_request  # noqa: F401 - fixture

import latte_lab as ll
from latte_lab.errors import AuthenticationError, MissingAPIKeyError
from latte_lab.models import keys, make_model
from latte_lab.models.keys import LOCAL_SERVER_KEY, get_api_key
from latte_lab.models.providers.anthropic import AnthropicModel
from latte_lab.models.providers.openai import OpenAIModel
from latte_lab.trial import run_trial

BASE_URL_KEY_ENV = "LATTE_BASE_URL_API_KEY"  # the documented name users set


@pytest.fixture
def planted(monkeypatch):
    """Canary provider keys in the environment, no base-URL key, no .env and no SDK base URL variables."""
    monkeypatch.setattr(keys, "_env_loaded", True)  # no .env from the checkout
    for name in (BASE_URL_KEY_ENV, "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    canaries = {"openai": f"sk-canary{uuid.uuid4().hex}", "anthropic": f"canary-{uuid.uuid4().hex}"}
    monkeypatch.setenv("OPENAI_API_KEY", canaries["openai"])
    monkeypatch.setenv("ANTHROPIC_API_KEY", canaries["anthropic"])
    return canaries


def sent_keys(server) -> list[str]:
    """The key each request carried (Authorization bearer or x-api-key)."""
    out = []
    for request in server.requests:
        headers = request["headers"]
        out.append(headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer "))
    return out


def every_header_value(server) -> str:
    return "\n".join(v for r in server.requests for v in r["headers"].values())


def client(provider, server, **kw):
    if provider == "openai":
        return OpenAIModel("gpt-4o", base_url=server.openai_url, max_retries=0, **kw)
    return AnthropicModel("claude-test", base_url=server.url, max_retries=0, **kw)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_base_url_server_never_gets_the_provider_key(fake_server, planted, provider):
    client(provider, fake_server).generate(make_request(provider, "m"))
    assert sent_keys(fake_server) == [LOCAL_SERVER_KEY]
    assert planted[provider] not in every_header_value(fake_server)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_base_url_server_gets_latte_base_url_api_key(fake_server, planted, monkeypatch, provider):
    server_key = f"server-key-{uuid.uuid4().hex}"
    monkeypatch.setenv(BASE_URL_KEY_ENV, server_key)
    client(provider, fake_server).generate(make_request(provider, "m"))
    assert sent_keys(fake_server) == [server_key]
    assert planted[provider] not in every_header_value(fake_server)


@pytest.mark.parametrize(("provider", "variable"), [("openai", "OPENAI_BASE_URL"),
                                                    ("anthropic", "ANTHROPIC_BASE_URL")])
def test_the_sdks_base_url_variables_are_base_urls_too(fake_server, planted, monkeypatch, provider, variable):
    monkeypatch.setenv(variable, fake_server.openai_url if provider == "openai" else fake_server.url)
    model = OpenAIModel("gpt-4o", max_retries=0) if provider == "openai" else AnthropicModel("c", max_retries=0)
    model.generate(make_request(provider, "m"))
    assert sent_keys(fake_server) == [LOCAL_SERVER_KEY]
    assert planted[provider] not in every_header_value(fake_server)


def test_make_model_with_base_url_sends_no_provider_key(fake_server, planted, tmp_path):
    model = make_model("openai/gpt-4o", base_url=fake_server.openai_url, cache=tmp_path / "c.sqlite")
    model.generate(make_request(base_url=fake_server.openai_url))
    assert sent_keys(fake_server) == [LOCAL_SERVER_KEY]


@pytest.mark.parametrize(("provider", "url", "expected_host"), [
    ("openai", None, "api.openai.com"),
    ("openai", "https://api.openai.com/v1", "api.openai.com"),
    ("anthropic", None, "api.anthropic.com"),
    ("anthropic", "https://api.anthropic.com", "api.anthropic.com"),
])
def test_the_providers_own_api_gets_its_key(planted, provider, url, expected_host):
    cls = OpenAIModel if provider == "openai" else AnthropicModel
    model = cls("m", base_url=url)  # built only: no call leaves the machine
    assert model._client.base_url.host == expected_host
    assert model._client.api_key == planted[provider]


@pytest.mark.parametrize("url", ["https://api.openai.com.example.org/v1", "http://api.openai.com/v1",
                                 "https://api.openai.com:8443/v1", "https://api.anthropic.com"])
def test_lookalike_hosts_and_plain_http_are_not_openai(planted, url):
    assert get_api_key("OPENAI_API_KEY", provider="openai", base_url=url) == LOCAL_SERVER_KEY


def test_missing_provider_key_is_still_an_error_for_the_providers_api(planted, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(MissingAPIKeyError, match="set OPENAI_API_KEY"):
        OpenAIModel("gpt-4o")
    assert get_api_key("OPENAI_API_KEY", provider="openai", base_url="http://127.0.0.1:9/v1") == LOCAL_SERVER_KEY


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_refused_key_at_a_base_url_names_latte_base_url_api_key(fake_server, planted, monkeypatch, provider):
    server_key = f"server-key-{uuid.uuid4().hex}"
    monkeypatch.setenv(BASE_URL_KEY_ENV, server_key)
    fake_server.queue(Reply(status=401, body={"error": {"message": f"bad key {server_key}", "type": "x"}}))
    with pytest.raises(AuthenticationError) as info:
        client(provider, fake_server).generate(make_request(provider, "m"))
    message = str(info.value)
    assert "\n" not in message and server_key not in message and "[REDACTED]" in message
    assert f"Check {BASE_URL_KEY_ENV}" in message


def test_a_trial_at_a_base_url_keeps_every_key_out_of_the_server_logs_run_and_cache(tmp_path, planted,
                                                                                   monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    server_key = f"server-key-{uuid.uuid4().hex}"
    monkeypatch.setenv(BASE_URL_KEY_ENV, server_key)
    server = ProtocolServer().start()
    try:
        res = run_trial(ll.TrialConfig(task="debug", model="openai/test-model", base_url=server.openai_url,
                                       max_rounds=4, max_retries=0, cache_path=str(tmp_path / "cache.sqlite"),
                                       runs_dir=str(tmp_path / "runs")))
    finally:
        server.stop()
    assert res.status == "ok", res.error
    assert server.hits > 0 and set(sent_keys(server)) == {server_key}
    assert planted["openai"] not in every_header_value(server)
    secrets = [*planted.values(), server_key]
    for path in Path(tmp_path).rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not [s for s in secrets if s.encode() in data], path
    assert not [s for s in secrets if s in caplog.text]
