"""The one tidy trial schema shared by the published data and latte_lab's own trials.

Every analysis function takes a ``trials`` DataFrame with (a subset of) these columns, one row per
trial, whatever the source. ``load_published`` maps the authors' files onto it; ``load_runs`` reads
our run directories onto it; the trial engine fills a row with these keys (missing ones are NaN).

Names follow the released results.csv where it had them (reference §7.1), so the published numbers
and ours are computed by the same code. Team and task ids are latte_lab's (see ``TEAM_FROM_OFFICIAL``).

>>> "accuracy" in TRIAL_COLUMNS and "cross_agent_overwrites" in TRIAL_COLUMNS
True
>>> team_id("no_graph"), task_id("debug_sprint")
('leader_worker', 'debug')
"""

from __future__ import annotations

from latte_lab.config import TASK_ALIASES, TEAM_ALIASES
from latte_lab.errors import DataError
from latte_lab.events import OPERATOR_EVENT_TYPES

# --- the data contract's version --------------------------------------------------------------------

SCHEMA_VERSION = "1.0"
"""The version of latte_lab's data contract: the files of a run directory (config.json, result.json, the
event types of events.jsonl, calls.jsonl) and the results columns (:data:`TRIAL_COLUMNS`). It is written into
config.json, result.json, the first event (``run_start``) and the Parquet export's metadata. The minor number
grows when something is added (an event type, a column, an optional field): older readers can still read it.
The major number grows when something is renamed, removed or changes meaning: :func:`latte_lab.read_run`
refuses a run of a newer major version. A run written before versioning reads as version ``0``."""

UNVERSIONED = "0"
"""The schema version of a run directory written before latte_lab recorded one."""


def schema_major(version: str | None) -> int:
    """The major number of a schema version string (``"1.0"`` -> 1; None or ``"0"`` -> 0).

    >>> schema_major("1.0"), schema_major(None), schema_major("2")
    (1, 0, 2)
    """
    if version is None:
        return 0
    head = str(version).split(".", 1)[0]
    if not head.isdigit():
        raise DataError(f"schema_version {version!r} is not a version number such as {SCHEMA_VERSION!r}")
    return int(head)


def check_schema_version(version: str | None, where: str) -> str:
    """``version`` (``"0"`` when None) if this latte_lab reads it; a one-line DataError for a newer major.

    >>> check_schema_version(None, "x"), check_schema_version("1.3", "x")
    ('0', '1.3')
    >>> check_schema_version("9.0", "runs/a")
    Traceback (most recent call last):
    ...
    latte_lab.errors.DataError: runs/a has data schema 9.0, newer than this latte_lab reads (1.x and older): upgrade latte_lab (pip install -U latte-lab)
    """
    if schema_major(version) > schema_major(SCHEMA_VERSION):
        raise DataError(f"{where} has data schema {version}, newer than this latte_lab reads "
                        f"({schema_major(SCHEMA_VERSION)}.x and older): upgrade latte_lab (pip install -U latte-lab)")
    return UNVERSIONED if version is None else str(version)


# --- names ------------------------------------------------------------------------------------------

TEAM_ORDER = ("latte", "leader_worker", "decentralized", "static", "metagpt", "pipeline")
"""Display order of teams (the paper's column order; our pipeline team last)."""

TASK_ORDER = ("eda", "debug", "textproc")
"""Display order of tasks (the paper's row order)."""

TEAM_LABELS = {
    "latte": "LATTE",
    "leader_worker": "Leader-Worker",
    "decentralized": "Decentralized",
    "static": "Static",
    "metagpt": "MetaGPT",
    "pipeline": "Pipeline",
}
TASK_LABELS = {"eda": "Data Analysis", "debug": "Debug", "textproc": "Library Ext.", "all": "Agg."}

# The published data's condition and task names: the aliases of latte_lab.config, plus the names the
# released code shares with ours (and `metagpt`, the real MetaGPT, which has no latte_lab team).
TEAM_FROM_OFFICIAL = {**{n: n for n in ("static", "decentralized", "metagpt")}, **TEAM_ALIASES}
TASK_FROM_OFFICIAL = {"textproc": "textproc", **TASK_ALIASES}

HIDDEN_ACCURACY_TASKS = frozenset({"eda", "textproc"})
"""Tasks whose accuracy is the hidden-suite pass rate; every other task uses binary public success
(reference §8.5)."""

ALL = "all"
SUCCESS_AND_ACCURACY = (
    "success: the team declared the task done and the task's public tests, as shipped, pass when the hidden "
    "evaluation runs them; accuracy: the share of the task's hidden tests that pass (the debug task scores "
    "success itself, 0 or 1). The public tests are few and the hidden ones many, so a team can succeed at a low "
    "accuracy, or pass most hidden tests without finishing.")
"""What the ``success`` and ``accuracy`` columns mean, said beside every table that shows both."""
"""Value of ``model``/``task`` in aggregate rows (both models pooled / all tasks pooled)."""

# --- columns ---------------------------------------------------------------------------------------

TRIAL_COLUMNS: dict[str, str] = {
    # identity
    "source": "'published' (authors' data) or 'latte_lab' (our own trials)",
    "task": "task id: eda, debug, textproc (or any registered task)",
    "team": "team id: latte, static, leader_worker, decentralized, pipeline, metagpt",
    "model": "'<provider>/<model>', e.g. anthropic/claude-sonnet-4-6, openai/gpt-5.2, simulated",
    "seed": "seed of the trial (ours); NaN for published rows",
    "trial": "replicate index (published: the dispatcher's trial number)",
    "trial_id": "unique id of the trial (published: run directory basename or MetaGPT run name)",
    "status": "'ok', 'error', or 'budget' when a budget stopped it (published rows are all ok: crashed trials "
    "have no row)",
    "error": "error message of a failed trial, else empty",
    "run_dir": "run directory (published: as written in results.csv)",
    "n_workers": "number of workers/peers besides the Lead (published n_teammates)",
    # outcome
    "success": "public success (graph teams: all nodes done and public tests pass; flat: tests pass), as confirmed "
    "by the hidden evaluation's own run of the public tests as shipped: a claim it contradicts is not a success",
    "parent": "a fork's parent run directory (latte_lab.forking); empty for a trial run from round 0 (ours only)",
    "fork_round": "the round after which a fork left its parent (0: after planning); NaN for a trial from round 0",
    "claimed_success": "the team's own verdict from its public test runs (ours only); differs from success when "
    "the hidden evaluation contradicted it",
    "tampered": "the workspace reached into its tests (a conftest.py, pytest configuration, a patch of pytest or "
    "unittest, ...; see the trial's tampering events); ours only; the hidden score is computed as if it were absent",
    "accuracy": "Table 2 accuracy in 0..1: hidden pass rate for eda/textproc, success for debug; "
    "NaN when the hidden eval has no rate (missing deliverables are dropped, reference §8.5)",
    "tasks_done": "done nodes (graph) or passed public tests (flat, MetaGPT)",
    "total_tasks": "all nodes (graph) or public tests (flat, MetaGPT)",
    "task_completion_rate": "tasks_done / total_tasks (0 when total is 0)",
    "hidden_passed": "hidden-suite tests passed",
    "hidden_failed": "hidden-suite tests failed (published only)",
    "hidden_total": "hidden-suite tests run",
    "hidden_pass_rate": "hidden_passed / hidden_total; NaN when the suite could not score the run",
    # cost
    "wall_clock_seconds": "wall clock of the execution rounds in seconds, planning excluded, as the released "
    "code measured it for Table 2 (ours: virtual clock = model latency + tool time); NaN where tokens are "
    "missing (the released analysis drops both)",
    "wall_clock_with_planning_seconds": "wall_clock_seconds plus the planning phase (ours only)",
    "planning_seconds": "virtual seconds of the planning phase (0 for teams without one; A6.3)",
    "real_seconds": "real elapsed seconds of our trial (NaN for published rows)",
    "total_rounds": "number of round_start events (MetaGPT: its own round count)",
    "total_input_tokens": "input tokens of every call, planning included",
    "total_output_tokens": "output tokens of every call",
    "total_tokens": "input + output tokens; NaN when the run logged 0 tokens (reference §7.1)",
    "tokens_per_task": "total_tokens / tasks_done (NaN when tasks_done is 0)",
    # dispatch (released definitions, reference §7.1)
    "dispatched_agent_rounds": "sum of round_dispatch.n_dispatched",
    "possible_agent_rounds": "sum of round_dispatch.n_total",
    "idle_agent_rounds": "possible - dispatched",
    "idle_fraction": "idle / possible (0 when none); Figure 4E inactivity; 1 - idle = active rounds",
    "idle_fraction_released": "idle fraction from the *_released dispatch counts (ours; published rows "
    "copy idle_fraction, which is that definition)",
    # released event metrics (reference §7.2; published event_metrics.json)
    "cross_agent_overwrites": "per file, adjacent edits (log order) by different agents",
    "n_concurrent_collisions": "distinct (file, round) edited by >= 2 agents",
    "wasted_chars": "per colliding (file, round): characters of all its edits but the last",
    "total_code_chars": "characters of all edits",
    "total_messages": "agent_reply events of agents other than the Lead",
    "total_message_chars": "characters of those replies, each capped at 2,000 as the released logger did",
    # the paper's intended metrics (our trials only; NaN for published rows)
    "function_overwrites": "per (file, symbol), adjacent edits by different agents",
    "function_concurrent_writes": "distinct (file, symbol, round) written by >= 2 agents",
    "discarded_chars": "characters of written lines that never appear in the final file",
    "n_broadcasts": "broadcast events",
    "message_chars": "characters of broadcast text",
    "active_agent_rounds": "sum over rounds of team agents that actually ran (round_dispatch.agents)",
    "team_agent_rounds": "sum over rounds of the team size (initialize.agents)",
    "inactive_agent_rounds": "team_agent_rounds - active_agent_rounds (agent-rounds nobody used)",
    "active_fraction": "active_agent_rounds / team_agent_rounds",
    "n_completed_nodes": "nodes with a completion time (claimed, then completed or closed)",
    "node_completion_mean_s": "node completion time (§5.3): mean virtual seconds from a node's first claim "
    "to its complete/close",
    "node_completion_p95_s": "95th percentile of the same",
    "node_completion_from_assign_mean_s": "mean virtual seconds from a node's first assign or claim to its "
    "complete/close (includes waiting after an early Assign)",
    "node_completion_from_assign_p95_s": "95th percentile of the same",
    "graph_size_initial": "nodes after planning (round 0 snapshot)",
    "graph_size_final": "nodes in the last snapshot",
    "graph_size_per_round": "list of node counts per snapshot round (object column)",
    "n_parse_errors": "parse_error events",
    "lead_invocations": "rounds in which the Lead ran (round_dispatch.agents)",
    "lead_active_fraction": "lead_invocations / total_rounds (A6.3: share of execution rounds with the Lead)",
    "heartbeat_alerts": "heartbeat_alert events",
    "n_verify": "create_verify_node events",
    "n_release": "release_task events",
    "fix_tasks": "fix_task_injected events",
}
"""Every trial column with its definition; the engine imports this and fills missing keys with NaN.
Operator counts ``op_<event type>`` (see ``latte_lab.events.OPERATOR_EVENT_TYPES``) are added below."""

for _op in OPERATOR_EVENT_TYPES:
    TRIAL_COLUMNS[f"op_{_op}"] = f"number of {_op} events in the trial"
del _op

EVENT_METRIC_COLUMNS = (
    "cross_agent_overwrites",
    "n_concurrent_collisions",
    "wasted_chars",
    "total_code_chars",
    "total_messages",
    "total_message_chars",
)
"""The released per-run coordination metrics (published event_metrics.json keys)."""

TRAJECTORY_COLUMNS = ("team", "round", "mean", "sem", "n")
"""Graph size per round, aggregated per team over the runs still running at that round."""

OPERATOR_USAGE_COLUMNS = ("team", "operator", "fraction", "n_runs")
"""Fraction of a team's runs with >= 1 event of an operator type (n_runs NaN when unknown)."""

SNAPSHOT_COLUMNS = ("trial_id", "round", "node", "title", "status", "owner", "deps", "is_verify")
"""One row per node per snapshot round (deps is a list)."""


def team_id(name: str, strict: bool = True) -> str:
    """Our team id for an official condition name (our own ids pass through).

    ``strict=False`` passes any other name through too: our own run directories may hold teams a user
    registered (``latte_lab.teams.register``), which this module does not know.
    """
    if name in TEAM_LABELS or (not strict and name not in TEAM_FROM_OFFICIAL):
        return name
    try:
        return TEAM_FROM_OFFICIAL[name]
    except KeyError:
        known = sorted(set(TEAM_FROM_OFFICIAL) | set(TEAM_LABELS))
        raise DataError(f"unknown team/condition {name!r}; known: {', '.join(known)}") from None


def task_id(name: str) -> str:
    """Our task id for an official task name (our own ids pass through)."""
    return TASK_FROM_OFFICIAL.get(name, name)


def conform(df):
    """Return ``df`` with every TRIAL_COLUMNS column (missing ones NaN), schema columns first.

    Extra columns are kept after the schema ones so nothing a caller added is lost.
    """
    import numpy as np

    out = df.copy()
    for col in TRIAL_COLUMNS:
        if col not in out.columns:
            out[col] = np.nan
    extra = [c for c in out.columns if c not in TRIAL_COLUMNS]
    return out[list(TRIAL_COLUMNS) + extra].reset_index(drop=True)


def require_columns(trials, cols) -> None:
    """Raises a one-line DataError unless ``trials`` is a DataFrame holding every column in ``cols``.

    >>> import pandas as pd
    >>> require_columns(pd.DataFrame({"team": []}), ("team", "accuracy"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    latte_lab.errors.DataError: trials frame lacks columns ['accuracy']; ...
    """
    columns = getattr(trials, "columns", None)
    if columns is None or not hasattr(trials, "iloc"):
        raise DataError(f"expected a trials DataFrame (e.g. ll.load_published(path).trials), got "
                        f"{type(trials).__name__}")
    missing = [c for c in cols if c not in columns]
    if missing:
        raise DataError(f"trials frame lacks columns {missing}; build it with ll.load_published or "
                        "ll.load_runs (schema: latte_lab.schema.TRIAL_COLUMNS)")


def ordered(values, order) -> list:
    """Values sorted by a display order; unknown values follow in sorted order."""
    values = list(dict.fromkeys(values))
    known = [v for v in order if v in values]
    return known + sorted(v for v in values if v not in order)
