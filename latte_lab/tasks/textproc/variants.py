"""Plausible wrong versions of the textproc work units (the simulated model's failed-skill output).

Each is a convention slip a real team makes when it skims the description; the hidden suite catches
every one (tests/test_task_textproc.py checks that).
"""

WRONG: dict[str, dict[str, str]] = {
    "tokenizer": {
        # n-grams as lists, not tuples
        "Tokenizer.get_ngrams": '''def get_ngrams(self, tokens, n):
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    return [tokens[i : i + n] for i in range(len(tokens) - n + 1)]''',
    },
    "document": {
        # a mutable default argument: every Document shares one metadata dict
        "Document.__init__": '''def __init__(self, text, metadata={}):
    if not isinstance(text, str):
        raise TypeError(f"Document text must be a str, not {type(text).__name__}")
    self.text = text
    self._tokenizer = Tokenizer()
    self.metadata = metadata''',
    },
    "sentiment": {
        # abbreviated labels
        "SentimentAnalyzer": '''class SentimentAnalyzer:
    """Scores text with the word lists above."""

    def __init__(self, positive_words=None, negative_words=None):
        self.positive_words = frozenset(POSITIVE_WORDS if positive_words is None else positive_words)
        self.negative_words = frozenset(NEGATIVE_WORDS if negative_words is None else negative_words)
        self._tokenizer = Tokenizer()

    def analyze(self, text):
        tokens = self._tokenizer.tokenize_words(text)
        positive = sum(1 for t in tokens if t in self.positive_words)
        negative = sum(1 for t in tokens if t in self.negative_words)
        score = (positive - negative) / (positive + negative) if positive + negative else 0.0
        label = "pos" if score > 0 else "neg" if score < 0 else "neutral"
        return {"score": score, "label": label, "positive_count": positive, "negative_count": negative}''',
    },
    "keywords": {
        # ties broken alphabetically instead of by first occurrence
        "KeywordExtractor": '''class KeywordExtractor:
    """Finds the most frequent content words and n-grams of a text."""

    def __init__(self, stopwords=None):
        self.stopwords = frozenset(STOPWORDS if stopwords is None else stopwords)
        self._tokenizer = Tokenizer()

    def _candidates(self, text):
        return [
            t for t in self._tokenizer.tokenize_words(text)
            if t not in self.stopwords and len(t) >= MIN_KEYWORD_LENGTH
        ]

    @staticmethod
    def _top(items, top_k):
        if top_k <= 0:
            return []
        counts = Counter(items)
        return sorted(counts, key=lambda item: (-counts[item], item))[:top_k]

    def extract(self, text, top_k=5):
        return self._top(self._candidates(text), top_k)

    def extract_ngrams(self, text, n=2, top_k=5):
        return self._top(self._tokenizer.get_ngrams(self._candidates(text), n), top_k)''',
    },
    "summarizer": {
        # sentences returned best-first instead of in text order
        "Summarizer": '''class Summarizer:
    """Picks the most informative sentences of a text."""

    def summarize(self, text, n_sentences=1):
        tokenizer = Tokenizer()
        sentences = tokenizer.tokenize_sentences(text)
        if n_sentences <= 0 or not sentences:
            return ""

        def content(words):
            return [w for w in words if w not in STOPWORDS and len(w) >= MIN_KEYWORD_LENGTH]

        freq = Counter(content(tokenizer.tokenize_words(text)))
        scores = [sum(freq[w] for w in content(tokenizer.tokenize_words(s))) for s in sentences]
        ranked = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))[:n_sentences]
        return " ".join(sentences[i] for i in ranked)''',
    },
    "similarity": {
        # cosine over word sets: repeated words ignored
        "cosine_similarity": '''def cosine_similarity(text_a, text_b):
    tokenizer = Tokenizer()
    a, b = set(tokenizer.tokenize_words(text_a)), set(tokenizer.tokenize_words(text_b))
    if not a or not b:
        return 0.0
    return len(a & b) / math.sqrt(len(a) * len(b))''',
    },
    "formatter": {
        # the suffix is added after max_length characters instead of within them
        "Formatter.truncate": '''def truncate(self, text, max_length, suffix="..."):
    if max_length < 0:
        raise ValueError(f"max_length must be >= 0, got {max_length}")
    if len(text) <= max_length:
        return text
    return text[:max_length] + suffix''',
    },
    "pipeline": {
        # only the label is stored, not the analysis dict
        "add_sentiment": '''def add_sentiment(document):
    document.add_metadata("sentiment", SentimentAnalyzer().analyze(document.text)["label"])
    return document''',
    },
}
