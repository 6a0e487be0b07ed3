"""Replies holding code points UTF-8 cannot encode (a lone surrogate, which a provider's JSON can carry as
``"\\udc80"``): the cassette, the cache and the ledger keep the paid call, and replays give back the very
same string (issue 34)."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
from conftest_models import FakeProvider, ProtocolServer, Reply, anthropic_body, make_request, openai_body

import latte_lab as ll
from latte_lab.models import (
    CachedModel,
    Cassette,
    CassetteModel,
    CostLedger,
    ModelResponse,
    RecordingModel,
    ResponseCache,
    ScriptedModel,
    Usage,
    import_cassettes,
    read_cassette,
)
from latte_lab.models.base import Message
from latte_lab.models.providers.anthropic import AnthropicModel
from latte_lab.models.providers.openai import OpenAIModel
from latte_lab.models.request_keys import canonical_json, key_and_parts, key_fields, key_from_fields, request_key
from latte_lab.trial import comparable_events, comparable_row, run_trial

ODD = "caf\udc80 \ud800end"  # two lone surrogates, low and high
PRICES = [ll.models.ledger.Price("openai", "gpt-4o", 2.5, 10.0, "test", "2026-01-01")]


def odd_request(**kw):
    request = make_request(text=f"question {ODD}", **kw)
    return dataclasses.replace(request, system=f"system {ODD}",
                               messages=[*request.messages, Message("assistant", ODD), Message("user", "go on")])


def odd_answer(text=ODD, model="gpt-4o"):
    return ModelResponse(text=text, usage=Usage(12, 3), latency_s=0.5, finish_reason="stop", model=model)


def test_keys_of_texts_with_lone_surrogates_are_the_same_whole_and_piece_by_piece():
    fields = key_fields(odd_request())
    key, _ = key_and_parts(fields)
    assert key == key_from_fields(fields) == request_key(odd_request())
    # texts UTF-8 encodes keep the key they always had
    plain = key_fields(make_request(text="héllo — 世界"))
    expected = hashlib.sha256(canonical_json({**plain, "schema": 1}).encode("utf-8")).hexdigest()
    assert key_from_fields(plain) == key_and_parts(plain)[0] == expected


def test_cassette_keeps_a_lone_surrogate_and_replays_it_byte_exact(tmp_path):
    request = odd_request()
    with Cassette(tmp_path / "calls.jsonl") as cassette:
        RecordingModel(ScriptedModel([ODD]), cassette).generate(request)
    raw = (tmp_path / "calls.jsonl").read_bytes()
    raw.decode("utf-8")  # strict UTF-8: any reader can read it
    [line] = read_cassette(tmp_path)
    assert line["response"]["text"] == ODD
    assert line["request"]["system"] == request.system
    assert line["request"]["messages"][1] == ["assistant", ODD]
    assert line["key"] == request_key(request)
    replayed = CassetteModel(tmp_path).generate(request)
    assert replayed.text == ODD and replayed.cached


@pytest.mark.parametrize("text", [ODD, "\udc80", "a\ud83d\ude00b plain 😀", "plain ascii"])
def test_cache_round_trips_any_code_points(tmp_path, text):
    request = odd_request()
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        assert cache.put(request, odd_answer(text, model=f"gpt-4o{ODD}"))
        assert request in cache
    with ResponseCache(tmp_path / "c.sqlite", read_only=True) as cache:
        hit = cache.get(request)
        assert hit.text == text and hit.model == f"gpt-4o{ODD}"
        other = dataclasses.replace(request, messages=request.messages[:1])
        assert "differs in: messages" in cache.explain_miss(other)


def test_cassettes_with_lone_surrogates_import_into_the_cache(tmp_path):
    with Cassette(tmp_path / "run" / "calls.jsonl") as cassette:
        RecordingModel(ScriptedModel([ODD]), cassette).generate(odd_request())
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        assert import_cassettes(tmp_path / "run", cache) == 1
        assert cache.get(odd_request()).text == ODD


def test_ledger_of_a_model_name_with_a_lone_surrogate_writes_utf8():
    ledger = CostLedger(PRICES)
    ledger.record("Dev1", 1, odd_answer(model=f"gpt-4o{ODD}"), provider="openai")
    text = ledger.to_csv()
    text.encode("utf-8")
    assert "gpt-4o" + ODD.encode("utf-8", "backslashreplace").decode() in text
    assert ledger.summary()["billed_input_tokens"] == 12


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_paid_reply_with_a_lone_surrogate_is_kept_everywhere_through_the_sdk(tmp_path, monkeypatch, provider):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-secret-0000000000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-not-secret-0000000000")
    server = FakeProvider().start()
    # the server's JSON carries the lone surrogate as an escape, as json.dumps writes it
    body = openai_body(ODD) if provider == "openai" else anthropic_body(ODD)
    server.queue(Reply(body=body), Reply(body=body))
    first = make_request(provider, "gpt-4o", text="q1")
    try:
        client = (OpenAIModel("gpt-4o", base_url=server.openai_url, max_retries=0) if provider == "openai"
                  else AnthropicModel("gpt-4o", base_url=server.url, max_retries=0))
        cache = ResponseCache(tmp_path / "c.sqlite")
        ledger = CostLedger(PRICES)
        with Cassette(tmp_path / "run" / "calls.jsonl") as cassette:
            model = RecordingModel(CachedModel(client, cache), cassette)
            a = model.generate(first)
            ledger.record("Dev1", 1, a, provider=provider)
            second = dataclasses.replace(first, messages=[*first.messages, Message("assistant", a.text),
                                                          Message("user", "q2")],
                                         scope=dataclasses.replace(first.scope, call_index=1))
            b = model.generate(second)
            ledger.record("Dev1", 2, b, provider=provider)
            assert a.text == b.text == ODD
            assert server.hits == 2  # one request per call
            # the second prompt repeats the reply: on the wire its lone surrogate is U+FFFD
            sent = server.requests[1]["body"]["messages"]
            assert any(m["content"] == "\ufffd".join(["caf", " ", "end"]) for m in sent)
            again = [model.generate(first), model.generate(second)]  # cache hits now, recorded as replayed
        assert server.hits == 2 and [r.text for r in again] == [ODD, ODD] and all(r.cached for r in again)
    finally:
        server.stop()
    assert len(cache) == 2
    calls = [r for r in read_cassette(tmp_path / "run") if r["type"] == "call"]
    assert [c["response"]["text"] for c in calls] == [ODD] * 4
    assert ledger.summary()["billed_calls"] == 2
    assert ledger.summary()["billed_input_tokens"] == 2 * (11 if provider == "openai" else 13)
    replay = CassetteModel(tmp_path / "run")
    assert replay.generate(first).text == ODD and replay.generate(second).text == ODD


class OddServer(ProtocolServer):
    """A LATTE team's server whose every reply ends with two lone surrogates."""

    def default_body(self, path, body):
        reply = super().default_body(path, body)
        reply["choices"][0]["message"]["content"] += f"\n{ODD}"
        return reply


def test_a_trial_whose_replies_hold_lone_surrogates_records_every_paid_call_and_replays(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-secret-0000000000")
    server = OddServer().start()
    cfg = dict(task="debug", team="latte", model="openai/test-model", seed=0, max_rounds=6, max_retries=0,
               base_url=server.openai_url, cache_path=str(tmp_path / "cache.sqlite"))
    try:
        res = run_trial(ll.TrialConfig(**cfg, runs_dir=str(tmp_path / "a")))
        assert res.status == "ok", res.error
        calls = server.hits
        again = run_trial(ll.TrialConfig(**cfg, cache="replay", runs_dir=str(tmp_path / "b")))
        assert again.status == "ok", again.error
        assert server.hits == calls  # every reply came back from the cache
    finally:
        server.stop()
    recorded = [r for r in read_cassette(res.run_dir) if r["type"] == "call"]
    assert len(recorded) == calls > 0
    assert all(r["response"]["text"].endswith(f"\n{ODD}") for r in recorded)
    ledger = (res.run_dir / "ledger.csv").read_text(encoding="utf-8").splitlines()
    assert len(ledger) == calls + 1
    assert res.row["billed_tokens"] == calls * (11 + 7)
    assert again.row["billed_tokens"] == 0 and again.row["replayed_tokens"] == res.row["total_tokens"]
    assert comparable_events(again.event_list) == comparable_events(res.event_list)
    assert comparable_row(again.row) == comparable_row(res.row)
    logged = [e for e in ll.rundir.read_jsonl(res.run_dir / "events.jsonl") if e["type"] == "agent_reply"]
    assert len(logged) == calls and all(e["text"].endswith(ODD) for e in logged)
