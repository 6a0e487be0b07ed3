"""Loads the prompt texts in ``latte_lab/teams/prompts/`` (our own wording of the paper's prompts)."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def _raw(name: str) -> str:
    return resources.files("latte_lab.teams").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")


def prompt(name: str, **fields: str) -> str:
    """The prompt ``name`` with ``{agent}``, ``{workers}``, ``{teammates}`` filled in."""
    text = _raw(name)
    for key, value in fields.items():
        text = text.replace("{" + key + "}", value)
    return text.strip()
