"""Text formatting helpers (to implement: see the task description)."""

import re  # noqa: F401 - for the implementation


class Formatter:
    """Formats text for display."""

    def truncate(self, text: str, max_length: int, suffix: str = "...") -> str:
        raise NotImplementedError

    def wrap(self, text: str, width: int) -> list[str]:
        raise NotImplementedError

    def to_uppercase(self, text: str) -> str:
        raise NotImplementedError

    def to_titlecase(self, text: str) -> str:
        raise NotImplementedError

    def remove_extra_whitespace(self, text: str) -> str:
        raise NotImplementedError
