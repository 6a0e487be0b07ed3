"""Summarize short texts and check the selection and ordering rules."""


@check("summarizer::summarize")
def _():
    s = load("summarizer").Summarizer()
    text = "Cats purr. Dogs bark loudly at dogs. Birds sing."
    assert s.summarize(text, 0) == "" and s.summarize("", 2) == ""
    assert s.summarize("Only one.", 3) == "Only one."
    assert s.summarize(text, 1) == "Dogs bark loudly at dogs.", s.summarize(text, 1)
    two = s.summarize("Alpha beta. Gamma. Alpha beta alpha.", 2)
    assert two == "Alpha beta. Alpha beta alpha.", two
