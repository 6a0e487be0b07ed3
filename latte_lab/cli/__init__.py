"""The ``latte-lab`` command.

Each subcommand module (``trial``, ``sweep``, ``cache``, ``figures``, ``prices``) registers its subcommands with
``add_parser(subparsers)``, setting ``func(args) -> exit code``; the work itself lives in the library.

>>> args = build_parser().parse_args(["run", "--task", "debug"])
>>> args.team, args.model, args.cache
('latte', 'simulated', 'read_write')
"""

from __future__ import annotations

import argparse
import os
import sys

from latte_lab.cli import cache, figures, prices, sweep, trial
from latte_lab.errors import LatteError
from latte_lab.rundir import DiskFullError

SUBCOMMAND_MODULES = (trial, sweep, cache, figures, prices)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="latte-lab", description="Run, replay and analyse language-agent teams (latte_lab)."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMAND_MODULES:
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (LatteError, DiskFullError) as exc:
        print(f"latte-lab: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("latte-lab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


__all__ = ["build_parser", "main"]
