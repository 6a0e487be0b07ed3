"""What a trial ends with: the evaluation of the workspace the team left, and the trial's results row.

:func:`evaluate_workspace` runs the task's hidden evaluation on the final workspace and looks for tampering (the
static scan of every file an agent wrote, and what the judge saw); :func:`results_row` is the trial's line in the
tidy results schema (:data:`latte_lab.schema.TRIAL_COLUMNS`): the metrics of its event log (:mod:`latte_lab.metrics`)
with how it ended, its cost, its clocks and its evaluation. :func:`latte_lab.trial.run_trial` calls both once its
rounds are over, whatever ended them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from latte_lab.sandbox import slots
from latte_lab.schema import TRIAL_COLUMNS

__all__ = ["Evaluation", "accuracy_of", "evaluate_workspace", "results_row", "tampering_found"]


@dataclass
class Evaluation:
    """The hidden evaluation of a final workspace: ``eval`` is result.json's ``eval`` (counts, rate, per class,
    notes; or ``{"error": ...}``), ``tampering`` the ``tampering`` events' fields, ``final_files`` the workspace's
    text files (for the metrics of waste), ``public_confirmed`` whether the public tests, as shipped, passed."""

    eval: dict = field(default_factory=dict)
    tampering: list[dict] = field(default_factory=list)
    final_files: dict[str, str] = field(default_factory=dict)
    public_confirmed: bool | None = None


def evaluate_workspace(task, ws, events: list[dict], emit: Callable[..., object]) -> Evaluation:
    """Evaluate the workspace ``ws`` the team left with the task's hidden suite, and look for tampering (in the
    final files and in every file an agent wrote on the way, ``events``); emits the ``evaluation`` event and one
    ``tampering`` event per finding. An evaluation that fails is recorded as its error, never raised."""
    found = Evaluation(tampering=tampering_found(task, ws.root, events))
    try:
        with slots.held(evaluation=True):  # the hidden suite takes a core, as the trial's own test runs do
            ev = task.evaluate(ws)
        found.eval = {"passed": ev.passed, "failed": ev.failed, "errors": ev.errors, "total": ev.total,
                      "rate": ev.rate, "per_class": {k: list(v) for k, v in ev.per_class.items()},
                      "missing_outputs": list(ev.missing_outputs), "public_confirmed": ev.public_confirmed,
                      "notes": list(ev.notes), "failed_tests": list(ev.failed_tests)}
        emit("evaluation", **found.eval)
        found.tampering += [{"kind": "evaluation", "path": where.rsplit(":", 1)[0] if where else "",
                             "line": int(where.rsplit(":", 1)[1]) if where.rsplit(":", 1)[-1].isdigit() else 0,
                             "detail": what, "source": "evaluation"} for what, where in ev.tampering]
        found.public_confirmed = ev.public_confirmed
        found.final_files = ws.snapshot_files()
    except Exception as exc:  # noqa: BLE001 - the evaluation failing must not lose the trial
        found.eval = {"error": f"{type(exc).__name__}: {exc}"}
        emit("evaluation", error=found.eval["error"])
    for item in found.tampering:
        emit("tampering", **item)
    return found


def tampering_found(task, root: Path, events: list[dict]) -> list[dict]:
    """What the final workspace, and every file an agent wrote on the way, shows of reaching into the tests
    (:func:`latte_lab.sandbox.tamper.scan`), as ``tampering`` event fields; files the task set up are not."""
    from latte_lab.sandbox.tamper import scan, scan_text
    from latte_lab.tasks.files import task_files

    try:
        own = task_files(task)
    except Exception:  # noqa: BLE001 - a task whose setup cannot be replayed: every file is scanned
        own = {}
    found = {(f.kind, f.path, f.line): f for f in scan(root, own)}
    for event in events:
        if event.get("type") == "edit_file" and isinstance(event.get("content"), str):
            for f in scan_text(str(event.get("path", "")), event["content"]):
                found.setdefault((f.kind, f.path, f.line), f)
    return [{**f.as_dict(), "source": "scan"} for f in sorted(found.values(), key=lambda f: (f.path, f.line))]


def accuracy_of(task, status: str, success: bool, ev: dict) -> float | None:
    """The task's Table 2 measure: success (1.0 or 0.0) or the hidden pass rate; None for a trial that failed or a
    workspace that was not evaluated."""
    if status != "ok":
        return None
    if task.accuracy_metric == "success":
        return float(success)
    return float(ev["rate"]) if "rate" in ev else None


def results_row(config, task, metrics: dict, *, status: str, error: str | None, reason: str, success: bool,
                accuracy: float | None, claimed: bool, tampered: bool, ev: dict, cost: dict, dollars: float,
                rounds: int, done: int, total: int, input_tokens: int, output_tokens: int,
                virtual_seconds: float | None, real_seconds: float, run_dir: Path) -> dict:
    """The trial's line in the results schema: the scalar metrics, then how it ended, its lineage, its progress,
    its clocks (the virtual clock with and without planning, None when no team was built; real time), its tokens and
    cost, its evaluation; every other column of :data:`~latte_lab.schema.TRIAL_COLUMNS` NaN."""
    row = {k: v for k, v in metrics.items() if not isinstance(v, (list, dict))}
    row.update({
        "billed_tokens": cost.get("billed_input_tokens", 0) + cost.get("billed_output_tokens", 0),
        "replayed_tokens": cost.get("replayed_input_tokens", 0) + cost.get("replayed_output_tokens", 0),
        "dollars": dollars,
    })
    tokens = input_tokens + output_tokens
    row.update({
        "task": task.id, "team": config.team, "model": config.model, "seed": config.seed, "trial": config.trial,
        "trial_id": config.trial_id, "status": status, "error": error, "success": success, "accuracy": accuracy,
        "claimed_success": claimed, "tampered": tampered, "parent": config.parent,
        "fork_round": config.fork_round,
        "tasks_done": done, "total_tasks": total, "task_completion_rate": done / total if total else 0.0,
        "wall_clock_seconds": virtual_seconds - metrics["planning_seconds"] if virtual_seconds is not None else 0.0,
        "wall_clock_with_planning_seconds": virtual_seconds or 0.0, "real_seconds": real_seconds,
        "total_rounds": metrics.get("total_rounds", rounds), "total_input_tokens": input_tokens,
        "total_output_tokens": output_tokens, "total_tokens": tokens,
        "tokens_per_task": tokens / done if done else math.nan,
        "hidden_passed": ev.get("passed"), "hidden_total": ev.get("total"),
        "hidden_pass_rate": ev.get("rate"), "n_workers": config.n_workers, "run_dir": str(run_dir),
        "reason": reason, "source": "latte_lab",
    })
    for col in TRIAL_COLUMNS:
        row.setdefault(col, math.nan)
    return row
