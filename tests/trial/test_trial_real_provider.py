"""A whole trial through the real OpenAI SDK against a local server that speaks its wire format:
the response cache fills, a second run in replay mode makes zero calls, and no key leaks anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest_models import FakeProvider, Reply, anthropic_body, openai_body

import latte_lab as ll
from latte_lab import prompts
from latte_lab.trial import comparable_events, comparable_row, run_trial


class ProtocolServer(FakeProvider):
    """Answers like a (very small) LATTE team: the Lead plans one task, a worker claims and fixes it."""

    solution = ll.tasks.get("debug").reference_solution()["signal_toolkit.py"]

    def default_body(self, path, body):
        last = body["messages"][-1]["content"]
        if isinstance(last, list):  # Anthropic content blocks
            last = "".join(b.get("text", "") for b in last)
        if "PLANNING" in last:
            text = 'Plan.\n<discover_task id="t1" title="Fix the module">Fix every bug.</discover_task>'
        elif prompts.READY_HEADER in last:
            text = 'Taking it. <claim_task id="t1" />'
        elif prompts.TASK_HEADER in last:
            text = f'<edit_file path="signal_toolkit.py">{self.solution}</edit_file>\n<complete_task id="t1" />'
        else:
            text = "Nothing to change."
        if path.endswith("/messages"):
            return anthropic_body(text, model=body["model"])
        return openai_body(text, model=body["model"])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_trial_through_the_sdks_caches_replays_and_keeps_keys_out(tmp_path, monkeypatch, provider):
    canary = "sk-canary-trial-7f3e9b1c2d4a"
    monkeypatch.setenv("OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY", canary)
    cache_path = tmp_path / "cache.sqlite"
    server = ProtocolServer().start()
    if provider == "anthropic":  # the Anthropic SDK's base URL comes from the environment
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    try:
        cfg = dict(task="debug", team="latte", model=f"{provider}/test-model", seed=0, max_rounds=6,
                   cache_path=str(cache_path), base_url=server.openai_url if provider == "openai" else None)
        res = run_trial(ll.TrialConfig(**cfg, runs_dir=str(tmp_path / "a")))
        assert res.status == "ok", res.error
        assert res.success and res.reason == "all_tasks_done"
        calls = server.hits
        assert calls == len([e for e in res.event_list if e["type"] == "agent_reply"]) > 0
        per_call = (11 + 7) if provider == "openai" else (13 + 5)  # usage taken from the responses
        assert res.row["total_tokens"] == calls * per_call
        first = server.requests[0]["body"]
        assert first["max_tokens"] == 4096 and first["temperature"] == 0.7

        again = run_trial(ll.TrialConfig(**cfg, cache="replay", runs_dir=str(tmp_path / "b")))
        assert again.status == "ok", again.error
        assert server.hits == calls  # every response came from the cache
        assert comparable_events(again.event_list) == comparable_events(res.event_list)
        assert comparable_row(again.row) == comparable_row(res.row)
        assert again.row["billed_tokens"] == 0 and again.row["replayed_tokens"] == res.row["total_tokens"]
    finally:
        server.stop()

    # no key in any file the trials wrote, nor in the cache
    for path in [*Path(tmp_path).rglob("*")]:
        if path.is_file():
            assert canary.encode() not in path.read_bytes(), path
    for e in res.event_list:
        assert canary not in json.dumps(e)


def test_missing_key_is_a_clear_error_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env here
    with pytest.raises(ll.MissingAPIKeyError, match="OPENAI_API_KEY"):
        run_trial(ll.TrialConfig(task="debug", model="openai/gpt-4o", max_rounds=2, runs_dir=str(tmp_path / "r"),
                                 cache="off"))
    assert not (tmp_path / "r").exists()


def test_a_provider_failing_mid_trial_keeps_the_partial_record(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-secret")
    server = ProtocolServer().start()
    try:
        server.queue(Reply(), *[Reply(status=500, body={"error": {"message": "boom"}}) for _ in range(10)])
        res = run_trial(ll.TrialConfig(task="debug", model="openai/gpt-4o-mini", base_url=server.openai_url,
                                       max_rounds=4, max_retries=1, cache="off", runs_dir=str(tmp_path)))
    finally:
        server.stop()
    assert res.status == "error" and res.error
    saved = json.loads((res.run_dir / "result.json").read_text())
    assert saved["status"] == "error"
    events = [json.loads(line) for line in (res.run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["type"] for e in events][:3] == ["run_start", "initialize", "planning_phase_start"]
    assert any(e["type"] == "trial_error" for e in events)
