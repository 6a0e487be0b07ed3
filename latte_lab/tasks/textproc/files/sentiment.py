"""Lexicon-based sentiment analysis (to implement: see the task description)."""

from tokenizer import Tokenizer  # noqa: F401 - for the implementation

POSITIVE_WORDS = frozenset({
    "good", "great", "excellent", "amazing", "wonderful", "happy", "love", "like", "best", "fantastic",
    "nice", "pleasant", "positive", "brilliant", "enjoy", "awesome", "perfect", "glad", "success", "fun",
})

NEGATIVE_WORDS = frozenset({
    "bad", "terrible", "awful", "horrible", "sad", "hate", "worst", "poor", "negative", "angry",
    "boring", "ugly", "fail", "failure", "disappointing", "annoying", "wrong", "broken", "pain", "problem",
})


class SentimentAnalyzer:
    """Scores text with the word lists above."""

    def __init__(self, positive_words=None, negative_words=None):
        raise NotImplementedError

    def analyze(self, text: str) -> dict:
        raise NotImplementedError
