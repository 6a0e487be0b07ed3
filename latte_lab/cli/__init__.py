"""The ``latte-lab`` command.

Each subcommand module (``trial``, ``sweep``, ``emulate``, ``cache``, ``runs``, ``show``, ``export``,
``figures``, ``prices``) registers its subcommands with ``add_parser(subparsers)``, setting
``func(args) -> exit code``; the work itself lives in the library. Every subcommand has a description, every option a help text that
says its default (:class:`~latte_lab.cli._common.HelpFormatter` adds it when the text does not), and
``tests/cli/test_cli_conventions.py`` keeps it so.

An error is one line on stderr, ``latte-lab: error: ...``: exit status 2 when the command line names
something that is not there (a missing folder, an unknown run; argparse's status for usage errors), 1 for
any other error a command reports. A warning is one line on stderr too, ``latte-lab: warning: ...``,
without the source line Python's default format shows (:func:`one_line_warnings`).

>>> args = build_parser().parse_args(["run", "--task", "debug"])
>>> args.team, args.model, args.cache
('latte', 'simulated', 'read_write')
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings

from latte_lab.cli import (
    _catalog,
    cache,
    emulate,
    export,
    figures,
    fork,
    notebooks,
    prices,
    runs,
    show,
    sweep,
    trial,
    view,
)
from latte_lab.cli._common import USAGE_EXIT, Parser, UsageError, VersionAction
from latte_lab.errors import LatteError
from latte_lab.rundir import DiskFullError

SUBCOMMAND_MODULES = (trial, fork, sweep, emulate, cache, runs, show, export, figures, prices, view, notebooks,
                      _catalog)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="latte-lab", description="Run, replay and analyse language-agent teams (latte_lab)."
    )
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
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
        with one_line_warnings():
            code = int(args.func(args) or 0)
    except UsageError as exc:
        print(f"latte-lab: error: {exc}", file=sys.stderr)
        return USAGE_EXIT
    except (LatteError, DiskFullError) as exc:
        print(f"latte-lab: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("latte-lab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if argv is None and getattr(args, "skip_teardown", False):
        _exit_now(code)
    return code


def format_warning(message: Warning | str, category: type[Warning] | None = None) -> str:
    """A warning as the command prints it: one line, its words only (no file, line number or source).

    >>> format_warning(UserWarning("2 trials left out:\\n  a.failed-1\\n  b.failed-1"))
    'latte-lab: warning: 2 trials left out: a.failed-1 b.failed-1'
    """
    return "latte-lab: warning: " + " ".join(str(message).split())


@contextlib.contextmanager
def one_line_warnings():
    """Within it, every warning shown is printed by :func:`format_warning` to stderr (the processes a
    command forks inherit it); the filters stay as they are, so a warning shown once is still shown once."""
    def show(message, category, filename, lineno, file=None, line=None):
        try:
            print(format_warning(message, category), file=file or sys.stderr, flush=True)
        except (OSError, ValueError):  # stderr closed: nowhere to say it
            pass

    previous = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


def _exit_now(code: int) -> None:
    """Ends the program without the interpreter's teardown, for a command whose output is all written and
    closed: unloading pandas, scipy and statsmodels at exit takes a third of a second, longer than some
    commands' work. Only when run as the program (``argv`` from the command line), never inside a caller."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            pass
    os._exit(code)


__all__ = ["build_parser", "format_warning", "main", "one_line_warnings"]
