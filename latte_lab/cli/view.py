"""``latte-lab view RUN_OR_DIR``: the viewer page of a trial, of a sweep directory, or of two trials side by
side (``--compare A B``), written as one self-contained HTML file (:mod:`latte_lab.viz.viewer`); with
``--serve``, served on 127.0.0.1 and opened in a browser.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from latte_lab.cli._common import UsageError, default_runs_dir

__all__ = ["add_parser", "run"]

EPILOG = """\
examples:
  latte-lab view runs/debug-latte-s0-6ce190142a      writes runs/debug-latte-s0-6ce190142a/view.html
  latte-lab view debug-latte-s0 --serve              a trial id (or its start) under runs/, opened in a browser
  latte-lab view runs/sweep -o sweep.html            the sweep's table, each trial's page beside it
  latte-lab view --compare runs/a runs/b -o ab.html  two trials side by side, the same round on both"""


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    runs_dir = default_runs_dir()
    p = sub.add_parser(
        "view", help="write a trial's (or a sweep's) viewer page: every round, prompt, reply and edit",
        description="Write a self-contained HTML page (data and script embedded, no network) showing a trial "
        "round by round: its config and outcome, the coordination graph, one lane per agent with its prompt, "
        "reply, actions and their outcomes, file edits as diffs, test runs, Lead triggers and heartbeats, and "
        "the tokens over rounds. For a sweep directory, a sortable, filterable table of its trials, each "
        "linking to its own page (written beside the table). With --compare, two trials side by side.",
        epilog=EPILOG)
    p.add_argument("run", metavar="RUN_OR_DIR", nargs="?", default=None,
                   help="run directory, trial id (or its start) under --runs-dir, or sweep directory "
                   "(default: none; required unless --compare is given)")
    p.add_argument("-o", "--output", default=None,
                   help="the page to write (default: view.html inside the run or sweep directory; "
                   "compare-<A>-<B>.html beside A with --compare)")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), default=None,
                   help="two trials (run directories or trial ids) side by side (default: off)")
    p.add_argument("--serve", action="store_true",
                   help="serve the page on 127.0.0.1 (an ephemeral port, loopback only) and open it in a "
                   "browser; Ctrl-C stops (default: off)")
    p.add_argument("--runs-dir", default=runs_dir,
                   help=f"where a trial id is looked for, searched recursively (default: {runs_dir})")
    p.set_defaults(func=run)
    return p


def _resolve(name: str, runs_dir: str) -> Path:
    from latte_lab.cli.show import find_run

    path = Path(name)
    if path.is_dir():
        return path
    return find_run(name, runs_dir)


def run(args) -> int:
    from latte_lab.viz import viewer

    if args.compare:
        if args.run:
            raise UsageError("give either RUN_OR_DIR or --compare A B, not both")
        a, b = (_resolve(n, args.runs_dir) for n in args.compare)
        page = viewer.build_page(a, args.output, compare=b)
    elif args.run:
        page = viewer.build_page(_resolve(args.run, args.runs_dir), args.output)
    else:
        raise UsageError("give a run directory, trial id or sweep directory (or --compare A B)")
    print(f"wrote {page} ({page.stat().st_size / 1e6:.2f} MB)")
    if args.serve:
        viewer.serve(page)
    return 0
