"""The ``latte-lab`` command.

Subcommands are wired here; their work lives in the library modules.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from latte_lab.errors import LatteError

# Modules that contribute subcommands: each exposes ``add_parser(subparsers)`` which registers its
# subcommand(s) with ``set_defaults(func=...)``; ``func(args) -> int`` is the exit code.
_SUBCOMMAND_MODULES = (
    "latte_lab.trial_cli",
    "latte_lab.models.cli_cache",
    "latte_lab.analysis.cli_figures",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="latte-lab", description="Run, replay and analyse language-agent teams (latte_lab)."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
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
    except LatteError as exc:
        print(f"latte-lab: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("latte-lab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
