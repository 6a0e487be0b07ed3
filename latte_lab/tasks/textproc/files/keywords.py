"""Keyword extraction by word frequency (to implement: see the task description)."""

from collections import Counter  # noqa: F401 - for the implementation

from tokenizer import Tokenizer  # noqa: F401 - for the implementation

MIN_KEYWORD_LENGTH = 3  # shorter tokens are never keywords

STOPWORDS = frozenset({
    "a", "an", "the", "and", "or", "but", "if", "then", "so", "of", "to", "in", "on", "at", "by",
    "for", "with", "from", "about", "as", "into", "over", "after", "before", "is", "are", "was",
    "were", "be", "been", "being", "am", "do", "does", "did", "have", "has", "had", "it", "its",
    "this", "that", "these", "those", "he", "she", "they", "them", "his", "her", "their", "we",
    "us", "our", "you", "your", "i", "me", "my", "not", "no", "can", "will", "would", "should",
    "could", "there", "here", "what", "which", "who", "all", "any", "some", "very", "just", "also",
})


class KeywordExtractor:
    """Finds the most frequent content words and n-grams of a text."""

    def __init__(self, stopwords=None):
        raise NotImplementedError

    def extract(self, text: str, top_k: int = 5) -> list[str]:
        raise NotImplementedError

    def extract_ngrams(self, text: str, n: int = 2, top_k: int = 5) -> list[tuple[str, ...]]:
        raise NotImplementedError
