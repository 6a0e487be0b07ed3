"""The emulator's bill against what latte_lab recorded: was any call lost, or paid twice?

Every call a trial makes is a line of its cassette (``calls.jsonl``) with its scope (trial, agent, call index),
its usage and whether it was served from the cache; the emulator's log names the same call for every
request it answered (:mod:`latte_lab.models.call_header`). :func:`reconcile` matches the two over a sweep
folder: every trial, every attempt kept beside it and whatever a killed sweep left in its running area.

- *lost*: a call the provider billed that no run directory records: it was answered while its trial's
  process was being killed, or its record could not be written;
- *paid twice*: a call billed more than once (a rerun that did not find it in the response cache);
- *recorded, not billed*: a call a trial counts as billed that the provider never answered (a bug).

Dollars on latte_lab's side are the trials' ledgers (``ledger.csv``, written when a trial ends) and, for an
attempt killed before it could write one, its cassette's billed calls at the price table's prices.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from pathlib import Path

from latte_lab import rundir


def run_dirs(out: str | Path) -> list[Path]:
    """Every run directory of a sweep folder: trials, attempts, and the running area's leftovers."""
    out = Path(out)
    found = [p for p in sorted(out.iterdir()) if p.is_dir() and not p.name.startswith(".")] if out.is_dir() else []
    running = out / rundir.SWEEP_DIR / rundir.RUNNING_DIR  # where a sweep's trials run until they end
    if running.is_dir():
        found += [p for p in sorted(running.iterdir()) if p.is_dir()]
    return [p for p in found if (p / rundir.CALLS_FILE).exists() or (p / rundir.CONFIG_FILE).exists()]


def billed_calls(run_dir: Path) -> list[dict]:
    """The billed calls a run directory's cassette records: ``{"call", "input_tokens", "output_tokens", "model"}``."""
    calls = []
    try:
        text = (run_dir / rundir.CALLS_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return calls
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # a line cut short by a kill
            continue
        if record.get("type") != "call":
            continue
        response, scope = record.get("response") or {}, record.get("scope") or {}
        if response.get("cached"):
            continue
        usage = response.get("usage") or {}
        calls.append({"call": f"{scope.get('trial')}/{scope.get('agent')}/{scope.get('call_index')}",
                      "input_tokens": int(usage.get("input_tokens") or 0),
                      "output_tokens": int(usage.get("output_tokens") or 0), "model": response.get("model") or ""})
    return calls


def _ledger_dollars(run_dir: Path) -> float | None:
    """The dollars a run directory's ledger bills, or None when it has no ledger."""
    try:
        with open(run_dir / rundir.LEDGER_FILE, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return None
    return math.fsum(float(r["dollars"] or "nan") for r in rows if r.get("cached") == "False")


def reconcile(entries: list[dict], out: str | Path, *, provider: str = "openai") -> dict:
    """The emulator's log ``entries`` against the run directories under ``out``; see the module docstring.
    ``provider`` prices the calls of attempts killed before writing a ledger."""
    from latte_lab.models.ledger import find_price, load_prices

    billed = [e for e in entries if e.get("outcome") == "ok" and e.get("call")]
    by_provider = Counter(e["call"] for e in billed)
    recorded: Counter = Counter()
    tokens_recorded = 0
    dollars: list[float] = []
    prices = None
    for path in run_dirs(out):
        calls = billed_calls(path)
        recorded.update(c["call"] for c in calls)
        tokens_recorded += sum(c["input_tokens"] + c["output_tokens"] for c in calls)
        ledger = _ledger_dollars(path)
        if ledger is not None:
            dollars.append(ledger)
            continue
        prices = load_prices() if prices is None else prices
        for c in calls:
            price = find_price(prices, c["model"], provider)
            dollars.append(math.nan if price is None else
                           (c["input_tokens"] * price.input_per_mtok + c["output_tokens"] * price.output_per_mtok) / 1e6)
    lost = sorted(call for call in by_provider if call not in recorded)
    provider_dollars = [e.get("dollars") for e in billed]
    return {
        "billed_by_provider": len(billed), "recorded": sum(recorded.values()), "lost": lost,
        "paid_twice": sum(n - 1 for n in by_provider.values() if n > 1),
        "recorded_not_billed": sorted(call for call in recorded if call not in by_provider),
        "tokens_by_provider": sum(e.get("input_tokens", 0) + e.get("output_tokens", 0) for e in billed),
        "tokens_recorded": tokens_recorded,
        "dollars_by_provider": math.nan if any(d is None for d in provider_dollars) else math.fsum(provider_dollars),
        "dollars_recorded": math.fsum(dollars),
    }


def reconcile_line(result: dict) -> str:
    """:func:`reconcile` in one line."""
    return (f"{result['billed_by_provider']:,} calls billed by the provider, {result['recorded']:,} recorded as billed; "
            f"lost {len(result['lost'])}, paid twice {result['paid_twice']}, recorded but not billed "
            f"{len(result['recorded_not_billed'])}; ${result['dollars_by_provider']:,.6f} billed, "
            f"${result['dollars_recorded']:,.6f} counted")


__all__ = ["billed_calls", "reconcile", "reconcile_line", "run_dirs"]
