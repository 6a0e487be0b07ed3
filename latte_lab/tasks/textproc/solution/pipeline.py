"""Processing pipelines over Documents."""

from document import Document
from keywords import KeywordExtractor
from sentiment import SentimentAnalyzer
from summarizer import Summarizer


class Pipeline:
    """Runs a list of steps over a Document."""

    def __init__(self, steps=None):
        self.steps = list(steps or [])

    def run(self, document):
        if isinstance(document, str):
            document = Document(document)
        for step in self.steps:
            document = step(document)
        return document


def add_sentiment(document):
    document.add_metadata("sentiment", SentimentAnalyzer().analyze(document.text))
    return document


def add_keywords(document, top_k: int = 5):
    document.add_metadata("keywords", KeywordExtractor().extract(document.text, top_k=top_k))
    return document


def add_summary(document, n_sentences: int = 1):
    document.add_metadata("summary", Summarizer().summarize(document.text, n_sentences=n_sentences))
    return document
