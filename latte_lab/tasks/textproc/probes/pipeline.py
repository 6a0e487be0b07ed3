"""Run the whole pipeline on a small review and look at the metadata it writes."""


@check("pipeline::run")
def _():
    p = load("pipeline")
    doc = p.Pipeline([p.add_sentiment, p.add_keywords, p.add_summary]).run(
        "Great food. Slow service but great staff. We will return.")
    meta = doc.metadata
    assert set(meta) >= {"sentiment", "keywords", "summary"}, meta
    assert isinstance(meta["sentiment"], dict) and meta["sentiment"]["label"] in ("positive", "negative", "neutral")
    assert isinstance(meta["keywords"], list) and isinstance(meta["summary"], str) and meta["summary"]
    assert p.Pipeline().run("text").text == "text"


@check("apostrophes::typographic")
def _():
    try:
        words = load("pipeline").add_keywords(load("document").Document("The app\u2019s design. The app\u2019s speed."), top_k=1).metadata["keywords"]
    except NotImplementedError:
        return "the module is still a stub"
    assert words == ["app's"], f"keywords of a review with typographic apostrophes: {words}"
