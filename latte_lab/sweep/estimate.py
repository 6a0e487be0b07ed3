"""What a sweep would do: the grid, the trials already finished in ``out``, and what the rest may cost.

Tokens per trial come from the earliest source that has the condition: finished trials in ``out``
(same task, team and model; then other models), then the authors' published data (same model, then
any). Dollars are those tokens at the price table's list prices, as if no call were served from a
cache: an upper bound for a rerun. The simulated and scripted models are free.
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
    """Rows of the finished trials in a sweep directory (attempts and the running area left out)."""
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
            rows.append(payload["row"])
    return rows


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


@dataclass
class SweepPlan:
    """A sweep's grid against what ``out`` already holds (``ll.sweep.dry_run``)."""

    out: Path
    configs: list[TrialConfig]
    done: dict[str, dict] = field(default_factory=dict)
    """trial id -> row of every trial of the grid already finished in ``out``."""

    @property
    def todo(self) -> list[TrialConfig]:
        return [c for c in self.configs if c.trial_id not in self.done]

    def table(self):
        """One row per condition: trials, finished, to run, estimated tokens and dollars, and their basis."""
        import pandas as pd

        from latte_lab.models.ledger import find_price, load_prices

        own = finished_rows(self.out)
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
            same = [(r["total_input_tokens"], r["total_output_tokens"]) for r in own
                    if (r.get("task"), r.get("team"), r.get("model")) == (task, team, model) and r.get("status") == "ok"]
            other = [(r["total_input_tokens"], r["total_output_tokens"]) for r in own
                     if (r.get("task"), r.get("team")) == (task, team) and r.get("status") == "ok"]
            if same:
                tokens, basis = _mean(same), f"mean of {len(same)} runs in this folder"
            elif other:
                tokens, basis = _mean(other), f"mean of {len(other)} runs in this folder with other models"
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
            rows.append({
                "task": task, "team": team, "model": model, "trials": len(cfgs), "finished": len(cfgs) - to_run,
                "to_run": to_run, "tokens_per_trial": math.nan if tokens is None else round(sum(tokens)),
                "dollars_per_trial": per_trial, "dollars_to_run": per_trial * to_run if to_run else 0.0,
                "basis": basis + (f"; {price_note}" if price_note else ""),
            })
        return pd.DataFrame(rows)

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
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.report()) + "</pre>"
