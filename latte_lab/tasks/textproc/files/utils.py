"""Small text helpers shared by the library."""

import re

_NOT_WORDISH = re.compile(r"[^\w\s']")


def normalize_whitespace(text: str) -> str:
    """Collapse every run of whitespace (spaces, tabs, newlines) to one space and strip the ends."""
    return " ".join(text.split())


def clean_text(text: str) -> str:
    """Lowercase, replace punctuation (anything but letters, digits, whitespace, apostrophes) with
    spaces, then normalize whitespace."""
    return normalize_whitespace(_NOT_WORDISH.sub(" ", text.lower()))
