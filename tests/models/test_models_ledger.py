"""CostLedger: billed vs replayed tokens, dollars from the price table, unknown models as NaN."""

from __future__ import annotations

import math

import pytest

from latte_lab.errors import DataError
from latte_lab.models import CostLedger, ModelResponse, Usage
from latte_lab.models.ledger import PRICES_ENV, find_price, load_prices


def response(model, i, o, cached=False):
    return ModelResponse(text="x", usage=Usage(i, o), cached=cached, model=model)


def test_shipped_price_table_is_complete(monkeypatch):
    monkeypatch.delenv(PRICES_ENV, raising=False)
    prices = load_prices()
    assert {p.provider for p in prices} == {"openai", "anthropic"}
    for p in prices:
        assert p.input_per_mtok > 0 and p.output_per_mtok >= p.input_per_mtok
        assert "pricing" in p.source and len(p.as_of) == 10


def test_dated_snapshots_match_their_alias_but_siblings_do_not(monkeypatch):
    monkeypatch.delenv(PRICES_ENV, raising=False)
    prices = load_prices()
    assert find_price(prices, "gpt-4o-2024-08-06").model == "gpt-4o"
    assert find_price(prices, "claude-sonnet-4-5-20250929").model == "claude-sonnet-4-5"
    assert find_price(prices, "gpt-4o-mini").model == "gpt-4o-mini"
    assert find_price(prices, "claude-sonnet-4-7") is None  # not silently billed as claude-sonnet-4
    assert find_price(prices, "gpt-4o", provider="anthropic") is None


def test_billed_vs_replayed_and_dollars(tmp_path):
    table = tmp_path / "prices.csv"
    table.write_text("provider,model,input_per_mtok,output_per_mtok,source,as_of\n"
                     "openai,m1,2.0,10.0,test,2025-01-01\n")
    ledger = CostLedger(table)
    ledger.record("Lead", 0, response("m1", 1_000_000, 100_000), provider="openai")
    ledger.record("Dev1", 1, response("m1", 500_000, 0, cached=True))
    ledger.record("Dev2", 1, response("mystery", 10, 10))
    s = ledger.summary()
    assert (s["calls"], s["billed_calls"], s["replayed_calls"]) == (3, 2, 1)
    assert (s["billed_input_tokens"], s["billed_output_tokens"]) == (1_000_010, 100_010)
    assert s["replayed_input_tokens"] == 500_000
    assert math.isnan(s["dollars"])  # one billed call has no price: the total is unknown, not understated
    assert len(s["notes"]) == 1 and "'mystery'" in s["notes"][0]
    frame = ledger.to_frame()
    assert list(frame["agent"]) == ["Lead", "Dev1", "Dev2"]
    assert frame.loc[0, "dollars"] == pytest.approx(3.0)
    assert frame.loc[1, "dollars"] == 0.0 and frame.loc[1, "list_dollars"] == pytest.approx(1.0)
    assert math.isnan(frame.loc[2, "dollars"])
    assert frame["billed_input_tokens"].sum() == 1_000_010


def test_bad_price_tables(tmp_path):
    bad = tmp_path / "p.csv"
    bad.write_text("provider,model\nopenai,x\n")
    with pytest.raises(DataError, match="lacks column"):
        load_prices(bad)
    bad.write_text("provider,model,input_per_mtok,output_per_mtok,source,as_of\nopenai,x,cheap,1,s,d\n")
    with pytest.raises(DataError, match="line 2"):
        load_prices(bad)
    with pytest.raises(DataError, match="not found"):
        load_prices(tmp_path / "missing.csv")


def test_prices_env_overrides_the_bundled_table(tmp_path, monkeypatch):
    table = tmp_path / "mine.csv"
    table.write_text("provider,model,input_per_mtok,output_per_mtok,source,as_of\n"
                     "openai,my-model,1.0,2.0,my contract,2026-01-01\n")
    monkeypatch.setenv(PRICES_ENV, str(table))
    assert [p.model for p in load_prices()] == ["my-model"]
    monkeypatch.setenv(PRICES_ENV, str(tmp_path / "gone.csv"))
    with pytest.raises(DataError, match=f"not found \\(from \\${PRICES_ENV}\\)"):
        load_prices()


def test_a_missing_bundled_table_is_an_error_not_an_empty_table(tmp_path, monkeypatch):
    monkeypatch.delenv(PRICES_ENV, raising=False)
    monkeypatch.setattr("latte_lab.data.files", lambda package: tmp_path)  # an installation without data files
    with pytest.raises(DataError, match="bundled prices.csv is missing.*reinstall latte_lab"):
        CostLedger()


def test_the_ledger_csv_is_what_pandas_writes_without_pandas(tmp_path):
    """A trial writes ledger.csv with ``to_csv`` (no pandas in the trial's process): the same text as the
    DataFrame's own CSV, for billed, replayed and unpriced calls, prices with long decimals and odd names."""
    table = tmp_path / "prices.csv"
    table.write_text("provider,model,input_per_mtok,output_per_mtok,source,as_of\n"
                     "openai,m1,2.5,10.1,test,2025-01-01\n")
    ledger = CostLedger(table)
    ledger.record("Lead", 0, response("m1", 1_234_567, 89_012), provider="openai")
    ledger.record("Dev1", 1, response("m1", 3, 7, cached=True), provider="openai")
    ledger.record('Dev,2 "the second"', 2, response("mystery", 10, 10))
    ledger.record("Dev3", 3, response("m1", 0, 0, cached=True))
    assert ledger.to_csv() == ledger.to_frame().to_csv(index=False)
    assert CostLedger(table).to_csv() == CostLedger(table).to_frame().to_csv(index=False)  # no calls
