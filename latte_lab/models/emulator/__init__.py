"""A provider on this machine, for rehearsing a study before paying for it: ``latte-lab emulate``.

The emulator speaks the OpenAI chat-completions and Anthropic messages wire formats on a loopback port and
answers with the simulated model (:mod:`latte_lab.models.emulator.answer`), so whole trials run through the
official SDKs, the rate limiter, the response cache, the budget and the sweep exactly as they do against a
provider, and a study's plumbing (keys, limits, retries, budget stops, Ctrl-C and resume) can be rehearsed
offline. It imposes what a provider does (:mod:`latte_lab.models.emulator.conditions`):

- a latency per call, lognormal with a given median (``latency_s``) and spread of its logarithm
  (``latency_sigma``; 0.5 puts the 99th percentile at 3.2 times the median);
- limits of requests and tokens per minute, refused with 429 and ``Retry-After`` (``retry-after-ms`` too);
- server errors (500, 503; Anthropic's 529) and dropped connections at set rates, which the SDKs retry;
- usage counts in every reply, and a log of every request it served (:data:`~latte_lab.models.emulator.server.LOG_FIELDS`):
  what it billed, what it refused, and which call of which trial each request was.

Its draws are seeded by the request's content, so a study sees the same latencies and faults on every run.
It listens on loopback only, accepts any key and keeps none (nor any prompt text) in its log, and a spawned
emulator stops with the process that started it.

>>> from latte_lab.models.emulator import Emulator
>>> with Emulator(latency_s=0.01, tokens_per_minute=1_000_000) as emu:             # doctest: +SKIP
...     res = ll.run_trial(ll.TrialConfig(task="debug", model="openai/gpt-4o-mini", base_url=emu.openai_url,
...                                       cache="off"))
...     print(summary(emu.entries()))
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from latte_lab.errors import DataError
from latte_lab.models.emulator.conditions import DEFAULT_BURST_S, Conditions
from latte_lab.models.emulator.process import EmulatorProcess, spawn
from latte_lab.models.emulator.server import LOG_FIELDS, Emulator

RETRIED_OUTCOMES = ("rate_limit", "5xx", "drop")  # refusals the SDKs retry


def read_log(path: str | Path) -> list[dict]:
    """The entries of an emulator's request log file (a line cut short by a kill is left out)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"no emulator log at {path}")
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def summary(entries: list[dict]) -> dict:
    """Totals of a request log: requests by outcome, calls billed, tokens and dollars billed, and the span.

    >>> s = summary([{"outcome": "ok", "input_tokens": 10, "output_tokens": 5, "dollars": 1e-6, "arrived": 0.0,
    ...               "finished": 2.0}, {"outcome": "rate_limit", "arrived": 1.0, "finished": 1.0}])
    >>> s["billed_calls"], s["tokens"], s["retried"], s["seconds"]
    (1, 15, 1, 2.0)
    """
    outcomes = Counter(e.get("outcome") for e in entries)
    billed = [e for e in entries if e.get("outcome") == "ok"]
    dollars = [e.get("dollars") for e in billed]
    start = min((e["arrived"] for e in entries if e.get("arrived") is not None), default=0.0)
    end = max((e["finished"] for e in entries if e.get("finished") is not None), default=start)
    return {
        "requests": len(entries), "outcomes": dict(outcomes), "billed_calls": len(billed),
        "input_tokens": sum(e.get("input_tokens", 0) for e in billed),
        "output_tokens": sum(e.get("output_tokens", 0) for e in billed),
        "tokens": sum(e.get("input_tokens", 0) + e.get("output_tokens", 0) for e in billed),
        "dollars": math.nan if any(d is None for d in dollars) else math.fsum(dollars),
        "retried": sum(outcomes.get(o, 0) for o in RETRIED_OUTCOMES), "seconds": end - start,
    }


def summary_line(entries: list[dict]) -> str:
    """:func:`summary` in one line, as ``latte-lab emulate`` prints it when it stops."""
    s = summary(entries)
    o = s["outcomes"]
    dollars = "no price" if math.isnan(s["dollars"]) else f"${s['dollars']:,.4f}"
    return (f"{s['requests']:,} requests: {o.get('ok', 0):,} answered, {o.get('rate_limit', 0):,} refused for a rate "
            f"limit (429), {o.get('5xx', 0):,} server errors, {o.get('drop', 0):,} dropped; {s['tokens']:,} tokens "
            f"billed ({dollars})")


__all__ = ["DEFAULT_BURST_S", "LOG_FIELDS", "Conditions", "Emulator", "EmulatorProcess", "read_log", "spawn",
           "summary", "summary_line"]
