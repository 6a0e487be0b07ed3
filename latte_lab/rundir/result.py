"""A trial read back from its run directory (:class:`TrialResult`, :func:`load_trial`), and what a result says of
how its trial ended: finished or not (:func:`is_finished`), the result of an attempt that did not finish
(:func:`failed_result`), and the name an unfinished attempt is kept under (:func:`attempt_of`).

>>> attempt_of("debug-latte-s0-1a2b3c4d5e.failed-2"), attempt_of("debug-latte-s0-1a2b3c4d5e")
(('debug-latte-s0-1a2b3c4d5e', 2), ('debug-latte-s0-1a2b3c4d5e', None))
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from latte_lab.config import TrialConfig
from latte_lab.errors import DataError, LatteError
from latte_lab.graph.history import GraphHistory
from latte_lab.rundir.format import (
    CONFIG_FILE,
    EVENTS_FILE,
    RESULT_FILE,
    read_config,
    read_json,
    read_jsonl,
    read_result,
    read_snapshots,
)
from latte_lab.schema import SCHEMA_VERSION

__all__ = ["FAILED_INFIX", "FINAL_STATUSES", "REASONS", "TrialResult", "attempt_of", "failed_result", "is_finished",
           "load_trial"]

FAILED_INFIX = ".failed-"  # an attempt that did not finish is kept as <trial_id>.failed-<N> beside the trial
FINAL_STATUSES = ("ok", "budget")
"""Statuses of a finished trial; ``budget`` only when the trial's own budget stopped it (reason
``budget``), not the sweep's (reason ``sweep_budget``)."""


def is_finished(payload: dict | None) -> bool:
    """Whether a result.json payload is a finished trial (see :data:`FINAL_STATUSES`)."""
    if not payload:
        return False
    status = payload.get("status")
    return status == "ok" or (status == "budget" and (payload.get("row") or {}).get("reason") == "budget")


def attempt_of(name: str) -> tuple[str, int | None]:
    """(trial id, attempt number) of a run directory's name; None for the trial's own."""
    stem, sep, n = name.rpartition(FAILED_INFIX)
    if sep and n.isdigit():
        return stem, int(n)
    return name, None


def failed_result(run_dir: str | Path, error: str, *, reason: str = "error", keep_row: bool = False) -> dict:
    """The result.json of an attempt that did not finish: status ``error``, ``error`` and ``reason``, the row built
    from its config.json (or, with ``keep_row``, its own row with the status changed). A damaged result.json there
    is moved aside first, as ``result.json.damaged``."""
    run_dir = Path(run_dir)
    row: dict = {}
    if keep_row:
        try:
            row = dict(read_json(run_dir / RESULT_FILE).get("row") or {})
        except DataError:
            row = {}
    if not row:
        try:
            cfg = read_config(run_dir)
            row = {"task": cfg.task, "team": cfg.team, "model": cfg.model, "seed": cfg.seed, "trial": cfg.trial,
                   "trial_id": cfg.trial_id, "n_workers": cfg.n_workers, "success": False}
        except DataError:
            row = {"trial_id": attempt_of(run_dir.name)[0], "success": False}
    result = run_dir / RESULT_FILE
    if not keep_row and result.exists():
        try:
            read_json(result)
        except DataError:  # keep the damaged file beside the new one: nothing is lost
            os.replace(result, result.with_name(RESULT_FILE + ".damaged"))
    row.update(status="error", error=error, reason=reason, run_dir=str(run_dir), source="latte_lab")
    return {"schema_version": SCHEMA_VERSION, "trial_id": row.get("trial_id"), "status": "error", "reason": reason,
            "error": error, "row": row, "metrics": {}, "eval": {}}


# --- a trial read back --------------------------------------------------------------------------------------

REASONS = {
    "all_tasks_done": "every task of the graph done and the public tests passing",
    "certified": "an agent declared the work done while the public tests passed",
    "tests_passed": "the public tests passed",
    "tests_failed": "the public tests still failed once the planned tasks were done",
    "planning_failed": "the Lead planned no task",
    "qa_rounds_exhausted": "the QA rounds ran out with tests failing",
    "max_rounds": "the round budget ran out first",
    "interrupted": "stopped by the user or a signal",
    "budget": "the trial's token or dollar budget ran out",
    "sweep_budget": "the sweep's token or dollar budget ran out",
    "error": "the trial failed",
}
"""What each ``reason`` (how a trial ended, the results row's column) means, as the summary says it."""


def _accuracy_metric(task: str) -> str | None:
    """The task's accuracy measure (``success`` or ``hidden_pass_rate``), from the task registry; None for a
    task no longer registered (a run directory read back elsewhere)."""
    from latte_lab import tasks  # a registry lookup (tests/package/test_layers.py allows exactly this)

    try:
        return tasks.get(task).accuracy_metric
    except LatteError:
        return None


@dataclass
class TrialResult:
    """What a trial produced. ``row`` is its line in the tidy results schema (``ll.load_runs``)."""

    config: TrialConfig
    trial_id: str
    status: str  # "ok" or "error"
    error: str | None
    success: bool
    accuracy: float | None
    rounds: int
    input_tokens: int
    output_tokens: int
    virtual_seconds: float
    real_seconds: float
    reason: str
    metrics: dict = field(default_factory=dict)
    eval: dict = field(default_factory=dict)
    row: dict = field(default_factory=dict)
    run_dir: Path | None = None
    event_list: list[dict] = field(default_factory=list, repr=False)
    snapshots: Sequence[dict] = field(default_factory=GraphHistory, repr=False)
    """The graph per round (graph teams): ``snapshots[i]`` is ``{"round", "t", "graph"}``."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def events(self):
        """The event log as a pandas DataFrame (one row per event; ``round`` as integers, <NA> outside rounds)."""
        import pandas as pd

        df = pd.DataFrame(self.event_list)
        if "round" in df:
            df["round"] = df["round"].astype("Int64")  # not 3.0: events before round 0 have none
        return df

    def summary(self) -> str:
        """Four lines: the outcome (its first line, short enough for a title), what the outcome means, the
        figures (accuracy saying what it measures) and the run directory. Success is the team's own verdict
        (``reason``, worded by :data:`REASONS`) as confirmed by the hidden evaluation's run of the public
        tests; accuracy is the task's Table 2 measure, which may differ from it."""
        head = f"{self.trial_id}: {'SUCCESS' if self.success else 'no success'} ({self.reason})"
        if self.status != "ok":
            head += f" — ERROR: {self.error}"
        return (f"{head}\n  {self._outcome_words()}\n  {self._accuracy_words()} · rounds {self.rounds} · "
                f"tokens {self.tokens:,} (in {self.input_tokens:,} / out {self.output_tokens:,}) · "
                f"virtual {self.virtual_seconds:.1f} s · real {self.real_seconds:.1f} s\n"
                f"  run directory: {self.run_dir}")

    def _outcome_words(self) -> str:
        """``reason: what it means``, and why a claimed success is none when the evaluation contradicted it."""
        words = f"{self.reason}: {REASONS.get(self.reason, 'how the team reported its end')}"
        if self.row.get("claimed_success") is True and not self.success and self.status == "ok":
            words += "; but the public tests as shipped failed in the hidden evaluation, so no success"
        elif self.success:
            words += "; the hidden evaluation's run of the public tests confirmed it"
        return words

    def _accuracy_words(self) -> str:
        """``accuracy 91% = share of the hidden tests passed (53 of 58)``, or what else the figure measures."""
        if self.accuracy is None or self.accuracy != self.accuracy:  # None or NaN
            return "accuracy n/a (the hidden evaluation gave no score)"
        value = f"accuracy {self.accuracy:.0%}"
        if _accuracy_metric(self.config.task) == "success":
            return f"{value} (this task scores success: 100% or 0%)"
        passed, total = self.eval.get("passed"), self.eval.get("total")
        counts = f" ({passed} of {total})" if isinstance(passed, int) and isinstance(total, int) else ""
        return f"{value} = share of the hidden tests passed{counts}"

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:  # a compact card in notebooks
        import html

        return "<pre>" + html.escape(self.summary()) + "</pre>"


def load_trial(run_dir: str | Path) -> TrialResult:
    """Reads a finished run directory back into a TrialResult (no model calls, nothing rerun).

    Parameters
    ----------
    run_dir : str or Path
        A finished run directory (``config.json`` and ``result.json``).

    Returns
    -------
    TrialResult
        The trial as :func:`~latte_lab.trial.run_trial` returned it.
    """
    run_dir = Path(run_dir)
    for name in (CONFIG_FILE, RESULT_FILE):
        if not (run_dir / name).exists():
            raise DataError(f"{run_dir / name} is missing: {run_dir} is not a finished latte_lab run directory")
    config = read_config(run_dir)
    payload = read_result(run_dir)
    row = payload["row"]
    return TrialResult(
        config=config, trial_id=payload.get("trial_id", config.trial_id), status=payload.get("status", "ok"),
        error=payload.get("error"), success=bool(row.get("success")), accuracy=row.get("accuracy"),
        rounds=int(row.get("total_rounds") or 0), input_tokens=int(row.get("total_input_tokens") or 0),
        output_tokens=int(row.get("total_output_tokens") or 0),
        virtual_seconds=float(row.get("wall_clock_with_planning_seconds", row.get("wall_clock_seconds")) or 0.0),
        real_seconds=float(row.get("real_seconds") or 0.0),
        reason=row.get("reason", ""), metrics=payload.get("metrics", {}), eval=payload.get("eval", {}), row=row,
        run_dir=run_dir, event_list=read_jsonl(run_dir / EVENTS_FILE), snapshots=read_snapshots(run_dir),
    )
