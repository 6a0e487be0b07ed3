"""Run SentimentAnalyzer on a few sentences and compare with the description's rules."""


@check("sentiment::analyze")
def _():
    a = load("sentiment").SentimentAnalyzer(positive_words={"good"}, negative_words={"bad"})
    assert a.analyze("") == {"score": 0.0, "label": "neutral", "positive_count": 0, "negative_count": 0}
    got = a.analyze("Good, GOOD... bad!")
    assert got["positive_count"] == 2 and got["negative_count"] == 1, got
    assert abs(got["score"] - 1 / 3) < 1e-9 and got["label"] == "positive", got
    assert a.analyze("bad")["label"] == "negative"
