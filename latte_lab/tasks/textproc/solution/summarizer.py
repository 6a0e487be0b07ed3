"""Extractive summarization."""

from collections import Counter

from keywords import MIN_KEYWORD_LENGTH, STOPWORDS
from tokenizer import Tokenizer


class Summarizer:
    """Picks the most informative sentences of a text."""

    def summarize(self, text: str, n_sentences: int = 1) -> str:
        tokenizer = Tokenizer()
        sentences = tokenizer.tokenize_sentences(text)
        if n_sentences <= 0 or not sentences:
            return ""
        if len(sentences) <= n_sentences:
            return " ".join(sentences)

        def content(words: list[str]) -> list[str]:
            return [w for w in words if w not in STOPWORDS and len(w) >= MIN_KEYWORD_LENGTH]

        freq = Counter(content(tokenizer.tokenize_words(text)))
        scores = [sum(freq[w] for w in content(tokenizer.tokenize_words(s))) for s in sentences]
        ranked = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))[:n_sentences]
        return " ".join(sentences[i] for i in sorted(ranked))
