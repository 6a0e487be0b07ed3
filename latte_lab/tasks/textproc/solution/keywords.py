"""Keyword extraction by word frequency."""

from collections import Counter

from tokenizer import Tokenizer

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
        self.stopwords = frozenset(STOPWORDS if stopwords is None else stopwords)
        self._tokenizer = Tokenizer()

    def _candidates(self, text: str) -> list[str]:
        """Tokens that may be keywords, in text order."""
        return [
            t for t in self._tokenizer.tokenize_words(text)
            if t not in self.stopwords and len(t) >= MIN_KEYWORD_LENGTH
        ]

    @staticmethod
    def _top(items: list, top_k: int) -> list:
        if top_k <= 0:
            return []
        # Counter keeps first-seen order and most_common sorts stably: ties go to the earlier item.
        return [item for item, _ in Counter(items).most_common(top_k)]

    def extract(self, text: str, top_k: int = 5) -> list[str]:
        return self._top(self._candidates(text), top_k)

    def extract_ngrams(self, text: str, n: int = 2, top_k: int = 5) -> list[tuple[str, ...]]:
        return self._top(self._tokenizer.get_ngrams(self._candidates(text), n), top_k)
