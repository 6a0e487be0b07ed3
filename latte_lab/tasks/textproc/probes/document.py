"""Try the Document extensions: metadata, sentences, counts, unique words."""


@check("document::metadata")
def _():
    Document = load("document").Document
    a, b = Document("one"), Document("two")
    a.add_metadata("k", 1)
    a.add_metadata("k", 2)
    assert a.get_metadata("k") == 2 and b.get_metadata("k") is None and b.get_metadata("k", 0) == 0
    assert a.metadata == {"k": 2} and b.metadata == {}


@check("document::counts")
def _():
    d = load("document").Document("Hi there. Hi again!")
    assert d.sentences == ["Hi there.", "Hi again!"] and d.sentence_count == 2
    assert d.char_count == len("Hi there. Hi again!")
    assert d.unique_words == ["hi", "there", "again"] and d.unique_word_count == 3


@check("apostrophes::typographic")
def _():
    try:
        words = load("document").Document("I can\u2019t; you can\u2019t. We can.").unique_words
    except AttributeError:
        return "Document.unique_words is not written yet"
    assert words == ["i", "can't", "you", "we", "can"], f"unique words of a text with typographic apostrophes: {words}"
