"""Load the authors' published ``experiments/`` folder or our own run directories into one schema.

Both loaders return a :class:`TrialData` whose ``trials`` frame follows
``latte_lab.schema.TRIAL_COLUMNS``; the figures and statistics take it unchanged.
The published layout and its quirks (MetaGPT side CSVs, blank hidden rates, a run with 0 tokens) are
described in the reference document §7-§10; each mapping below cites the rule it implements.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from latte_lab import rundir, schema
from latte_lab.errors import DataError

PUBLISHED_SOURCES = (
    ("experiment1/n4", "simple_eda"),
    ("experiment2/n4", "debug_sprint"),
    ("textproc/n4", "textproc"),
)
"""(folder, official task) of each results.csv; textproc lives under textproc/, not experiment3/."""

METAGPT_FOLDER = ("experiment2/n4", "debug_sprint")
"""Only debug has the extra MetaGPT CSVs (tokens, wall clock, completion)."""

METAGPT_MODELS = {"gpt52": "openai/gpt-5.2", "sonnet": "anthropic/claude-sonnet-4-6"}
"""Model tags in MetaGPT run names."""

RESULTS_REQUIRED = ("condition", "trial", "success", "wall_clock_seconds", "total_tokens", "run_dir")
HIDDEN_REQUIRED = ("run_dir", "hidden_passed", "hidden_total", "hidden_pass_rate")

_RUN_NAME = re.compile(r"^(?P<model>.+)_(?P<trial>\d{2,})_(?P<cond>[a-z_]+?)_(?P<ts>\d{8}_\d{6})$")
_METAGPT_RUN = re.compile(r"^(?P<task>.+)_(?P<model>gpt52|sonnet)_r(?P<k>\d+)$")


@dataclass
class TrialData:
    """Tidy frames of one data source.

    trials: one row per trial (results, hidden eval and event metrics joined; TRIAL_COLUMNS).
    operator_usage: team, operator, fraction, n_runs (Figure 3A).
    trajectories: team, round, mean, sem, n (graph size per round, Figure 3B).
    snapshots: trial_id, round, node, title, status, owner, deps, is_verify (Figure 3C).
    source: 'published' or 'latte_lab'; path: where it was read from.
    damaged: the run directories :func:`load_runs` left out because a file in them is damaged, one
    ``{"path", "reason"}`` per directory (also ``trials.attrs["damaged"]``); empty for published data.
    """

    trials: pd.DataFrame
    operator_usage: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=list(schema.OPERATOR_USAGE_COLUMNS)))
    trajectories: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=list(schema.TRAJECTORY_COLUMNS)))
    snapshots: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=list(schema.SNAPSHOT_COLUMNS)))
    source: str = "published"
    path: str = ""
    damaged: list[dict] = field(default_factory=list)

    def __repr__(self) -> str:
        extra = f", damaged={len(self.damaged)}" if self.damaged else ""
        return (f"TrialData(source={self.source!r}, trials={len(self.trials)}, "
                f"operator_usage={len(self.operator_usage)}, trajectories={len(self.trajectories)}, "
                f"snapshots={len(self.snapshots)}{extra})")


# --- published -------------------------------------------------------------------------------------

def _read_csv(path: Path, required: tuple[str, ...]) -> pd.DataFrame:
    if not path.is_file():
        raise DataError(f"missing file {path}: expected the authors' experiments/ layout "
                        "(experiment1/n4, experiment2/n4, textproc/n4)")
    try:
        df = pd.read_csv(path)
    except Exception as exc:  # pandas raises several parser error types
        raise DataError(f"cannot parse {path}: {exc}") from exc
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DataError(f"malformed {path}: missing columns {missing}; found {list(df.columns)}")
    return df


def _read_json(path: Path, kind: type):
    if not path.is_file():
        raise DataError(f"missing file {path}: expected it beside experiment1/ in the published folder")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot parse {path}: {exc}") from exc
    if not isinstance(data, kind):
        raise DataError(f"malformed {path}: expected a JSON {kind.__name__}, got {type(data).__name__}")
    return data


def parse_run_name(run_dir: str) -> dict:
    """Model, trial and team from a published run directory name.

    >>> parse_run_name("experiments/x/runs/openai_gpt-5.2_03_no_graph_20260416_230526")["model"]
    'openai/gpt-5.2'
    """
    base = Path(str(run_dir)).name
    m = _RUN_NAME.match(base)
    if not m:
        raise DataError(f"cannot parse run directory name {base!r} "
                        "(expected <provider>_<model>_<trial>_<condition>_<YYYYmmdd_HHMMSS>)")
    provider, _, model = m["model"].partition("_")
    return {"model": f"{provider}/{model}", "trial": int(m["trial"]), "team": schema.team_id(m["cond"]),
            "trial_id": base}


def _as_bool(series: pd.Series) -> pd.Series:
    return series.astype(str).str.strip().str.lower().eq("true")


def _results_rows(root: Path, folder: str, official_task: str) -> pd.DataFrame:
    path = root / folder / "results.csv"
    df = _read_csv(path, RESULTS_REQUIRED).drop_duplicates("run_dir").reset_index(drop=True)
    try:
        parsed = pd.DataFrame([parse_run_name(r) for r in df["run_dir"]])
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from exc
    df = df.rename(columns={"n_teammates": "n_workers"})
    df["team"] = [schema.team_id(c) for c in df["condition"]]
    df["model"] = parsed["model"].to_numpy()
    df["trial_id"] = parsed["trial_id"].to_numpy()
    df["success"] = _as_bool(df["success"])
    df["task"] = schema.task_id(official_task)
    numeric = [c for c in df.columns if c not in ("condition", "team", "model", "trial_id", "run_dir",
                                                  "success", "task")]
    for col in numeric:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    return df.drop(columns=["condition"])


def _hidden_rows(root: Path, folder: str) -> pd.DataFrame | None:
    path = root / folder / "hidden_eval_results.csv"
    if not path.is_file():
        return None
    df = _read_csv(path, HIDDEN_REQUIRED).drop_duplicates("run_dir")
    out = df[["run_dir"]].copy()
    for col in ("hidden_passed", "hidden_failed", "hidden_total", "hidden_pass_rate"):
        out[col] = pd.to_numeric(df[col], errors="coerce") if col in df.columns else np.nan
    return out


def _metagpt_rows(root: Path, folder: str, official_task: str) -> pd.DataFrame:
    """Extra MetaGPT runs: tokens and wall clock from the TOTAL role rows, success iff 100 % pass."""
    base = root / folder
    tok = _read_csv(base / "tokens_metagpt.csv", ("run", "role", "input_tokens", "output_tokens",
                                                  "total_tokens"))
    wall = _read_csv(base / "wallclock_metagpt.csv", ("run", "role"))
    comp = _read_csv(base / "completion_metagpt.csv", ("run", "passed", "total", "pass_rate"))
    tok = tok[tok["role"] == "TOTAL"].set_index("run")
    wall = wall[wall["role"] == "TOTAL"].set_index("run")
    rows = []
    for _, c in comp.iterrows():
        run = str(c["run"])
        m = _METAGPT_RUN.match(run)
        if not m:
            raise DataError(f"{base / 'completion_metagpt.csv'}: cannot parse run name {run!r} "
                            "(expected <task>_<gpt52|sonnet>_r<k>)")
        try:
            rate = float(str(c["pass_rate"]).rstrip("%")) / 100.0
        except ValueError as exc:
            raise DataError(f"{base / 'completion_metagpt.csv'}: bad pass_rate {c['pass_rate']!r}") from exc
        if run not in tok.index:
            raise DataError(f"{base / 'tokens_metagpt.csv'}: no TOTAL row for run {run!r}")
        w = wall.loc[run] if run in wall.index else None
        seconds = np.nan
        if w is not None:
            seconds = w.get("wall_clock_s", np.nan)
            if pd.isna(seconds):
                seconds = w.get("api_elapsed_s", np.nan)
        total = float(tok.loc[run, "total_tokens"])
        passed = float(c["passed"])
        rows.append({
            "task": schema.task_id(official_task), "team": "metagpt", "model": METAGPT_MODELS[m["model"]],
            "trial": int(m["k"]), "trial_id": run, "run_dir": run, "success": rate >= 1.0,
            "tasks_done": passed, "total_tasks": float(c["total"]), "task_completion_rate": rate,
            "wall_clock_seconds": float(seconds), "total_input_tokens": float(tok.loc[run, "input_tokens"]),
            "total_output_tokens": float(tok.loc[run, "output_tokens"]), "total_tokens": total,
            "tokens_per_task": total / passed if passed else np.nan,
        })
    return pd.DataFrame(rows)


def _published_trials(root: Path) -> pd.DataFrame:
    frames = []
    for folder, task in PUBLISHED_SOURCES:
        df = _results_rows(root, folder, task)
        hidden = _hidden_rows(root, folder)
        if hidden is not None:
            df = df.merge(hidden, on="run_dir", how="left")
        frames.append(df)
    frames.append(_metagpt_rows(root, *METAGPT_FOLDER))
    trials = pd.concat(frames, ignore_index=True)

    # Runs that logged 0 tokens: tokens and wall clock are missing, not zero (reference §7.1).
    zero = trials["total_tokens"].fillna(0) <= 0
    for col in ("total_tokens", "total_input_tokens", "total_output_tokens", "tokens_per_task",
                "wall_clock_seconds"):
        trials.loc[zero, col] = np.nan

    hidden_task = trials["task"].isin(schema.HIDDEN_ACCURACY_TASKS)
    trials["accuracy"] = np.where(hidden_task, trials.get("hidden_pass_rate", np.nan),
                                  trials["success"].astype(float))
    trials["idle_fraction_released"] = trials["idle_fraction"]
    trials["source"] = "published"
    trials["status"] = "ok"
    trials["error"] = ""

    metrics = _read_json(root / "event_metrics.json", dict)
    em = pd.DataFrame.from_dict(metrics, orient="index")
    missing = [c for c in schema.EVENT_METRIC_COLUMNS if c not in em.columns]
    if missing:
        raise DataError(f"malformed {root / 'event_metrics.json'}: entries lack {missing}")
    em = em[list(schema.EVENT_METRIC_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    em.index.name = "run_dir"
    trials = trials.merge(em.reset_index(), on="run_dir", how="left")
    return schema.conform(trials)


def _published_operator_usage(root: Path) -> pd.DataFrame:
    path = root / "operator_usage.json"
    data = _read_json(path, dict)
    rows = []
    for cond, ops in data.items():
        if not isinstance(ops, dict):
            raise DataError(f"malformed {path}: {cond!r} should map operator -> fraction")
        for op, frac in ops.items():
            rows.append({"team": schema.team_id(cond), "operator": op, "fraction": float(frac),
                         "n_runs": np.nan})
    return pd.DataFrame(rows, columns=list(schema.OPERATOR_USAGE_COLUMNS))


def _published_trajectories(root: Path) -> pd.DataFrame:
    path = root / "task_trajectories.json"
    data = _read_json(path, dict)
    rows = []
    for cond, d in data.items():
        try:
            # the published "stds" are standard errors of the mean (reference §7.3)
            for r, mean, sem in zip(d["rounds"], d["means"], d["stds"], strict=True):
                rows.append({"team": schema.team_id(cond), "round": int(r), "mean": float(mean),
                             "sem": float(sem), "n": np.nan})
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"malformed {path}: {cond!r} needs equal-length rounds/means/stds ({exc})") \
                from exc
    return pd.DataFrame(rows, columns=list(schema.TRAJECTORY_COLUMNS))


def _published_snapshots(root: Path) -> pd.DataFrame:
    path = root / "example_run_snapshots.json"
    data = _read_json(path, dict)
    rows = []
    for r, snap in data.items():
        try:
            for node, d in snap["nodes"].items():
                rows.append({"trial_id": "published_example", "round": int(r), "node": node,
                             "title": d.get("title", ""), "status": d.get("status", "pending"),
                             "owner": d.get("owner"), "deps": list(d.get("deps") or []),
                             "is_verify": bool(d.get("is_verify", False))})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DataError(f"malformed {path}: round {r!r} needs a 'nodes' mapping ({exc})") from exc
    return pd.DataFrame(rows, columns=list(schema.SNAPSHOT_COLUMNS))


def load_published(path=None) -> TrialData:
    """Read the authors' ``experiments/`` folder into tidy frames; by default the copy bundled with latte_lab
    (or ``$LATTE_PUBLISHED_DIR`` when set).

    Raises DataError naming the file when a required file is missing or malformed.

    Parameters
    ----------
    path : str or Path, optional
        The authors' ``experiments/`` folder (default: ``$LATTE_PUBLISHED_DIR``, else the bundled copy).

    Returns
    -------
    TrialData
        ``.trials`` (one row per trial, :data:`~latte_lab.schema.TRIAL_COLUMNS`) and the other tidy frames.
    """
    from latte_lab import data

    root = Path(path) if path is not None else data.published_dir()
    if not root.is_dir():
        raise DataError(f"published data folder {root} does not exist; point it at the authors' "
                        "experiments/ folder, or call load_published() for the copy bundled with latte_lab")
    return TrialData(trials=_published_trials(root), operator_usage=_published_operator_usage(root),
                     trajectories=_published_trajectories(root), snapshots=_published_snapshots(root),
                     source="published", path=str(root))


def is_published_dir(path) -> bool:
    """True when ``path`` looks like the authors' experiments/ folder."""
    root = Path(path)
    return any((root / folder / "results.csv").is_file() for folder, _ in PUBLISHED_SOURCES)


# --- our own runs ----------------------------------------------------------------------------------

def _graph_nodes(graph: dict) -> list[dict]:
    nodes = graph.get("nodes", [])
    if isinstance(nodes, dict):  # tolerate the published {id: {...}} form too
        return [{"id": k, **v} for k, v in nodes.items()]
    return list(nodes)


def trajectories_from_sizes(sizes: pd.DataFrame) -> pd.DataFrame:
    """Aggregate per-trial graph sizes (team, trial_id, round, n_nodes) into mean/SEM per round.

    Like the published JSON, a round averages only the runs still running at that round.
    """
    if sizes.empty:
        return pd.DataFrame(columns=list(schema.TRAJECTORY_COLUMNS))
    g = sizes.groupby(["team", "round"])["n_nodes"]
    out = g.agg(mean="mean", sem="sem", n="count").reset_index()
    return out[list(schema.TRAJECTORY_COLUMNS)]


def _pick_runs(root: Path) -> tuple[list[tuple[Path, dict]], int, list[dict]]:
    """One (run directory, result payload) per trial id under ``root``, how many attempts were left out, and
    the directories whose result.json or config.json is damaged (``{"path", "reason"}``), left out too.

    A sweep keeps the trial in ``<trial_id>/`` and the attempts that did not finish beside it
    (``<trial_id>.failed-<N>``, see :mod:`latte_lab.rundir`); a plain runs folder may hold several runs of
    one config (``<trial_id>-2``). Per trial id the pick is: a finished result, then the directory named
    after the trial, then the latest attempt. Directories whose name starts with a dot (a sweep's running
    area) are not read.
    """
    by_id: dict[str, list[tuple[Path, dict]]] = {}
    damaged: list[dict] = []
    for path in sorted(root.rglob(rundir.RESULT_FILE)):
        if any(part.startswith(".") for part in path.relative_to(root).parts[:-1]):
            continue
        try:
            data = rundir.read_result(path.parent)
            if (path.parent / rundir.CONFIG_FILE).exists():
                rundir.read_config(path.parent)
        except DataError as exc:
            damaged.append({"path": str(path.parent), "reason": str(exc)})
            continue
        trial_id = data["row"].get("trial_id") or data.get("trial_id") or path.parent.name
        by_id.setdefault(str(trial_id), []).append((path.parent, data))
    picked, ignored = [], 0
    for trial_id, runs in by_id.items():
        def rank(item, trial_id=trial_id):
            run_dir, data = item
            attempt = rundir.attempt_of(run_dir.name)[1]
            return (rundir.is_finished(data) or data.get("status", "ok") == "ok", run_dir.name == trial_id,
                    -1 if attempt is None else attempt, (run_dir / rundir.RESULT_FILE).stat().st_mtime)
        picked.append(max(runs, key=rank))
        ignored += len(runs) - 1
    return sorted(picked, key=lambda item: str(item[0])), ignored, damaged


def _graph_rows(run_dir: Path, row: dict) -> tuple[list[dict], list[dict], list[dict]]:
    """(operator usage, graph sizes, snapshot nodes) of one run directory, from its events.jsonl and
    snapshots.jsonl (the row's operator counts when it has no events); a damaged file is a DataError."""
    from latte_lab import metrics

    usage_rows, size_rows, snap_rows = [], [], []
    team, trial_id = row.get("team"), row["trial_id"]
    events_path = run_dir / rundir.EVENTS_FILE
    if events_path.is_file():
        counts = metrics.operator_counts(rundir.iter_jsonl(events_path))
    else:
        counts = {op: row.get(f"op_{op}") for op in schema.OPERATOR_EVENT_TYPES}
    for op, n in counts.items():
        if n is not None and not pd.isna(n):
            usage_rows.append({"team": team, "operator": op, "used": float(n > 0)})

    if (run_dir / rundir.SNAPSHOTS_FILE).is_file():
        for snap in rundir.iter_snapshots(run_dir):
            r, nodes = int(snap.get("round", 0)), _graph_nodes(snap.get("graph", {}))
            size_rows.append({"team": team, "trial_id": trial_id, "round": r, "n_nodes": len(nodes)})
            for n in nodes:
                snap_rows.append({"trial_id": trial_id, "round": r, "node": n.get("id"),
                                  "title": n.get("title", ""), "status": n.get("status", "pending"),
                                  "owner": n.get("agent", n.get("owner")),
                                  "deps": list(n.get("deps") or []),
                                  "is_verify": bool(n.get("is_verify", False))})
    return usage_rows, size_rows, snap_rows


def load_runs(out_dir, include_errors: bool = False) -> TrialData:
    """Read the run directories under ``out_dir`` (recursively) into the same frames as published: one
    row per trial id (see :func:`_pick_runs`); a warning counts the attempts left out.

    Trials whose status is not 'ok' are left out unless ``include_errors`` (crashed trials have no
    row in the published data either). Operator usage and graph sizes come from events.jsonl and
    snapshots.jsonl beside each result.json when present.

    A run directory with a damaged file (result.json, config.json, events.jsonl or snapshots.jsonl cut
    off or not JSON) is left out with a one-line warning naming it and the damage; the returned
    ``TrialData.damaged`` lists each as ``{"path", "reason"}``, and so does ``trials.attrs["damaged"]``
    (a list, empty when nothing is damaged; pandas keeps ``attrs`` through most operations on the frame).

    Parameters
    ----------
    out_dir : str or Path
        A folder holding run directories (searched recursively): a sweep, or ``runs/``.
    include_errors : bool, optional
        Keep trials whose status is not ``ok`` (default: False, as the published data has no crashed trials).

    Returns
    -------
    TrialData
        The same frames as :func:`load_published`, for these runs.
    """
    import warnings

    root = Path(out_dir)
    if not root.is_dir():
        raise DataError(f"run folder {root} does not exist")
    picked, ignored, damaged = _pick_runs(root)
    rows, usage_rows, size_rows, snap_rows = [], [], [], []
    not_ok = 0
    for run_dir, data in picked:
        row = data["row"]
        status = row.get("status", data.get("status", "ok"))
        if status != "ok" and not include_errors:
            not_ok += 1
            continue
        row = dict(row)
        row.setdefault("status", status)
        row.setdefault("trial_id", data.get("trial_id", run_dir.name))
        row["source"] = "latte_lab"
        try:
            usage, sizes, snaps = _graph_rows(run_dir, row)
        except DataError as exc:
            damaged.append({"path": str(run_dir), "reason": str(exc)})
            continue
        rows.append(row)
        usage_rows += usage
        size_rows += sizes
        snap_rows += snaps
    damaged.sort(key=lambda d: d["path"])
    if not rows:
        if damaged and not not_ok:
            raise DataError(f"every run directory under {root} is damaged ({len(damaged)}; the first: "
                            f"{damaged[0]['reason']}); restore them or run the sweep again")
        if not picked:
            raise DataError(f"no */result.json under {root}; run a sweep first (ll.run_sweep) or pass a "
                            "published experiments/ folder")
        raise DataError(f"every trial under {root} has status != 'ok'; pass include_errors=True to see them")
    for entry in damaged:
        warnings.warn(f"load_runs left out the damaged run directory {Path(entry['path']).name}: "
                      f"{entry['reason']}", stacklevel=2)
    if ignored or not_ok:
        parts = []
        if ignored:
            parts.append(f"{ignored} other attempt(s) of trials it has a row for (earlier errors, interruptions "
                         "or duplicates)")
        if not_ok:
            parts.append(f"{not_ok} trial(s) whose status is not 'ok' (include_errors=True shows them)")
        warnings.warn(f"load_runs({str(root)!r}) left out " + " and ".join(parts), stacklevel=2)
    trials = pd.DataFrame(rows)
    if "team" in trials:
        trials["team"] = [schema.team_id(t, strict=False) for t in trials["team"]]
    if "task" in trials:
        trials["task"] = [schema.task_id(t) for t in trials["task"]]
    if "accuracy" not in trials and "success" in trials:
        trials["accuracy"] = trials["success"].astype(float)
    trials = schema.conform(trials)
    trials.attrs["damaged"] = damaged

    usage = pd.DataFrame(usage_rows, columns=["team", "operator", "used"])
    if usage.empty:
        op_usage = pd.DataFrame(columns=list(schema.OPERATOR_USAGE_COLUMNS))
    else:
        op_usage = (usage.groupby(["team", "operator"], sort=False)["used"].agg(fraction="mean", n_runs="count")
                    .reset_index())
    sizes = pd.DataFrame(size_rows, columns=["team", "trial_id", "round", "n_nodes"])
    return TrialData(trials=trials, operator_usage=op_usage, trajectories=trajectories_from_sizes(sizes),
                     snapshots=pd.DataFrame(snap_rows, columns=list(schema.SNAPSHOT_COLUMNS)),
                     source="latte_lab", path=str(root), damaged=damaged)


def load(path) -> TrialData:
    """Published folder or a folder of our run directories, whichever ``path`` is."""
    return load_published(path) if is_published_dir(path) else load_runs(path)
