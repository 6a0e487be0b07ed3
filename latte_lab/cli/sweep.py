"""``latte-lab sweep``: a grid of trials, resumable, on this machine or a Ray cluster; ``--dry-run`` shows
the grid, what is already finished and what the rest may cost."""

from __future__ import annotations

import argparse
import textwrap

from latte_lab.config import BACKENDS, CACHE_MODES, DEFAULT_CACHE_MODE


def _names(values: list[str]) -> list[str]:
    """``--teams latte,static pipeline`` -> ["latte", "static", "pipeline"]."""
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _jobs(text: str) -> int | str:
    return text if text == "auto" else int(text)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep", help="run a grid of trials (resumable; local processes or Ray)",
        description="Run every trial of tasks x teams x models x replicates not already finished in --out. "
        "Rerun the same command to resume; Ctrl-C stops it cleanly. Lists take commas or spaces.",
        epilog="examples:\n  latte-lab sweep --tasks debug,eda --teams latte,static --replicates 5 --jobs 2\n"
        "  latte-lab sweep --tasks textproc --teams latte leader_worker --models openai/gpt-4o --dry-run\n"
        "  latte-lab sweep --tasks debug --replicates 20 --backend ray --out runs/big\n"
        "  latte-lab sweep --tasks debug --models openai/gpt-4o-mini --replicates 300 --in-flight 60 "
        "--rate-limit openai=5000/4000000")
    p.add_argument("--tasks", nargs="+", required=True,
                   help="task ids: debug, eda, textproc (latte-lab tasks lists them)")
    p.add_argument("--teams", nargs="+", default=["latte"], help="team ids (latte-lab teams lists them) (default: latte)")
    p.add_argument("--models", nargs="+", default=["simulated"],
                   help="model specs: simulated[/profile], openai/<model>, anthropic/<model> (default: simulated)")
    p.add_argument("--replicates", type=int, default=1, help="trials per condition (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first replicate; replicate i gets seed + i")
    p.add_argument("--jobs", type=_jobs, default=None,
                   help="worker processes, 1 to 4 per CPU, or auto (default: 1); with Ray, trials in flight")
    p.add_argument("--in-flight", type=int, default=None, dest="in_flight",
                   help="keep up to this many trials running at once, as threads of --jobs processes (default: "
                   "off; one trial per process): for real models, whose trials wait on the network")
    p.add_argument("--rate-limit", action="append", default=None, dest="rate_limits", metavar="API=RPM/TPM",
                   help="requests and tokens per minute of a provider API or base URL, e.g. openai=5000/2000000 "
                   "(- for no limit); repeat for more (default: the configured limits)")
    p.add_argument("--backend", choices=BACKENDS, default=BACKENDS[0],
                   help=f"where trials run: local processes, or a Ray cluster (default: {BACKENDS[0]})")
    p.add_argument("--ray-address", default=None,
                   help="an existing Ray cluster (auto, ray://host:10001) (default: a local cluster started for "
                   "the sweep)")
    p.add_argument("--ray-cpus", type=float, default=1,
                   help="CPUs each trial reserves on its Ray node (default: 1)")
    p.add_argument("--ray-memory", default=None,
                   help="memory each trial reserves on its Ray node, e.g. 2G or 512M (default: none reserved)")
    p.add_argument("--ray-retries", type=int, default=None,
                   help="runs of a trial on another node after its node was lost; each trial is still recorded "
                   "once (default: 3)")
    p.add_argument("--out", default="runs/sweep", help="sweep directory (default: runs/sweep)")
    p.add_argument("--max-dollars", type=float, default=None, help="stop once the sweep has billed this much (default: no limit)")
    p.add_argument("--max-rounds", type=int, default=None, help="round budget per trial (default: the task's)")
    p.add_argument("--workers", type=int, default=None, dest="n_workers",
                   help="workers besides the Lead (default: the config's, 4)")
    p.add_argument("--base-url", default=None,
                   help="OpenAI-compatible server (vLLM, Ollama, LM Studio) (default: the provider's own endpoint)")
    p.add_argument("--cache", default=DEFAULT_CACHE_MODE, choices=CACHE_MODES, help="response cache mode")
    p.add_argument("--dry-run", action="store_true",
                   help="print the grid, the trials already finished and the estimated calls, tokens, cost and "
                   "time of the rest, run nothing")
    p.add_argument("--estimate-from", default=None,
                   help="with --dry-run: estimate from the finished trials in this folder (a rehearsal, a pilot) "
                   "(default: --out)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_sweep)


def _grid(args) -> dict:
    grid = {"task": _names(args.tasks), "team": _names(args.teams), "model": _names(args.models),
            "replicates": args.replicates, "seed_offset": args.seed, "cache": args.cache}
    for field in ("max_rounds", "n_workers", "base_url"):
        if getattr(args, field) is not None:
            grid[field] = getattr(args, field)
    return grid


RESULT_COLUMNS = ("trials", "success", "accuracy", "rounds", "tokens", "errors")


def results_table(df) -> str:
    """The sweep's results, one line per task, team (and model, when the sweep has more than one): trials,
    success rate, mean accuracy, mean rounds and mean tokens over the trials that ran to their end (status
    ok), and how many did not (an error, an interruption, a budget).

    >>> import pandas as pd
    >>> rows = pd.DataFrame({"task": ["debug"] * 3, "team": ["latte"] * 3, "model": ["simulated"] * 3,
    ...                      "status": ["ok", "ok", "error"], "success": [True, False, False],
    ...                      "accuracy": [1.0, 0.0, None], "total_rounds": [30, 40, 2],
    ...                      "total_tokens": [400_000, 500_000, 1_000]})
    >>> print(results_table(rows))
    task   team   trials  success  accuracy  rounds   tokens  errors
    debug  latte       3      50%       50%    35.0  450,000       1
    """
    import pandas as pd

    keys = ["task", "team"] + (["model"] if df["model"].nunique() > 1 else [])
    def mean(rows, column: str, fmt: str) -> str:
        values = pd.to_numeric(rows[column], errors="coerce").dropna()
        return fmt.format(values.mean()) if len(values) else "-"

    lines = []
    for key, group in df.groupby(keys, sort=False):
        ok = group[group["status"] == "ok"]
        lines.append([*key, str(len(group)), mean(ok, "success", "{:.0%}"), mean(ok, "accuracy", "{:.0%}"),
                      mean(ok, "total_rounds", "{:.1f}"), mean(ok, "total_tokens", "{:,.0f}"),
                      str(len(group) - len(ok))])
    header = [*keys, *RESULT_COLUMNS]
    widths = [max(len(str(row[i])) for row in [header, *lines]) for i in range(len(header))]
    text = [header, *lines]
    left = len(keys)  # names align left, figures right
    return "\n".join("  ".join(cell.ljust(w) if i < left else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in text)


def _sweep(args) -> int:
    from latte_lab.models.ratelimit import parse_limits
    from latte_lab.sweep import dry_run, run_sweep

    grid = _grid(args)
    limits = parse_limits(",".join(args.rate_limits or []), where="--rate-limit")
    if args.dry_run:
        print(dry_run(grid, args.out, n_jobs=args.jobs, in_flight=args.in_flight, rate_limits=limits,
                      basis=args.estimate_from).report())
        return 0
    df = run_sweep(grid, args.out, n_jobs=args.jobs, backend=args.backend, progress=not args.quiet,
                   max_dollars=args.max_dollars, ray_address=args.ray_address, in_flight=args.in_flight,
                   rate_limits=limits, ray_cpus=args.ray_cpus, ray_memory=args.ray_memory,
                   ray_retries=args.ray_retries)
    stopped = df.attrs["stopped"]
    if args.quiet and not stopped:  # run_sweep prints its summary line with progress or when it stopped
        print(df.attrs["summary"])
    if len(df):
        from latte_lab.schema import SUCCESS_AND_ACCURACY

        print(results_table(df))
        print(textwrap.fill(SUCCESS_AND_ACCURACY, 110))
    if stopped == "interrupted":
        return 130
    return 0 if not stopped and len(df) and (df["status"] == "ok").all() else 1
