"""A whole trial through the real OpenAI and Anthropic SDKs against the provider emulator
(latte_lab.models.emulator, started here on a loopback port): the response cache fills, a second run in
replay mode makes zero calls, the tokens and dollars are the emulator's, and no key leaks anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import latte_lab as ll
from latte_lab.models.emulator import Emulator, summary
from latte_lab.trial import comparable_events, comparable_row, run_trial


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_trial_through_the_sdks_caches_replays_and_keeps_keys_out(tmp_path, monkeypatch, provider):
    canary = "sk-canary-trial-7f3e9b1c2d4a"
    monkeypatch.setenv("OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY", canary)
    monkeypatch.setenv("LATTE_BASE_URL_API_KEY", canary + "-base-url")  # the key a base_url server is sent
    # reached through ANTHROPIC_BASE_URL, the emulator counts as the Anthropic API: not at its tier-1 limits here
    monkeypatch.setenv("LATTE_LAB_RATE_LIMITS", "anthropic=-/-")
    cache_path = tmp_path / "cache.sqlite"
    model = "gpt-4o-mini" if provider == "openai" else "claude-haiku-4-5"
    with Emulator(log_path=tmp_path / "emulator.jsonl") as emu:
        if provider == "anthropic":  # the Anthropic SDK's base URL comes from the environment
            monkeypatch.setenv("ANTHROPIC_BASE_URL", emu.url)
        cfg = dict(task="debug", team="latte", model=f"{provider}/{model}", seed=0, max_rounds=3,
                   cache_path=str(cache_path), base_url=emu.openai_url if provider == "openai" else None)
        res = run_trial(ll.TrialConfig(**cfg, runs_dir=str(tmp_path / "a")))
        billed = summary(emu.entries())
        assert res.status == "ok", res.error
        replies = [e for e in res.event_list if e["type"] == "agent_reply"]
        assert billed["requests"] == billed["billed_calls"] == len(replies) > 0
        assert res.row["total_tokens"] == billed["tokens"]  # usage taken from the responses
        assert res.row["dollars"] == pytest.approx(billed["dollars"], abs=1e-12) and billed["dollars"] > 0

        again = run_trial(ll.TrialConfig(**cfg, cache="replay", runs_dir=str(tmp_path / "b")))
        assert again.status == "ok", again.error
        assert summary(emu.entries())["requests"] == billed["requests"]  # every response came from the cache
        assert comparable_events(again.event_list) == comparable_events(res.event_list)
        assert comparable_row(again.row) == comparable_row(res.row)
        assert again.row["billed_tokens"] == 0 and again.row["replayed_tokens"] == res.row["total_tokens"]

    # no key in any file the trials or the emulator wrote, nor in the cache
    for path in [*Path(tmp_path).rglob("*")]:
        if path.is_file():
            assert canary.encode() not in path.read_bytes(), path
    for e in res.event_list:
        assert canary not in json.dumps(e)


def test_missing_key_is_a_clear_error_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env here
    with pytest.raises(ll.MissingAPIKeyError, match="OPENAI_API_KEY"):
        run_trial(ll.TrialConfig(task="debug", model="openai/gpt-4o", max_rounds=2, runs_dir=str(tmp_path / "r"),
                                 cache="off"))
    assert not (tmp_path / "r").exists()


def test_a_provider_failing_keeps_the_partial_record(tmp_path):
    with Emulator(error_rate=1.0) as emu:  # every call answered 500 or 503, retried once, then given up
        res = run_trial(ll.TrialConfig(task="debug", model="openai/gpt-4o-mini", base_url=emu.openai_url,
                                       max_rounds=4, max_retries=1, cache="off", runs_dir=str(tmp_path)))
        assert [e["outcome"] for e in emu.entries()] == ["5xx", "5xx"]
    assert res.status == "error" and "server error HTTP" in res.error
    saved = json.loads((res.run_dir / "result.json").read_text())
    assert saved["status"] == "error"
    events = [json.loads(line) for line in (res.run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["type"] for e in events][:3] == ["run_start", "initialize", "planning_phase_start"]
    assert any(e["type"] == "trial_error" for e in events)
