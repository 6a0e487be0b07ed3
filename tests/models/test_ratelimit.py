"""Rate limits: pacing of requests and tokens, adaptation to 429, sharing across processes, and a sweep of
four concurrent trials kept under 60 requests per minute by a loopback OpenAI server's own count."""

from __future__ import annotations

import multiprocessing
import time

import pytest
from conftest_models import Reply, canary_keys_fixture, fake_server_fixture, make_request  # noqa: F401 - fixtures
from sweep_helpers import TeamServer

import latte_lab as ll
from latte_lab.models import ratelimit
from latte_lab.models.ratelimit import MemoryState, RateLimit, SqliteState


def test_requests_are_spaced_evenly_at_the_limit():
    state = MemoryState()
    start = time.monotonic()
    slots = [start + state.reserve("api", RateLimit(120, None), 0) for _ in range(5)]
    gaps = [b - a for a, b in zip(slots, slots[1:])]
    assert gaps == pytest.approx([0.5] * 4, abs=0.01)


def test_tokens_pace_calls_and_are_settled_with_the_real_usage():
    state = MemoryState()
    limit = RateLimit(None, 600)  # 10 tokens a second
    assert state.reserve("api", limit, 100) == pytest.approx(0.0, abs=0.01)
    assert state.reserve("api", limit, 100) == pytest.approx(10.0, abs=0.01)  # waits for the first call's tokens
    state.settle("api", limit, -150)  # the two calls used 50 tokens in all, not 200
    assert state.reserve("api", limit, 0) == pytest.approx(5.0, abs=0.01)


def test_a_429_halves_the_pace_holds_calls_for_retry_after_and_successes_restore_it():
    state = MemoryState()
    limit = RateLimit(60, None)
    state.throttle("api", 2.0)
    assert state.pace("api") == 0.5
    assert state.reserve("api", limit, 0) == pytest.approx(2.0, abs=0.05)  # held for Retry-After
    assert state.reserve("api", limit, 0) == pytest.approx(4.0, abs=0.05)  # then at half the rate: 2 s apart
    state.throttle("api", None)
    assert state.pace("api") == 0.25
    for _ in range(20):
        state.settle("api", limit, 0)
    assert state.pace("api") == 1.0


def test_limits_from_config_the_environment_and_configure(monkeypatch):
    assert ratelimit.default_limits()["openai"] == RateLimit(*ll.config.DEFAULT_RATE_LIMITS["openai"])
    monkeypatch.setenv(ratelimit.RATE_LIMITS_ENV, "openai=5000/2000000, http://127.0.0.1:8000/v1=60/-")
    limits = ratelimit.current_limits()
    assert limits["openai"] == RateLimit(5000, 2_000_000) and limits["http://127.0.0.1:8000/v1"] == RateLimit(60)
    assert ratelimit.limiter_for("openai", "http://127.0.0.1:8000/v1/").limit == RateLimit(60)
    assert ratelimit.limiter_for("openai", "http://elsewhere/v1") is None  # other servers: not limited
    with ratelimit.using({"anthropic": None}):
        assert ratelimit.limiter_for("anthropic") is None
    assert ratelimit.limiter_for("anthropic").limit == RateLimit(50, 30_000)
    monkeypatch.setenv(ratelimit.RATE_LIMITS_ENV, "openai=fast")
    with pytest.raises(ll.ConfigError, match="write provider=rpm/tpm"):
        ratelimit.current_limits()
    with pytest.raises(ll.ConfigError, match="positive number"):
        RateLimit(-1)


def _reserve_slots(path, n, now, queue):
    state = SqliteState(path)
    queue.put([state.reserve("api", RateLimit(600, None), 0, now=now) for _ in range(n)])


def test_processes_share_one_pace_through_sqlite(tmp_path):
    path = tmp_path / "state.sqlite"
    SqliteState(path)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    now = time.monotonic()  # every reservation at the same instant: the slots show whether they share one queue
    procs = [ctx.Process(target=_reserve_slots, args=(path, 5, now, queue)) for _ in range(3)]
    for p in procs:
        p.start()
    slots = sorted(s for _ in procs for s in queue.get(timeout=60))
    for p in procs:
        p.join(10)
    assert slots == pytest.approx([0.1 * i for i in range(15)])  # one queue: 600/min = one every 0.1 s


def test_a_429_from_the_server_slows_the_limiter_through_the_sdk_hook(fake_server, canary_keys):
    url = fake_server.openai_url
    fake_server.queue(Reply(status=429, headers={"retry-after": "0.3"}, body={"error": {"message": "slow down"}}))
    with ratelimit.using({url: (6000, None)}, state=MemoryState()):
        model = ll.make_model("gpt-test", base_url=url, cache_mode="off")
        assert isinstance(model, ratelimit.RateLimitedModel)
        response = model.generate(make_request(base_url=url))  # the SDK retries the 429 itself
        assert response.text.startswith("reply to:")
        state = ratelimit.current_state()
        assert state.pace(url) == pytest.approx(0.5 + ratelimit.RECOVERY_PER_CALL)
    assert fake_server.hits == 2


def test_four_concurrent_trials_stay_under_60_requests_per_minute(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-ratelimit")
    server = TeamServer().start()
    try:
        grid = {"task": "debug", "team": "latte", "n_workers": 1, "max_rounds": 1, "replicates": 4,
                "model": "openai/gpt-4o-mini", "base_url": server.openai_url, "cache": "off"}
        df = ll.run_sweep(grid, out=tmp_path / "sweep", n_jobs=4, progress=False,
                          rate_limits={server.openai_url: (60, None)})
        times = sorted(server.times())
    finally:
        server.stop()
    assert len(df) == 4 and (df["status"] == "ok").all()
    assert len(times) >= 8
    per_second: dict[int, int] = {}
    for t in times:
        per_second[int(t - times[0])] = per_second.get(int(t - times[0]), 0) + 1
    print("requests per second:", [per_second.get(s, 0) for s in range(int(times[-1] - times[0]) + 1)])
    # one request a second, paced from a single queue: scheduling jitter may shift one into its neighbour's second
    assert max(per_second.values()) <= 2
    assert times[-1] - times[0] >= len(times) - 1 - 0.5
    for i, t in enumerate(times):  # and no 10-second stretch holds more than 11
        assert sum(1 for u in times[i:] if u - t < 10.0) <= 11


def test_a_long_wait_is_reported_once_so_a_low_limit_is_noticed(monkeypatch):
    monkeypatch.setattr(ratelimit.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(ratelimit, "_warned", set())
    limiter = ratelimit.Limiter("openai", RateLimit(None, 600), MemoryState())
    limiter.acquire(100)  # 10 s of tokens at 600 a minute
    with pytest.warns(RuntimeWarning, match=r"openai: a call waits 10 s for the rate limit \(600 tokens per minute\)"):
        limiter.acquire(100)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        limiter.acquire(100)  # once per API and process
