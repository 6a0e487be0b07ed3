"""``latte-lab run``, ``replay``, ``demo`` and ``graph-demo``."""

from __future__ import annotations

import argparse
from pathlib import Path

from latte_lab.config import CACHE_MODES, DEFAULT_CACHE_MODE


def add_parser(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run", help="run one trial and print one line per round",
        description="Run one trial of a team on a task: one line per round, then a summary with the run "
        "directory (replay it offline with latte-lab replay). Success is the team's own claim, confirmed by "
        "the hidden evaluation's run of the public tests as shipped; accuracy is the hidden pass rate (debug: "
        "success).",
        epilog="examples:\n  latte-lab run --task debug --team latte --seed 0\n"
        "  latte-lab run --task eda --team static --model openai/gpt-4o\n"
        "  latte-lab run --task debug --released --quiet")
    run.add_argument("--task", required=True, help="task id: debug, eda, textproc (latte-lab tasks lists them)")
    run.add_argument("--team", default="latte", help="team id (latte-lab teams lists them)")
    run.add_argument("--model", default="simulated",
                     help="simulated[/profile] (offline), openai/<model>, anthropic/<model>, or a model name "
                     "with --base-url")
    run.add_argument("--base-url", default=None,
                     help="OpenAI-compatible server (vLLM, Ollama, LM Studio) (default: the provider's own endpoint)")
    run.add_argument("--seed", type=int, default=0, help="seed of the trial (the simulated model's draws, names)")
    run.add_argument("--trial", type=int, default=0,
                     help="replicate index: a sweep's trials carry theirs in their id, so seed S at replicate K of a "
                     "sweep is --seed S --trial K (docs: Sweeps, a trial's id)")
    run.add_argument("--workers", type=int, default=4, dest="n_workers", help="workers besides the Lead")
    run.add_argument("--max-rounds", type=int, default=None,
                     help="round budget (default: the task's own, Task.default_max_rounds)")
    run.add_argument("--cache", default=DEFAULT_CACHE_MODE, choices=CACHE_MODES,
                     help="response cache mode for provider models (replay: a miss is an error, no network)")
    run.add_argument("--runs-dir", default="runs", help="where the trial's run directory is written")
    run.add_argument("--released", action="store_true",
                     help="reproduce the released code's behaviour (all paper-vs-code switches)")
    run.add_argument("--quiet", action="store_true", help="only print the result")
    run.set_defaults(func=_run)

    rep = sub.add_parser("replay", help="rerun a trial from its cassette with zero model calls",
                         description="Rerun a recorded trial from its cassette (calls.jsonl), offline and with zero "
                         "model calls, and say whether it reproduced the original exactly.")
    rep.add_argument("run_dir", help="the recorded trial's run directory")
    rep.add_argument("--runs-dir", default=None,
                     help="where the replay's run directory goes (default: beside the original)")
    rep.add_argument("--quiet", action="store_true", help="only print the result")
    rep.set_defaults(func=_replay)

    demo = sub.add_parser("demo", help="a LATTE team on the debug task with the simulated model (offline)",
                          description="A whole trial offline, no key needed: a team on a task with the simulated "
                          "model, one line per round, then the summary.")
    demo.add_argument("--task", default="debug", help="task id: debug, eda, textproc (latte-lab tasks lists them)")
    demo.add_argument("--team", default="latte", help="team id (latte-lab teams lists them)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the trial")
    demo.add_argument("--runs-dir", default="runs/demo", help="where the run directory is written")
    demo.set_defaults(func=_demo)

    gd = sub.add_parser("graph-demo", help="walk a small coordination graph through every operator",
                        description="Walk a small coordination graph through the seven operators (Discover, "
                        "Assign, Claim, Complete, Release, Close, Verify), printing its state after each.")
    gd.set_defaults(func=_graph_demo)


def _run(args) -> int:
    from latte_lab.rundir import check_writable_dir
    from latte_lab.trial import TrialConfig, _default_model, print_round, run_trial

    check_writable_dir(args.runs_dir)  # refused in one line before the trial is announced
    fields = dict(task=args.task, team=args.team, model=args.model, base_url=args.base_url, seed=args.seed,
                  trial=args.trial,
                  n_workers=args.n_workers, max_rounds=args.max_rounds, cache=args.cache, runs_dir=args.runs_dir)
    cfg = TrialConfig.released(**fields) if args.released else TrialConfig(**fields)
    model = _default_model(cfg)  # an unknown profile or a missing key: refused before the trial is announced
    print(f"trial {cfg.trial_id}: team {cfg.team} on {cfg.task} with {cfg.model}, up to {cfg.rounds} rounds"
          + ("" if args.quiet else " (each round's time is the trial's virtual clock: model latency and tool "
             "time, not time elapsed)"))
    res = run_trial(cfg, model=model, progress=None if args.quiet else print_round)
    print(res.summary())
    return 0 if res.status == "ok" else 1


def _replay(args) -> int:
    from latte_lab.rundir import check_writable_dir
    from latte_lab.trial import load_trial, print_round, replay, replay_verdict

    original = load_trial(args.run_dir)
    if args.runs_dir is not None:
        check_writable_dir(args.runs_dir)
    res = replay(args.run_dir, runs_dir=args.runs_dir, progress=None if args.quiet else print_round)
    print(res.summary())
    ok, verdict = replay_verdict(original, res)
    print(verdict)
    return 0 if ok else 1


def _demo(args) -> int:
    from latte_lab.rundir import check_writable_dir
    from latte_lab.trial import TrialConfig, print_round, run_trial

    check_writable_dir(args.runs_dir)
    cfg = TrialConfig(task=args.task, team=args.team, model="simulated", seed=args.seed, runs_dir=args.runs_dir)
    print(f"latte_lab demo: a {cfg.team} team (Lead + {cfg.n_workers} workers) on the '{cfg.task}' task with the "
          "simulated model — offline, no API key.\n")
    res = run_trial(cfg, progress=print_round)
    print()
    print(res.summary())
    m = res.metrics
    print(f"  overwrites {m.get('cross_agent_overwrites')} · concurrent writes {m.get('n_concurrent_collisions')} · "
          f"idle fraction {m.get('idle_fraction', float('nan')):.2f}")
    print(f"\nReplay it exactly, offline: latte-lab replay {res.run_dir}")
    print(f"Events: {Path(res.run_dir) / 'events.jsonl'}")
    return 0 if res.status == "ok" else 1


def _graph_demo(args) -> int:
    from latte_lab.graph import CoordinationGraph

    g = CoordinationGraph()
    steps = [
        ("discover t1", lambda: g.discover("t1", deps=[], title="Load data", by="Lead")),
        ("discover t2 <- t1", lambda: g.discover("t2", deps=["t1"], title="Clean data", by="Lead")),
        ("discover t3 <- t1", lambda: g.discover("t3", deps=["t1"], title="Plot", by="Lead")),
        ("assign t1 to Dev1", lambda: g.assign("t1", "Dev1", by="Lead")),
        ("Dev1 claims t1", lambda: g.claim("t1", "Dev1")),
        ("Dev1 completes t1", lambda: g.complete("t1", "Dev1")),
        ("Lead verifies t1", lambda: g.verify("t1", by="Lead")),
        ("Dev2 claims t1-verify", lambda: g.claim("t1-verify", "Dev2")),
        ("Dev2 completes t1-verify", lambda: g.complete("t1-verify", "Dev2")),
        ("Dev3 claims t2", lambda: g.claim("t2", "Dev3")),
        ("Lead releases t2", lambda: g.release("t2", by="Lead")),
        ("assign t2 to Dev4", lambda: g.assign("t2", "Dev4", by="Lead")),
        ("Dev4 claims t2", lambda: g.claim("t2", "Dev4")),
        ("Lead closes t2", lambda: g.close("t2", by="Lead")),
        ("Dev1 claims t3", lambda: g.claim("t3", "Dev1")),
        ("Dev1 completes t3", lambda: g.complete("t3", "Dev1")),
    ]
    for label, op in steps:
        op()
        statuses = ", ".join(f"{n}={g.status(n).value}" for n in g.nodes())
        print(f"{label:<26} frontier={g.frontier()}  [{statuses}]")
    return 0
