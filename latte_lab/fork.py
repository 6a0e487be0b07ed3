"""What if: fork a recorded trial at round k and let it run on under a change.

:func:`fork` replays a recorded trial to the end of round ``k`` from its cassette, with no model call: the
graph, the workspace, every agent's history, the memo, the ledger and the clocks are what the parent's were
there, because the same calls get the same replies and every tool runs again on the same files. From the
next round on it is a new trial, in its own run directory, under the changes: another model or profile (a
real model can take over a simulated trial, and the reverse), another seed for what follows, any protocol
switch of ``TrialConfig.switches()``, another round budget. What the parent did before round ``k`` is shared
by every fork of it, so a difference between forks is the change's (and chance's after ``k``), never the
past's. Changes that cannot apply mid-trial (another team, task or team size) are refused in one line.

>>> fork("runs/debug-latte-s0-033bd68aea", at_round=20, seed=7)          # doctest: +SKIP
>>> fork("runs/debug-latte-s0-033bd68aea", at_round=20, heartbeat_rule="released")   # doctest: +SKIP
>>> fork("runs/debug-latte-s0-033bd68aea", at_round=10, model="simulated/careful")   # doctest: +SKIP

A fork's ``config.json`` names its parent, the round and the changes (``parent``, ``fork_round``,
``fork_changes``); its events hold a ``fork_point`` event; its results row has ``parent`` and
``fork_round``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from latte_lab import rundir
from latte_lab.config import TrialConfig
from latte_lab.errors import ConfigError, DataError

# What may change at a fork point: what the agents are (the model and its sampling), the randomness of what
# follows, the protocol's switches and the round budget. Everything else is the trial's identity.
MODEL_FIELDS = ("model", "base_url", "temperature", "max_tokens", "top_p")
BUDGET_FIELDS = ("max_rounds", "max_dollars", "max_billed_tokens")
RUN_FIELDS = ("runs_dir", "cache", "cache_path", "max_retries", "timeout_s")
FIXED_REASONS = {
    "task": "a fork continues its parent's workspace, which belongs to its task",
    "team": "a fork continues its parent's team on its graph; another team structure is a new trial from round 0",
    "n_workers": "a fork continues its parent's agents; another team size is a new trial from round 0",
    "sandbox": "the replayed rounds must run their tools where the parent's did",
    "planning_turns": "planning is over at any fork point",
    "read_file_cap": "the replayed rounds must show files as the parent's did",
    "trial": "the replicate index is the parent's",
}


def changeable() -> tuple[str, ...]:
    """Every field a fork may change."""
    return (*MODEL_FIELDS, "seed", *BUDGET_FIELDS, *TrialConfig.switches(), *RUN_FIELDS)


LEAD_OPERATORS = ("discover_task", "assign_task", "release_task", "close_task", "verify_task")


def check_intervention(run_dir: str | Path, at_round: int, intervene: str | list[str]) -> str:
    """The Lead's actions to apply at the fork point (``<release_task id="t5" />`` and the like), as one text,
    once each has been applied, as the Lead would apply it, to the parent's graph at the end of round
    ``at_round``: a violated precondition (or an action the Lead cannot take) is a ConfigError of one line."""
    from latte_lab.actions import parse_actions
    from latte_lab.errors import OperatorError
    from latte_lab.graph import LEAD

    text = intervene if isinstance(intervene, str) else "\n".join(intervene)
    parsed = parse_actions(text)
    if parsed.errors or not parsed.actions:
        why = parsed.errors[0] if parsed.errors else "no action in it"
        raise ConfigError(f"intervention {text.strip()!r} does not parse: {getattr(why, 'message', why)}")
    history = rundir.read_snapshots(run_dir)
    upto = [i for i, r in enumerate(history.rounds()) if r <= at_round]
    if not upto:
        raise ConfigError(f"cannot intervene at round {at_round}: {Path(run_dir).name}'s team keeps no coordination "
                          "graph (only graph teams' Lead applies these operators)")
    graph = history.graph(upto[-1])
    for action in parsed.actions:
        tag = type(action).tag
        if tag not in LEAD_OPERATORS:
            raise ConfigError(f"intervention <{tag}> is not an operator the Lead applies; use one of "
                              f"{', '.join(LEAD_OPERATORS)}")
        try:
            if tag == "discover_task":
                graph.discover(action.id, deps=list(action.dependencies), title=action.title,
                               description=action.description, by=LEAD)
            elif tag == "assign_task":
                graph.assign(action.id, action.to, by=LEAD)
            else:
                getattr(graph, tag.removesuffix("_task"))(action.id, by=LEAD)
        except OperatorError as exc:
            raise ConfigError(f"intervention <{tag} id={action.id!r}> cannot apply at round {at_round}: "
                              f"{exc.reason}") from None
    return text


def fork_config(parent: TrialConfig, at_round: int, parent_dir: str | Path, **changes) -> TrialConfig:
    """The fork's config: the parent's with ``changes`` and its lineage; a change that cannot apply mid-trial
    is a ConfigError of one line saying why."""
    if isinstance(at_round, bool) or not isinstance(at_round, int) or at_round < 0:
        raise ConfigError(f"at_round must be a round number >= 0 (0: right after planning), got {at_round!r}")
    allowed = set(changeable()) | {"intervene"}
    for name in changes:
        if name in FIXED_REASONS:
            raise ConfigError(f"cannot change {name} at a fork: {FIXED_REASONS[name]}")
        if name not in allowed:
            raise ConfigError(f"cannot change {name!r} at a fork; what can change: {', '.join(sorted(allowed))}")
    if changes.get("max_rounds") is not None and changes["max_rounds"] < at_round:
        raise ConfigError(f"max_rounds={changes['max_rounds']} ends before the fork point (round {at_round})")
    values = parent.model_dump()
    values.update({k: v for k, v in changes.items() if k != "intervene"})
    values.update(parent=str(Path(parent_dir)), fork_round=at_round,
                  fork_changes={k: v for k, v in sorted(changes.items()) if k not in RUN_FIELDS} or None)
    return TrialConfig(**values)


def fork(run_dir: str | Path, at_round: int, *, model_override=None, runs_dir: str | Path | None = None,
         progress: bool | Callable[[dict], None] | None = False, run_name: str | None = None, **changes):
    """Fork the recorded trial in ``run_dir`` at the end of round ``at_round`` under ``changes`` (fields of
    :class:`~latte_lab.config.TrialConfig`: see :func:`changeable`); a :class:`~latte_lab.rundir.result.TrialResult`.

    ``model="simulated/careful"`` (a model spec, like every other change a field of the config) gives the
    rounds after the fork point another model or profile; it is recorded in the fork's ``config.json``.

    ``intervene``: the Lead's operators to apply at the fork point, as action text
    (``'<release_task id="fix-rms" />'``, or a list of such): checked first against the parent's graph at
    that round with the operators' own preconditions, then applied through the team as the Lead's own
    reply would be.

    ``model_override``: a model object to use instead of the one built from the fork's config for the rounds
    after the fork point (a scripted one, in tests). No call reaches it, or any model, before then: those
    replies come from the parent's cassette. The fork's run directory goes beside the parent's, in
    ``forks/`` (or ``runs_dir``).
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
    return run_fork(config, model=model_override, runs_dir=target, run_name=name, progress=progress)


def run_config(config: TrialConfig, **options):
    """Run ``config``: a fork (it names a ``parent``) with :func:`run_fork`, any other with
    :func:`~latte_lab.trial.run_trial` (the sweeps' workers run every trial through this)."""
    from latte_lab.trial import run_trial

    return (run_fork if config.parent is not None else run_trial)(config, **options)


def run_fork(config: TrialConfig, *, model=None, runs_dir: str | Path | None = None, run_name: str | None = None,
             progress: bool | Callable[[dict], None] | None = False):
    """Run the fork ``config`` describes (its ``parent``, ``fork_round`` and changes, as :func:`fork_config`
    makes them). A sweep runs such configs like any other (exactly once, resumable, local or Ray;
    :func:`run_config`); on Ray the parent's run directory must be readable where the fork runs."""
    from latte_lab import tasks
    from latte_lab.sandbox.pytest import runner_missing
    from latte_lab.trial import TrialRecorder, _default_model, play_rounds

    missing = runner_missing()
    if missing:
        raise ConfigError(missing)
    run_dir = Path(config.parent)
    parent = parent_config(run_dir)
    task = tasks.get(config.task)
    after = model if model is not None else _default_model(config)
    forked = ForkModel(_cassette(run_dir / rundir.CALLS_FILE), config.fork_round, after)
    recorder = TrialRecorder(config, task, forked, runs_dir=runs_dir, run_name=run_name, progress=progress,
                             replayed=parent)
    with recorder:
        team = recorder.start_team()
        play_rounds(team, recorder)
    return recorder.result


_CASSETTES: dict[tuple[str, float], object] = {}


def _cassette(path: Path):
    """The parent's cassette, parsed once per process and file version (every fork of a sweep's worker
    shares it)."""
    from latte_lab.models.cassette import CassetteModel

    key = (str(path.resolve()), path.stat().st_mtime)
    if key not in _CASSETTES:
        _CASSETTES.clear()
        _CASSETTES[key] = CassetteModel(path)
    return _CASSETTES[key]


def parent_config(run_dir: Path) -> TrialConfig:
    for path in (run_dir / rundir.CONFIG_FILE, run_dir / rundir.CALLS_FILE):
        if not path.exists():
            raise DataError(f"cannot fork {run_dir}: {path.name} is missing")
    return rundir.read_config(run_dir)  # the parent's config, after checking its cassette is there


def recorded_rounds(run_dir: Path) -> int | None:
    try:
        row = rundir.read_json(run_dir / rundir.RESULT_FILE).get("row", {})
        return int(row["total_rounds"])
    except (OSError, DataError, KeyError, TypeError, ValueError):
        return None  # no result (an interrupted parent): the cassette says how far it can go


class ForkModel:
    """Replies from the parent's cassette for calls up to the end of round ``at_round``, from ``after`` beyond."""

    def __init__(self, cassette, at_round: int, after):
        self.cassette, self.at_round, self.after = cassette, at_round, after
        self.provider = getattr(after, "provider", "fork")
        self.base_url = getattr(after, "base_url", None)
        self.model = getattr(after, "model", "")

    def __repr__(self) -> str:
        return f"ForkModel(until round {self.at_round}: {self.cassette!r}; then {self.after!r})"

    def generate(self, request):
        frame = request.frame if request.frame is not None else request.view
        if frame is not None and frame.round <= self.at_round:
            return self.cassette.generate(request)
        return self.after.generate(request)
