"""Extractive summarization (to implement: see the task description)."""

from collections import Counter  # noqa: F401 - for the implementation

from keywords import MIN_KEYWORD_LENGTH, STOPWORDS  # noqa: F401 - for the implementation
from tokenizer import Tokenizer  # noqa: F401 - for the implementation


class Summarizer:
    """Picks the most informative sentences of a text."""

    def summarize(self, text: str, n_sentences: int = 1) -> str:
        raise NotImplementedError
