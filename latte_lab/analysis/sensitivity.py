"""When does LATTE help? The headline comparisons, measured as the simulated agents' behaviour changes.

The simulated model's parameters describe how an agent works (how often its patch is right, how often
it stalls, how fast it reads its prompt, how much an observation helps it); the comparisons between
teams come out of the protocols. This module varies a few parameters one at a time around a base
profile, runs every team on every task for a number of seeds at each setting, and reports for each
setting how LATTE compares: its token, wall-clock and overwrite ratios to Leader-Worker and the
decentralized team, and its accuracy gap to the static team and the pipeline.

The module is callable: ``ll.analysis.sensitivity(grid, seeds)`` is :func:`sensitivity`.

>>> configs = sensitivity_configs({"p_straggler": [0.0]}, seeds=1, tasks=["debug"], teams=["latte"])
>>> [c["model"] for c in configs]
['simulated/default', 'simulated/default?p_straggler=0.0']

The full study takes hours of compute, so its per-trial results ship with latte_lab
(``latte_lab/data/sensitivity.csv``, read by :func:`load_sensitivity`); ``make sensitivity`` reruns it
(``python -m latte_lab.analysis.sensitivity``), resuming where it stopped.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
import types
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import parse_qsl

from latte_lab import data as bundled
from latte_lab.errors import ConfigError, DataError

TEAMS = ("latte", "leader_worker", "decentralized", "static", "pipeline")
TASKS = ("debug", "eda", "textproc")
BASE_PROFILE = "default"
DATA_FILE = "sensitivity.csv"  # bundled per-trial results of the study (make sensitivity)
DEFAULT_SEEDS = 10
# One-at-a-time grid around the default profile: a worse and a better value of each parameter.
DEFAULT_GRID: dict[str, list] = {
    "p_correct_patch": [0.65, 0.95],  # patch skill: how often a well-informed patch is right
    "p_straggler": [0.0, 0.25],  # straggler rate: how often an agent stalls on a subtask
    "prefill_tokens_per_s": [1000.0, 25000.0],  # how fast long prompts are read (context cost in time)
}
TRIAL_COLUMNS = ("task", "team", "model", "seed", "status", "success", "accuracy", "total_tokens",
                 "wall_clock_seconds", "total_rounds", "cross_agent_overwrites", "graph_size_initial",
                 "graph_size_final")
COUNT_COLUMNS = ("self_claims", "claim_conflicts", "discovered_after_planning", "releases", "lead_fraction")
BASELINE = "baseline"


# ================================================================================ the design ====

def model_spec(parameter: str | None = None, value=None, base: str = BASE_PROFILE) -> str:
    """The simulated model spec of one setting: ``simulated/default?p_straggler=0.25``."""
    if parameter is None:
        return f"simulated/{base}"
    return f"simulated/{base}?{parameter}={value}"


def setting_of(model: str) -> tuple[str, float | None]:
    """(parameter, value) of a model spec made by :func:`model_spec`; ("baseline", None) without overrides."""
    _, _, query = str(model).partition("?")
    pairs = parse_qsl(query)
    if not pairs:
        return BASELINE, None
    name, text = pairs[0]
    try:
        return name, float(text)
    except ValueError:
        return name, math.nan


def _seed_list(seeds: int | Iterable[int]) -> list[int]:
    return list(range(seeds)) if isinstance(seeds, int) else list(seeds)


def sensitivity_configs(grid: dict[str, Sequence] | None = None, seeds: int | Iterable[int] = DEFAULT_SEEDS, *,
                        tasks: Sequence[str] = TASKS, teams: Sequence[str] = TEAMS, base: str = BASE_PROFILE,
                        grid_seeds: int | Iterable[int] | None = None, grid_tasks: Sequence[str] | None = None,
                        **trial) -> list[dict]:
    """TrialConfig fields of every trial of the study: the base profile, then each parameter at each of
    its values with the others at base, for every task, team and seed (seed-major, so a study stopped
    half-way has every setting at a similar number of seeds). ``grid_seeds`` (default: ``seeds``) are
    the seeds of the varied settings, when the base profile gets more than they do, and ``grid_tasks``
    (default: ``tasks``) their tasks."""
    from latte_lab.models.sim.profiles import resolve_profile

    grid = DEFAULT_GRID if grid is None else grid
    seed_list = _seed_list(seeds)
    varied_seeds = set(seed_list if grid_seeds is None else _seed_list(grid_seeds))
    varied_tasks = set(tasks if grid_tasks is None else grid_tasks)
    if not seed_list:
        raise ConfigError("sensitivity needs at least one seed")
    specs = [model_spec(base=base)]
    for parameter, values in grid.items():
        for value in values:
            spec = model_spec(parameter, value, base)
            resolve_profile(spec.partition("/")[2])  # an unknown parameter or bad value fails here, listing them
            specs.append(spec)
    return [dict(task=task, team=team, model=spec, seed=seed, **trial)
            for seed in sorted(set(seed_list) | varied_seeds) for spec in specs for task in tasks for team in teams
            if (seed in varied_seeds and task in varied_tasks if spec != specs[0] else seed in seed_list)]


# ============================================================================ trial counts ====

def coordination_counts(events: Sequence[dict]) -> dict[str, float]:
    """Per trial, from its events: claims of nodes nobody assigned to the claimer (self-claims), claims
    refused because another worker claimed the node in the same round (conflicts), nodes discovered
    after planning, releases, and the fraction of rounds in which the Lead ran.

    >>> ev = [{"type": "assign_task", "task": "a", "assignee": "Dev1", "round": 1},
    ...       {"type": "claim_task", "task": "a", "agent": "Dev1", "round": 1},
    ...       {"type": "claim_task", "task": "b", "agent": "Dev2", "round": 2},
    ...       {"type": "claim_blocked", "task": "b", "agent": "Dev3", "round": 2},
    ...       {"type": "round_dispatch", "round": 1, "agents": ["Lead", "Dev1"]},
    ...       {"type": "round_dispatch", "round": 2, "agents": ["Dev2", "Dev3"]}]
    >>> coordination_counts(ev)
    {'self_claims': 1, 'claim_conflicts': 1, 'discovered_after_planning': 0, 'releases': 0, 'lead_fraction': 0.5}
    """
    assigned: dict[str, str] = {}
    claimed_in: dict[tuple, set] = {}
    self_claims = 0
    for e in events:
        kind = e.get("type")
        if kind == "assign_task":
            assigned[e.get("task")] = e.get("assignee")
        elif kind in ("release_task", "close_task", "complete_task"):
            assigned.pop(e.get("task"), None)
        elif kind == "claim_task":
            if assigned.get(e.get("task")) != e.get("agent"):
                self_claims += 1
            claimed_in.setdefault((e.get("task"), e.get("round")), set()).add(e.get("agent"))
    conflicts = sum(1 for e in events if e.get("type") == "claim_blocked"
                    and claimed_in.get((e.get("task"), e.get("round")), set()) - {e.get("agent")})
    rounds = [e for e in events if e.get("type") == "round_dispatch" and (e.get("round") or 0) >= 1]
    lead = sum(1 for e in rounds if "Lead" in (e.get("agents") or []))
    return {
        "self_claims": self_claims,
        "claim_conflicts": conflicts,
        "discovered_after_planning": sum(1 for e in events if e.get("type") == "discover_task" and (e.get("round") or 0) >= 1),
        "releases": sum(1 for e in events if e.get("type") == "release_task"),
        "lead_fraction": lead / len(rounds) if rounds else math.nan,
    }


def trial_rows(rows) -> "pd.DataFrame":  # noqa: F821 - pandas is imported lazily
    """Sweep rows reduced to the study's columns, with the setting and the coordination counts read from
    each trial's run directory."""
    import pandas as pd

    from latte_lab import rundir

    frame = pd.DataFrame(rows)
    out = []
    for row in frame.to_dict("records"):
        record = {c: row.get(c) for c in TRIAL_COLUMNS}
        record["parameter"], record["value"] = setting_of(row.get("model", ""))
        run_dir = row.get("run_dir")
        events = rundir.read_jsonl(Path(run_dir) / "events.jsonl") if run_dir else []
        record.update(coordination_counts(events))
        out.append(record)
    return pd.DataFrame(out)


# ================================================================================ analysis ====

def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) and not math.isnan(a) else math.nan


def summarise(rows) -> "pd.DataFrame":  # noqa: F821
    """One row per setting (parameter, value): LATTE's ratios and gaps, each the mean over tasks of the
    per-task comparison of team means (so every task weighs the same), over the tasks and seeds every
    setting ran (so the settings compare like with like: a base profile run at more seeds than the
    varied settings is summarised at theirs); ``seeds`` is how many seeds that is."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    if frame.empty:
        raise DataError("no sensitivity trials to summarise; run the study or load_sensitivity()")
    frame = frame[frame["status"].fillna("ok") == "ok"]
    settings = frame.groupby(["parameter", "value"], dropna=False)
    common = set.intersection(*settings["task"].agg(set))
    seeds = set.intersection(*settings["seed"].agg(set))
    frame = frame[frame["task"].isin(common) & frame["seed"].isin(seeds)]
    out = []
    for (parameter, value), group in frame.groupby(["parameter", "value"], dropna=False, sort=False):
        per_task = []
        for _task, cell in group.groupby("task"):
            m = cell.groupby("team")[["total_tokens", "wall_clock_seconds", "cross_agent_overwrites", "accuracy"]].mean()

            def get(team, col, m=m):
                return float(m.loc[team, col]) if team in m.index else math.nan

            per_task.append({
                "token_ratio_vs_leader_worker": _ratio(get("latte", "total_tokens"), get("leader_worker", "total_tokens")),
                "token_ratio_vs_decentralized": _ratio(get("latte", "total_tokens"), get("decentralized", "total_tokens")),
                "wall_ratio_vs_leader_worker": _ratio(get("latte", "wall_clock_seconds"),
                                                      get("leader_worker", "wall_clock_seconds")),
                "wall_ratio_vs_decentralized": _ratio(get("latte", "wall_clock_seconds"),
                                                      get("decentralized", "wall_clock_seconds")),
                "overwrite_ratio_vs_leader_worker": _ratio(get("latte", "cross_agent_overwrites"),
                                                           get("leader_worker", "cross_agent_overwrites")),
                "overwrite_ratio_vs_decentralized": _ratio(get("latte", "cross_agent_overwrites"),
                                                           get("decentralized", "cross_agent_overwrites")),
                "accuracy_gap_vs_static": get("latte", "accuracy") - get("static", "accuracy"),
                "accuracy_gap_vs_pipeline": get("latte", "accuracy") - get("pipeline", "accuracy"),
            })
        summary = pd.DataFrame(per_task).mean(numeric_only=True).to_dict()
        out.append({"parameter": parameter, "value": value, "trials": len(group), "seeds": group["seed"].nunique(),
                    "tasks": ",".join(sorted(common)), **summary})
    result = pd.DataFrame(out)
    order = {p: i for i, p in enumerate([BASELINE, *DEFAULT_GRID])}
    result["_o"] = result["parameter"].map(lambda p: order.get(p, len(order)))
    return result.sort_values(["_o", "value"]).drop(columns="_o").reset_index(drop=True)


def team_table(rows, parameter: str = BASELINE) -> "pd.DataFrame":  # noqa: F821
    """Means per task and team at one setting (the baseline by default): accuracy, tokens, wall clock,
    rounds, overwrites, self-claims, claim conflicts, nodes discovered after planning, releases and the
    fraction of rounds the Lead ran; plus the number of trials."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    frame = frame[(frame["parameter"] == parameter) & (frame["status"].fillna("ok") == "ok")]
    cols = ["accuracy", "total_tokens", "wall_clock_seconds", "total_rounds", "cross_agent_overwrites", *COUNT_COLUMNS]
    table = frame.groupby(["task", "team"])[cols].mean()
    table["trials"] = frame.groupby(["task", "team"]).size()
    pooled = frame.groupby("team")[cols].mean()
    pooled["trials"] = frame.groupby("team").size()
    pooled.index = pd.MultiIndex.from_product([["all"], pooled.index], names=["task", "team"])
    return pd.concat([table, pooled])


_HIGHER_IS_BETTER = {"accuracy": True, "tokens": False, "wall": False, "cross_agent_overwrites": False}
_OURS = {"accuracy": "accuracy", "tokens": "total_tokens", "wall": "wall_clock_seconds",
         "cross_agent_overwrites": "cross_agent_overwrites"}
_WORDS = {"accuracy": ("more accurate", "less accurate"), "tokens": ("cheaper", "dearer"),
          "wall": ("faster", "slower"), "cross_agent_overwrites": ("fewer overwrites", "more overwrites")}
_PAPER_TEAM = {"pipeline": "metagpt"}  # the published rows name the real MetaGPT


def _direction(latte: float, other: float, higher_is_better: bool) -> str:
    if latte == other:
        return "tie"
    return "better" if (latte > other) == higher_is_better else "worse"


def directions(rows, reference=None) -> "pd.DataFrame":  # noqa: F821
    """For each comparison the paper prints (Table 2 by task and pooled; §5.3 overwrites): whether LATTE
    comes out better than each other team (more accurate, cheaper, faster, fewer overwrites), worse, or
    level, in the paper and here, at the baseline setting. ``claim`` says it in words."""
    import pandas as pd

    from latte_lab.analysis.report import paper_reference

    ref = paper_reference() if reference is None else reference
    ref = ref[ref["quantity"].isin(["mean_sem", "mean"]) & ref["metric"].isin(list(_HIGHER_IS_BETTER))]
    ref = ref.sort_values("quantity", ascending=False)  # a Table 2 cell (mean_sem) wins over a §5.1 relative mean of the same comparison
    table = team_table(rows)
    out = []
    for (metric, task), group in ref.groupby(["metric", "task"]):
        paper = {}
        for r in group.itertuples():
            paper.setdefault(r.team, float(r.value))
        if "latte" not in paper or (task, "latte") not in table.index:
            continue
        for team in TEAMS[1:]:
            pteam = _PAPER_TEAM.get(team, team)
            if pteam not in paper or (task, team) not in table.index:
                continue
            better = _HIGHER_IS_BETTER[metric]
            ours_l, ours_o = table.loc[(task, "latte"), _OURS[metric]], table.loc[(task, team), _OURS[metric]]
            pd_, od = _direction(paper["latte"], paper[pteam], better), _direction(ours_l, ours_o, better)
            out.append({"metric": metric, "task": task, "versus": team, "paper_latte": paper["latte"],
                        "paper_other": paper[pteam], "paper_direction": pd_, "paper_latte_better": pd_ == "better",
                        "ours_latte": float(ours_l), "ours_other": float(ours_o), "ours_direction": od,
                        "ours_latte_better": od == "better", "same_direction": pd_ == od})
    return pd.DataFrame(out)


def _say(metric: str, direction: str) -> str:
    return "level" if direction == "tie" else _WORDS[metric][direction != "better"]


def markdown(rows, reference=None) -> str:
    """The baseline's team table beside the paper's Table 2, and the directions of every comparison, as
    Markdown (what ``docs/simulated-model.md`` shows; ``python -m latte_lab.analysis.sensitivity
    --collect --markdown`` prints it)."""
    from latte_lab.analysis.report import paper_reference

    ref = paper_reference() if reference is None else reference
    t2 = ref[(ref["section"] == "Table 2") & (ref["quantity"] == "mean_sem")].set_index(["metric", "task", "team"])
    table = team_table(rows)
    n = int(table["trials"].iloc[0]) if len(table) else 0

    def paper(metric, task, team):
        key = (metric, task, _PAPER_TEAM.get(team, team))
        return f"{t2.loc[key, 'value']:g}" if key in t2.index else "n/a"

    lines = ["| task | team | accuracy % | paper | tokens K | paper | wall min | paper | rounds | overwrites | "
             "self-claims | claim conflicts | discovered | releases | Lead ran (% of rounds) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    order = [(task, team) for task in (*TASKS, "all") for team in TEAMS if (task, team) in table.index]
    for (task, team), r in table.loc[order].iterrows():
        lead = "–" if math.isnan(r["lead_fraction"]) else f"{100 * r['lead_fraction']:.0f}"
        lines.append(f"| {task} | {team} | {100 * r['accuracy']:.0f} | {paper('accuracy', task, team)} | "
                     f"{r['total_tokens'] / 1000:.0f} | {paper('tokens', task, team)} | "
                     f"{r['wall_clock_seconds'] / 60:.1f} | {paper('wall', task, team)} | {r['total_rounds']:.1f} | "
                     f"{r['cross_agent_overwrites']:.1f} | {r['self_claims']:.1f} | {r['claim_conflicts']:.2f} | "
                     f"{r['discovered_after_planning']:.1f} | {r['releases']:.2f} | {lead} |")
    lines += ["", f"Means of {n} seeds per task and team (`all`: pooled over the tasks). The paper's MetaGPT column "
              "stands beside our pipeline team.", ""]
    d = directions(rows, ref)
    lines += ["| metric | LATTE versus | " + " | ".join(TASKS) + " | all |", "|---|---|" + "---|" * (len(TASKS) + 1)]
    d = d.sort_values(["metric", "versus"], key=lambda c: c.map({**{m: i for i, m in enumerate(_WORDS)},
                                                                **{t: i for i, t in enumerate(TEAMS)}}))
    for (metric, versus), group in d.groupby(["metric", "versus"], sort=False):
        cells = []
        for task in (*TASKS, "all"):
            g = group[group["task"] == task]
            if g.empty:
                cells.append("")
                continue
            r = g.iloc[0]
            mark = "same" if r["same_direction"] else "**differs**"
            cells.append(f"{mark}: paper {_say(metric, r['paper_direction'])}, here {_say(metric, r['ours_direction'])}")
        lines.append(f"| {metric} | {versus} | " + " | ".join(cells) + " |")
    lines += ["", f"{int(d['same_direction'].sum())} of {len(d)} comparisons point the same way as in the paper."]
    lines += ["", *_protocol_lines(rows)]
    return "\n".join(lines)


def _protocol_lines(rows) -> list[str]:
    """The paper's protocol figures (A6.3, §5.2) beside the same counts at the baseline."""
    import pandas as pd

    paper = pd.read_csv(io.StringIO(bundled.read_text("paper_protocol_reference.csv"))).set_index("id")
    frame = pd.DataFrame(rows)
    frame = frame[(frame["parameter"] == BASELINE) & (frame["status"].fillna("ok") == "ok")]
    out = ["| figure | team | paper | here |", "|---|---|---:|---:|"]
    for team in ("latte", "static"):
        ours = frame.loc[frame["team"] == team, "lead_fraction"].mean()
        ref = paper.loc[f"a6.3/lead_active_fraction/{team}", "value"]
        out.append(f"| rounds in which the Lead ran (%) | {team} | {ref:g} | {100 * ours:.1f} |")
    latte = frame[frame["team"] == "latte"]
    ref = paper.loc["5.2/runs_with_release/latte", "value"]
    out.append(f"| runs with a Release (%) | latte | {ref:g} | {100 * (latte['releases'] > 0).mean():.1f} |")
    return out


def load_sensitivity() -> "pd.DataFrame":  # noqa: F821
    """The study's per-trial results shipped with latte_lab (``make sensitivity`` regenerates them)."""
    import pandas as pd

    return pd.read_csv(io.StringIO(bundled.read_text(DATA_FILE)))


def sensitivity(grid: dict[str, Sequence] | None = None, seeds: int | Iterable[int] = DEFAULT_SEEDS, *, rows=None,
                out: str | Path = "runs/sensitivity", n_jobs: int = 2, tasks: Sequence[str] = TASKS,
                teams: Sequence[str] = TEAMS, base: str = BASE_PROFILE, progress: bool = True) -> "pd.DataFrame":  # noqa: F821
    """How LATTE's comparisons change with the agents' behaviour: one row per setting.

    With ``rows`` (per-trial results, e.g. :func:`load_sensitivity`) it only summarises them; otherwise it
    runs the study with :func:`latte_lab.run_sweep` under ``out`` (resumable: finished trials are not run
    again) and summarises what it ran. ``grid`` maps profile parameters to the values to try, each with
    the others at ``base``; ``seeds`` is a count or a list.

    >>> s = sensitivity(rows=load_sensitivity())            # doctest: +SKIP
    >>> s[["parameter", "value", "token_ratio_vs_leader_worker"]]  # doctest: +SKIP
    """
    if rows is None:
        rows = run(grid, seeds, out=out, n_jobs=n_jobs, tasks=tasks, teams=teams, base=base, progress=progress)
    return summarise(rows)


def run(grid=None, seeds: int | Iterable[int] = DEFAULT_SEEDS, *, out: str | Path = "runs/sensitivity",
        n_jobs: int = 2, tasks: Sequence[str] = TASKS, teams: Sequence[str] = TEAMS, base: str = BASE_PROFILE,
        progress: bool = True, grid_seeds: int | Iterable[int] | None = None,
        grid_tasks: Sequence[str] | None = None) -> "pd.DataFrame":  # noqa: F821
    """Runs (or resumes) the study and returns its per-trial rows."""
    from latte_lab.sweep import run_sweep

    configs = sensitivity_configs(grid, seeds, tasks=tasks, teams=teams, base=base, grid_seeds=grid_seeds,
                                  grid_tasks=grid_tasks)
    return trial_rows(run_sweep(configs, out=out, n_jobs=n_jobs, progress=progress))


def collect(grid=None, seeds: int | Iterable[int] = DEFAULT_SEEDS, *, out: str | Path = "runs/sensitivity",
            tasks: Sequence[str] = TASKS, teams: Sequence[str] = TEAMS, base: str = BASE_PROFILE,
            grid_seeds: int | Iterable[int] | None = None,
            grid_tasks: Sequence[str] | None = None) -> "pd.DataFrame":  # noqa: F821
    """The per-trial rows of the study's trials finished under ``out``, without running any: for each
    setting only the seeds at which every one of its tasks and every team has finished, so each setting
    compares teams on the same seeds (for a study stopped part-way)."""
    from latte_lab.sweep import dry_run

    configs = sensitivity_configs(grid, seeds, tasks=tasks, teams=teams, base=base, grid_seeds=grid_seeds,
                                  grid_tasks=grid_tasks)
    planned: dict[tuple, set] = {}
    for c in configs:
        planned.setdefault(_key(*setting_of(c["model"])), set()).add((c["task"], c["team"]))
    done = dry_run(configs, out).done
    rows = trial_rows(list(done.values()))
    if rows.empty:
        raise DataError(f"no finished trials of the study under {out}; run it first (make sensitivity)")
    finished: dict[tuple, set] = {}
    for r in rows.itertuples():
        finished.setdefault((*_key(r.parameter, r.value), r.seed), set()).add((r.task, r.team))
    keep = [finished[(*_key(p, v), seed)] >= planned[_key(p, v)]
            for p, v, seed in zip(rows["parameter"], rows["value"], rows["seed"])]
    if not any(keep):
        raise DataError(f"no seed under {out} has finished every task and team yet; let the study run longer")
    return rows[keep].reset_index(drop=True)


def _key(parameter, value) -> tuple:
    """A setting as a dictionary key (the baseline's value is None or NaN, which never equals itself)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return parameter, None
    return parameter, float(value)


def figure(summary, *, ax=None):
    """LATTE's ratios and gaps per setting, one panel per comparison (a matplotlib Figure)."""
    import matplotlib.pyplot as plt

    panels = [("token_ratio_vs_leader_worker", "tokens vs Leader-Worker", 1.0),
              ("token_ratio_vs_decentralized", "tokens vs decentralized", 1.0),
              ("wall_ratio_vs_leader_worker", "wall clock vs Leader-Worker", 1.0),
              ("overwrite_ratio_vs_decentralized", "overwrites vs decentralized", 1.0),
              ("accuracy_gap_vs_static", "accuracy gap to static", 0.0),
              ("accuracy_gap_vs_pipeline", "accuracy gap to the pipeline", 0.0)]
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5), sharey=False)
    labels = [BASELINE if p == BASELINE else f"{p}={v:g}" for p, v in zip(summary["parameter"], summary["value"])]
    for axis, (col, title, even) in zip(axes.flat, panels):
        axis.barh(labels, summary[col], color=["#444" if lab == BASELINE else "#4C72B0" for lab in labels])
        axis.axvline(even, color="#c44", lw=1)
        axis.set_title(f"LATTE {title}", fontsize=10)
        axis.invert_yaxis()
        axis.tick_params(labelsize=8)
    fig.tight_layout()
    return fig


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Run (or resume) the sensitivity study and write its per-trial CSV.")
    ap.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    ap.add_argument("--grid-seeds", type=int, default=None,
                    help="seeds of each varied setting (default: --seeds); the base profile always gets --seeds")
    ap.add_argument("--grid-tasks", default=None,
                    help="comma-separated tasks of each varied setting (default: every task)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="runs/sensitivity", help="where the trials' run directories go")
    from importlib.resources import files

    ap.add_argument("--write", default=str(files("latte_lab.data").joinpath(DATA_FILE)),
                    help="the per-trial CSV to write (default: the copy shipped in latte_lab/data)")
    ap.add_argument("--markdown", action="store_true", help="also print the baseline's tables as Markdown")
    ap.add_argument("--collect", action="store_true",
                    help="run nothing: write the trials already finished under --out (whole seeds of each setting)")
    args = ap.parse_args(argv)
    grid_tasks = args.grid_tasks.split(",") if args.grid_tasks else None
    try:
        if args.collect:
            rows = collect(None, args.seeds, out=args.out, grid_seeds=args.grid_seeds, grid_tasks=grid_tasks)
        else:
            rows = run(None, args.seeds, out=args.out, n_jobs=args.jobs, grid_seeds=args.grid_seeds,
                       grid_tasks=grid_tasks)
    except (ConfigError, DataError) as exc:
        sys.exit(f"error: {exc}")
    rows = rows.sort_values(["parameter", "value", "task", "team", "seed"], na_position="first")
    rows.to_csv(args.write, index=False, float_format="%.6g")
    print(f"{len(rows)} trials written to {args.write}")
    print(summarise(rows).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.markdown:
        print(markdown(rows))


class _CallableModule(types.ModuleType):
    """This module, callable as its main function: ``ll.analysis.sensitivity(grid, seeds)``."""

    def __call__(self, *args, **kwargs):
        return sensitivity(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    main()
