"""What a sweep would do: the grid, the trials already finished in ``out``, and what the rest may cost in
calls, tokens, dollars and time.

Tokens per trial come from the earliest source that has the condition: finished trials in the basis folder
(``out`` unless another is named, such as a rehearsal's or a pilot's; same task, team and model, then other
models), then the authors' published data (same model, then any). Calls per trial and seconds per trial come
from the basis folder's trials only (each one's ``ledger.csv`` has a line per call, its ``real_seconds`` the
time it took). Dollars are those tokens at the price table's list prices, as if no call were served from a
cache: an upper bound for a rerun. The simulated and scripted models are free.

Time: the longest of what the rate limits allow (the tokens and the calls still to run against each
provider API's tokens and requests per minute, :func:`latte_lab.models.ratelimit.current_limits` and the
sweep's ``rate_limits``) and what the trials in flight allow (the seconds per trial of the trials still to
run, shared among ``in_flight`` trials at once, or ``n_jobs`` processes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import latte_lab.sweep.sweepdir as sweepdir
from latte_lab import rundir
from latte_lab.config import FREE_PROVIDERS, TrialConfig, parse_model_spec
from latte_lab.errors import DataError

CONDITION = ("task", "team", "model")


def finished_rows(out: Path) -> list[dict]:
    """Rows of the finished trials in a sweep directory (attempts and the running area left out), each with
    ``calls``: the lines of its ledger (NaN when it has none)."""
    rows = []
    if not out.is_dir():
        return rows
    for path in sorted(out.iterdir()):
        if not path.is_dir() or path.name.startswith(".") or sweepdir.attempt_of(path.name)[1] is not None:
            continue
        try:
            payload = rundir.read_result(path)
        except DataError:
            continue
        if sweepdir.is_finished(payload):
            rows.append({**payload["row"], "calls": _calls(path)})
    return rows


def _calls(path: Path) -> float:
    """The model calls of the trial in ``path``: the lines of its ledger.csv after the header."""
    try:
        with open(path / rundir.LEDGER_FILE, "rb") as f:
            return float(max(0, sum(1 for line in f if line.strip()) - 1))
    except OSError:
        return math.nan


def _published_tokens():
    """(task, team, model) -> [(input, output) tokens] from the bundled published data; {} if unreadable."""
    try:
        from latte_lab.analysis.loaders import load_published

        trials = load_published().trials
    except (DataError, OSError, ImportError):
        return {}
    table: dict[tuple, list] = {}
    for row in trials[["task", "team", "model", "total_input_tokens", "total_output_tokens"]].itertuples(index=False):
        if not (math.isnan(row.total_input_tokens) or math.isnan(row.total_output_tokens)):
            table.setdefault((row.task, row.team, row.model), []).append((row.total_input_tokens,
                                                                          row.total_output_tokens))
    return table


def _mean(pairs: list) -> tuple[float, float]:
    return (sum(p[0] for p in pairs) / len(pairs), sum(p[1] for p in pairs) / len(pairs))


def _mean_of(rows: list[dict], column: str) -> float:
    values = [float(r[column]) for r in rows if isinstance(r.get(column), int | float) and not math.isnan(r[column])]
    return sum(values) / len(values) if values else math.nan


@dataclass
class SweepPlan:
    """A sweep's grid against what ``out`` already holds (``ll.sweep.dry_run``)."""

    out: Path
    configs: list[TrialConfig]
    done: dict[str, dict] = field(default_factory=dict)
    """trial id -> row of every trial of the grid already finished in ``out``."""
    basis: Path | None = None
    """the folder whose finished trials the estimates come from (None: ``out``)."""
    rate_limits: dict | None = None
    """limits on top of the configured ones, as ``run_sweep(rate_limits=...)`` takes them."""
    in_flight: int | None = None
    """trials the sweep will keep running at once (``run_sweep(in_flight=...)``), or None: ``jobs``."""
    jobs: int = 1
    """worker processes, each running one trial at a time when ``in_flight`` is None."""

    @property
    def todo(self) -> list[TrialConfig]:
        return [c for c in self.configs if c.trial_id not in self.done]

    def table(self):
        """One row per condition: trials, finished, to run, estimated tokens and dollars, and their basis."""
        import pandas as pd

        from latte_lab.models.ledger import find_price, load_prices
        from latte_lab.models.ratelimit import limit_key

        own = finished_rows(self.basis if self.basis is not None else self.out)
        published = None
        prices = None
        rows = []
        conditions: dict[tuple, list[TrialConfig]] = {}
        for cfg in self.configs:
            conditions.setdefault((cfg.task, cfg.team, cfg.model), []).append(cfg)
        for (task, team, model), cfgs in conditions.items():
            provider, name = parse_model_spec(model, base_url=cfgs[0].base_url)
            to_run = sum(1 for c in cfgs if c.trial_id not in self.done)
            tokens, basis = None, "no earlier runs of this task and team"
            same_rows = [r for r in own if (r.get("task"), r.get("team"), r.get("model")) == (task, team, model)
                         and r.get("status") == "ok"]
            other_rows = [r for r in own if (r.get("task"), r.get("team")) == (task, team) and r.get("status") == "ok"]
            same = [(r["total_input_tokens"], r["total_output_tokens"]) for r in same_rows]
            other = [(r["total_input_tokens"], r["total_output_tokens"]) for r in other_rows]
            folder = "this folder" if self.basis is None else str(self.basis)
            if same:
                tokens, basis = _mean(same), f"mean of {len(same)} runs in {folder}"
            elif other:
                tokens, basis = _mean(other), f"mean of {len(other)} runs in {folder} with other models"
            elif provider not in FREE_PROVIDERS:
                published = _published_tokens() if published is None else published
                exact = published.get((task, team, model), [])
                anymodel = [p for (t, tm, _m), ps in published.items() if (t, tm) == (task, team) for p in ps]
                if exact:
                    tokens, basis = _mean(exact), f"{len(exact)} published trials"
                elif anymodel:
                    tokens, basis = _mean(anymodel), f"{len(anymodel)} published trials of other models"
            if provider in FREE_PROVIDERS:
                per_trial, price_note = 0.0, "free"
            else:
                prices = load_prices() if prices is None else prices
                price = find_price(prices, name, provider)
                if price is None or tokens is None:
                    per_trial = math.nan
                    price_note = "no price" if price is None else ""
                else:
                    per_trial = (tokens[0] * price.input_per_mtok + tokens[1] * price.output_per_mtok) / 1e6
                    price_note = f"${price.input_per_mtok:g}/${price.output_per_mtok:g} per Mtok"
            timed = same_rows or other_rows
            tokens_per_trial = math.nan if tokens is None else round(sum(tokens))
            calls_per_trial = _mean_of(timed, "calls")
            rows.append({
                "task": task, "team": team, "model": model, "trials": len(cfgs), "finished": len(cfgs) - to_run,
                "to_run": to_run, "tokens_per_trial": tokens_per_trial,
                "dollars_per_trial": per_trial, "dollars_to_run": per_trial * to_run if to_run else 0.0,
                "basis": basis + (f"; {price_note}" if price_note else ""),
                "calls_per_trial": calls_per_trial, "seconds_per_trial": _mean_of(timed, "real_seconds"),
                "tokens_to_run": tokens_per_trial * to_run if to_run else 0.0,
                "calls_to_run": calls_per_trial * to_run if to_run else 0.0,
                "limit_key": None if provider in FREE_PROVIDERS else limit_key(provider, cfgs[0].base_url),
            })
        return pd.DataFrame(rows)

    def limits(self) -> dict:
        """The rate limits the sweep would run under: the configured ones with ``rate_limits`` on top."""
        from latte_lab.models.ratelimit import as_limit, current_limits

        return {**current_limits(), **{str(k): as_limit(v, f"rate_limits[{k!r}]")
                                       for k, v in (self.rate_limits or {}).items()}}

    def time_estimate(self, table=None) -> dict:
        """How long the trials still to run may take: ``seconds``, what bounds it (``bound``: a limit, or the
        trials in flight), the time each bound alone allows (``bounds``; NaN where a condition lacks the
        figure) and the bounds not known (``unknown``), which may make it longer."""
        table = self.table() if table is None else table
        bounds: dict[str, float] = {}
        limits = self.limits()
        for key, group in table[table["to_run"] > 0].groupby("limit_key", dropna=True):
            limit = limits.get(key)
            if limit is None:
                continue
            if limit.tokens_per_minute:
                bounds[f"the {limit.tokens_per_minute:,.0f} tokens per minute of {key}"] = (
                    float(group["tokens_to_run"].sum(skipna=False)) / limit.tokens_per_minute * 60)
            if limit.requests_per_minute:
                bounds[f"the {limit.requests_per_minute:,.0f} requests per minute of {key}"] = (
                    float(group["calls_to_run"].sum(skipna=False)) / limit.requests_per_minute * 60)
        at_once = self.in_flight or self.jobs
        todo = table[table["to_run"] > 0]
        if len(todo):
            seconds = float((todo["seconds_per_trial"] * todo["to_run"]).sum(skipna=False))
            bounds[f"{at_once} trial{'s' if at_once > 1 else ''} at once"] = seconds / at_once
        known = {k: v for k, v in bounds.items() if not math.isnan(v)}
        unknown = [k for k in bounds if k not in known]
        bound = max(known, key=known.get) if known else None
        return {"seconds": known[bound] if bound else math.nan, "bound": bound, "bounds": bounds, "unknown": unknown}

    def estimated_dollars(self) -> float:
        """Estimated dollars of the trials still to run (NaN when a condition has no estimate)."""
        return float(self.table()["dollars_to_run"].sum(skipna=False))

    def report(self) -> str:
        """The grid, what is finished, and the estimated cost of the rest, as text."""
        table = self.table()
        lines = [f"sweep {self.out}: {len(self.configs)} trials in {len(table)} conditions, "
                 f"{len(self.done)} finished, {len(self.todo)} to run"]
        head = f"  {'task':<9} {'team':<14} {'model':<28} {'trials':>6} {'done':>5} {'to run':>6} {'tokens/trial':>12} " \
               f"{'$ to run':>9}  basis"
        lines.append(head)
        for r in table.itertuples(index=False):
            tokens = "-" if math.isnan(r.tokens_per_trial) else f"{r.tokens_per_trial:,.0f}"
            dollars = "?" if math.isnan(r.dollars_to_run) else f"{r.dollars_to_run:,.2f}"
            lines.append(f"  {r.task:<9} {r.team:<14} {r.model:<28} {r.trials:>6} {r.finished:>5} {r.to_run:>6} "
                         f"{tokens:>12} {dollars:>9}  {r.basis}")
        total = table["dollars_to_run"]
        known = total.dropna().sum()
        missing = int(total.isna().sum())
        estimate = f"estimated cost of the trials to run: ${known:,.2f}"
        if missing:
            estimate += f" plus {missing} condition(s) without an estimate"
        lines.append(estimate + " (list prices, nothing served from the cache)")
        calls, tokens = table["calls_to_run"], table["tokens_to_run"]
        if len(self.todo):
            lines.append(f"calls to run: {_count(calls)}; tokens: {_count(tokens)}")
            timing = self.time_estimate(table)
            if timing["bound"] is None:
                lines.append("time: unknown (no finished trial of these conditions to time)")
            else:
                others = [f"{k}: {_duration(v)}" for k, v in timing["bounds"].items()
                          if k != timing["bound"] and not math.isnan(v)]
                lines.append(f"time: {'at least ' if timing['unknown'] else ''}{_duration(timing['seconds'])}, "
                             f"bound by {timing['bound']}" + (f" ({'; '.join(others)})" if others else "")
                             + (f"; not known: {', '.join(timing['unknown'])}" if timing["unknown"] else ""))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.report()) + "</pre>"


def _count(values) -> str:
    """A column's total, or ``unknown`` when a condition has no estimate."""
    total = float(values.sum(skipna=False))
    return "unknown" if math.isnan(total) else f"{total:,.0f}"


def _duration(seconds: float) -> str:
    """``seconds`` for a person: ``42 s``, ``3.5 min``, ``2.1 h``.

    >>> _duration(42), _duration(210), _duration(7560)
    ('42 s', '3.5 min', '2.1 h')
    """
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
