"""Splitting text into words (and, once extended, sentences and n-grams)."""

import re

WORD_PATTERN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")


class Tokenizer:
    """Turns text into tokens."""

    def tokenize_words(self, text: str) -> list[str]:
        """Lowercased word tokens: runs of letters/digits, inner apostrophes kept ("don't");
        punctuation is dropped."""
        return WORD_PATTERN.findall(text.lower())
