"""Try the Tokenizer extensions on small examples from the description."""


@check("tokenizer::sentences")
def _():
    t = load("tokenizer").Tokenizer()
    got = t.tokenize_sentences("Pi is 3.14. Wait... Really?  Yes!")
    assert got == ["Pi is 3.14.", "Wait...", "Really?", "Yes!"], got
    assert t.tokenize_sentences("no stop at the end") == ["no stop at the end"]


@check("tokenizer::ngrams")
def _():
    t = load("tokenizer").Tokenizer()
    assert t.get_ngrams(["a", "b", "c"], 2) == [("a", "b"), ("b", "c")]
    assert t.get_ngrams(["a"], 2) == [] and t.get_bigrams(["x", "y"]) == [("x", "y")]
    try:
        t.get_ngrams(["a"], 0)
    except ValueError:
        pass
    else:
        raise AssertionError("get_ngrams(tokens, 0) must raise ValueError")
