"""Hidden suite of the textproc task: behaviour of the finished library.

Copied into a temporary copy of the workspace by ``TextprocTask.evaluate``; agents never see it.
Every convention checked here is stated in the task description. Modules are imported inside the
tests, so one broken module fails its own tests instead of the whole suite's collection.
"""

from __future__ import annotations

import importlib
import math
from functools import partial

import pytest


def mod(name: str):
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any failure of the team's module fails the test
        pytest.fail(f"cannot import {name}: {exc!r}")


def Document(text):
    return mod("document").Document(text)


def tokenizer():
    return mod("tokenizer").Tokenizer()


class TestDocumentExtensions:
    def test_metadata_is_per_instance(self):
        a, b = Document("one"), Document("two")
        a.add_metadata("source", "web")
        assert a.get_metadata("source") == "web"
        assert b.get_metadata("source") is None
        assert a.metadata == {"source": "web"} and b.metadata == {}

    def test_metadata_overwrite_and_default(self):
        doc = Document("text")
        doc.add_metadata("k", 1)
        doc.add_metadata("k", 2)
        assert doc.get_metadata("k") == 2
        assert doc.get_metadata("missing", "dflt") == "dflt"

    def test_metadata_non_string_values(self):
        doc = Document("text")
        doc.add_metadata("scores", {"a": [1, 2]})
        doc.add_metadata(3, None)
        assert doc.get_metadata("scores") == {"a": [1, 2]}
        assert 3 in doc.metadata

    def test_char_count_counts_every_character(self):
        assert Document("Hi there!  ").char_count == 11
        assert Document("").char_count == 0

    def test_sentences_and_count(self):
        doc = Document("First one. Second one! Third?")
        assert doc.sentences == ["First one.", "Second one!", "Third?"]
        assert doc.sentence_count == 3

    def test_unique_words_keep_first_occurrence_order(self):
        doc = Document("The cat saw the Cat and the dog.")
        assert doc.unique_words == ["the", "cat", "saw", "and", "dog"]
        assert doc.unique_word_count == 5


class TestTokenizerExtensions:
    def test_sentences_keep_punctuation(self):
        assert tokenizer().tokenize_sentences("Hello world. How are you?") == ["Hello world.", "How are you?"]

    def test_sentences_split_on_all_terminators(self):
        text = "Stop! Really? Yes. Wait... what?!"
        assert tokenizer().tokenize_sentences(text) == ["Stop!", "Really?", "Yes.", "Wait...", "what?!"]

    def test_no_empty_sentences(self):
        t = tokenizer()
        assert t.tokenize_sentences("") == []
        assert t.tokenize_sentences("   \n ") == []
        assert t.tokenize_sentences("  One.   Two.  ") == ["One.", "Two."]

    def test_decimal_point_does_not_split(self):
        assert tokenizer().tokenize_sentences("Pi is 3.14 today. Yes") == ["Pi is 3.14 today.", "Yes"]

    def test_ngrams_are_tuples(self):
        grams = tokenizer().get_ngrams(["a", "b", "c", "d"], 3)
        assert grams == [("a", "b", "c"), ("b", "c", "d")]
        assert all(isinstance(g, tuple) for g in grams)

    def test_ngram_counts(self):
        t = tokenizer()
        words = ["w1", "w2", "w3", "w4", "w5"]
        assert len(t.get_ngrams(words, 1)) == 5
        assert len(t.get_ngrams(words, 5)) == 1
        assert t.get_ngrams(words, 6) == []

    def test_ngram_n_must_be_positive(self):
        with pytest.raises(ValueError):
            tokenizer().get_ngrams(["a"], 0)

    def test_bigrams(self):
        t = tokenizer()
        words = ["x", "y", "z"]
        assert t.get_bigrams(words) == t.get_ngrams(words, 2) == [("x", "y"), ("y", "z")]


def analyze(text):
    return mod("sentiment").SentimentAnalyzer().analyze(text)


class TestSentiment:
    def test_empty_text_is_neutral(self):
        assert analyze("") == {"score": 0.0, "label": "neutral", "positive_count": 0, "negative_count": 0}

    def test_result_keys(self):
        assert set(analyze("a good day")) == {"score", "label", "positive_count", "negative_count"}

    def test_case_and_punctuation_insensitive(self):
        result = analyze("GOOD!!! Great, (excellent)...")
        assert result["positive_count"] == 3 and result["label"] == "positive"

    def test_score_and_negative_label(self):
        result = analyze("a bad, bad day but a good lunch")
        assert result["positive_count"] == 1 and result["negative_count"] == 2
        assert math.isclose(result["score"], -1 / 3)
        assert result["label"] == "negative"

    def test_balanced_text_is_neutral(self):
        result = analyze("good and bad")
        assert result["score"] == 0.0 and result["label"] == "neutral"

    def test_custom_word_lists(self):
        analyzer = mod("sentiment").SentimentAnalyzer(positive_words={"sunny"}, negative_words={"rain"})
        assert analyzer.analyze("Sunny then rain then sunny")["score"] == pytest.approx(1 / 3)


def extractor():
    return mod("keywords").KeywordExtractor()


TEXT_KW = "Python code. Python tests run python code fast; tests help code."


class TestKeywords:
    def test_top_k_zero(self):
        assert extractor().extract(TEXT_KW, top_k=0) == []

    def test_frequency_order(self):
        assert extractor().extract(TEXT_KW, top_k=3) == ["python", "code", "tests"]

    def test_ties_broken_by_first_occurrence(self):
        assert extractor().extract("zebra apple mango apple zebra mango", top_k=3) == ["zebra", "apple", "mango"]

    def test_top_k_larger_than_vocabulary(self):
        assert extractor().extract("Cats chase mice.", top_k=10) == ["cats", "chase", "mice"]

    def test_stopwords_and_short_words_removed(self):
        assert extractor().extract("It is a an to of the ox", top_k=5) == []

    def test_ngram_frequency_order(self):
        grams = extractor().extract_ngrams("red apple pie. The red apple pie! green apple", n=2, top_k=2)
        assert grams == [("red", "apple"), ("apple", "pie")]


def summarize(text, n):
    return mod("summarizer").Summarizer().summarize(text, n)


TEXT_SUM = (
    "The weather was mild. Solar panels convert sunlight into electricity for solar homes. "
    "Birds sang. Solar electricity prices fell as panels improved."
)


class TestSummarizer:
    def test_single_sentence_verbatim(self):
        assert summarize("Only this sentence stays.", 1) == "Only this sentence stays."

    def test_zero_sentences(self):
        assert summarize(TEXT_SUM, 0) == ""

    def test_picks_highest_scoring_sentence(self):
        assert summarize(TEXT_SUM, 1) == "Solar panels convert sunlight into electricity for solar homes."

    def test_keeps_original_order(self):
        assert summarize(TEXT_SUM, 2) == (
            "Solar panels convert sunlight into electricity for solar homes. "
            "Solar electricity prices fell as panels improved."
        )
        # the best sentence comes last in the text, and stays last in the summary
        text = "Birds sang. Solar power is cheap. Solar panels make solar power from solar light."
        assert summarize(text, 2) == "Solar power is cheap. Solar panels make solar power from solar light."

    def test_more_sentences_than_text(self):
        assert summarize("One here. Two there.", 5) == "One here. Two there."


def cosine(a, b):
    return mod("similarity").cosine_similarity(a, b)


def jaccard(a, b):
    return mod("similarity").jaccard_similarity(a, b)


class TestSimilarity:
    def test_cosine_empty(self):
        assert cosine("", "some words") == 0.0 and cosine("", "") == 0.0

    def test_cosine_half(self):
        assert math.isclose(cosine("cat dog", "dog fish"), 0.5)

    def test_cosine_identical(self):
        assert math.isclose(cosine("Cat dog, cat.", "cat DOG cat"), 1.0)

    def test_cosine_counts_repeated_words(self):
        assert math.isclose(cosine("the the cat", "the cat cat"), 0.8)

    def test_cosine_symmetric(self):
        a, b = "a quick brown fox", "the quick red fox jumps"
        assert math.isclose(cosine(a, b), cosine(b, a))

    def test_jaccard_third(self):
        assert math.isclose(jaccard("cat dog", "dog fish"), 1 / 3)

    def test_jaccard_identical_sets(self):
        assert jaccard("cat cat dog", "Dog cat") == 1.0

    def test_jaccard_empty(self):
        assert jaccard("", "") == 0.0 and jaccard("", "word") == 0.0


def fmt():
    return mod("formatter").Formatter()


class TestFormatter:
    def test_truncate_fits(self):
        assert fmt().truncate("Hello", 5) == "Hello"
        assert fmt().truncate("Hi", 10) == "Hi"

    def test_truncate_over_limit(self):
        assert fmt().truncate("Hello world", 5) == "He..."

    def test_truncate_custom_and_empty_suffix(self):
        assert fmt().truncate("Hello world", 5, suffix="") == "Hello"
        assert fmt().truncate("Hello world", 6, suffix="~") == "Hello~"

    def test_wrap_empty_and_single_word(self):
        assert fmt().wrap("", 10) == []
        assert fmt().wrap("hello", 10) == ["hello"]

    def test_wrap_greedy_with_long_word(self):
        assert fmt().wrap("the quick brown fox", 10) == ["the quick", "brown fox"]
        assert fmt().wrap("a extraordinarily b", 5) == ["a", "extraordinarily", "b"]

    def test_case_conversions(self):
        assert fmt().to_uppercase("Mixed case 1") == "MIXED CASE 1"
        assert fmt().to_titlecase("hello wORLD, don't  stop") == "Hello World, Don't  Stop"

    def test_remove_extra_whitespace(self):
        assert fmt().remove_extra_whitespace("  a \t b\n\nc  ") == "a b c"


TEXT_PIPE = "I love this great library. The tests are good. Bugs are bad."


def pipeline():
    return mod("pipeline")


class TestPipelineIntegration:
    def test_empty_steps_returns_document(self):
        doc = pipeline().Pipeline([]).run(Document(TEXT_PIPE))
        assert doc.text == TEXT_PIPE and doc.metadata == {}

    def test_run_accepts_a_string(self):
        doc = pipeline().Pipeline().run(TEXT_PIPE)
        assert doc.text == TEXT_PIPE and hasattr(doc, "metadata")

    def test_three_steps_write_metadata(self):
        p = pipeline()
        doc = p.Pipeline([p.add_sentiment, p.add_keywords, p.add_summary]).run(TEXT_PIPE)
        assert set(doc.metadata) == {"sentiment", "keywords", "summary"}

    def test_sentiment_step(self):
        p = pipeline()
        doc = p.Pipeline([p.add_sentiment]).run(TEXT_PIPE)
        assert doc.get_metadata("sentiment") == analyze(TEXT_PIPE)
        assert doc.get_metadata("sentiment")["label"] == "positive"

    def test_keywords_step_with_top_k(self):
        p = pipeline()
        doc = p.Pipeline([partial(p.add_keywords, top_k=2)]).run("alpha beta gamma alpha beta alpha")
        assert doc.get_metadata("keywords") == ["alpha", "beta"]

    def test_default_keywords_top_k_is_five(self):
        p = pipeline()
        doc = p.Pipeline([p.add_keywords]).run("one1 two2 three3 four4 five5 six6 seven7")
        assert doc.get_metadata("keywords") == ["one1", "two2", "three3", "four4", "five5"]

    def test_summary_step(self):
        p = pipeline()
        doc = p.Pipeline([p.add_summary]).run(TEXT_SUM)
        assert isinstance(doc.get_metadata("summary"), str)
        assert doc.get_metadata("summary") == summarize(TEXT_SUM, 1)

    def test_steps_run_in_order(self):
        calls = []

        def step(name):
            def run(doc):
                calls.append(name)
                doc.add_metadata("last", name)
                return doc
            return run

        doc = pipeline().Pipeline([step("a"), step("b"), step("c")]).run("x")
        assert calls == ["a", "b", "c"] and doc.get_metadata("last") == "c"


class TestTypographicApostrophes:
    """Real text types apostrophes as U+2019; the shared tokenizer must read them as apostrophes."""

    def test_words_keep_typographic_apostrophes(self):
        assert tokenizer().tokenize_words("Don\u2019t stop") == ["don't", "stop"]

    def test_unique_words(self):
        assert Document("I can\u2019t; you can\u2019t.").unique_words == ["i", "can't", "you"]

    def test_similarity_ignores_the_apostrophe_style(self):
        assert mod("similarity").cosine_similarity("don\u2019t stop", "don't stop") == pytest.approx(1.0)

    def test_keywords_keep_possessives(self):
        text = "The team\u2019s plan. The team\u2019s goal."
        assert mod("keywords").KeywordExtractor().extract(text, top_k=1) == ["team's"]
