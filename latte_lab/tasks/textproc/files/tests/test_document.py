"""Tests of the working Document class."""

import pytest
from document import Document


def test_text_is_kept():
    assert Document("Hello there.").text == "Hello there."


def test_words_are_lowercased_without_punctuation():
    assert Document("Hello, World! It's fine.").words == ["hello", "world", "it's", "fine"]


def test_word_count():
    assert Document("one two  three\nfour").word_count == 4


def test_empty_document():
    doc = Document("")
    assert doc.words == [] and doc.word_count == 0


def test_text_must_be_a_string():
    with pytest.raises(TypeError):
        Document(42)
