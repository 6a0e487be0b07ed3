"""The provider emulator (latte_lab.models.emulator): both wire formats through the official SDKs, the
simulated model's replies, rate limits answered with 429 and Retry-After, seeded faults, the request log,
loopback only, and a spawned emulator that stops with its parent. Every emulator here is started by the test
on a loopback port."""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time

import httpx
import pytest
from sweep_helpers import wait_until

import latte_lab as ll
from latte_lab.models import call_header
from latte_lab.models.base import AgentView, Message, ModelRequest, Scope
from latte_lab.models.emulator import Conditions, Emulator, read_log, summary
from latte_lab.models.emulator.answer import frame_from_prompt
from latte_lab.trial import comparable_events, run_trial

FRAME = AgentView(task="debug", role="worker", agent="Dev1", round=2, phase="execution",
                  allowed_actions=("claim_task", "read_file", "edit_file", "run_tests", "complete_task"),
                  teammates=("Lead", "Dev2"))
READY = ("[From System]: === AVAILABLE TASKS (ready to claim) ===\n• task-1: Fix the filters — the tests of "
         "the filters fail")


def request(provider: str, model: str, *, frame=FRAME, call_index=0, text=READY) -> ModelRequest:
    return ModelRequest(provider=provider, model=model, system="You are a software engineer. You are Dev1.",
                        messages=[Message("user", text)], max_tokens=512,
                        scope=Scope(seed=3, agent="Dev1", call_index=call_index, trial="t-1"), frame=frame)


@pytest.fixture(name="no_keys")
def no_keys_fixture(monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
                 "LATTE_BASE_URL_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_both_wire_formats_through_the_sdks_answer_what_the_simulated_model_answers(no_keys, monkeypatch):
    sim = ll.make_model("simulated")
    with Emulator() as emu:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", emu.url)  # the Anthropic SDK's base URL comes from the environment
        for provider, model in (("openai", "gpt-4o-mini"), ("anthropic", "claude-haiku-4-5")):
            client = ll.make_model(f"{provider}/{model}", base_url=emu.openai_url if provider == "openai" else None,
                                   cache_mode="off", max_retries=0)
            got = client.generate(request(provider, model))
            want = sim.generate(request("simulated", "default"))
            assert got.text == want.text and "<claim_task" in got.text
            assert (got.usage.input_tokens, got.usage.output_tokens) == (want.usage.input_tokens,
                                                                         want.usage.output_tokens)
            assert got.model == model and got.finish_reason == "stop" and not got.cached
        entries = emu.entries()
    assert [e["api"] for e in entries] == ["openai", "anthropic"]
    assert all(e["call"] == "t-1/Dev1/0" and e["outcome"] == "ok" and e["delivered"] for e in entries)
    price = ll.models.ledger.find_price(ll.models.load_prices(), "gpt-4o-mini")
    first = entries[0]
    assert first["dollars"] == pytest.approx((first["input_tokens"] * price.input_per_mtok
                                              + first["output_tokens"] * price.output_per_mtok) / 1e6)


def test_a_trial_through_the_emulator_is_the_simulated_trial_and_replays_from_the_cache(no_keys, tmp_path):
    cfg = dict(task="debug", team="latte", seed=1, max_rounds=3)
    simulated = run_trial(ll.TrialConfig(**cfg, runs_dir=str(tmp_path / "sim")))
    with Emulator(latency_s=0.0) as emu:
        over_wire = dict(cfg, model="openai/gpt-4o-mini", base_url=emu.openai_url, cache_path=str(tmp_path / "c.sqlite"))
        res = run_trial(ll.TrialConfig(**over_wire, runs_dir=str(tmp_path / "a")))
        billed = summary(emu.entries())
        again = run_trial(ll.TrialConfig(**over_wire, cache="replay", runs_dir=str(tmp_path / "b")))
        assert summary(emu.entries())["requests"] == billed["requests"]  # the replay asked nothing
    replies = [e["text"] for e in res.event_list if e["type"] == "agent_reply"]
    assert res.status == "ok" and replies == [e["text"] for e in simulated.event_list if e["type"] == "agent_reply"]
    assert res.row["total_tokens"] == simulated.row["total_tokens"] == billed["tokens"]
    assert billed["billed_calls"] == len(replies) and res.row["dollars"] == pytest.approx(billed["dollars"], abs=1e-12)
    assert comparable_events(again.event_list) == comparable_events(res.event_list)


def test_rate_limits_are_refused_with_429_and_retry_after(no_keys):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x" * 400}]}  # 100 prompt tokens
    auth = {"authorization": "Bearer any-key"}
    with Emulator(requests_per_minute=1) as emu:
        assert httpx.post(emu.openai_url + "/chat/completions", json=body, headers=auth).status_code == 200
        refused = httpx.post(emu.openai_url + "/chat/completions", json=body, headers=auth)
        model = ll.make_model("openai/gpt-4o-mini", base_url=emu.openai_url, cache_mode="off", max_retries=0)
        with pytest.raises(ll.RateLimitError):
            model.generate(request("openai", "gpt-4o-mini", frame=None))
        entries = emu.entries()
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limit_exceeded"
    wait = float(refused.headers["retry-after-ms"]) / 1000
    assert 55 < wait <= 60 and refused.headers["retry-after"] == str(math.ceil(wait))  # a request a minute
    assert [e["outcome"] for e in entries] == ["ok", "rate_limit", "rate_limit"]
    assert entries[1]["limit"] == "requests" and entries[1]["input_tokens"] == entries[1]["dollars"] == 0
    with Emulator(tokens_per_minute=60, burst_s=60) as emu:  # the first reply puts the bucket in debt
        assert httpx.post(emu.url + "/v1/messages", json={**body, "max_tokens": 16}, headers=auth).status_code == 200
        refused = httpx.post(emu.url + "/v1/messages", json={**body, "max_tokens": 16}, headers=auth)
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "rate_limit_error"
    assert int(refused.headers["retry-after"]) >= 40  # over 40 tokens owed at one a second


def test_faults_follow_the_request_content_and_the_sdk_retries_them(no_keys):
    model_args = dict(cache_mode="off")
    with Emulator(error_rate=1.0) as emu:
        failing = ll.make_model("openai/gpt-4o-mini", base_url=emu.openai_url, max_retries=1, **model_args)
        with pytest.raises(ll.ModelError, match="server error HTTP 50[03] after 1 retries"):
            failing.generate(request("openai", "gpt-4o-mini"))
        assert [(e["outcome"], e["attempt"], e["status"] in (500, 503)) for e in emu.entries()] == [
            ("5xx", 0, True), ("5xx", 1, True)]
    with Emulator(drop_rate=1.0) as emu:
        dropped = ll.make_model("openai/gpt-4o-mini", base_url=emu.openai_url, max_retries=0, **model_args)
        with pytest.raises(ll.ModelError, match="could not connect"):
            dropped.generate(request("openai", "gpt-4o-mini"))
        assert [e["outcome"] for e in emu.entries()] == ["drop"]

    def outcomes() -> list[tuple[str, int]]:
        with Emulator(error_rate=0.2, drop_rate=0.1, seed=7) as emu:
            client = ll.make_model("openai/gpt-4o-mini", base_url=emu.openai_url, max_retries=8, **model_args)
            texts = [client.generate(request("openai", "gpt-4o-mini", call_index=i)).text for i in range(6)]
            return texts, sorted((e["outcome"], e["attempt"], e["call"]) for e in emu.entries())

    first, second = outcomes(), outcomes()
    assert first == second  # the same faults on every run: they follow the content, not the arrival order
    kinds = {o for o, _, _ in first[1]}
    assert {"ok", "5xx", "drop"} <= kinds and sum(o == "ok" for o, _, _ in first[1]) == 6


def test_latency_is_lognormal_around_its_median():
    conditions = Conditions(latency_s=3.0, latency_sigma=0.5, seed=11)
    draws = sorted(conditions.draw(f"request-{i}", 0).latency_s for i in range(4000))
    assert statistics.median(draws) == pytest.approx(3.0, rel=0.05)
    p99 = draws[int(0.99 * len(draws))]
    assert p99 / 3.0 == pytest.approx(math.exp(2.326 * 0.5), rel=0.15)
    assert Conditions(latency_s=2.0).draw("x", 0).latency_s == 2.0  # no spread: always the median
    with pytest.raises(ll.ConfigError, match="error_rate \\+ drop_rate is at most 1"):
        Conditions(error_rate=0.8, drop_rate=0.3)
    with pytest.raises(ll.ConfigError, match="latency_s must be a non-negative number"):
        Conditions(latency_s=-1)


def test_requests_a_provider_would_refuse_are_refused_so(no_keys):
    good = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    auth = {"authorization": "Bearer k"}
    with Emulator() as emu:
        post = lambda path, **kw: httpx.post(emu.url + path, **kw)  # noqa: E731
        assert post("/v1/chat/completions", json=good).status_code == 401  # no key at all
        assert post("/v1/chat/completions", json={**good, "stream": True}, headers=auth).status_code == 400
        assert post("/v1/chat/completions", content=b"{not json", headers=auth).status_code == 400
        assert post("/v1/messages", json=good, headers={"x-api-key": "k"}).json()["error"]["message"] == (
            "max_tokens: field required")
        assert post("/v1/embeddings", json=good, headers=auth).status_code == 404
        assert httpx.get(emu.url + "/health").json()["status"] == "ok"
        long = post("/v1/chat/completions", json={**good, "max_tokens": 1}, headers=auth).json()
        outcomes = [e["outcome"] for e in emu.entries()]
    assert outcomes == ["no_key", "invalid", "invalid", "invalid", "not_found", "ok"]
    assert long["choices"][0]["finish_reason"] == "length" and long["usage"]["completion_tokens"] == 1
    with pytest.raises(ll.ConfigError, match="listens on this machine only"):
        Emulator(host="0.0.0.0")


def test_a_client_without_the_call_header_gets_a_deterministic_answer_read_from_its_prompt(no_keys):
    system = ("You are a software engineer on a team that shares one code repository and one task graph. You "
              "are Dev2.\n- claim one with <claim_task id=\"task-1\" />\n- <read_file path=\"m.py\" />\n"
              "- <edit_file path=\"m.py\">content</edit_file>\n- <run_tests />\n- <complete_task id=\"task-1\" />")
    body = {"model": "gpt-4o-mini", "messages": [{"role": "system", "content": system},
                                                 {"role": "user", "content": READY}]}
    with Emulator() as emu:
        answers = [httpx.post(emu.openai_url + "/chat/completions", json=body,
                              headers={"authorization": "Bearer k"}).json()["choices"][0]["message"]["content"]
                   for _ in range(2)]
        assert [e["call"] for e in emu.entries()] == [None, None]
    assert answers[0] == answers[1] and "<claim_task" in answers[0]
    frame, scope = frame_from_prompt(system, [Message("user", READY)])
    assert (frame.role, frame.agent, frame.round, scope.agent) == ("worker", "Dev2", 1, "Dev2")
    assert frame.allowed_actions == ("claim_task", "read_file", "edit_file", "run_tests", "complete_task")


def test_the_call_header_goes_to_loopback_servers_only_and_no_key_reaches_the_log(tmp_path, monkeypatch):
    req = request("openai", "gpt-4o-mini")
    assert call_header.headers_for(req, "https://api.openai.com/v1") == {}
    assert call_header.headers_for(req, "http://10.0.0.5:8000/v1") == {}
    value = call_header.headers_for(req, "http://127.0.0.1:8000/v1")[call_header.HEADER]
    assert call_header.decode(value) == (FRAME, req.scope)
    canary = "canary-key-for-the-emulator-4c1d"
    monkeypatch.setenv("LATTE_BASE_URL_API_KEY", canary)  # the key latte_lab sends to a base_url server
    log = tmp_path / "requests.jsonl"
    with Emulator(log_path=log) as emu:
        ll.make_model("openai/gpt-4o-mini", base_url=emu.openai_url, cache_mode="off").generate(req)
    text = log.read_text()
    assert canary not in text and READY[30:60] not in text  # neither the key nor the prompt is logged
    assert read_log(log)[0]["call"] == "t-1/Dev1/0"


def test_the_command_runs_against_the_emulator_with_its_environment(tmp_path, capfd):
    from latte_lab.cli import main

    code = main(["emulate", "--latency", "0", "--cache", str(tmp_path / "rehearsal.sqlite"), "--",
                 sys.executable, "-c", "import os, sys; print(os.environ['OPENAI_BASE_URL'], "
                 "os.environ['LATTE_LAB_CACHE']); sys.exit(3)"])
    out = capfd.readouterr().out
    assert code == 3
    assert "latte-lab emulate: listening on http://127.0.0.1:" in out and "0 requests" in out
    assert f"/v1 {tmp_path / 'rehearsal.sqlite'}" in out  # the command's own output


@pytest.mark.slow
def test_a_spawned_emulator_stops_with_the_process_that_started_it(tmp_path):
    script = ("import sys, time\nfrom latte_lab.models.emulator import spawn\nemu = spawn()\n"
              "print(emu.proc.pid, emu.url, flush=True)\ntime.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid, url = parent.stdout.readline().split()
        assert httpx.get(url + "/health").json()["emulator"] == "latte_lab"
        parent.send_signal(signal.SIGKILL)  # the parent ends without a word to its emulator
        parent.wait(30)

        def gone() -> bool:
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                return True
            with open(f"/proc/{pid}/stat") as f:  # exited, not yet reaped by init
                return f.read().split(") ")[1].startswith("Z")
        wait_until(gone, "the emulator exited", timeout=60)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_the_log_lines_are_whole_json_with_the_documented_fields(tmp_path, no_keys):
    log = tmp_path / "log.jsonl"
    with Emulator(log_path=log, error_rate=0.5, seed=2) as emu:
        client = ll.make_model("openai/gpt-4o-mini", base_url=emu.openai_url, cache_mode="off", max_retries=6)
        for i in range(4):
            client.generate(request("openai", "gpt-4o-mini", call_index=i))
    lines = log.read_text().splitlines()
    assert all(set(json.loads(line)) == set(ll.models.emulator.LOG_FIELDS) for line in lines)
    assert sorted(json.loads(line)["n"] for line in lines) == list(range(len(lines)))
    assert time.time() - json.loads(lines[-1])["finished"] < 600
