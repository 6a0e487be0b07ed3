"""``latte-lab cache stats``, ``cache import`` and ``cache check``: inspect the response cache, fill it from runs,
find its damage and repair it."""

from __future__ import annotations

import argparse
from pathlib import Path

from latte_lab.errors import ConfigError
from latte_lab.models.cache import CACHE_ENV, DEFAULT_CACHE_PATH, ResponseCache, default_cache_path
from latte_lab.models.cache_check import check_cache, repair_cache
from latte_lab.models.cassette import import_cassettes


def _path_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--path", default=None,
                        help=f"cache file (default: ${CACHE_ENV}, else $XDG_CACHE_HOME/latte_lab/responses.sqlite, else {DEFAULT_CACHE_PATH})")


def cmd_stats(args: argparse.Namespace) -> int:
    with ResponseCache(args.path, read_only=True) as cache:
        stats = cache.stats()
    print(f"cache: {stats.path}")
    print(f"entries: {stats.entries}")
    print(f"size: {stats.size_bytes / 1e6:.2f} MB")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    with ResponseCache(args.path) as cache:
        before = len(cache)
        stored = import_cassettes(args.run_dirs, cache)
        after = len(cache)
    print(f"imported {stored} responses ({after - before} new) into {cache.path}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    if args.cache_file and args.path and Path(args.cache_file) != Path(args.path):
        raise ConfigError(f"two cache files given ({args.cache_file} and --path {args.path}); give one")
    path = Path(args.cache_file or args.path).expanduser() if (args.cache_file or args.path) else default_cache_path()
    if args.repair:
        repair = repair_cache(path, quick=args.quick)
        print("\n".join(repair.check.lines() + repair.lines()))
        return 0
    report = check_cache(path, quick=args.quick)
    print("\n".join(report.lines()))
    if report.ok:
        return 0
    print(f"damaged: run `latte-lab cache check --repair {path}` (while no trial uses the cache) to keep the "
          f"{report.readable} readable row(s) in a fresh file")
    return 1


def add_parser(subparsers) -> None:
    """Register ``cache stats``, ``cache import`` and ``cache check`` with the ``latte-lab`` command."""
    cache = subparsers.add_parser(
        "cache", help="inspect or fill the response cache",
        description="The SQLite cache of model responses that makes trials replayable offline: its size, "
        "importing run directories' cassettes into it, and checking (and repairing) a damaged file.")
    sub = cache.add_subparsers(dest="cache_command", metavar="ACTION")
    cache.set_defaults(func=lambda args: cache.print_help() or 2)

    stats = sub.add_parser("stats", help="entries and size of the response cache",
                           description="Entries, tokens and size of the response cache, per provider and model.")
    _path_arg(stats)
    stats.set_defaults(func=cmd_stats)

    imp = sub.add_parser("import", help="merge run directories' cassettes (calls.jsonl) into the cache",
                         description="Merge the calls recorded in run directories' cassettes (calls.jsonl) into "
                         "the response cache, so their trials replay from it on this machine.")
    imp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                     help="run or sweep directories, calls.jsonl files or globs")
    _path_arg(imp)
    imp.set_defaults(func=cmd_import)

    check = sub.add_parser("check", help="report damage in the response cache; --repair keeps its readable rows",
                           description="Report damaged pages and rows that do not decode in the response cache "
                           "(exit status 1 when damaged); --repair copies every readable row into a fresh file.")
    check.add_argument("cache_file", nargs="?", metavar="PATH",
                       help=f"cache file (default: ${CACHE_ENV}, else $XDG_CACHE_HOME/latte_lab/responses.sqlite, else {DEFAULT_CACHE_PATH})")
    _path_arg(check)
    check.add_argument("--quick", action="store_true",
                       help="PRAGMA quick_check instead of integrity_check (does not match indexes to the table)")
    check.add_argument("--repair", action="store_true",
                       help="copy every readable row into a fresh file and swap it in, keeping the damaged file "
                            "as <PATH>.damaged-<time>; run it while no trial uses the cache")
    check.set_defaults(func=cmd_check)
