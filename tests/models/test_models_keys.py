"""API keys: .env loading without overriding the environment, missing-key errors, redaction."""

from __future__ import annotations

import pytest

from latte_lab.errors import MissingAPIKeyError
from latte_lab.models import keys
from latte_lab.models.keys import get_api_key, load_env, redact


@pytest.fixture
def fresh_env(monkeypatch):
    monkeypatch.setattr(keys, "_env_loaded", False)
    monkeypatch.setattr(keys, "_known_secrets", set())
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "LATTE_TEST_KEY"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_dotenv_is_found_upwards_and_does_not_override(tmp_path, fresh_env):
    (tmp_path / ".env").write_text("OPENAI_API_KEY=from-dotenv-0123456789\nANTHROPIC_API_KEY=dotenv-ant-0123456\n")
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    fresh_env.chdir(nested)
    fresh_env.setenv("ANTHROPIC_API_KEY", "from-environment-99")
    assert load_env() == str(tmp_path / ".env")
    assert get_api_key("OPENAI_API_KEY", provider="openai") == "from-dotenv-0123456789"
    assert get_api_key("ANTHROPIC_API_KEY", provider="anthropic") == "from-environment-99"


def test_missing_key_names_the_variable(tmp_path, fresh_env):
    fresh_env.chdir(tmp_path)
    with pytest.raises(MissingAPIKeyError, match="set OPENAI_API_KEY in the environment or in a .env file"):
        get_api_key("OPENAI_API_KEY", provider="openai")


def test_local_server_needs_no_key(tmp_path, fresh_env):
    fresh_env.chdir(tmp_path)
    assert get_api_key("OPENAI_API_KEY", provider="openai", base_url="http://127.0.0.1:8000/v1") == "not-needed"


def test_redact_masks_key_shapes_env_secrets_and_handed_out_keys(tmp_path, fresh_env):
    fresh_env.setenv("LATTE_TEST_KEY", "plainsecretvalue42")
    fresh_env.setenv("LATTE_TEST_FLAG_TOKEN", "1")  # too short to be a secret: left alone
    text = "a sk-proj-AbCdEfGhIjKlMnOpQrSt b sk-ant-api03-xyzxyzxyzxyzxyzxyz c plainsecretvalue42 d 1"
    assert redact(text) == "a [REDACTED] b [REDACTED] c [REDACTED] d 1"
    fresh_env.chdir(tmp_path)
    fresh_env.setenv("OPENAI_API_KEY", "unusual-shape-key-777")
    key = get_api_key("OPENAI_API_KEY", provider="openai")
    fresh_env.delenv("OPENAI_API_KEY")  # gone from the env, still masked because it was handed out
    assert redact(f"key={key}") == "key=[REDACTED]"
    assert redact("scikit sk-learn and ask-me") == "scikit sk-learn and ask-me"


def test_redact_sees_secrets_set_after_its_first_call(fresh_env):
    assert redact("a later-secret-value-1 b") == "a later-secret-value-1 b"
    fresh_env.setenv("LATTE_TEST_KEY", "later-secret-value-1")
    assert redact("a later-secret-value-1 b") == "a [REDACTED] b"
    fresh_env.setenv("LATTE_TEST_KEY", "changed-secret-value-2")
    assert redact("a later-secret-value-1 changed-secret-value-2") == "a later-secret-value-1 [REDACTED]"
    keys.register_secret("handed-out-key-3")
    assert redact("k handed-out-key-3") == "k [REDACTED]"
