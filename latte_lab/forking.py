"""What if: a recorded trial forked at round k, running on under a change.

A fork is a :class:`~latte_lab.config.TrialConfig` with a ``parent`` (its parent's run directory), a
``fork_round`` and its changes (:func:`fork_config`); :func:`latte_lab.trial.run_trial` runs it like any other
trial (``ll.fork`` makes one and runs it). It starts where its parent stood at the end of round ``k``: the graph,
the workspace, every agent's history, the ledger and the clocks are the parent's, restored from the state the
parent saved then (``state.jsonl``, :mod:`latte_lab.teams.state`), with no model call and no tool run; a parent
that saved none (a run directory of an older latte_lab, or a team holding what its state cannot hold) has its
rounds replayed from its cassette instead, which gives the same start. From the next round on it is a new
trial, in its own run directory, under the changes: another model or profile (a real model can take over a
simulated trial, and the reverse), another seed for what follows, any protocol switch of
``TrialConfig.switches()``, another round budget. What the parent did before round ``k`` is shared by every fork
of it, so a difference between forks is the change's (and chance's after ``k``), never the past's. Changes that
cannot apply mid-trial (another team, task or team size) are refused in one line.

This module (``latte_lab.fork`` before: the package's ``fork`` is the function ``ll.fork``) holds what makes a
trial a fork: the changes it may make (:func:`changeable`, :func:`fork_config`,
:func:`check_intervention`), how it starts (:class:`ForkStart`: the saved state, or the model wrapper that
replays the parent's calls, :class:`ForkModel`) and its round hook (:meth:`ForkStart.after_round`: the fork
point).

>>> ll.fork("runs/debug-latte-s0-033bd68aea", at_round=20, seed=7)          # doctest: +SKIP
>>> ll.fork("runs/debug-latte-s0-033bd68aea", at_round=20, heartbeat_rule="released")   # doctest: +SKIP
>>> ll.fork("runs/debug-latte-s0-033bd68aea", at_round=10, model="simulated/careful")   # doctest: +SKIP

A fork's ``config.json`` names its parent, the round and the changes (``parent``, ``fork_round``,
``fork_changes``); its events hold a ``fork_point`` event; its results row has ``parent`` and
``fork_round``.
"""

from __future__ import annotations

from pathlib import Path

from latte_lab import rundir
from latte_lab.config import TrialConfig
from latte_lab.errors import ConfigError, DataError
from latte_lab.teams.state import Codec, SavedState, read_state, restore_team

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


class ForkStart:
    """How the fork ``config`` starts: from the state its parent saved at the end of round ``config.fork_round``
    (:attr:`saved`), or, where the parent saved none, by replaying the parent's rounds from its cassette under the
    parent's config (:attr:`first_config`, :meth:`model`) until the fork point (:meth:`after_round`)."""

    def __init__(self, config: TrialConfig):
        self.config = config
        self.parent_dir = Path(config.parent)
        self.parent = parent_config(self.parent_dir)
        self.codec = Codec()
        self.saved: SavedState | None = read_state(self.parent_dir, config.fork_round, self.codec)
        # a replayed fork runs under its parent's config until the fork point: the calls replayed from the
        # parent's cassette must be the very calls it made
        self.first_config = config if self.saved is not None else self.parent
        self.taken_over = False

    def model(self, after):
        """The fork's model: ``after`` (built from the fork's config) itself when the fork is restored; else one
        that answers from the parent's cassette up to the fork point and from ``after`` beyond."""
        if self.saved is not None:
            return after
        return ForkModel(_cassette(self.parent_dir / rundir.CALLS_FILE), self.config.fork_round, after)

    def restore(self, team, recorder) -> None:
        """Make ``team`` (built for the fork, not set up) and the recorder's run directory what the parent's were
        at the end of the fork round: the parent's events (after its ``run_start``), calls, graph records and saved
        states up to then are copied, and the team, its workspace and ledger restored."""
        saved, parent = self.saved, self.parent_dir
        counts = saved.counts
        events = rundir.read_jsonl(parent / rundir.EVENTS_FILE)[:counts["events"]]
        records = rundir.read_snapshots(parent).records[:counts["snapshots"]]
        if len(events) != counts["events"] or len(records) != counts["snapshots"]:
            raise DataError(f"{parent} holds fewer events or graph records than its saved state counts")
        recorder.cassette.copy_lines(parent / rundir.CALLS_FILE, counts["calls"])
        recorder.copy_events(events[1:])  # the fork's own run_start stands in for its parent's
        recorder.log.round = counts["log_round"]
        restore_team(team, saved, records)
        recorder.states.resume(saved, self.codec, parent)

    def after_round(self, team, log, r: int | None) -> None:
        """The round hook: at the end of the fork round, the fork point. From the next call on the team runs under
        the fork's own config (:meth:`~latte_lab.teams.engine.Team.rebind`), and the Lead's intervention, if any,
        applies as its own reply's would."""
        if self.taken_over or (r or 0) != self.config.fork_round:
            return
        self.taken_over = True
        config = self.config
        team.rebind(config)
        changes = dict(config.fork_changes or {})
        log.emit("fork_point", parent=config.parent, fork_round=config.fork_round, changes=changes,
                 restored=self.saved is not None)
        if changes.get("intervene"):
            team.apply(team.lead, changes["intervene"])


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


_MOVED = {  # names this module (latte_lab.fork before) no longer has, and where they are
    "fork": "latte_lab.trial.fork (ll.fork): it makes a fork's config and runs it with run_trial",
    "run_fork": "latte_lab.trial.run_trial, which runs a config with a parent as a fork",
    "run_config": "latte_lab.trial.run_trial, which runs a config with a parent as a fork",
}


def __getattr__(name: str):
    if name in _MOVED:
        raise AttributeError(f"latte_lab.forking has no {name!r}: it is {_MOVED[name]}")
    raise AttributeError(f"module 'latte_lab.forking' has no attribute {name!r}")
