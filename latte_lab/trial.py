"""Run one trial, write its run directory, replay it exactly.

>>> cfg = TrialConfig(task="debug", team="latte", model="simulated", seed=0)   # doctest: +SKIP
>>> res = run_trial(cfg)                                                      # doctest: +SKIP
>>> res.success, res.accuracy, res.row["total_tokens"]                        # doctest: +SKIP

Run directory ``<runs_dir>/<trial_id>/``:

- ``config.json``: the TrialConfig.
- ``events.jsonl``: one typed event per line, appended and flushed as it happens. Every event has
  ``type``, ``seq`` (0, 1, ...), ``round`` (0 = planning, null before the first round), ``t`` (virtual clock,
  seconds: model latency of the slowest call of each parallel batch plus a nominal cost per tool call;
  deterministic) and ``ts`` (unix wall time). Types and fields:
  ``run_start{trial_id, task, team, model, seed, n_workers}``, ``initialize{agents, lead}``,
  ``planning_phase_start``, ``planning_reply{agent, turn, text}``,
  ``planning_phase_end{tasks_discovered, turns, reason}``, ``planning_failed{message}``, ``round_start``,
  ``lead_invoked{reasons}``, ``lead_skipped{reason, consecutive_skips}``,
  ``heartbeat_alert{agent, task, rounds_active, last_activity_round, rounds_without_activity}``,
  ``round_dispatch{n_dispatched, n_total, agents, n_dispatched_released, n_total_released}``
  (``agents`` = who actually ran, Lead included; n_dispatched/n_total = workers for graph teams and
  everyone who could run for flat teams; ``*_released`` = the released code's figures),
  ``agent_reply{agent, role, text, n_chars, n_chars_logged, input_tokens, output_tokens, latency_s, cached,
  call_index}``, ``apply_order{agents}``, ``parse_error{agent, tag, message}``,
  ``edit_file{agent, path, n_chars, symbols, created, content}``, ``edit_blocked{agent, path, reason}``,
  ``read_file{agent, path, ok}``, ``run_script{agent, path, returncode, timed_out, real_seconds,
  stdout_tail, stderr_tail}``, ``run_tests{agent, returncode, passed, failed, errors, real_seconds,
  test_cached, failed_tests, stdout_tail}``, ``discover_task{agent, task, title, dependencies}``,
  ``discover_task_skipped{agent, task, reason}``, ``discover_task_warning{agent, task, dropped_dep, reason}``,
  ``assign_task{task, assigner, assignee}``, ``claim_task{agent, task}``, ``claim_blocked{agent, task, reason}``,
  ``complete_task{agent, task}``, ``release_task{task, prev_owner, requester, reason}``,
  ``release_task_blocked``, ``close_task{task, prev_owner, agent}``, ``close_task_blocked``,
  ``create_verify_node{task, verify_id, requester, successors_rerouted}``, ``verify_task_blocked``,
  ``task_verified{task, verify_id}``, ``operator_blocked{agent, operator, task, reason}``,
  ``action_error{agent, action, message}``, ``broadcast{sender, message}``, ``request_status{agent}``,
  ``synthesize{agent, text}``, ``fix_task_injected{task}``, ``certify_complete{agent, accepted}``,
  ``phase_start{phase}`` and ``publish{sender, topic, text}`` (pipeline),
  ``evaluation{passed, failed, errors, total, rate, per_class, missing_outputs}``,
  ``run_end{reason, success, tests_passed, rounds}``, ``trial_error{error}``.
  Fields in ``VOLATILE_EVENT_FIELDS`` (wall time, measured seconds, cache hits) may differ in a replay.
- ``snapshots.jsonl``: ``{"round", "t", "graph"}`` per round for graph teams (round 0 = after planning).
- ``calls.jsonl``: the cassette, every model call in order, enough to replay the trial offline.
- ``ledger.csv``: tokens per call with agent and round, billed vs replayed, dollars (``data/prices.csv``).
- ``workspace/``: the shared files as the team left them.
- ``result.json``: ``{"trial_id", "status", "error", "row", "metrics", "eval"}``.
"""

from __future__ import annotations

import json
import math
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from latte_lab.config import TrialConfig
from latte_lab.errors import DataError, LatteError
from latte_lab.teams.engine import VOLATILE_EVENT_FIELDS, EventLog, Team

__all__ = ["TrialConfig", "TrialResult", "comparable_events", "load_trial", "replay", "run_trial"]

# Row fields that legitimately differ between a trial and its replay (measured time, where it ran, what
# was billed rather than replayed from the cassette).
VOLATILE_ROW_FIELDS = ("real_seconds", "run_dir", "billed_tokens", "replayed_tokens", "dollars")

ACTION_EVENT_TYPES = frozenset({
    "edit_file", "read_file", "run_script", "run_tests", "discover_task", "assign_task", "claim_task",
    "complete_task", "release_task", "close_task", "create_verify_node", "broadcast", "publish",
    "certify_complete", "request_status", "synthesize",
})


def team_class(team: str) -> type[Team]:
    """The registered team class for a team id or alias (``latte_lab.teams.get``)."""
    from latte_lab import teams

    return teams.get(team)


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
    snapshots: list[dict] = field(default_factory=list, repr=False)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def events(self):
        """The event log as a pandas DataFrame (one row per event)."""
        import pandas as pd

        return pd.DataFrame(self.event_list)

    def summary(self) -> str:
        acc = "n/a" if self.accuracy is None else f"{self.accuracy:.0%}"
        head = f"{self.trial_id}: {'SUCCESS' if self.success else 'no success'} ({self.reason})"
        if self.status != "ok":
            head += f" — ERROR: {self.error}"
        return (f"{head}\n  accuracy {acc} · rounds {self.rounds} · tokens {self.tokens:,} "
                f"(in {self.input_tokens:,} / out {self.output_tokens:,}) · virtual {self.virtual_seconds:.1f} s · "
                f"real {self.real_seconds:.1f} s\n  run directory: {self.run_dir}")

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:  # a compact card in notebooks
        import html

        return "<pre>" + html.escape(self.summary()) + "</pre>"


def _new_run_dir(runs_dir: Path, name: str) -> Path:
    runs_dir.mkdir(parents=True, exist_ok=True)
    path = runs_dir / name
    k = 1
    while path.exists():  # never overwrite an earlier run
        k += 1
        path = runs_dir / f"{name}-{k}"
    path.mkdir()
    return path


def _default_model(config: TrialConfig):
    from latte_lab.models import make_model

    kwargs: dict[str, Any] = dict(base_url=config.base_url, max_retries=config.max_retries,
                                  timeout_s=config.timeout_s)
    if not config.model.startswith("simulated"):
        from latte_lab.models.cache import ResponseCache

        kwargs["cache_mode"] = config.cache
        if config.cache != "off":
            kwargs["cache"] = ResponseCache(config.cache_path)
    return make_model(config.model, **kwargs)


def run_trial(config: TrialConfig | dict, *, model=None, runs_dir: str | Path | None = None,
              progress: bool | Callable[[dict], None] = False, run_name: str | None = None) -> TrialResult:
    """Runs one trial to its end and writes its run directory.

    ``model`` overrides the model built from ``config.model`` (tests pass a scripted model).
    ``progress=True`` prints one line per round; a callable receives a dict per round.
    A trial that fails (API errors after retries, a bug) still returns a result with ``status="error"``
    and keeps its partial events. A model that cannot be built (a missing API key) raises before any
    run directory is created.
    """
    from latte_lab import tasks
    from latte_lab.models.cassette import Cassette, RecordingModel
    from latte_lab.workspace import Workspace

    if isinstance(config, dict):
        config = TrialConfig(**config)
    trial_id = config.trial_id
    task = tasks.get(config.task)
    if model is None:  # before the run directory exists: a missing key is an error, not an empty run
        model = _default_model(config)
    run_dir = _new_run_dir(Path(runs_dir if runs_dir is not None else config.runs_dir), run_name or trial_id)
    (run_dir / "config.json").write_text(config.to_json(), encoding="utf-8")
    cassette = Cassette(run_dir / "calls.jsonl")
    recorder = RecordingModel(model, cassette)
    team_obj: Team | None = None
    start = time.perf_counter()
    clock_box = {"team": None}
    log = EventLog(run_dir / "events.jsonl", lambda: clock_box["team"].vclock if clock_box["team"] else 0.0)
    status, error, interrupted = "ok", None, False
    snap_fh = open(run_dir / "snapshots.jsonl", "w", encoding="utf-8")
    try:
        ws = Workspace(run_dir / "workspace")
        task.setup(ws)
        team_obj = team_class(config.team)(config, task, ws, recorder, log, seed=config.seed, trial_id=trial_id)
        clock_box["team"] = team_obj
        log.emit("run_start", trial_id=trial_id, task=task.id, team=config.team, model=config.model,
                 seed=config.seed, n_workers=config.n_workers)
        team_obj.setup()
        n_snap = 0

        def flush_snapshots() -> None:
            nonlocal n_snap
            snap_fh.writelines(json.dumps(snap, ensure_ascii=False) + "\n" for snap in team_obj.snapshots[n_snap:])
            snap_fh.flush()
            n_snap = len(team_obj.snapshots)

        started = team_obj.planning()
        flush_snapshots()
        if started:
            for r in range(1, config.rounds + 1):
                mark = len(log.events)
                finished = team_obj.run_round(r)
                flush_snapshots()
                if progress:
                    info = _round_info(team_obj, log.events[mark:], r)
                    progress(info) if callable(progress) else print(_round_line(info), flush=True)
                if finished:
                    break
            else:
                team_obj.outcome.reason = "max_rounds"
                team_obj.outcome.success = False
    except KeyboardInterrupt:  # stopped from the keyboard or a notebook: record it, then stop
        status, error, interrupted = "error", "interrupted by the user", True
        log.emit("trial_error", error=error, traceback="")
    except Exception as exc:  # noqa: BLE001 - a failed trial keeps its partial record
        status = "error"
        error = f"{type(exc).__name__}: {exc}"
        from latte_lab.models.keys import redact

        error = redact(error)
        log.emit("trial_error", error=error, traceback=redact(traceback.format_exc(limit=8)))
        if not isinstance(exc, LatteError):
            warnings.warn(f"trial {trial_id} failed with an unexpected error: {error}", RuntimeWarning, stacklevel=2)
    finally:
        snap_fh.close()
        cassette.close()
        if team_obj is not None:
            team_obj.close()
    real_seconds = time.perf_counter() - start
    result = _finish(config, task, team_obj, log, run_dir, status, error, real_seconds)
    log.close()
    if interrupted:
        raise KeyboardInterrupt(f"trial {trial_id} interrupted; its partial record is in {run_dir}")
    return result


def _finish(config, task, team, log: EventLog, run_dir: Path, status: str, error: str | None,
            real_seconds: float) -> TrialResult:
    from latte_lab.metrics import trial_metrics

    outcome = team.outcome if team is not None else None
    ev_dict: dict = {}
    accuracy: float | None = None
    success = bool(outcome.success) if outcome and status == "ok" else False
    final_files: dict[str, str] = {}
    if team is not None:
        try:
            ev = task.evaluate(team.ws)
            ev_dict = {"passed": ev.passed, "failed": ev.failed, "errors": ev.errors, "total": ev.total,
                       "rate": ev.rate, "per_class": {k: list(v) for k, v in ev.per_class.items()},
                       "missing_outputs": list(ev.missing_outputs)}
            log.emit("evaluation", **{k: v for k, v in ev_dict.items()})
            final_files = team.ws.snapshot_files()
        except Exception as exc:  # noqa: BLE001 - the evaluation failing must not lose the trial
            ev_dict = {"error": f"{type(exc).__name__}: {exc}"}
            log.emit("evaluation", error=ev_dict["error"])
    if status == "ok":
        if task.accuracy_metric == "success":
            accuracy = float(success)
        elif "rate" in ev_dict:
            accuracy = float(ev_dict["rate"])
    rounds = team.round if team is not None else 0
    log.emit("run_end", reason=outcome.reason if outcome else "error", success=success,
             tests_passed=outcome.tests_passed if outcome else None, rounds=rounds)
    metrics = trial_metrics(log.events, final_files=final_files or None,
                            snapshots=team.snapshots if team is not None else None)
    tokens_in = team.input_tokens if team else 0
    tokens_out = team.output_tokens if team else 0
    done, total = team.progress() if team is not None else (0, 0)
    row = {k: v for k, v in metrics.items() if not isinstance(v, (list, dict))}
    cost: dict = {}
    if team is not None:
        cost = team.ledger.summary()
        team.ledger.to_frame().to_csv(run_dir / "ledger.csv", index=False)
    row.update({
        "billed_tokens": cost.get("billed_input_tokens", 0) + cost.get("billed_output_tokens", 0),
        "replayed_tokens": cost.get("replayed_input_tokens", 0) + cost.get("replayed_output_tokens", 0),
        "dollars": cost.get("dollars", math.nan) if cost.get("calls") else 0.0,
    })
    row.update({
        "task": task.id, "team": config.team, "model": config.model, "seed": config.seed, "trial": config.trial,
        "trial_id": config.trial_id, "status": status, "error": error, "success": success, "accuracy": accuracy,
        "tasks_done": done, "total_tasks": total, "task_completion_rate": done / total if total else 0.0,
        "wall_clock_seconds": team.vclock if team else 0.0, "real_seconds": real_seconds,
        "total_rounds": metrics.get("total_rounds", rounds), "total_input_tokens": tokens_in,
        "total_output_tokens": tokens_out, "total_tokens": tokens_in + tokens_out,
        "tokens_per_task": (tokens_in + tokens_out) / done if done else math.nan,
        "hidden_passed": ev_dict.get("passed"), "hidden_total": ev_dict.get("total"),
        "hidden_pass_rate": ev_dict.get("rate"), "n_workers": config.n_workers, "run_dir": str(run_dir),
        "reason": outcome.reason if outcome else "error", "source": "latte_lab",
    })
    try:
        from latte_lab.analysis.schema import TRIAL_COLUMNS

        for col in TRIAL_COLUMNS:
            row.setdefault(col, math.nan)
    except ImportError:  # pragma: no cover - the schema module ships with the package
        pass
    payload = {"trial_id": config.trial_id, "status": status, "error": error, "row": row, "metrics": metrics,
               "eval": ev_dict}
    (run_dir / "result.json").write_text(json.dumps(payload, indent=2, default=_json_default), encoding="utf-8")
    return TrialResult(
        config=config, trial_id=config.trial_id, status=status, error=error, success=success, accuracy=accuracy,
        rounds=rounds, input_tokens=tokens_in, output_tokens=tokens_out,
        virtual_seconds=team.vclock if team else 0.0, real_seconds=real_seconds,
        reason=outcome.reason if outcome else "error", metrics=metrics, eval=ev_dict, row=row, run_dir=run_dir,
        event_list=log.events, snapshots=team.snapshots if team else [],
    )


def _json_default(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def _round_info(team: Team, events: list[dict], r: int) -> dict:
    dispatch = next((e for e in events if e["type"] == "round_dispatch"), {})
    tests = [e for e in events if e["type"] == "run_tests"]
    frontier = len(team.graph.frontier()) if team.graph is not None else None
    return {
        "round": r, "frontier": frontier, "agents": dispatch.get("agents", []),
        "actions": sum(1 for e in events if e["type"] in ACTION_EVENT_TYPES),
        "tests": (tests[-1]["passed"], tests[-1]["passed"] + tests[-1]["failed"] + tests[-1]["errors"]) if tests else None,
        "nodes": len(team.graph) if team.graph is not None else None,
        "t": team.vclock,
    }


def _round_line(info: dict) -> str:
    tests = "-" if info["tests"] is None else f"{info['tests'][0]}/{info['tests'][1]} passed"
    front = "" if info["frontier"] is None else f"frontier {info['frontier']:>2} · nodes {info['nodes']:>2} · "
    agents = ",".join(info["agents"]) or "-"
    return (f"round {info['round']:>2} · {front}ran {agents} · actions {info['actions']:>2} · tests {tests} · "
            f"t={info['t']:.0f}s")


def comparable_events(events: list[dict]) -> list[dict]:
    """Events without the fields that legitimately differ between a trial and its replay."""
    return [{k: v for k, v in e.items() if k not in VOLATILE_EVENT_FIELDS} for e in events]


def comparable_row(row: dict) -> dict:
    """A results row without the fields that legitimately differ between a trial and its replay."""
    def same(v):  # NaN != NaN, so missing values compare as None
        return None if isinstance(v, float) and math.isnan(v) else v

    return {k: same(v) for k, v in row.items() if k not in VOLATILE_ROW_FIELDS}


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}: line {i} is not valid JSON ({exc.msg})") from None
    return out


def load_trial(run_dir: str | Path) -> TrialResult:
    """Reads a finished run directory back into a TrialResult (no model calls, nothing rerun)."""
    run_dir = Path(run_dir)
    cfg_path, res_path = run_dir / "config.json", run_dir / "result.json"
    for p in (cfg_path, res_path):
        if not p.exists():
            raise DataError(f"{p} is missing: {run_dir} is not a finished latte_lab run directory")
    try:
        config = TrialConfig(**json.loads(cfg_path.read_text()))
        payload = json.loads(res_path.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"malformed JSON in {run_dir}: {exc}") from None
    row = payload.get("row", {})
    return TrialResult(
        config=config, trial_id=payload.get("trial_id", config.trial_id), status=payload.get("status", "ok"),
        error=payload.get("error"), success=bool(row.get("success")), accuracy=row.get("accuracy"),
        rounds=int(row.get("total_rounds") or 0), input_tokens=int(row.get("total_input_tokens") or 0),
        output_tokens=int(row.get("total_output_tokens") or 0),
        virtual_seconds=float(row.get("wall_clock_seconds") or 0.0), real_seconds=float(row.get("real_seconds") or 0.0),
        reason=row.get("reason", ""), metrics=payload.get("metrics", {}), eval=payload.get("eval", {}), row=row,
        run_dir=run_dir, event_list=_read_jsonl(run_dir / "events.jsonl"),
        snapshots=_read_jsonl(run_dir / "snapshots.jsonl"),
    )


def replay(run_dir: str | Path, *, runs_dir: str | Path | None = None, progress: bool = False) -> TrialResult:
    """Reruns a trial from its cassette alone: zero model calls, the same events and result."""
    from latte_lab.models.cassette import CassetteModel

    run_dir = Path(run_dir)
    cfg_path, cassette = run_dir / "config.json", run_dir / "calls.jsonl"
    for p in (cfg_path, cassette):
        if not p.exists():
            raise DataError(f"cannot replay {run_dir}: {p.name} is missing")
    config = TrialConfig(**json.loads(cfg_path.read_text()))
    target = Path(runs_dir) if runs_dir is not None else run_dir.parent / "replays"
    return run_trial(config, model=CassetteModel(cassette), runs_dir=target, progress=progress,
                     run_name=run_dir.name + "-replay")
