"""``latte-lab cache stats`` and ``latte-lab cache import``: inspect the response cache, fill it from runs."""

from __future__ import annotations

import argparse

from latte_lab.models.cache import CACHE_ENV, DEFAULT_CACHE_PATH, ResponseCache
from latte_lab.models.cassette import import_cassettes


def _path_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--path", default=None,
                        help=f"cache file (default: ${CACHE_ENV}, else {DEFAULT_CACHE_PATH})")


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


def add_parser(subparsers) -> None:
    """Register ``cache stats`` and ``cache import`` with the ``latte-lab`` command."""
    cache = subparsers.add_parser("cache", help="inspect or fill the response cache")
    sub = cache.add_subparsers(dest="cache_command", metavar="ACTION")
    cache.set_defaults(func=lambda args: cache.print_help() or 2)

    stats = sub.add_parser("stats", help="entries and size of the response cache")
    _path_arg(stats)
    stats.set_defaults(func=cmd_stats)

    imp = sub.add_parser("import", help="merge run directories' cassettes (calls.jsonl) into the cache")
    imp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                     help="run or sweep directories, calls.jsonl files or globs")
    _path_arg(imp)
    imp.set_defaults(func=cmd_import)
