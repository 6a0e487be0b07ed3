"""Interface check: the classes, methods and functions of the finished library exist.

This only checks that the names are there and callable. It does NOT check that they work: the
library is scored by a private suite against the task description.
"""

import importlib

import pytest

INTERFACES = {
    "document": {"Document": ["add_metadata", "get_metadata", "sentences", "sentence_count", "char_count",
                              "unique_words", "unique_word_count", "words", "word_count"]},
    "tokenizer": {"Tokenizer": ["tokenize_words", "tokenize_sentences", "get_ngrams", "get_bigrams"]},
    "sentiment": {"SentimentAnalyzer": ["analyze"], "POSITIVE_WORDS": [], "NEGATIVE_WORDS": []},
    "keywords": {"KeywordExtractor": ["extract", "extract_ngrams"], "STOPWORDS": []},
    "summarizer": {"Summarizer": ["summarize"]},
    "similarity": {"cosine_similarity": [], "jaccard_similarity": []},
    "formatter": {"Formatter": ["truncate", "wrap", "to_uppercase", "to_titlecase", "remove_extra_whitespace"]},
    "pipeline": {"Pipeline": ["run"], "add_sentiment": [], "add_keywords": [], "add_summary": []},
}


@pytest.mark.parametrize("module_name", sorted(INTERFACES))
def test_interface_exists(module_name):
    module = importlib.import_module(module_name)
    for name, members in INTERFACES[module_name].items():
        assert hasattr(module, name), f"{module_name}.{name} is missing"
        for member in members:
            assert hasattr(getattr(module, name), member), f"{module_name}.{name}.{member} is missing"
