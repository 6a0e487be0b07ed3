"""Processing pipelines over Documents (to implement: see the task description)."""

from document import Document  # noqa: F401 - for the implementation
from keywords import KeywordExtractor  # noqa: F401 - for the implementation
from sentiment import SentimentAnalyzer  # noqa: F401 - for the implementation
from summarizer import Summarizer  # noqa: F401 - for the implementation


class Pipeline:
    """Runs a list of steps over a Document."""

    def __init__(self, steps=None):
        raise NotImplementedError

    def run(self, document):
        raise NotImplementedError


def add_sentiment(document):
    raise NotImplementedError


def add_keywords(document, top_k: int = 5):
    raise NotImplementedError


def add_summary(document, n_sentences: int = 1):
    raise NotImplementedError
