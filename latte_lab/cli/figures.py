"""``latte-lab figures``: every figure, table and a short report from published data or our runs."""

from __future__ import annotations

import argparse
import gc
import os
from pathlib import Path

from latte_lab.data import PUBLISHED_ENV
from latte_lab.errors import DataError


def default_jobs(figures: int) -> int:
    """One drawer per CPU this process may use, at most one per figure, at least two: the drawing (text layout,
    PNG and PDF, the PDF's font subsets) is most of the command's CPU once the tables are done."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(2, min(figures, cpus))


def _workers(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes (0, 1, 2, ...)")
    return int(text)


EPILOG = """\
examples:
  latte-lab figures                            the paper's figures from the bundled published data
  latte-lab figures --data runs/sweep --out figures/mine/
  latte-lab figures --data experiments/ --jobs 0        the authors' experiments/ folder, drawn here"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "figures",
        help="write Figures 2-4, Table 2, the §5.1/§5.3 statistics and report.md",
        description="Regenerate the paper's figures and tables. --data is the authors' experiments/ "
        "folder or a folder of latte_lab run directories (*/result.json); without it, "
        f"${PUBLISHED_ENV} when set, else the authors' published data bundled with latte_lab.",
        epilog=EPILOG,
    )
    p.add_argument("--data", default=None,
                   help=f"published experiments/ folder or a runs folder (default: ${PUBLISHED_ENV}, else the "
                   "bundled published data)")
    p.add_argument("--out", default="figures/", help="output folder (default: figures/)")
    p.add_argument("--jobs", type=_workers, default=None,
                   help="processes drawing the figures while this one computes the tables; 0 draws them in "
                   "this one (default: one per CPU, at least 2, at most one per figure; Linux only)")
    p.add_argument("--reference", default=None,
                   help="paper reference CSV (default: the table of the paper's printed numbers bundled with latte_lab)")
    p.set_defaults(func=run, skip_teardown=True)  # every file is written and closed when run returns
    return p


def run(args) -> int:
    # A command of a few seconds whose garbage is a few figures: no cyclic collection while it runs, here or in
    # the processes it forks: its imports and figures would set off many and free little.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if collecting:
            gc.enable()


def _run(args) -> int:
    from latte_lab import data as bundled
    from latte_lab.analysis import loaders, report
    from latte_lab.viz import paper

    data_dir = Path(args.data) if args.data else bundled.published_dir()
    if not data_dir.is_dir():
        raise DataError(f"--data {data_dir} is not a folder")
    if loaders.is_published_dir(data_dir):
        data = loaders.load_published(data_dir)
    elif next(data_dir.rglob("result.json"), None) is not None:
        data = loaders.load_runs(data_dir)
    else:
        raise DataError(f"--data {data_dir} holds neither the published layout (experiment1/n4/results.csv, "
                        "...) nor run directories with result.json")
    reference = report.paper_reference(args.reference) if args.reference else None
    jobs = default_jobs(len(paper.FIGURES)) if args.jobs is None else args.jobs
    written = paper.write_all(data, args.out, reference=reference, figure_workers=jobs)
    print(f"{data.source}: {len(data.trials)} trials from {data_dir}")
    print(f"wrote {len(written)} files to {args.out}")
    for path in written:
        print(f"  {path}")
    return 0
