"""Compare texts with cosine and Jaccard similarity on hand-computed cases."""


@check("similarity::measures")
def _():
    m = load("similarity")
    assert abs(m.cosine_similarity("a b", "a c") - 0.5) < 1e-9
    assert abs(m.cosine_similarity("red red blue", "red red blue") - 1.0) < 1e-9
    assert m.cosine_similarity("", "x") == 0.0 and m.jaccard_similarity("", "") == 0.0
    assert abs(m.jaccard_similarity("a b", "b c") - 1 / 3) < 1e-9


@check("apostrophes::typographic")
def _():
    try:
        words = load("similarity").cosine_similarity("don\u2019t stop", "don't stop")
    except NotImplementedError:
        return "the module is still a stub"
    assert abs(words - 1.0) < 1e-9, f"cosine of the same words with two apostrophe styles is {words:.2f}"
