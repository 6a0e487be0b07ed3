"""``latte-lab fork``: continue a recorded trial from round k under a change."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    from latte_lab.config import TrialConfig

    # the run directory `latte-lab run --task debug --seed 0` writes, so that the examples run as printed
    run = f"runs/{TrialConfig(task='debug', seed=0).trial_id}"
    p = sub.add_parser(
        "fork", help="continue a recorded trial from round K under a change (what if ...)",
        description="Replay a recorded trial to the end of round K from its cassette, with no model call, then "
        "let it run on as a new trial under the changes given with --set: another model or profile, another "
        "seed for what follows, a protocol switch, another round budget. Another team, task or team size is "
        "refused: those are new trials from round 0.",
        epilog=f"examples (after latte-lab run --task debug --seed 0, which writes {run}):\n"
        f"  latte-lab fork {run} --at 10 --set seed=7\n"
        f"  latte-lab fork {run} --at 6 --set heartbeat_rule=released\n"
        f"  latte-lab fork {run} --at 5 --set model=simulated/careful --set max_rounds=30\n"
        f"  latte-lab fork {run} --at 8 --intervene '<release_task id=\"task-2\" />'")
    p.add_argument("run_dir", metavar="RUN", help="the recorded trial's run directory, or its trial id (or the "
                   "start of one) under runs/")
    p.add_argument("--at", type=int, required=True, dest="at_round",
                   help="the round after which the fork leaves its parent (0: right after planning)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="changes",
                   help="a change (a TrialConfig field; the value is read as JSON when it parses, else as text); "
                   "repeat for several (default: none: the parent's own continuation)")
    p.add_argument("--intervene", action="append", default=[], metavar="ACTION",
                   help="a Lead operator applied at the fork point, as action text, e.g. '<release_task id=\"t5\" />' "
                   "(checked against the parent's graph at round K first); repeatable (default: none)")
    p.add_argument("--runs-dir", default=None, help="where the fork's run directory goes (default: forks/ beside RUN)")
    p.add_argument("--quiet", action="store_true", help="only print the result")
    p.set_defaults(func=_fork)


def parse_changes(items: list[str]) -> dict[str, object]:
    """``["seed=7", "heartbeat_rule=released"]`` -> ``{"seed": 7, "heartbeat_rule": "released"}``.

    >>> parse_changes(["seed=7", "model=simulated/careful", "file_lock=true"])
    {'seed': 7, 'model': 'simulated/careful', 'file_lock': True}
    """
    from latte_lab.cli._common import UsageError

    changes: dict[str, object] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set takes KEY=VALUE, got {item!r}")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        changes[key.strip()] = value
    return changes


def _fork(args) -> int:
    from latte_lab.cli._common import UsageError, default_runs_dir
    from latte_lab.cli.show import find_run
    from latte_lab.rundir import CALLS_FILE
    from latte_lab.trial import fork, print_round

    runs = Path(default_runs_dir())
    if not Path(args.run_dir).is_dir() and not runs.is_dir():  # a missing RUN: one line, exit status 2
        raise UsageError(f"no run directory {args.run_dir}; give a recorded trial's run directory "
                         "(latte-lab runs DIR lists the trials under DIR)")
    run_dir = find_run(args.run_dir, runs)  # a trial id under runs/; an unknown one: one line, exit status 2
    if not (run_dir / CALLS_FILE).exists():
        raise UsageError(f"{run_dir} has no {CALLS_FILE} (the cassette a fork replays its first rounds from): "
                         "it cannot be forked")
    changes = parse_changes(args.changes)
    if args.intervene:
        changes["intervene"] = list(args.intervene)
    res = fork(run_dir, args.at_round, runs_dir=args.runs_dir, progress=None if args.quiet else print_round,
               **changes)
    print(res.summary())
    print(f"forked from {res.config.parent} after round {res.config.fork_round}"
          + (f" with {res.config.fork_changes}" if res.config.fork_changes else " with no change"))
    return 0 if res.status == "ok" else 1
