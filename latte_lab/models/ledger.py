"""CostLedger: tokens per call (agent, round), billed vs replayed, and dollars from the price table.

The price table ships with latte_lab (``latte_lab/data/prices.csv``, read as a package resource);
``$LATTE_LAB_PRICES`` or ``CostLedger(prices=path)`` points at your own.

Replayed tokens are those served from the cache or a cassette (``response.cached``): the trial used
them, nobody paid for them now. Prices are list prices per million tokens, edited by users; a model
with no price row gets NaN dollars and a note, never an error.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from latte_lab import data
from latte_lab.errors import DataError
from latte_lab.models.base import ModelResponse

PRICES_FILE = "prices.csv"  # bundled in latte_lab.data
PRICES_ENV = "LATTE_LAB_PRICES"  # point at your own price table without editing the repository's
PRICE_COLUMNS = ("provider", "model", "input_per_mtok", "output_per_mtok", "source", "as_of")
# A provider's dated snapshot ("gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929") bills like its alias.
DATED_SUFFIX = re.compile(r"^-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


@dataclass(frozen=True)
class Price:
    provider: str
    model: str
    input_per_mtok: float
    output_per_mtok: float
    source: str
    as_of: str


def load_prices(path: str | os.PathLike | None = None) -> list[Price]:
    """The price table: ``path``, else ``$LATTE_LAB_PRICES``, else the one bundled with latte_lab.

    >>> prices = load_prices()
    >>> find_price(prices, "gpt-4o-2024-08-06").input_per_mtok     # a dated snapshot bills like its alias
    2.5
    """
    explicit = path if path is not None else os.environ.get(PRICES_ENV)
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise DataError(f"price table {p} not found" + ("" if path is not None else f" (from ${PRICES_ENV})"))
        return _parse_prices(p.read_text(encoding="utf-8"), str(p))
    return _parse_prices(data.read_text(PRICES_FILE), f"latte_lab's bundled {PRICES_FILE}")


def _parse_prices(text: str, where: str) -> list[Price]:
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in PRICE_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(f"price table {where} lacks column(s) {', '.join(missing)}; expected {PRICE_COLUMNS}")
    prices = []
    for n, row in enumerate(reader, 2):
        try:
            prices.append(Price(row["provider"].strip(), row["model"].strip(), float(row["input_per_mtok"]),
                                float(row["output_per_mtok"]), row["source"], row["as_of"]))
        except (ValueError, TypeError, AttributeError):
            raise DataError(f"price table {where} line {n}: prices must be numbers and every column filled") from None
    return prices


def find_price(prices: list[Price], model: str, provider: str | None = None) -> Price | None:
    """The row for ``model`` (exact, or the alias of a dated snapshot), optionally within ``provider``."""
    rows = [p for p in prices if provider in (None, "", p.provider)]
    for p in rows:
        if p.model == model:
            return p
    for p in rows:
        if model.startswith(p.model) and DATED_SUFFIX.match(model[len(p.model):]):
            return p
    return None


LEDGER_COLUMNS = ("agent", "round", "provider", "model", "input_tokens", "output_tokens", "cached",
                  "billed_input_tokens", "billed_output_tokens", "dollars", "list_dollars")


def _csv_value(value):
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (in a model name a server sent): written as its escape
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


class CostLedger:
    """Tokens per call, with dollars for billed calls. Thread-safe: agents record concurrently."""

    def __init__(self, prices: str | os.PathLike | list[Price] | None = None):
        self.prices = prices if isinstance(prices, list) else load_prices(prices)
        self._rows: list[dict] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def record(self, agent: str, round: int, response: ModelResponse, *, provider: str | None = None) -> dict:
        """Add one call; returns the row (dollars NaN when the model has no price)."""
        price = find_price(self.prices, response.model, provider)
        i, o = response.usage.input_tokens, response.usage.output_tokens
        cost = math.nan if price is None else (i * price.input_per_mtok + o * price.output_per_mtok) / 1e6
        row = {
            "agent": agent,
            "round": int(round),
            "provider": provider or (price.provider if price else ""),
            "model": response.model,
            "input_tokens": i,
            "output_tokens": o,
            "cached": bool(response.cached),
            "billed_input_tokens": 0 if response.cached else i,
            "billed_output_tokens": 0 if response.cached else o,
            "dollars": 0.0 if response.cached and price is not None else (math.nan if response.cached else cost),
            "list_dollars": cost,  # what the call costs at list price, billed or not
        }
        with self._lock:
            self._rows.append(row)
        return row

    def restore_row(self, row: dict) -> None:
        """Add a row as :meth:`record` made it (a trial's saved state: a fork's ledger up to its fork point)."""
        with self._lock:
            self._rows.append({name: row[name] for name in LEDGER_COLUMNS})

    def rows(self) -> list[dict]:
        with self._lock:
            return list(self._rows)

    def to_frame(self):
        """One row per call (pandas DataFrame)."""
        import pandas as pd

        return pd.DataFrame(self.rows(), columns=list(LEDGER_COLUMNS))

    def to_csv(self) -> str:
        """The ledger as ``to_frame().to_csv(index=False)`` writes it, without importing pandas (a trial
        process that writes its ledger needs nothing else of it): missing dollars empty, floats as Python
        prints them, text quoted where CSV needs it."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(LEDGER_COLUMNS)
        for row in self.rows():
            writer.writerow([_csv_value(row[c]) for c in LEDGER_COLUMNS])
        return out.getvalue()

    def summary(self) -> dict:
        """Totals: calls, billed and replayed tokens, dollars billed and at list price, and notes."""
        rows = self.rows()
        billed = [r for r in rows if not r["cached"]]
        replayed = [r for r in rows if r["cached"]]
        unpriced = sorted({r["model"] for r in rows if math.isnan(r["list_dollars"])})
        notes = [
            f"no price for model {m!r}: add a row to a copy of latte_lab/data/prices.csv and point ${PRICES_ENV} "
            f"at it; its dollars are NaN"
            for m in unpriced
        ]

        def total(rs, field):
            return sum(r[field] for r in rs)

        return {
            "calls": len(rows),
            "billed_calls": len(billed),
            "replayed_calls": len(replayed),
            "billed_input_tokens": total(billed, "input_tokens"),
            "billed_output_tokens": total(billed, "output_tokens"),
            "replayed_input_tokens": total(replayed, "input_tokens"),
            "replayed_output_tokens": total(replayed, "output_tokens"),
            "total_tokens": total(rows, "input_tokens") + total(rows, "output_tokens"),
            "dollars": total(billed, "dollars") if rows else 0.0,
            "list_dollars": total(rows, "list_dollars") if rows else 0.0,
            "notes": notes,
        }


def dollars_without_calls(config) -> float:
    """The dollars of a trial whose ledger holds no call (it stopped before the first, or every call so far was
    its parent's): nothing, for a model with a price; unknown (NaN) for one without, as for every other trial
    of that model (the simulated model's), so that a trial's dollars never depend on how far it got."""
    from latte_lab.config import parse_model_spec
    from latte_lab.errors import LatteError

    try:
        provider, name = parse_model_spec(config.model, base_url=config.base_url)
        return 0.0 if find_price(load_prices(), name, provider) is not None else math.nan
    except (LatteError, OSError):  # an unreadable price table: unknown, as the ledger would say
        return math.nan
