"""Lexicon-based sentiment analysis."""

from tokenizer import Tokenizer

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
        self.positive_words = frozenset(POSITIVE_WORDS if positive_words is None else positive_words)
        self.negative_words = frozenset(NEGATIVE_WORDS if negative_words is None else negative_words)
        self._tokenizer = Tokenizer()

    def analyze(self, text: str) -> dict:
        tokens = self._tokenizer.tokenize_words(text)
        positive = sum(1 for t in tokens if t in self.positive_words)
        negative = sum(1 for t in tokens if t in self.negative_words)
        score = (positive - negative) / (positive + negative) if positive + negative else 0.0
        label = "positive" if score > 0 else "negative" if score < 0 else "neutral"
        return {"score": score, "label": label, "positive_count": positive, "negative_count": negative}
