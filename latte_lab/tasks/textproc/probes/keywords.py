"""Extract keywords and n-grams from a short text and check the ranking rules."""


@check("keywords::extract")
def _():
    k = load("keywords").KeywordExtractor()
    text = "Rivers feed lakes. Lakes feed rivers. Rivers flood towns."
    assert k.extract(text, top_k=2) == ["rivers", "feed"], k.extract(text, top_k=2)
    assert k.extract(text, top_k=0) == [] and k.extract("the an of", top_k=3) == []
    assert k.extract_ngrams(text, n=2, top_k=1) == [("rivers", "feed")], k.extract_ngrams(text, n=2, top_k=1)


@check("apostrophes::typographic")
def _():
    try:
        words = load("keywords").KeywordExtractor().extract("Customers don\u2019t like the app\u2019s new look. The app\u2019s design.", top_k=3)
    except NotImplementedError:
        return "the module is still a stub"
    assert "don't" in words and "app's" in words, f"keywords of a text with typographic apostrophes: {words}"
