"""Format a few strings and compare with the description's examples."""


@check("formatter::truncate_wrap")
def _():
    f = load("formatter").Formatter()
    assert f.truncate("Hello world", 5) == "He..." and f.truncate("Hi", 5) == "Hi"
    assert f.wrap("", 4) == [] and f.wrap("aa bb cc", 5) == ["aa bb", "cc"]
    assert f.wrap("a verylongword b", 4) == ["a", "verylongword", "b"]


@check("formatter::case_space")
def _():
    f = load("formatter").Formatter()
    assert f.to_titlecase("don't STOP") == "Don't Stop" and f.to_uppercase("ab") == "AB"
    assert f.remove_extra_whitespace("  a \t b\n ") == "a b"
