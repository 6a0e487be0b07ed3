"""Text formatting helpers."""

import re


class Formatter:
    """Formats text for display."""

    def truncate(self, text: str, max_length: int, suffix: str = "...") -> str:
        if max_length < 0:
            raise ValueError(f"max_length must be >= 0, got {max_length}")
        if len(text) <= max_length:
            return text
        if max_length <= len(suffix):
            return text[:max_length]
        return text[: max_length - len(suffix)] + suffix

    def wrap(self, text: str, width: int) -> list[str]:
        if width <= 0:
            raise ValueError(f"width must be positive, got {width}")
        lines: list[str] = []
        current = ""
        for word in text.split():
            if current and len(current) + 1 + len(word) <= width:
                current += " " + word
            else:
                if current:
                    lines.append(current)
                current = word
        if current:
            lines.append(current)
        return lines

    def to_uppercase(self, text: str) -> str:
        return text.upper()

    def to_titlecase(self, text: str) -> str:
        return "".join(part[:1].upper() + part[1:].lower() for part in re.split(r"(\s+)", text))

    def remove_extra_whitespace(self, text: str) -> str:
        return " ".join(text.split())

