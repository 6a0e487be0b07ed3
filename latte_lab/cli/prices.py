"""``latte-lab prices``: the price table the cost ledger uses, or the price of given models."""

from __future__ import annotations

import argparse
import os

EPILOG = """\
examples:
  latte-lab prices                             the whole table
  latte-lab prices --provider anthropic
  latte-lab prices gpt-4o-2024-08-06 claude-sonnet-4-5"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    from latte_lab.models.ledger import PRICES_ENV

    p = subparsers.add_parser(
        "prices",
        help="list prices per million tokens used for the dollars of a trial",
        description="Print the price table (bundled with latte_lab; $LATTE_LAB_PRICES or --path for your own), "
        "or the row that prices each MODEL (a dated snapshot such as gpt-4o-2024-08-06 bills like its alias).",
        epilog=EPILOG,
    )
    p.add_argument("models", nargs="*", metavar="MODEL", help="model names to look up (default: the whole table)")
    p.add_argument("--provider", default=None, help="only this provider: openai, anthropic (default: every provider)")
    p.add_argument("--path", default=None, help=f"price table CSV (default: ${PRICES_ENV}, else the bundled one)")
    p.set_defaults(func=run)
    return p


def _line(provider: str, model: str, inp: str, out: str, as_of: str, source: str) -> str:
    return f"{provider:<10} {model:<28} {inp:>10} {out:>11}  {as_of:<10}  {source}"


def run(args) -> int:
    from latte_lab.models.ledger import PRICES_ENV, find_price, load_prices

    prices = load_prices(args.path)
    where = args.path or os.environ.get(PRICES_ENV) or "the table bundled with latte_lab"
    print(f"prices per million tokens (USD), from {where}")
    print(_line("provider", "model", "input", "output", "as of", "source"))
    if not args.models:
        rows = [p for p in prices if args.provider in (None, p.provider)]
        for p in rows:
            print(_line(p.provider, p.model, f"{p.input_per_mtok:.2f}", f"{p.output_per_mtok:.2f}", p.as_of, p.source))
        return 0 if rows else 1
    missing = 0
    for name in args.models:
        p = find_price(prices, name, args.provider)
        if p is None:
            missing += 1
            print(_line(args.provider or "?", name, "-", "-", "", f"no price: add a row to a copy of the table and "
                        f"set ${PRICES_ENV} (its dollars are NaN)"))
        else:
            label = name if name == p.model else f"{name} (as {p.model})"
            print(_line(p.provider, label, f"{p.input_per_mtok:.2f}", f"{p.output_per_mtok:.2f}", p.as_of, p.source))
    return 1 if missing else 0
