"""Splitting text into words, sentences and n-grams."""

import re

WORD_PATTERN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})  # typographic forms of '


class Tokenizer:
    """Turns text into tokens."""

    def tokenize_words(self, text: str) -> list[str]:
        """Lowercased word tokens: runs of letters/digits, inner apostrophes kept ("don't", also when
        typed as a typographic apostrophe, "don\u2019t"); punctuation is dropped."""
        return WORD_PATTERN.findall(text.lower().translate(APOSTROPHES))

    def tokenize_sentences(self, text: str) -> list[str]:
        """Sentences: the text is split after '.', '!' or '?' followed by whitespace; each sentence
        keeps its punctuation and is stripped; empty pieces are dropped."""
        return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]

    def get_ngrams(self, tokens: list[str], n: int) -> list[tuple[str, ...]]:
        """Consecutive n-grams of a token list, as tuples, in order."""
        if n <= 0:
            raise ValueError(f"n must be positive, got {n}")
        return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]

    def get_bigrams(self, tokens: list[str]) -> list[tuple[str, str]]:
        return self.get_ngrams(tokens, 2)
