"""A sweep's progress bar (``tqdm.auto``: a widget in a notebook, a line in a terminal) and its summary."""

from __future__ import annotations

import math


def _dollars(rows: list[dict]) -> float:
    total = 0.0
    for row in rows:
        value = row.get("dollars")
        if isinstance(value, int | float) and not math.isnan(value):
            total += value
    return total


def _billed_tokens(rows: list[dict]) -> int:
    return int(sum(r.get("billed_tokens") or 0 for r in rows if isinstance(r.get("billed_tokens"), int | float)
                   and not math.isnan(r.get("billed_tokens"))))


def cost_text(rows: list[dict]) -> str:
    """What the rows' trials billed: dollars when any priced call was made, else their tokens (the
    simulated model is free, a cache hit costs nothing)."""
    dollars = _dollars(rows)
    if dollars > 0:
        return f"${dollars:,.2f}"
    tokens = _billed_tokens(rows)
    return f"{tokens / 1e6:.1f}M tokens" if tokens >= 100_000 else f"{tokens:,} tokens"


def _cost_part(rows: list[dict]) -> str:
    return cost_text(rows) if _dollars(rows) > 0 else f"{cost_text(rows)} used"


class SweepProgress:
    """One bar over all the trials of a grid: those already finished count from the start; the bar shows
    the ETA, the success rate of the finished trials and what this run has billed so far."""

    def __init__(self, total: int, done: list[dict], *, enabled: bool = True, desc: str = "sweep"):
        self.done = list(done)
        self.new: list[dict] = []
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=len(done), unit="trial", desc=desc, dynamic_ncols=True)
            self._refresh()

    def _refresh(self) -> None:
        finished = [r for r in self.done + self.new if r.get("status") == "ok"]
        success = sum(bool(r.get("success")) for r in finished)
        rate = f"{success / len(finished):.0%}" if finished else "-"
        failed = sum(1 for r in self.new if r.get("status") != "ok")
        text = f"success {rate} of {len(finished)} · {_cost_part(self.new)}"
        if failed:
            text += f" · {failed} not ok"
        self.bar.set_postfix_str(text, refresh=False)

    def update(self, row: dict) -> None:
        self.new.append(row)
        if self.bar is not None:
            self._refresh()
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def summary(out, total: int, done: list[dict], new: list[dict], stopped: str | None) -> str:
    """One line: what the sweep in ``out`` has, what this run did, why it stopped, how to go on."""
    ok = sum(1 for r in new if r.get("status") == "ok")
    interrupted = sum(1 for r in new if r.get("reason") == "interrupted")
    budget = sum(1 for r in new if r.get("status") == "budget")
    errors = len(new) - ok - interrupted - budget
    not_started = total - len(done) - len(new)
    parts = [f"{len(done) + ok} of {total} trials finished" + (f" ({ok} now)" if done else "")]
    for n, word in ((errors, "failed"), (interrupted, "interrupted"), (budget, "stopped by a budget"),
                    (not_started, "not started")):
        if n:
            parts.append(f"{n} {word}")
    if new:
        parts.append(_cost_part(new))
    head = f"sweep {out}"
    if stopped == "interrupted":
        head += " interrupted"
    elif stopped:
        head += f" stopped: {stopped}"
    tail = "; run it again to resume" if (not_started or errors or interrupted or budget) else ""
    return f"{head}: {', '.join(parts)}{tail}"
