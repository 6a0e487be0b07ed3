"""``latte-lab show RUN``: one trial in full: its config, its outcome, the coordination graph as the trial
left it, one line per round, and its results row.

RUN is a run directory, or the name of one (a trial id, or the start of one) under the runs folder. A
trial still running or with damaged files is shown as far as its files can be read, with a line saying what
could not be.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from latte_lab.cli._common import MISSING, UsageError, cell, default_runs_dir, local_time, table
from latte_lab.cli.runs import RunEntry, find_runs, read_entry
from latte_lab.errors import DataError
from latte_lab.rundir import CONFIG_FILE, RESULT_FILE, read_json

__all__ = ["add_parser", "find_run", "graph_lines", "round_lines"]

IDENTITY_FIELDS = ("task", "team", "model", "seed", "trial", "n_workers", "max_rounds")
"""Config fields shown on the first config line; the others are shown when they differ from the default."""
PLACE_FIELDS = ("runs_dir", "cache_path")
"""Config fields that say where files went, not what the trial was: never shown."""
DEPS_WIDTH = 40
"""Most characters of a node's DEPS cell: a node with more dependencies lists the first and counts the rest,
so one node waiting on 35 others does not widen every row of the table."""
REFUSAL_TYPES = ("parse_error", "action_error")
"""Event types of a reply or action the team refused (besides every ``*_blocked`` type)."""

EPILOG = """\
examples:
  latte-lab show runs/sweep/debug-latte-s0-6ce190142a
  latte-lab show debug-latte-s0          a trial id, or the start of one, under runs/
  latte-lab show debug-static --runs-dir results/"""


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    runs_dir = default_runs_dir()
    p = sub.add_parser(
        "show", help="show one trial: config, outcome, final graph, rounds, results row",
        description="Show one trial: its config, its outcome (success, the team's own claim, accuracy, why it "
        "ended, rounds, tokens, dollars, virtual and real time), the coordination graph after its last round "
        "(each node's status, owner and dependencies), one line per round (who ran, what they did) and its "
        "results row. RUN is a run directory or a trial id (or the start of one) found under --runs-dir.",
        epilog=EPILOG)
    p.add_argument("run", metavar="RUN", help="run directory, or trial id (or its start) under --runs-dir")
    p.add_argument("--runs-dir", default=runs_dir,
                   help=f"where a trial id is looked for, searched recursively (default: {runs_dir})")
    p.set_defaults(func=run)
    return p


# --- finding the run ----------------------------------------------------------------------------------------

def find_run(name: str, runs_dir: str | Path) -> Path:
    """The run directory ``name`` stands for: itself when it is one, else the one trial under ``runs_dir``
    whose folder is named ``name``, or failing that whose trial id is ``name`` (a trial's failed attempts,
    ``<trial id>.failed-<N>``, share its id), or failing that whose folder name or id starts with ``name``.
    A UsageError when there is none, or more than one at the first step that finds any."""
    path = Path(name)
    if path.is_dir():
        if (path / CONFIG_FILE).exists() or (path / RESULT_FILE).exists():
            return path
        raise UsageError(f"{path} is not a run directory (it has no {CONFIG_FILE} or {RESULT_FILE}); "
                         f"latte-lab runs {path} lists the trials under it")
    root = Path(runs_dir)
    if not root.is_dir():
        raise UsageError(f"no run directory {name} and no folder {root} to look for a trial id in; give the run "
                         "directory or --runs-dir")
    entries = find_runs(root)
    for test in (lambda r: r.path.name == name,  # a trial's own folder before its failed attempts'
                 lambda r: r.trial_id == name,
                 lambda r: r.path.name.startswith(name) or r.trial_id.startswith(name)):
        found = [r for r in entries if test(r)]
        if len(found) == 1:
            return found[0].path
        if found:
            listed = ", ".join(str(r.path) for r in found[:5]) + (", ..." if len(found) > 5 else "")
            raise UsageError(f"{name} matches {len(found)} trials under {root} ({listed}); give its path")
    raise UsageError(f"no trial {name} under {root} (no run directory by that path, and no trial id that is or "
                     f"starts with it); list them with: latte-lab runs {root}")


# --- the parts ----------------------------------------------------------------------------------------------

def _json(path: Path) -> tuple[dict, str | None]:
    try:
        return read_json(path), None
    except DataError as exc:
        return {}, str(exc)


def config_lines(config: dict) -> list[str]:
    """The identity fields on one line, then every other field that differs from TrialConfig's default."""
    from latte_lab.config import TrialConfig

    shown = {**config, "max_rounds": config.get("max_rounds") or "the task's"}  # None: the task's default
    ident = " · ".join(f"{k.replace('n_workers', 'workers').replace('_', ' ')} {cell(shown.get(k))}"
                       for k in IDENTITY_FIELDS)
    fields = TrialConfig.model_fields
    other = [f"{k}={v}" for k, v in config.items()
             if k not in IDENTITY_FIELDS and k not in PLACE_FIELDS and (k not in fields or fields[k].default != v)]
    return [f"config     {ident}", f"settings   {', '.join(other) if other else 'the defaults (the paper)'}"]


def outcome_lines(entry: RunEntry, result: dict) -> list[str]:
    row = result.get("row") or {}

    def yes(v) -> str:
        return MISSING if v is None or v != v else ("yes" if v else "no")

    claimed = f" (team's claim: {yes(row['claimed_success'])})" if "claimed_success" in row else ""
    lines = [f"status     {entry.status}" + (f": {entry.problem}" if entry.problem else ""),
             f"outcome    success {yes(row.get('success'))}{claimed} · accuracy {cell(entry.accuracy, '{:.0%}')} · "
             f"ended by {cell(row.get('reason'))}"]
    planning = row.get("planning_seconds")
    virtual = row.get("wall_clock_with_planning_seconds", row.get("wall_clock_seconds"))
    lines.append(
        f"cost       rounds {cell(entry.rounds)} · tokens {cell(entry.tokens, '{:,}')} (in "
        f"{cell(row.get('total_input_tokens'), '{:,}')} / out {cell(row.get('total_output_tokens'), '{:,}')}) · "
        f"dollars {cell(entry.dollars, '{:.4f}')} · wall clock {cell(virtual, '{:.1f}')} s virtual"
        + (f" (planning {cell(planning, '{:.1f}')} s)" if cell(planning) not in (MISSING, "0", "0.0") else "")
        + f", {cell(row.get('real_seconds'), '{:.1f}')} s real")
    if row.get("hidden_total") not in (None, 0) and row.get("hidden_total") == row.get("hidden_total"):
        lines.append(f"hidden     {cell(row.get('hidden_passed'))}/{cell(row.get('hidden_total'))} tests passed")
    lines.append(f"time       started {local_time(entry.started, seconds=True)} · "
                 f"finished {local_time(entry.finished, seconds=True)}")
    return lines


def graph_lines(run_dir: Path) -> list[str]:
    """The coordination graph after the trial's last recorded round, one node per line."""
    from latte_lab.graph import CoordinationGraph
    from latte_lab.rundir import SNAPSHOTS_FILE, read_snapshots

    if not (run_dir / SNAPSHOTS_FILE).is_file():
        return ["graph: none recorded (a team without a coordination graph, or a trial that stopped before "
                "planning ended)"]
    try:
        history = read_snapshots(run_dir)
        if not len(history):
            return ["graph: none recorded (snapshots.jsonl is empty)"]
        last = history[-1]
        g = CoordinationGraph.from_snapshot(last["graph"])
    except DataError as exc:
        return [f"graph: cannot be read: {exc}"]
    counts = ", ".join(f"{n} {s}" for s, n in g.counts().items() if n)
    lines = [f"graph after round {last['round']} (virtual time {last['t']:.0f} s): {len(g)} nodes"
             + (f" ({counts})" if counts else "") + f"; frontier: {', '.join(g.frontier()) or 'empty'}"]
    rows = []
    for node_id in g.nodes():
        node = g.node(node_id)
        rows.append(["  " + node_id, node["status"], node["agent"] or MISSING, deps_cell(node["deps"]),
                     node["title"] or ""])
    if rows:
        lines += table(["  NODE", "STATUS", "OWNER", "DEPS", "TITLE"], rows)
    return lines


def deps_cell(deps, width: int = DEPS_WIDTH) -> str:
    """A node's dependencies for the DEPS column, at most ``width`` characters: as many as fit, then how many
    more.

    >>> deps_cell(["t1", "t2"]), deps_cell([]), deps_cell([f"fix-{i}" for i in range(35)], width=24)
    ('t1, t2', '-', 'fix-0, fix-1 (+33 more)')
    """
    deps = list(deps)
    if not deps:
        return MISSING
    text = ", ".join(deps)
    if len(text) <= width:
        return text
    for k in range(len(deps) - 1, 0, -1):
        text = f"{', '.join(deps[:k])} (+{len(deps) - k} more)"
        if len(text) <= width:
            return text
    return f"{deps[0]} (+{len(deps) - 1} more)"


def round_lines(run_dir: Path) -> list[str]:
    """One line per round from events.jsonl: who ran, how many actions of each kind took effect, what was
    refused, the last test run, and the virtual clock at the round's end."""
    from latte_lab.events import ACTION_EVENT_TYPES
    from latte_lab.rundir import EVENTS_FILE, iter_jsonl

    path = run_dir / EVENTS_FILE
    if not path.is_file():
        return ["rounds: no events.jsonl"]
    rounds: dict[int, dict] = {}
    note = None
    try:
        for e in iter_jsonl(path):
            r = e.get("round")
            if not isinstance(r, int):
                continue
            info = rounds.setdefault(r, {"ran": [], "replied": [], "actions": {}, "refused": 0, "tests": None,
                                         "t": 0.0})
            kind = e.get("type")
            if kind == "round_dispatch":
                info["ran"] = list(e.get("agents") or [])
            elif kind in ("agent_reply", "planning_reply") and e.get("agent") not in info["replied"]:
                info["replied"].append(e.get("agent"))
            elif kind in ACTION_EVENT_TYPES:
                info["actions"][kind] = info["actions"].get(kind, 0) + 1
                if kind == "run_tests" and e.get("passed") is not None:
                    total = sum(int(e.get(k) or 0) for k in ("passed", "failed", "errors"))
                    info["tests"] = f"{e['passed']}/{total}"
            elif kind in REFUSAL_TYPES or str(kind).endswith("_blocked"):
                info["refused"] += 1
            if isinstance(e.get("t"), int | float):
                info["t"] = e["t"]
    except DataError as exc:
        note = f"events.jsonl stops being readable here: {exc}"
    rows = []
    for r, info in sorted(rounds.items()):
        ran = info["ran"] or info["replied"]
        actions = ", ".join(f"{k} {n}" for k, n in sorted(info["actions"].items(), key=lambda kv: -kv[1]))
        rows.append([f"  {r}" + (" (planning)" if r == 0 else ""), ",".join(a for a in ran if a) or MISSING,
                     str(info["refused"]), info["tests"] or MISSING, f"{info['t']:.0f}s", actions or MISSING])
    # ACTIONS last: the one long column, never padded, so a busy round does not widen every row
    lines = table(["  ROUND", "RAN", "REFUSED", "TESTS", "VIRTUAL T", "ACTIONS"], rows, right={2, 4}) if rows \
        else ["  no rounds recorded"]
    return ["rounds (VIRTUAL T: the trial's virtual clock at the round's end, model latency and tool time)"] + \
        lines + ([note] if note else [])


def row_lines(result: dict) -> list[str]:
    """The results row in the schema's column order, columns without a value left out (and counted)."""
    from latte_lab.schema import TRIAL_COLUMNS

    row = result.get("row") or {}
    if not row:
        return ["results row: none (no readable result.json)"]
    keys = [k for k in TRIAL_COLUMNS if k in row] + [k for k in row if k not in TRIAL_COLUMNS]
    kept = [k for k in keys if cell(row[k]) != MISSING]
    width = max(len(k) for k in kept) if kept else 0
    lines = [f"results row ({len(kept)} columns with a value, {len(keys) - len(kept)} without)"]
    lines += [f"  {k:<{width}}  {cell(row[k], '{:.6g}') if isinstance(row[k], float) else row[k]}" for k in kept]
    return lines


def run(args) -> int:
    run_dir = find_run(args.run, args.runs_dir)
    entry = read_entry(run_dir)
    config, config_problem = _json(run_dir / CONFIG_FILE)
    result = _json(run_dir / RESULT_FILE)[0]
    print(f"trial {entry.trial_id}  ({run_dir})")
    print("\n".join(config_lines(config) if config else [f"config     cannot be read: {config_problem}"]))
    print("\n".join(outcome_lines(entry, result)))  # its status line says what in result.json cannot be read
    for part in (graph_lines(run_dir), round_lines(run_dir), row_lines(result)):
        print()
        print("\n".join(part))
    return 0
