"""Budgets: a trial, and a sweep, stop before they spend more than meant.

A trial's budget is ``TrialConfig.max_dollars`` / ``max_billed_tokens``; a sweep's is
``run_sweep(max_dollars=..., max_billed_tokens=...)``, whose running spend every trial of the sweep
adds to through the sweep's shared state (:mod:`latte_lab.models.ratelimit`). Both are checked before
each model call: once either is reached, the next call raises :class:`BudgetExceeded` and the trial
ends with status ``budget``. Calls already under way finish, so a budget can be passed by at most the
calls of one round.

Only billed calls count: cache and cassette hits are free. Dollars are list prices from the price
table (:mod:`latte_lab.models.ledger`); the simulated and scripted models cost nothing.

>>> from latte_lab.models.scripted import ScriptedModel
>>> guarded = BudgetedModel(ScriptedModel(["hi"] * 5), "scripted", max_billed_tokens=1)
>>> from latte_lab.models.base import Message, ModelRequest
>>> _ = guarded.generate(ModelRequest("scripted", "scripted", "", [Message("user", "hello")]))
>>> guarded.generate(ModelRequest("scripted", "scripted", "", [Message("user", "again")]))
Traceback (most recent call last):
latte_lab.models.budget.BudgetExceeded: the trial's budget of 1 billed tokens is spent (3 billed); it stops here
"""

from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass

from latte_lab.config import FREE_PROVIDERS, parse_model_spec
from latte_lab.errors import ConfigError, LatteError
from latte_lab.models import stop
from latte_lab.models.base import ModelRequest, ModelResponse
from latte_lab.models.ledger import PRICES_ENV, Price, find_price, load_prices


class BudgetExceeded(LatteError):
    """A trial's or its sweep's budget is spent; ``scope`` is ``"trial"`` or ``"sweep"``."""

    def __init__(self, message: str, scope: str):
        super().__init__(message)
        self.scope = scope


@dataclass(frozen=True)
class SweepBudget:
    """What a whole sweep may spend; None = no limit."""

    max_dollars: float | None = None
    max_billed_tokens: int | None = None

    def __post_init__(self):
        _check_caps(self.max_dollars, self.max_billed_tokens, "sweep")

    @property
    def unlimited(self) -> bool:
        return self.max_dollars is None and self.max_billed_tokens is None

    def reached(self, dollars: float, tokens: int) -> str | None:
        """The reason the sweep must stop, or None."""
        return _reached("the sweep's", self.max_dollars, self.max_billed_tokens, dollars, tokens)


def _check_caps(max_dollars, max_tokens, who: str) -> None:
    if max_dollars is not None and not (isinstance(max_dollars, int | float) and max_dollars > 0):
        raise ConfigError(f"{who} max_dollars must be a positive number of dollars, got {max_dollars!r}")
    if max_tokens is not None and not (isinstance(max_tokens, int) and max_tokens > 0):
        raise ConfigError(f"{who} max_billed_tokens must be a positive integer, got {max_tokens!r}")


def _reached(whose: str, max_dollars, max_tokens, dollars: float, tokens: int) -> str | None:
    if max_dollars is not None and dollars >= max_dollars:
        return f"{whose} budget of ${max_dollars:,.2f} is spent (${dollars:,.4f})"
    if max_tokens is not None and tokens >= max_tokens:
        return f"{whose} budget of {max_tokens:,} billed tokens is spent ({tokens:,} billed)"
    return None


_setting_lock = threading.Lock()
_sweep: tuple[SweepBudget, object] | None = None


def set_sweep_budget(budget: SweepBudget | None, state=None) -> None:
    """Sets the budget of the sweep this process works for, with the shared state holding its spend
    (a :class:`~latte_lab.models.ratelimit.PacingState`); None clears it."""
    global _sweep
    with _setting_lock:
        _sweep = None if budget is None or budget.unlimited else (budget, state)


@contextlib.contextmanager
def using_sweep_budget(budget: SweepBudget | None, state=None):
    """:func:`set_sweep_budget` for the duration of a ``with`` block."""
    global _sweep
    saved = _sweep
    set_sweep_budget(budget, state)
    try:
        yield
    finally:
        with _setting_lock:
            _sweep = saved


def sweep_budget() -> tuple[SweepBudget, object] | None:
    """The sweep budget and its shared state in this process, or None."""
    return _sweep


class BudgetedModel:
    """Wraps a trial's model: before each call, checks the trial's and the sweep's budgets."""

    def __init__(self, inner, model_spec: str, *, base_url: str | None = None, max_dollars: float | None = None,
                 max_billed_tokens: int | None = None, sweep: tuple[SweepBudget, object] | None = None,
                 prices: list[Price] | None = None):
        _check_caps(max_dollars, max_billed_tokens, "trial")
        self.inner = inner
        self.provider, self.model_name = parse_model_spec(model_spec, base_url=base_url)
        self.model = getattr(inner, "model", None)
        self.base_url = getattr(inner, "base_url", None)
        self.max_dollars, self.max_billed_tokens = max_dollars, max_billed_tokens
        self.sweep = sweep
        self.free = self.provider in FREE_PROVIDERS
        self.prices = prices if prices is not None or self.free else load_prices()
        self.price = None if self.free else find_price(self.prices, self.model_name, self.provider)
        needs_price = max_dollars is not None or (sweep is not None and sweep[0].max_dollars is not None)
        if needs_price and not self.free and self.price is None:
            raise ConfigError(
                f"a dollar budget needs the price of {model_spec!r}, which the price table lacks: add a row to a copy "
                f"of latte_lab/data/prices.csv and point ${PRICES_ENV} at it (latte-lab prices shows the table), "
                "or budget in tokens (max_billed_tokens)")
        self._lock = threading.Lock()
        self.dollars = 0.0
        self.billed_tokens = 0

    def __repr__(self) -> str:
        return (f"BudgetedModel({self.inner!r}, max_dollars={self.max_dollars}, "
                f"max_billed_tokens={self.max_billed_tokens}, sweep={self.sweep is not None})")

    def cost(self, response: ModelResponse) -> float:
        """Dollars billed for one response (0 for a cache hit or a free model)."""
        if response.cached or self.free:
            return 0.0
        price = find_price(self.prices, response.model, self.provider) if response.model else None
        price = price or self.price
        if price is None:
            return math.nan
        return (response.usage.input_tokens * price.input_per_mtok
                + response.usage.output_tokens * price.output_per_mtok) / 1e6

    def check(self) -> None:
        """Raises BudgetExceeded when the trial's or the sweep's budget is spent, TrialStopped when the trials of
        this process were asked to stop (:mod:`latte_lab.models.stop`)."""
        stop.check()
        with self._lock:
            why = _reached("the trial's", self.max_dollars, self.max_billed_tokens, self.dollars, self.billed_tokens)
        if why is not None:
            raise BudgetExceeded(f"{why}; it stops here", "trial")
        if self.sweep is not None:
            budget, state = self.sweep
            why = budget.reached(*state.spend())
            if why is not None:
                raise BudgetExceeded(f"{why}; this trial stops here", "sweep")

    def generate(self, request: ModelRequest) -> ModelResponse:
        self.check()
        response = self.inner.generate(request)
        dollars = self.cost(response)
        tokens = 0 if response.cached else response.usage.total_tokens
        with self._lock:
            self.dollars += 0.0 if math.isnan(dollars) else dollars
            self.billed_tokens += tokens
        if self.sweep is not None and (tokens or dollars):
            self.sweep[1].add_spend(0.0 if math.isnan(dollars) else dollars, tokens)
        return response


def guard(model, config) -> object:
    """``model`` wrapped in the budgets of a trial (``config``) and of the sweep this process works
    for, and in the stop of trials run in threads (:func:`latte_lab.models.stop.arming`); ``model`` itself
    when none applies."""
    sweep = sweep_budget()
    if config.max_dollars is None and config.max_billed_tokens is None and sweep is None and not stop.armed():
        return model
    return BudgetedModel(model, config.model, base_url=config.base_url, max_dollars=config.max_dollars,
                         max_billed_tokens=config.max_billed_tokens, sweep=sweep)


__all__ = ["BudgetExceeded", "BudgetedModel", "SweepBudget", "guard", "set_sweep_budget", "sweep_budget", "using_sweep_budget"]
