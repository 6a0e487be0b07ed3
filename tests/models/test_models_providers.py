"""The OpenAI and Anthropic clients, driven through the real SDKs against a local fake server."""

from __future__ import annotations

import logging
import socket

import pytest
from conftest_models import (  # noqa: F401 - fixtures
    Reply,
    anthropic_body,
    canary_keys_fixture,
    fake_server_fixture,
    make_request,
    openai_body,
)

from latte_lab.errors import (
    AuthenticationError,
    ContextLengthError,
    ModelError,
    ModelResponseError,
    ModelTimeoutError,
    RateLimitError,
)
from latte_lab.models import CachedModel, Cassette, RecordingModel, ResponseCache, make_model
from latte_lab.models.providers.anthropic import AnthropicModel
from latte_lab.models.providers.openai import OpenAIModel, accepts_temperature, uses_max_completion_tokens

FAST_RETRY = {"retry-after-ms": "20"}  # keeps retry tests quick while still going through the SDK's wait


def openai_model(server, model="gpt-4o", **kw):
    kw.setdefault("max_retries", 2)
    kw.setdefault("timeout_s", 10.0)
    return OpenAIModel(model, base_url=server.openai_url, **kw)


def anthropic_model(server, model="claude-test", **kw):
    kw.setdefault("max_retries", 2)
    kw.setdefault("timeout_s", 10.0)
    return AnthropicModel(model, base_url=server.url, **kw)


# -- round trips ----------------------------------------------------------------------------------------
def test_openai_round_trip_with_usage(fake_server, canary_keys):
    response = openai_model(fake_server).generate(make_request(text="hello there"))
    assert response.text == "reply to: hello there"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 7)
    assert response.cached is False and response.finish_reason == "stop"
    assert response.latency_s > 0
    [req] = fake_server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == "Bearer not-needed"  # OPENAI_API_KEY goes to api.openai.com only
    body = req["body"]
    assert body["messages"][0] == {"role": "system", "content": "You are a test agent."}
    assert body["messages"][1] == {"role": "user", "content": "hello there"}
    assert body["temperature"] == 0.7 and body["max_tokens"] == 4096
    assert "max_completion_tokens" not in body


def test_anthropic_round_trip_concatenates_text_blocks(fake_server, canary_keys):
    fake_server.queue(Reply(body=anthropic_body(["first ", "second"], usage=(21, 4))))
    response = anthropic_model(fake_server).generate(make_request("anthropic", "claude-test", stop=("END",)))
    assert response.text == "first second"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (21, 4)
    assert response.finish_reason == "stop" and response.cached is False
    [req] = fake_server.requests
    assert req["path"] == "/v1/messages"
    # Older SDKs send the key as x-api-key, anthropic 2.x as a bearer token; ANTHROPIC_API_KEY goes to
    # api.anthropic.com only
    sent = req["headers"].get("x-api-key") or req["headers"]["authorization"].removeprefix("Bearer ")
    assert sent == "not-needed"
    body = req["body"]
    assert body["system"] == "You are a test agent."
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert "top_p" not in body
    assert body["temperature"] == 0.7 and body["max_tokens"] == 4096
    assert body["stop_sequences"] == ["END"]


@pytest.mark.parametrize(("stop", "finish"), [("max_tokens", "length"), ("refusal", "refusal"),
                                              ("stop_sequence", "stop")])
def test_anthropic_stop_reasons(fake_server, canary_keys, stop, finish):
    fake_server.queue(Reply(body=anthropic_body("partial", stop=stop)))
    assert anthropic_model(fake_server).generate(make_request("anthropic", "c")).finish_reason == finish


def test_anthropic_sampling_parameters_on_the_wire(fake_server, canary_keys):
    anthropic_model(fake_server).generate(make_request("anthropic", "c", top_p=0.9))
    anthropic_model(fake_server, send_temperature=False).generate(make_request("anthropic", "c"))
    first, second = (r["body"] for r in fake_server.requests)
    assert first["temperature"] == 0.7 and first["top_p"] == 0.9
    assert "temperature" not in second and "top_p" not in second


def test_openai_truncation_is_reported_not_raised(fake_server, canary_keys):
    fake_server.queue(Reply(body=openai_body("cut sho", finish="length")))
    response = openai_model(fake_server).generate(make_request())
    assert response.finish_reason == "length" and response.text == "cut sho"


@pytest.mark.parametrize(
    ("model", "limit_name", "has_temperature"),
    [
        ("gpt-4o", "max_tokens", True),
        ("gpt-4.1-mini", "max_tokens", True),
        ("o1", "max_completion_tokens", False),
        ("o3-mini", "max_completion_tokens", False),
        ("o4-mini", "max_completion_tokens", False),
        ("gpt-5", "max_completion_tokens", False),
        ("gpt-5.2", "max_completion_tokens", True),
    ],
)
def test_token_limit_parameter_name_per_family(fake_server, canary_keys, model, limit_name, has_temperature):
    openai_model(fake_server, model).generate(make_request(model=model, max_tokens=321))
    body = fake_server.requests[-1]["body"]
    assert body[limit_name] == 321
    other = {"max_tokens", "max_completion_tokens"} - {limit_name}
    assert not other & set(body)
    assert ("temperature" in body) is has_temperature
    assert uses_max_completion_tokens(model) is (limit_name == "max_completion_tokens")
    assert accepts_temperature(model) is has_temperature


# -- retries --------------------------------------------------------------------------------------------
def test_429_with_retry_after_is_retried_after_waiting(fake_server, canary_keys):
    fake_server.queue(Reply(status=429, body={"error": {"message": "slow down"}}, headers={"retry-after-ms": "250"}))
    response = openai_model(fake_server).generate(make_request())
    assert response.text == "reply to: hello"
    assert fake_server.hits == 2
    waited = fake_server.requests[1]["time"] - fake_server.requests[0]["time"]
    assert waited >= 0.24


def test_anthropic_429_with_retry_after_seconds(fake_server, canary_keys):
    fake_server.queue(Reply(status=429, body={"type": "error", "error": {"type": "rate_limit_error",
                                                                         "message": "slow"}},
                            headers={"retry-after": "0.2"}))
    assert anthropic_model(fake_server).generate(make_request("anthropic", "c")).text == "reply to: hello"
    assert fake_server.hits == 2
    assert fake_server.requests[1]["time"] - fake_server.requests[0]["time"] >= 0.19


def test_500_then_success(fake_server, canary_keys):
    fake_server.queue(Reply(status=500, body={"error": {"message": "boom"}}, headers=FAST_RETRY))
    assert openai_model(fake_server).generate(make_request()).text == "reply to: hello"
    assert fake_server.hits == 2


def test_persistent_429_raises_rate_limit_error(fake_server, canary_keys):
    fake_server.queue(*[Reply(status=429, body={"error": {"message": "no"}}, headers=FAST_RETRY)] * 3)
    with pytest.raises(RateLimitError, match="still rate limited after 1 retries; lower concurrency or wait"):
        openai_model(fake_server, max_retries=1).generate(make_request())
    assert fake_server.hits == 2


def test_persistent_500_raises_model_error(fake_server, canary_keys):
    fake_server.queue(*[Reply(status=503, body={"error": {"message": "down"}}, headers=FAST_RETRY)] * 2)
    with pytest.raises(ModelError, match="server error HTTP 503 after 1 retries"):
        openai_model(fake_server, max_retries=1).generate(make_request())


# -- errors that must not be retried ---------------------------------------------------------------------
def _echo_key_401(key: str) -> Reply:
    # Real providers quote (part of) the key back; the echo checks that redaction catches it.
    return Reply(status=401, body={"error": {"message": f"Incorrect API key provided: {key}",
                                             "type": "invalid_request_error", "code": "invalid_api_key"}})


def test_401_is_not_retried_and_names_the_variable(fake_server, canary_keys):
    fake_server.queue(_echo_key_401(canary_keys["openai"]))
    with pytest.raises(AuthenticationError) as info:
        openai_model(fake_server).generate(make_request())
    assert fake_server.hits == 1
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "refused the API key" in message
    assert canary_keys["openai"] not in message and "[REDACTED]" in message


def test_anthropic_403_is_authentication_error(fake_server, canary_keys):
    fake_server.queue(Reply(status=403, body={"type": "error", "error": {
        "type": "permission_error", "message": f"key {canary_keys['anthropic']} lacks access"}}))
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY") as info:
        anthropic_model(fake_server).generate(make_request("anthropic", "c"))
    assert fake_server.hits == 1
    assert canary_keys["anthropic"] not in str(info.value)


def test_openai_context_length_error(fake_server, canary_keys):
    fake_server.queue(Reply(status=400, body={"error": {
        "message": "This model's maximum context length is 128000 tokens.", "type": "invalid_request_error",
        "code": "context_length_exceeded"}}))
    with pytest.raises(ContextLengthError, match="context window"):
        openai_model(fake_server).generate(make_request())
    assert fake_server.hits == 1


def test_anthropic_prompt_too_long(fake_server, canary_keys):
    fake_server.queue(Reply(status=400, body={"type": "error", "error": {
        "type": "invalid_request_error", "message": "prompt is too long: 250000 tokens > 200000 maximum"}}))
    with pytest.raises(ContextLengthError):
        anthropic_model(fake_server).generate(make_request("anthropic", "c"))
    assert fake_server.hits == 1


def test_other_400_is_plain_model_error(fake_server, canary_keys):
    fake_server.queue(Reply(status=400, body={"error": {"message": "bad temperature"}}))
    with pytest.raises(ModelError, match="HTTP 400") as info:
        openai_model(fake_server).generate(make_request())
    assert not isinstance(info.value, ContextLengthError)


def test_timeout(fake_server, canary_keys):
    fake_server.queue(Reply(delay_s=1.5))
    with pytest.raises(ModelTimeoutError, match="no answer within 0.3 s"):
        openai_model(fake_server, max_retries=0, timeout_s=0.3).generate(make_request())
    assert fake_server.hits == 1


def test_anthropic_timeout(fake_server, canary_keys):
    fake_server.queue(Reply(delay_s=1.5))
    with pytest.raises(ModelTimeoutError):
        anthropic_model(fake_server, max_retries=0, timeout_s=0.3).generate(make_request("anthropic", "c"))


@pytest.mark.parametrize("make", [openai_model, anthropic_model])
def test_malformed_json_is_response_error_and_not_cached(fake_server, canary_keys, tmp_path, make):
    fake_server.queue(Reply(body=b"{this is not json"))
    cache = ResponseCache(tmp_path / "c.sqlite")
    model = CachedModel(make(fake_server), cache)
    provider = "anthropic" if make is anthropic_model else "openai"
    with pytest.raises(ModelResponseError):
        model.generate(make_request(provider, "m"))
    assert len(cache) == 0


def test_unexpected_body_shape_is_response_error(fake_server, canary_keys):
    fake_server.queue(Reply(body={"unexpected": True}))
    with pytest.raises(ModelResponseError, match="no choices"):
        openai_model(fake_server).generate(make_request())


def test_none_content_is_response_error_not_crash(fake_server, canary_keys):
    body = openai_body("x")
    body["choices"][0]["message"]["content"] = None
    fake_server.queue(Reply(body=body))
    with pytest.raises(ModelResponseError, match="no text content"):
        openai_model(fake_server).generate(make_request())


def test_openai_refusal_field(fake_server, canary_keys):
    body = openai_body("x")
    body["choices"][0]["message"].update(content=None, refusal="I can't help with that.")
    fake_server.queue(Reply(body=body))
    response = openai_model(fake_server).generate(make_request())
    assert response.finish_reason == "refusal" and response.text == "I can't help with that."


def test_connection_refused_names_base_url(canary_keys):
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ModelError, match=f"could not connect to {url}"):
        OpenAIModel("gpt-4o", base_url=url, max_retries=0, timeout_s=5).generate(make_request())


def test_failed_calls_are_not_cached(fake_server, canary_keys, tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    model = CachedModel(openai_model(fake_server, max_retries=0), cache)
    fake_server.queue(Reply(status=500, body={"error": {"message": "x"}}),
                      Reply(body=openai_body("truncated", finish="length")),
                      Reply(body=openai_body("fine")))
    with pytest.raises(ModelError):
        model.generate(make_request())
    assert model.generate(make_request()).finish_reason == "length"
    assert len(cache) == 0
    assert model.generate(make_request()).text == "fine"
    assert len(cache) == 1
    hit = model.generate(make_request())
    assert hit.cached and hit.text == "fine" and fake_server.hits == 3


# -- secrets --------------------------------------------------------------------------------------------
def test_canary_keys_never_reach_cache_cassette_or_logs(fake_server, canary_keys, tmp_path, caplog, capsys):
    caplog.set_level(logging.DEBUG)  # the SDKs and the cache log request details at DEBUG
    db = tmp_path / "c.sqlite"
    cache = ResponseCache(db)
    cassette = Cassette(tmp_path / "run" / "calls.jsonl")
    errors = []
    for provider, make in (("openai", openai_model), ("anthropic", anthropic_model)):
        model = RecordingModel(CachedModel(make(fake_server, max_retries=0), cache), cassette)
        model.generate(make_request(provider, "m", text="ok"))
        fake_server.queue(_echo_key_401(canary_keys[provider]))
        with pytest.raises(AuthenticationError) as info:
            model.generate(make_request(provider, "m", text="fails"))
        errors.append(str(info.value))
        logging.getLogger("latte_lab.test").error("call failed: %s", info.value)
        print(info.value)
    cassette.close()
    cache.close()
    out = capsys.readouterr()
    blobs = {
        "cache file": db.read_bytes().decode("latin-1"),
        "cache wal": "".join(p.read_bytes().decode("latin-1") for p in tmp_path.glob("c.sqlite-*")),
        "cassette": cassette.path.read_text(),
        "log": caplog.text,
        "stdout": out.out + out.err,
        "errors": "\n".join(errors),
    }
    assert "[REDACTED]" in blobs["cassette"]  # the error lines quoted the (masked) key
    for name, blob in blobs.items():
        for key in canary_keys.values():
            assert key not in blob, f"API key leaked into the {name}"


def test_make_model_openai_compatible_server_without_key(fake_server, monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr("latte_lab.models.keys._env_loaded", True)
    model = make_model("llama3.1:8b", base_url=fake_server.openai_url, cache=tmp_path / "c.sqlite")
    response = model.generate(make_request(model="llama3.1:8b", base_url=fake_server.openai_url))
    assert response.text == "reply to: hello"
    assert fake_server.requests[0]["headers"]["authorization"] == "Bearer not-needed"
    assert fake_server.requests[0]["body"]["model"] == "llama3.1:8b"
