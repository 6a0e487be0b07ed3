"""Run one trial, write its run directory, replay it exactly; fork a recorded one.

>>> cfg = TrialConfig(task="debug", team="latte", model="simulated", seed=0)   # doctest: +SKIP
>>> res = run_trial(cfg)                                                      # doctest: +SKIP
>>> res.success, res.accuracy, res.row["total_tokens"]                        # doctest: +SKIP
>>> fork(res.run_dir, at_round=20, seed=7)                                    # doctest: +SKIP

:func:`run_trial` is the only way a trial runs: a config with a ``parent`` is a fork of that run (:mod:`latte_lab.forking`),
which starts from the state its parent saved at the end of its fork round.

What a run directory holds is described in :mod:`latte_lab.rundir`; the events in it are declared in
:mod:`latte_lab.events`.
"""

from __future__ import annotations

import contextlib
import gc
import math
import shutil
import signal
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from latte_lab import rundir
from latte_lab.config import TrialConfig
from latte_lab.errors import ConfigError, DataError, LatteError
from latte_lab.events import ACTION_EVENT_TYPES, VOLATILE_EVENT_FIELDS, EventLog
from latte_lab.forking import ForkStart, check_intervention, fork_config, parent_config, recorded_rounds
from latte_lab.graph.history import GraphHistory
from latte_lab.models import budget, stop
from latte_lab.models.ledger import dollars_without_calls
from latte_lab.results import Evaluation, accuracy_of, evaluate_workspace, results_row
from latte_lab.rundir import TrialResult, load_trial
from latte_lab.sandbox import Sandbox
from latte_lab.sandbox.paths import note_runs_dir
from latte_lab.schema import SCHEMA_VERSION
from latte_lab.teams.engine import Team
from latte_lab.teams.state import StateWriter

__all__ = ["TrialConfig", "TrialResult", "comparable_events", "fork", "load_trial", "replay", "replay_verdict",
           "run_trial"]

# Row fields that legitimately differ between a trial and its replay (measured time, where it ran, what
# was billed rather than replayed from the cassette).
VOLATILE_ROW_FIELDS = ("real_seconds", "run_dir", "billed_tokens", "replayed_tokens", "dollars")


def team_class(team: str) -> type[Team]:
    """The registered team class for a team id or alias (``latte_lab.teams.get``)."""
    from latte_lab import teams

    return teams.get(team)


def _default_model(config: TrialConfig):
    from latte_lab.models import make_model

    kwargs: dict[str, Any] = dict(base_url=config.base_url, max_retries=config.max_retries,
                                  timeout_s=config.timeout_s)
    if not config.model.startswith("simulated"):
        from latte_lab.models.cache import ResponseCache

        kwargs["cache_mode"] = config.cache
        if config.cache != "off":
            kwargs["cache"] = ResponseCache(config.cache_path, read_only=config.cache == "replay" or None)
    return make_model(config.model, **kwargs)


def run_trial(config: TrialConfig | dict, *, model=None, runs_dir: str | Path | None = None,
              progress: bool | Callable[[dict], None] | None = False, run_name: str | None = None) -> TrialResult:
    """Runs one trial to its end and writes its run directory.

    A config with a ``parent`` is a fork (:func:`fork` makes one): it starts from the state its parent saved at the
    end of round ``fork_round`` and runs on under its changes; ``model`` is then the model of its rounds after the
    fork point (no call reaches any model before).

    ``progress=print_round`` prints each round's state (frontier, who ran, actions, tests) as one line. A trial that
    fails (API errors after retries, a bug) still returns a result with ``status="error"``
    and keeps its partial events. A model that cannot be built (a missing API key), or a machine where no
    test can run, raises before any run directory is created.

    Parameters
    ----------
    config : TrialConfig or dict
        The trial: a :class:`~latte_lab.config.TrialConfig`, or a dict of its fields.
    model : Model, optional
        A model to use instead of the one ``config.model`` names (a scripted model in tests, a wrapped one).
    runs_dir : str or Path, optional
        Where the run directory goes (default: ``config.runs_dir``).
    progress : bool or callable, optional
        True: a progress bar over rounds; a callable: called with each round's summary dict; False: silent.
    run_name : str, optional
        The run directory's name (default: the trial id; ``-2``, ``-3`` ... when taken).

    Returns
    -------
    TrialResult
        Its outcome, metrics, results row, events, graph per round and run directory.
    """
    from latte_lab import tasks
    from latte_lab.sandbox.pytest import runner_missing

    config = config if isinstance(config, TrialConfig) else TrialConfig(**config)
    start = ForkStart(config) if config.parent is not None else None  # a fork: its parent read (or a DataError)
    task = tasks.get(config.task)
    missing = runner_missing()
    if missing:  # before any model call or run directory: a trial whose tests cannot run measures nothing
        raise ConfigError(missing)
    if model is None:  # before the run directory exists: a missing key is an error, not an empty run
        model = _default_model(config)
    if start is not None:
        model = start.model(model)
    recorder = TrialRecorder(config, task, model, runs_dir=runs_dir, run_name=run_name, progress=progress,
                             start=start)
    with recorder:
        team = recorder.start_team()
        play_rounds(team, recorder)
    return recorder.result


def fork(run_dir: str | Path, at_round: int, *, model_override=None, runs_dir: str | Path | None = None,
         progress: bool | Callable[[dict], None] | None = False, run_name: str | None = None, **changes) -> TrialResult:
    """Fork the recorded trial in ``run_dir`` at the end of round ``at_round`` under ``changes`` (fields of
    :class:`~latte_lab.config.TrialConfig`: see :func:`~latte_lab.forking.changeable`), and run the fork with
    :func:`run_trial`; a :class:`~latte_lab.rundir.result.TrialResult`.

    ``model="simulated/careful"`` (a model spec, like every other change a field of the config) gives the
    rounds after the fork point another model or profile; it is recorded in the fork's ``config.json``.

    ``intervene``: the Lead's operators to apply at the fork point, as action text
    (``'<release_task id="fix-rms" />'``, or a list of such): checked first against the parent's graph at
    that round with the operators' own preconditions, then applied through the team as the Lead's own
    reply would be.

    No call reaches ``model_override``, or any model, before the fork point.

    Parameters
    ----------
    run_dir : str or Path
        The recorded trial to fork (a finished run directory with its ``state.jsonl`` or ``calls.jsonl``).
    at_round : int
        The round after which the fork leaves its parent (0: after planning).
    model_override : Model, optional
        A model object for the rounds after the fork point instead of the one its config names (tests).
    runs_dir : str or Path, optional
        Where the fork's run directory goes (default: ``forks/`` beside the parent's).
    progress : bool or callable, optional
        As for :func:`run_trial`.
    run_name : str, optional
        The fork's run directory name (default: its trial id).
    **changes
        The fork's changes: TrialConfig fields and their new values (``model=``, ``seed=``, ...).

    Returns
    -------
    TrialResult
        The fork, run to its end; its config names ``parent`` and ``fork_round``.
    """
    if "model" in changes and not isinstance(changes["model"], str):
        raise ConfigError(f"model= is the fork's model spec, a string such as 'simulated/careful' (got a "
                          f"{type(changes['model']).__name__}); pass a model object as model_override=")
    run_dir = Path(run_dir)
    parent = parent_config(run_dir)
    recorded = recorded_rounds(run_dir)
    if recorded is not None and at_round > recorded:
        raise ConfigError(f"cannot fork {run_dir.name} at round {at_round}: it ended after round {recorded}")
    if changes.get("intervene") is not None:
        changes["intervene"] = check_intervention(run_dir, at_round, changes["intervene"])
    config = fork_config(parent, at_round, run_dir, **changes)
    target = Path(runs_dir) if runs_dir is not None else run_dir.parent / "forks"
    name = run_name or f"{run_dir.name}-fork{at_round}-{config.trial_id.rsplit('-', 1)[-1]}"
    return run_trial(config, model=model_override, runs_dir=target, run_name=name, progress=progress)


def play_rounds(team: Team, recorder: TrialRecorder) -> None:
    """The trial itself: the team's planning, then round after round until it finishes or the budget of
    rounds is spent (a restored fork: from the round after its fork point). Everything around it (files,
    signals, errors, the final record) is the recorder's."""
    first = recorder.first_round
    if first is None:
        started = team.planning()
        recorder.after_round(None, finished=not started)
        if not started:
            return
        first = 1
    elif first < 0:  # a fork of a trial whose rounds were over at its fork point
        return
    for r in range(first, recorder.config.rounds + 1):
        mark = len(recorder.log.events)
        finished = team.run_round(r)
        recorder.after_round(r, mark, finished=finished)
        if finished:
            return
    team.outcome.reason = "max_rounds"
    team.outcome.success = False


class TrialRecorder:
    """Everything a trial writes and guards while :func:`play_rounds` runs it, as a context manager.

    It owns the run directory's writer, the cassette every model call goes through (under the trial's
    budgets), the event log, the snapshots flushed after each round, progress, SIGTERM (raised in the trial
    once, then held until the record is written) and the collector's freeze. On leaving it records how the
    trial ended: an error, Ctrl-C, SIGTERM or a spent budget is a result with its status, never a lost trial;
    it evaluates the workspace and writes ``result.json`` (:attr:`result`), then re-raises an interruption.
    """

    def __init__(self, config: TrialConfig, task, model, *, runs_dir=None, run_name: str | None = None,
                 progress: bool | Callable[[dict], None] | None = False, start: ForkStart | None = None):
        from latte_lab.models.cassette import Cassette, RecordingModel

        self.config, self.task, self.progress = config, task, progress
        self.start = start  # a fork's start (latte_lab.forking): its saved state, or its parent's rounds replayed
        # None: planning first; else the first round to run (a restored fork), -1 when none is left
        self.first_round: int | None = None
        self.trial_id = config.trial_id
        self.run_dir = rundir.new_run_dir(runs_dir if runs_dir is not None else config.runs_dir,
                                          run_name or self.trial_id)
        note_runs_dir(self.run_dir.parent)  # the sandbox's local runs see no other trial's directory there
        try:
            self.writer = rundir.RunWriter(self.run_dir)
            self.writer.write_config(config)
        except rundir.DiskFullError:  # nothing ran: leave no directory that looks like a trial
            shutil.rmtree(self.run_dir, ignore_errors=True)
            raise
        self.cassette = Cassette(self.writer.calls_path)
        self.states = StateWriter(self.writer)
        self.model = budget.guard(RecordingModel(model, self.cassette), config)  # budgets checked before each call
        self.team: Team | None = None
        self.log = EventLog(self.writer.append_event, lambda: self.team.vclock if self.team is not None else 0.0)
        self.result: TrialResult | None = None
        self._bar = None
        self._snapshots = 0
        self._start = 0.0
        self._stack = contextlib.ExitStack()
        self._sigterm: dict | None = None

    def __enter__(self) -> TrialRecorder:
        self._sigterm = self._stack.enter_context(_sigterm_stops_the_trial())
        self._stack.enter_context(_older_objects_frozen())
        self._start = time.perf_counter()
        return self

    def start_team(self) -> Team:
        """The workspace set up by the task and the team built on it, announced with ``run_start``; a fork's
        team restored to where its parent stood at the fork point (or set up to replay its parent's rounds)."""
        from latte_lab.workspace import Workspace

        config, start = self.config, self.start
        ws = Workspace(self.writer.workspace, sandbox=config.sandbox)
        self.task.setup(ws)
        first = start.first_config if start is not None else config
        self.team = team_class(config.team)(first, self.task, ws, self.model, self.log, seed=first.seed,
                                            trial_id=first.trial_id)
        self.log.emit("run_start", trial_id=self.trial_id, task=self.task.id, team=config.team, model=config.model,
                      seed=config.seed, n_workers=config.n_workers, schema_version=SCHEMA_VERSION)
        if start is None or start.saved is None:
            self.team.setup()
            return self.team
        start.restore(self.team, self)
        self._flush_snapshots()
        start.after_round(self.team, self.log, start.saved.round)
        self.first_round = -1 if start.saved.finished else start.saved.round + 1
        return self.team

    def copy_events(self, events: list[dict]) -> None:
        """Events recorded before (a fork's parent's, up to its fork point), appended as they are."""
        for event in events:
            self.log.events.append(event)
            self.writer.append_event(event)

    def _flush_snapshots(self) -> None:
        records = self.team.snapshots.records
        self.writer.append_snapshots(records[self._snapshots:])
        self._snapshots = len(records)

    def after_round(self, r: int | None, mark: int = 0, *, finished: bool = False) -> None:
        """Flush the graph's new snapshots and save the trial's state; at a fork's fork point, the fork's hook;
        report round ``r`` (None: planning) to the progress bar or callback."""
        self._flush_snapshots()
        counts = {"events": len(self.log.events), "snapshots": self._snapshots, "calls": self.cassette.lines,
                  "log_round": self.log.round}
        self.states.save(r or 0, self.team, counts, finished)
        if self.start is not None:
            self.start.after_round(self.team, self.log, r)
        if r is None or not self.progress:
            return
        if self.progress is True and self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.config.rounds, desc=self.trial_id, unit="round", leave=True)
        info = _round_info(self.team, self.log.events[mark:], r)
        if self._bar is not None:
            self._bar.set_postfix_str(round_line(info), refresh=False)
            self._bar.update(1)
        else:
            self.progress(info)

    def __exit__(self, kind, exc, tb) -> bool:
        try:
            status, error, reason = self._how_it_ended(exc)
            self._close_parts()
            self._record(status, error, reason)
        finally:
            self._stack.close()  # SIGTERM's handler is the one from before the trial again
        pending = self._sigterm is not None and self._sigterm["pending"]
        if isinstance(exc, KeyboardInterrupt) or pending:
            if isinstance(exc, TrialTerminated) or not isinstance(exc, KeyboardInterrupt):
                signal.raise_signal(signal.SIGTERM)  # to whoever handled it before (by default: the process ends)
                raise TrialTerminated(f"trial {self.trial_id} terminated by SIGTERM; its record is in {self.run_dir}")
            raise KeyboardInterrupt(f"trial {self.trial_id} interrupted; its partial record is in {self.run_dir}")
        return exc is None or isinstance(exc, Exception)

    def _how_it_ended(self, exc: BaseException | None) -> tuple[str, str | None, str | None]:
        """(status, one-line error, reason) for the exception that ended the trial (None: it ran to its end)."""
        if exc is None:
            return "ok", None, None
        if isinstance(exc, KeyboardInterrupt | stop.TrialStopped):  # the keyboard, a notebook's stop button,
            # SIGTERM, or (a trial run in a thread) the stop of its process's trials
            error = str(exc) if isinstance(exc, TrialTerminated | stop.TrialStopped) else "interrupted by the user"
            self.log.emit("trial_error", error=error, traceback="")
            return "error", error, "interrupted"
        if isinstance(exc, budget.BudgetExceeded):  # its own budget, or its sweep's: a result, not a failure
            return "budget", str(exc), "budget" if exc.scope == "trial" else "sweep_budget"
        if isinstance(exc, rundir.DiskFullError) or rundir.is_disk_full(exc):
            error = str(exc) if isinstance(exc, rundir.DiskFullError) else rundir.disk_full_message(self.run_dir, exc)
            self.writer.disk_full = self.writer.disk_full or error  # no more appends: the files stay whole
            self.log.emit("trial_error", error=error, traceback="")
            warnings.warn(f"trial {self.trial_id} stopped: {error}", RuntimeWarning, stacklevel=3)
            return "error", error, None
        from latte_lab.models.keys import redact

        error = redact(f"{type(exc).__name__}: {exc}")
        self.log.emit("trial_error", error=error,
                      traceback=redact("".join(traceback.format_exception(exc, limit=8))))
        if not isinstance(exc, LatteError):
            warnings.warn(f"trial {self.trial_id} failed with an unexpected error: {error}", RuntimeWarning,
                          stacklevel=3)
        return "error", error, None

    def _close_parts(self) -> None:
        if self._bar is not None:
            self._bar.total = self._bar.n  # a trial that ends early is complete, not stalled
            self._bar.close()
        self.cassette.close()
        if self.team is not None:
            self.team.close()

    def _record(self, status: str, error: str | None, reason: str | None) -> None:
        """Evaluate the workspace and write the result, whatever happens while doing so."""
        sigterm = self._sigterm
        if sigterm is not None:
            sigterm["raise"] = False  # from here on a SIGTERM waits until the record is written
        try:
            self.result = _finish(self.config, self.task, self.team, self.log, self.writer, status, error,
                                  time.perf_counter() - self._start, reason=reason)
        except BaseException as failure:  # a Ctrl-C during the evaluation, or a bug: the trial still ends recorded
            self._write_failed_result(failure)
            if isinstance(failure, KeyboardInterrupt) and not isinstance(failure, TrialTerminated):
                raise KeyboardInterrupt(f"trial {self.trial_id} interrupted; its partial record is in "
                                        f"{self.run_dir}") from None
            raise
        finally:
            self.log.close()
            self.writer.close()
            Sandbox(self.writer.workspace).close()  # what the workspace's runs kept between them
            with contextlib.suppress(OSError):  # links and FIFOs agents left: named in special_files.json, removed
                rundir.record_special_files(self.run_dir)

    def _write_failed_result(self, failure: BaseException) -> None:
        from latte_lab.models.keys import redact

        if (self.run_dir / rundir.RESULT_FILE).exists():
            return
        if isinstance(failure, KeyboardInterrupt):
            failed = rundir.failed_result(self.run_dir, "interrupted by the user while its record was being "
                                            "written", reason="interrupted")
        else:
            failed = rundir.failed_result(self.run_dir, redact(f"the trial's record could not be completed: "
                                                                 f"{type(failure).__name__}: {failure}"))
        with contextlib.suppress(OSError):  # a full disk uses the reserved space; beyond that, the error
            self.writer.write_result(failed)


_FROZEN = {"trials": 0, "mine": False}
_FROZEN_LOCK = threading.Lock()


@contextlib.contextmanager
def _older_objects_frozen():
    """While trials run, the cyclic garbage collector leaves alone the objects that existed before the
    first of them started (``gc.freeze``); they are handed back when the last one ends.

    A process that has imported pandas, matplotlib and the rest holds a million objects; a full collection
    walks them all, 20-30 ms each time, and a trial set one off every few rounds although almost nothing
    it makes outlives it. A process that froze objects itself is left as it is."""
    with _FROZEN_LOCK:
        if _FROZEN["trials"] == 0:
            _FROZEN["mine"] = gc.get_freeze_count() == 0
            if _FROZEN["mine"]:
                gc.freeze()
        _FROZEN["trials"] += 1
    try:
        yield
    finally:
        with _FROZEN_LOCK:
            _FROZEN["trials"] -= 1
            if _FROZEN["trials"] == 0 and _FROZEN["mine"]:
                _FROZEN["mine"] = False
                gc.unfreeze()


class TrialTerminated(KeyboardInterrupt):
    """SIGTERM arrived while a trial was running; it is recorded like an interrupt from the keyboard."""


@contextlib.contextmanager
def _sigterm_stops_the_trial():
    """While a trial runs in the main thread, SIGTERM raises TrialTerminated there (once). After
    ``state["raise"]`` is cleared, a SIGTERM only sets ``state["pending"]``, so the record gets written.
    Yields None (nothing installed) outside the main thread or when SIGTERM is ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous in (signal.SIG_IGN, None):
        yield None
        return
    state = {"raise": True, "pending": False}

    def on_sigterm(signum, frame):
        if state["raise"]:
            state["raise"] = False
            raise TrialTerminated("terminated by SIGTERM")
        state["pending"] = True

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield state
    finally:
        signal.signal(signal.SIGTERM, previous)


def _finish(config, task, team, log: EventLog, writer: rundir.RunWriter, status: str, error: str | None,
            real_seconds: float, reason: str | None = None) -> TrialResult:
    """Evaluates the final workspace (:mod:`latte_lab.results`), computes the metrics and writes ledger.csv and
    result.json. ``reason`` is how the trial ended; by default the team's outcome, or ``error`` for a failed trial.
    """
    from latte_lab.metrics import trial_metrics

    outcome = team.outcome if team is not None else None
    if reason is None:
        reason = outcome.reason if outcome is not None and status == "ok" else "error"
    claimed = bool(outcome.success) if outcome and status == "ok" else False
    found = Evaluation()
    if team is not None and writer.disk_full is not None:  # the hidden suite needs disk space too
        found.eval = {"error": "not evaluated: " + writer.disk_full}
    elif team is not None:
        found = evaluate_workspace(task, team.ws, log.events, log.emit)
    success = claimed and found.public_confirmed is not False  # a claim the public tests contradict is no success
    accuracy = accuracy_of(task, status, success, found.eval)
    broken = _every_test_run_broken(log.events)
    if broken and status == "ok":  # nothing was measured: an error, never a 0% result
        status, error, success, accuracy = "error", f"every test run failed to start: {broken}", False, None
        log.emit("trial_error", error=error)
    rounds = team.round if team is not None else 0
    log.emit("run_end", reason=reason, success=success,
             tests_passed=outcome.tests_passed if outcome else None, rounds=rounds)
    metrics = trial_metrics(log.events, final_files=found.final_files or None,
                            snapshots=team.snapshots if team is not None else None)
    cost: dict = {}
    if team is not None:
        cost = team.ledger.summary()
        writer.write_ledger(team.ledger.to_csv())
    if writer.disk_full is not None and status == "ok":  # its record is incomplete (the ledger did not fit)
        status, error, success, accuracy, reason = "error", writer.disk_full, False, None, "error"
    done, total = team.progress() if team is not None else (0, 0)
    tokens_in, tokens_out = (team.input_tokens, team.output_tokens) if team is not None else (0, 0)
    row = results_row(
        config, task, metrics, status=status, error=error, reason=reason, success=success, accuracy=accuracy,
        claimed=claimed, tampered=bool(found.tampering), ev=found.eval, cost=cost,
        dollars=cost.get("dollars", math.nan) if cost.get("calls") else dollars_without_calls(config),
        rounds=rounds, done=done, total=total, input_tokens=tokens_in, output_tokens=tokens_out,
        virtual_seconds=team.vclock if team is not None else None, real_seconds=real_seconds, run_dir=writer.path)
    payload = {"trial_id": config.trial_id, "status": status, "reason": reason, "error": error, "row": row,
               "metrics": metrics, "eval": found.eval}
    written = writer.write_result(payload)
    if written["status"] != status:  # the disk filled up: a short result marks the trial as failed
        status, error, reason, success, accuracy = written["status"], written["error"], written["reason"], False, None
        row.update(status=status, error=error, reason=reason, success=success, accuracy=accuracy)
    return TrialResult(
        config=config, trial_id=config.trial_id, status=status, error=error, success=success, accuracy=accuracy,
        rounds=rounds, input_tokens=tokens_in, output_tokens=tokens_out,
        virtual_seconds=team.vclock if team else 0.0, real_seconds=real_seconds,
        reason=reason, metrics=metrics, eval=found.eval, row=row, run_dir=writer.path,
        event_list=log.events, snapshots=team.snapshots if team else GraphHistory(),
    )


def _every_test_run_broken(events: list[dict]) -> str | None:
    """The reason, when the trial ran its tests and not one run could test the code (pytest missing, the
    sandbox unable to start it); else None."""
    runs = [e for e in events if e.get("type") == "run_tests"]
    if runs and all(e.get("infrastructure_error") for e in runs):
        return runs[-1]["infrastructure_error"]
    return None


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


def print_round(info: dict) -> None:
    """Prints one line per round: pass ``progress=print_round`` to ``run_trial`` for a log instead of a bar."""
    print(round_line(info), flush=True)


def round_line(info: dict) -> str:
    """One round's progress dict (what a ``progress`` callable receives) as a line of text; its time is the
    trial's virtual clock (model latency and tool time as the trial accounts them, not time elapsed here)."""
    tests = "-" if info["tests"] is None else f"{info['tests'][0]}/{info['tests'][1]} passed"
    front = "" if info["frontier"] is None else f"frontier {info['frontier']:>2} · nodes {info['nodes']:>2} · "
    agents = ",".join(info["agents"]) or "-"
    return (f"round {info['round']:>2} · {front}ran {agents} · actions {info['actions']:>2} · tests {tests} · "
            f"virtual {info['t']:.0f} s")


def comparable_events(events: list[dict]) -> list[dict]:
    """Events without the fields that legitimately differ between a trial and its replay."""
    return [{k: v for k, v in e.items() if k not in VOLATILE_EVENT_FIELDS} for e in events]


def comparable_row(row: dict) -> dict:
    """A results row without the fields that legitimately differ between a trial and its replay."""
    def same(v):  # NaN != NaN, so missing values compare as None
        return None if isinstance(v, float) and math.isnan(v) else v

    return {k: same(v) for k, v in row.items() if k not in VOLATILE_ROW_FIELDS}


def replay_verdict(original: TrialResult, again: TrialResult) -> tuple[bool, str]:
    """Whether a replay reproduced its original trial, and one line saying so (or what went wrong)."""
    if original.status != "ok":
        ended = f"ended with status {again.status}" + (f" ({again.error})" if again.error else "")
        return False, (f"the original trial failed ({original.error}); its replay can follow it only up to the "
                       f"failure and {ended}")
    if again.status != "ok":
        return False, f"the replay failed: {again.error}"
    same = (again.success, again.accuracy, again.tokens, again.rounds) == (
        original.success, original.accuracy, original.tokens, original.rounds)
    return same, "replay matches the original result" if same else "replay DIFFERS from the original result"


def replay(run_dir: str | Path, *, runs_dir: str | Path | None = None,
           progress: bool | Callable[[dict], None] | None = False) -> TrialResult:
    """Reruns a trial from its cassette alone: zero model calls, the same events and result.

    Parameters
    ----------
    run_dir : str or Path
        The run directory of the trial to replay (its ``config.json`` and ``calls.jsonl`` are enough).
    runs_dir : str or Path, optional
        Where the replay's run directory goes (default: ``replays/`` beside ``run_dir``).
    progress : bool or callable, optional
        As for :func:`run_trial`.

    Returns
    -------
    TrialResult
        The replayed trial; its events and result equal the recorded ones.
    """
    from latte_lab.models.cassette import CassetteModel

    run_dir = Path(run_dir)
    cassette = run_dir / rundir.CALLS_FILE
    for p in (run_dir / rundir.CONFIG_FILE, cassette):
        if not p.exists():
            raise DataError(f"cannot replay {run_dir}: {p.name} is missing")
    config = rundir.read_config(run_dir)
    target = Path(runs_dir) if runs_dir is not None else run_dir.parent / "replays"
    return run_trial(config, model=CassetteModel(cassette), runs_dir=target, progress=progress,
                     run_name=run_dir.name + "-replay")
