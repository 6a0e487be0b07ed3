"""Budgets: a trial stops at its own dollar or token budget with status ``budget`` and a row; a sweep stops
at its dollar cap, starting no new trial; only billed calls count."""

from __future__ import annotations

import pytest
from sweep_helpers import TeamServer

import latte_lab as ll
from latte_lab import rundir
from latte_lab.models.base import Message, ModelRequest, ModelResponse, Usage
from latte_lab.models.budget import BudgetedModel, BudgetExceeded, SweepBudget
from latte_lab.models.ratelimit import MemoryState
from latte_lab.sweep import sweepdir

# gpt-4o-mini at the bundled prices ($0.15 in, $0.60 out per million tokens): 100,000 + 1,000 tokens a call
USAGE = (100_000, 1_000)
CALL_DOLLARS = (100_000 * 0.15 + 1_000 * 0.60) / 1e6  # $0.0156


class Priced:
    """A provider-like model answering every call with USAGE tokens; ``cached`` marks cache hits."""

    provider, model, base_url = "openai", "gpt-4o-mini", None

    def __init__(self, cached=False):
        self.cached, self.calls = cached, 0

    def generate(self, request):
        self.calls += 1
        return ModelResponse("ok", Usage(*USAGE), cached=self.cached, model="gpt-4o-mini-2024-07-18")


def _request():
    return ModelRequest("openai", "gpt-4o-mini", "", [Message("user", "hi")])


def test_a_trial_budget_stops_calls_once_spent():
    guarded = BudgetedModel(Priced(), "openai/gpt-4o-mini", max_dollars=0.03)
    guarded.generate(_request())
    guarded.generate(_request())  # $0.0312 after this one: the next call is refused
    with pytest.raises(BudgetExceeded, match=r"the trial's budget of \$0.03 is spent \(\$0.0312\)") as info:
        guarded.generate(_request())
    assert info.value.scope == "trial" and guarded.inner.calls == 2
    assert guarded.dollars == pytest.approx(2 * CALL_DOLLARS)


def test_cache_hits_are_free_and_tokens_can_be_budgeted_without_a_price():
    hits = BudgetedModel(Priced(cached=True), "openai/gpt-4o-mini", max_dollars=0.01, max_billed_tokens=1)
    for _ in range(5):
        hits.generate(_request())
    assert hits.dollars == 0 and hits.billed_tokens == 0
    with pytest.raises(ll.ConfigError, match="needs the price of 'openai/unpriced-model'"):
        BudgetedModel(Priced(), "openai/unpriced-model", max_dollars=1.0)
    tokens = BudgetedModel(Priced(), "openai/unpriced-model", max_billed_tokens=150_000)
    tokens.generate(_request())
    tokens.generate(_request())
    with pytest.raises(BudgetExceeded, match="budget of 150,000 billed tokens"):
        tokens.generate(_request())


def test_the_sweep_budget_is_shared_by_every_trial():
    state, budget = MemoryState(), SweepBudget(max_dollars=0.04)
    first = BudgetedModel(Priced(), "openai/gpt-4o-mini", sweep=(budget, state))
    second = BudgetedModel(Priced(), "openai/gpt-4o-mini", sweep=(budget, state))
    for _ in range(3):
        first.generate(_request())
    with pytest.raises(BudgetExceeded, match="the sweep's budget of \\$0.04 is spent") as info:
        second.generate(_request())
    assert info.value.scope == "sweep" and state.spend()[0] == pytest.approx(3 * CALL_DOLLARS)


def test_a_trial_at_its_budget_ends_with_status_budget_and_a_row(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-budget")
    server = TeamServer(usage=USAGE).start()
    try:
        cfg = ll.TrialConfig(task="debug", team="leader_worker", model="openai/gpt-4o-mini", base_url=server.openai_url,
                             cache="off", max_rounds=10, max_dollars=0.05, runs_dir=str(tmp_path))
        res = ll.run_trial(cfg)
        calls = server.hits
    finally:
        server.stop()
    assert res.status == "budget" and res.reason == "budget" and "budget of $0.05 is spent" in res.error
    assert 0.05 <= res.row["dollars"] <= 0.05 + calls * CALL_DOLLARS
    assert res.rounds < 10  # it stopped before the round budget
    saved = rundir.read_result(res.run_dir)
    assert saved["status"] == "budget" and saved["row"]["reason"] == "budget" and sweepdir.is_finished(saved)
    assert [e["reason"] for e in res.event_list if e["type"] == "run_end"] == ["budget"]


def test_a_sweep_stops_at_its_dollar_cap_and_resumes_with_a_higher_one(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-budget")
    server = TeamServer(usage=USAGE).start()
    out = tmp_path / "sweep"
    try:
        grid = {"task": "debug", "team": "leader_worker", "n_workers": 1, "replicates": 6, "max_rounds": 3, "cache": "off",
                "model": "openai/gpt-4o-mini", "base_url": server.openai_url}
        df = ll.run_sweep(grid, out=out, progress=False, max_dollars=0.15)
        billed = server.hits * CALL_DOLLARS
        assert "budget of $0.15 is spent" in df.attrs["stopped"] and "stopped:" in df.attrs["summary"]
        assert 0.15 <= billed <= 0.15 + 5 * CALL_DOLLARS  # the calls of one round at most beyond the cap
        assert df["dollars"].sum() == pytest.approx(billed)
        assert len(df) < 6  # no trial started once the cap was reached
        cut = df[df["status"] != "ok"]
        assert list(cut["status"]) == ["budget"] and list(cut["reason"]) == ["sweep_budget"]
        assert (out / f"{cut['trial_id'].iloc[0]}.failed-0").is_dir()  # the trial runs again next time

        more = ll.run_sweep(grid, out=out, progress=False, max_dollars=10.0)
    finally:
        server.stop()
    assert len(more) == 6 and (more["status"] == "ok").all()


class _FailsForOneAgent(Priced):
    """Answers every agent but ``Dev2`` once the workers start; ``Dev2``'s call fails like a spent budget."""

    def generate(self, request):
        if request.scope.agent == "Dev2":
            raise BudgetExceeded("the test's budget is spent", "trial")
        return super().generate(request)


@pytest.mark.parametrize("threaded", [True, False])
def test_replies_paid_for_before_a_failed_call_of_the_same_round_are_recorded(tmp_path, monkeypatch, threaded):
    from latte_lab.teams import engine

    monkeypatch.setattr(engine, "calls_wait", lambda model: threaded)
    cfg = ll.TrialConfig(task="debug", team="decentralized", model="openai/gpt-4o-mini", cache="off",
                         max_rounds=3, runs_dir=str(tmp_path))
    res = ll.run_trial(cfg, model=_FailsForOneAgent())
    assert res.status == "budget", res.error
    replies = [e for e in res.event_list if e["type"] == "agent_reply"]
    # round 1: every worker is called; Dev1 answers before Dev2 fails (and the others after it, when threaded)
    assert "Dev1" in {e["agent"] for e in replies}
    assert res.row["dollars"] == pytest.approx(len(replies) * CALL_DOLLARS)
