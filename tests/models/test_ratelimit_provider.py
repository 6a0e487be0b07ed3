"""The rate limiter against what a provider says: the limits its replies' headers announce lower the pace, and a
call refused for the rate limit after the SDK's retries waits for a new slot and tries again (the provider here
is the emulator, started on a loopback port)."""

from __future__ import annotations

import pytest

import latte_lab as ll
from latte_lab.models import ratelimit
from latte_lab.models.base import Message, ModelRequest, Scope
from latte_lab.models.emulator import Emulator
from latte_lab.models.ratelimit import MemoryState, RateLimit, SqliteState


class Reply:
    def __init__(self, status: int, headers: dict):
        self.status_code, self.headers = status, headers


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_limits_announced_below_the_configured_ones_set_the_pace(tmp_path, kind):
    state = MemoryState() if kind == "memory" else SqliteState(tmp_path / "state.sqlite")
    limiter = ratelimit.Limiter("api", RateLimit(6000, 6_000_000), state)
    limiter.on_response(Reply(200, {"x-ratelimit-limit-requests": "60", "x-ratelimit-limit-tokens": "9000000"}))
    now = 100.0
    slots = [state.reserve("api", limiter.limit, 10, now=now) for _ in range(3)]
    assert slots == pytest.approx([0.0, 1.0, 2.0])  # 60 a minute, as announced; the higher token limit is ignored
    limiter.on_response(Reply(200, {"anthropic-ratelimit-tokens-limit": "600"}))  # 10 tokens a second
    state.settle("api", limiter.limit, 0)
    assert state.reserve("api", limiter.limit, 100, now=now + 10) == pytest.approx(0.0)
    assert state.reserve("api", limiter.limit, 0, now=now + 10) == pytest.approx(10.0)  # 100 tokens at 10 a second


def test_a_call_refused_after_the_sdks_retries_waits_for_a_new_slot_and_succeeds(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with Emulator(requests_per_minute=20, burst_s=1) as emu:  # a request every 3 s, no burst
        with ratelimit.using({emu.openai_url: (6000, None)}, state=MemoryState()):  # set far above the provider's
            model = ll.make_model("openai/gpt-4o-mini", base_url=emu.openai_url, cache_mode="off", max_retries=0)
            for i in range(2):
                request = ModelRequest("openai", "gpt-4o-mini", "You are Dev1.", [Message("user", f"call {i}")],
                                       scope=Scope(call_index=i))
                assert model.generate(request).text
            assert ratelimit.current_state().pace(emu.openai_url) < 1.0  # the 429 slowed the pace
        outcomes = [e["outcome"] for e in emu.entries()]
    # the second call came before the provider's second slot: refused (the SDK may not retry), then tried again
    # in the limiter's next slot, after the Retry-After
    assert outcomes == ["ok", "rate_limit", "ok"]
