"""When does LATTE help? The sensitivity study's results: how the headline comparisons move as the simulated
agents' behaviour changes.

The simulated model's parameters describe how an agent works (how often its patch is right, how often
it stalls, how fast it reads its prompt, how much an observation helps it); the comparisons between
teams come out of the protocols. The study (:mod:`latte_lab.sweep.sensitivity` runs it) varies a few
parameters one at a time around a base profile and runs every team on every task for a number of seeds at
each setting. This module reads its per-trial rows and reports for each setting how LATTE compares: its
token, wall-clock and overwrite ratios to Leader-Worker and the decentralized team, and its accuracy gap
to the static team and the pipeline. ``ll.analysis.sensitivity(rows)`` is :func:`sensitivity`; the
figure is ``ll.viz.sensitivity_figure``.

>>> model_spec("p_straggler", 0.0), setting_of("simulated/default?p_straggler=0.0")
('simulated/default?p_straggler=0.0', ('p_straggler', 0.0))

The full study takes hours of compute, so its per-trial results ship with latte_lab
(``latte_lab/data/sensitivity.csv``, read by :func:`load_sensitivity`); ``make sensitivity`` reruns it
(``python -m latte_lab.sweep.sensitivity``), resuming where it stopped.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import parse_qsl

from latte_lab import data as bundled
from latte_lab.errors import DataError

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
    "p_reread": [0.1, 0.9],  # whether an agent re-reads a file before patching it again (stale copies, overwrites)
    "p_delegate": [0.1, 0.9],  # how much of the ready queue the Lead assigns rather than leaving it to self-claims
}
# Readings of the protocol varied the same way (TrialConfig switch -> its other values; docs/fidelity.md): who
# the orchestrator dispatches each round, when the Lead runs, and what counts as "G_t has changed". A reading's
# setting is named "switch=value" in the rows' parameter column, its value column empty.
DEFAULT_READINGS: dict[str, list[str]] = {
    "dispatch": ["busy_every_round", "released"],
    "lead_triggers": ["released"],
    "graph_change": ["counts"],
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


def reading_of(config: dict, readings: dict[str, list[str]] | None = None) -> str | None:
    """The reading a trial's config sets (``"dispatch=released"``), or None at the paper's defaults.

    >>> reading_of({"dispatch": "released", "lead_triggers": "paper"})
    'dispatch=released'
    >>> reading_of({"dispatch": "paper"}) is None
    True
    """
    for name, values in (DEFAULT_READINGS if readings is None else readings).items():
        if config.get(name) in values:
            return f"{name}={config[name]}"
    return None


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
        config = rundir.read_json(Path(run_dir) / "config.json") if run_dir and (Path(run_dir) / "config.json").exists() else {}
        reading = reading_of(config or {})
        if reading is not None:
            record["parameter"], record["value"] = reading, None
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
    readings = [f"{k}={v}" for k, vs in DEFAULT_READINGS.items() for v in vs]
    order = {p: i for i, p in enumerate([BASELINE, *DEFAULT_GRID, *readings])}
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
    Markdown (what ``docs/simulated-model.md`` shows; ``python -m latte_lab.sweep.sensitivity
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


def sensitivity(rows) -> "pd.DataFrame":  # noqa: F821
    """How LATTE's comparisons change with the agents' behaviour: one row per setting of the study's per-trial
    ``rows`` (:func:`load_sensitivity`, or what ``latte_lab.sweep.sensitivity.run`` returns), as :func:`summarise`.

    >>> s = sensitivity(load_sensitivity())
    >>> list(s["parameter"])[:2], bool(s["token_ratio_vs_leader_worker"].notna().all())
    (['baseline', 'p_correct_patch'], True)
    """
    if rows is None or (isinstance(rows, dict) and "parameter" not in rows):
        raise DataError("ll.analysis.sensitivity summarises the study's per-trial rows; run a grid with "
                        "ll.sweep.sensitivity.run(grid, seeds) and pass what it returns")
    return summarise(rows)
