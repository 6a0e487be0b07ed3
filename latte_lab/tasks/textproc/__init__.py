"""The ``textproc`` task (paper: "Library Ext.").

A small working text library to extend: two classes to complete (``Document``, ``Tokenizer``) and six
stub modules to write (sentiment, keywords, summarizer, similarity, formatter, pipeline). The public
test only checks that the interfaces exist; a hidden suite of 58 tests in 9 classes checks behaviour.
Unlike the released task, every convention the hidden suite checks is stated in the description
(attribute names, result keys and labels, the sentence rule, tuple n-grams, ordering and
tie-breaking, the truncate suffix, wrap and summary rules, pipeline metadata keys), so a careful team
can reach 100 %.

Hidden work: the working ``Tokenizer.tokenize_words`` splits words at a typographic apostrophe
(U+2019, "don\u2019t" -> "don", "t"), which real text is full of. The description calls the tokenizer
working, so a plan made from it does not touch it; the defect shows when the modules built on the
tokenizer (keywords, similarity, the pipeline, Document) run on realistic text. Fixing that shared
helper is the hidden unit ``apostrophes``; ``TestTypographicApostrophes`` in the hidden suite checks it.
The description ends with examples a user would state (``>>>`` lines and the output expected); the
first is a sentence of the customer reviews the library is for, with typographic apostrophes, so
running the examples against the starting tokenizer shows the defect.

Missing outputs: the released evaluator dropped runs lacking sentiment.py, keywords.py or pipeline.py.
Here those files exist as stubs from the start, so a required output counts as missing when the file
is absent or still identical to its stub; ``evaluate`` scores the run anyway and lists them in
``EvalResult.missing_outputs``.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources  # not `files`: the task's files/ folder has that name
from typing import TYPE_CHECKING

from latte_lab.tasks import register
from latte_lab.tasks.base import EvalResult, Task, WorkUnit
from latte_lab.tasks.suite import run_hidden_suite

if TYPE_CHECKING:  # pragma: no cover
    from latte_lab.workspace import Workspace

LIBRARY_FILES = (
    "document.py", "tokenizer.py", "utils.py", "sentiment.py", "keywords.py", "summarizer.py",
    "similarity.py", "formatter.py", "pipeline.py",
)
PUBLIC_TESTS = ("test_interfaces.py", "tests/test_document.py")
STARTING_FILES = LIBRARY_FILES + PUBLIC_TESTS
SOLUTION_FILES = (
    "document.py", "tokenizer.py", "sentiment.py", "keywords.py", "summarizer.py", "similarity.py",
    "formatter.py", "pipeline.py",
)
HIDDEN_SUITE = "test_hidden.py"


def _package_text(*parts: str) -> str:
    return resources.files(__name__).joinpath(*parts).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def starting_files() -> dict[str, str]:
    """{path: content} of the starting workspace."""
    return {p: _package_text("files", *p.split("/")) for p in STARTING_FILES}


@lru_cache(maxsize=1)
def _solution() -> dict[str, str]:
    return {p: _package_text("solution", p) for p in SOLUTION_FILES}


DESCRIPTION = """\
Extend a small Python text-processing library.

The workspace is a flat package of modules that import each other by plain name (`from tokenizer
import Tokenizer`). Working now: document.py (Document: text, words, word_count), tokenizer.py
(Tokenizer.tokenize_words: lowercased tokens, punctuation dropped, inner apostrophes kept),
utils.py (clean_text, normalize_whitespace) and tests/test_document.py (5 passing tests).
"Tokens" below always means Tokenizer().tokenize_words(text).

1. Complete Document (document.py); sentences/counts/unique words are read-only properties:
   - every Document has its own `metadata` dict attribute, empty at creation;
     add_metadata(key, value) stores any value under any key (a later call overwrites);
     get_metadata(key, default=None) returns the value or the default;
   - sentences: Tokenizer().tokenize_sentences(text); sentence_count: len(sentences);
   - char_count: len(text) (every character, spaces and punctuation included);
   - unique_words: the words without repeats, in order of first occurrence; unique_word_count: its length.
2. Complete Tokenizer (tokenizer.py):
   - tokenize_sentences(text) -> list[str]: split after '.', '!' or '?' where whitespace follows
     (so "3.14" is not split and "Wait..." ends one sentence); each sentence is stripped and keeps its
     punctuation; empty pieces are dropped; trailing text without punctuation is a sentence too;
   - get_ngrams(tokens, n) -> list of tuples: the consecutive n-grams of a token LIST, in order
     ([] when n > len(tokens); ValueError when n <= 0); get_bigrams(tokens) = get_ngrams(tokens, 2).
3. sentiment.py: SentimentAnalyzer(positive_words=None, negative_words=None) (defaults: the module's
   POSITIVE_WORDS / NEGATIVE_WORDS). analyze(text) -> {"score", "label", "positive_count",
   "negative_count"} exactly: counts are token occurrences found in each list (case-insensitive via
   the tokens); score = (pos - neg) / (pos + neg), 0.0 when both are 0; label is "positive" if score > 0,
   "negative" if score < 0, else "neutral".
4. keywords.py: KeywordExtractor(stopwords=None) (default STOPWORDS). Candidate words: tokens not in
   the stopwords and at least MIN_KEYWORD_LENGTH (3) characters long, in text order.
   extract(text, top_k=5) -> list[str]: the top_k candidates by frequency, most frequent first, ties
   broken by first occurrence in the text; [] when top_k <= 0 or there are no candidates; fewer when
   the vocabulary is smaller. extract_ngrams(text, n=2, top_k=5) -> list of tuples: the same ranking
   over the n-grams of the candidate sequence (Tokenizer.get_ngrams of the filtered words).
5. summarizer.py: Summarizer().summarize(text, n_sentences=1) -> str. Sentences come from
   tokenize_sentences. "" when n_sentences <= 0 or there are no sentences; all sentences (joined by one
   space) when there are at most n_sentences. Otherwise score each sentence as the sum, over its
   candidate words (the keyword rule above, every occurrence), of that word's frequency in the whole
   text; take the n_sentences highest scores (ties: earlier sentence) and return them in their
   original text order, joined by one space.
6. similarity.py: cosine_similarity(text_a, text_b) -> float: cosine of the token COUNT vectors
   (repeated words count); jaccard_similarity(text_a, text_b) -> float: |A & B| / |A | B| of the token
   sets. Both return 0.0 when either text has no tokens.
7. formatter.py: Formatter() with methods
   - truncate(text, max_length, suffix="..."): text unchanged if len(text) <= max_length; else
     text[:max_length - len(suffix)] + suffix, so the result is exactly max_length long
     (truncate("Hello world", 5) == "He..."); when max_length <= len(suffix), text[:max_length];
     ValueError when max_length < 0;
   - wrap(text, width) -> list[str]: greedy wrapping of the whitespace-separated words into lines of
     at most width characters (words joined by one space); a word longer than width gets a line of
     its own, unbroken; [] for empty/blank text; ValueError when width <= 0;
   - to_uppercase(text); to_titlecase(text): each whitespace-separated word gets its first character
     uppercased and the rest lowercased ("don't" -> "Don't"), whitespace kept as is;
   - remove_extra_whitespace(text): runs of whitespace become one space, ends stripped.
8. pipeline.py: Pipeline(steps=None) holds a list of steps (callables taking a Document and returning
   it); run(document) accepts a Document or a str (wrapped in a Document), passes it through the steps
   in order (each step gets the previous step's return value) and returns the final Document
   (unchanged when there are no steps). Step functions, each storing into the document's metadata and
   returning the document: add_sentiment(document) -> key "sentiment" = SentimentAnalyzer().analyze(text)
   (the whole dict); add_keywords(document, top_k=5) -> key "keywords" = KeywordExtractor().extract(text,
   top_k); add_summary(document, n_sentences=1) -> key "summary" = Summarizer().summarize(text,
   n_sentences).

Examples (what the finished library returns; the first line is a sentence from the customer reviews
the library is for):

    >>> from tokenizer import Tokenizer
    >>> from document import Document
    >>> from sentiment import SentimentAnalyzer
    >>> from keywords import KeywordExtractor
    >>> from summarizer import Summarizer
    >>> from similarity import cosine_similarity, jaccard_similarity
    >>> from formatter import Formatter
    >>> from pipeline import Pipeline, add_sentiment, add_keywords, add_summary
    >>> Tokenizer().tokenize_words("Customers don\u2019t like the app\u2019s new look.")
    ['customers', "don't", 'like', 'the', "app's", 'new', 'look']
    >>> Tokenizer().tokenize_sentences("Pi is 3.14. Wait... Really?  Yes!")
    ['Pi is 3.14.', 'Wait...', 'Really?', 'Yes!']
    >>> Tokenizer().get_ngrams(["a", "b", "c"], 2)
    [('a', 'b'), ('b', 'c')]
    >>> Tokenizer().get_bigrams(["x", "y"])
    [('x', 'y')]
    >>> Document("Hi there. Hi again!").sentences
    ['Hi there.', 'Hi again!']
    >>> Document("Hi there. Hi again!").unique_words
    ['hi', 'there', 'again']
    >>> Document("Hi there. Hi again!").sentence_count
    2
    >>> Document("Hi there. Hi again!").unique_word_count
    3
    >>> Document("Hi there. Hi again!").char_count
    19
    >>> Document("one").metadata
    {}
    >>> Document("one").get_metadata("k", 0)
    0
    >>> SentimentAnalyzer(positive_words={"good"}, negative_words={"bad"}).analyze("Good, GOOD... bad!")
    {'score': 0.3333333333333333, 'label': 'positive', 'positive_count': 2, 'negative_count': 1}
    >>> SentimentAnalyzer(positive_words={"good"}, negative_words={"bad"}).analyze("bad")
    {'score': -1.0, 'label': 'negative', 'positive_count': 0, 'negative_count': 1}
    >>> SentimentAnalyzer().analyze("")
    {'score': 0.0, 'label': 'neutral', 'positive_count': 0, 'negative_count': 0}
    >>> KeywordExtractor().extract("Rivers feed lakes. Lakes feed rivers. Rivers flood towns.", top_k=2)
    ['rivers', 'feed']
    >>> KeywordExtractor().extract_ngrams("Rivers feed lakes. Lakes feed rivers. Rivers flood towns.", n=2, top_k=1)
    [('rivers', 'feed')]
    >>> KeywordExtractor().extract("the an of", top_k=3)
    []
    >>> Summarizer().summarize("Cats purr. Dogs bark loudly at dogs. Birds sing.", 1)
    'Dogs bark loudly at dogs.'
    >>> Summarizer().summarize("Alpha beta. Gamma. Alpha beta alpha.", 2)
    'Alpha beta. Alpha beta alpha.'
    >>> round(cosine_similarity("a b", "a c"), 4)
    0.5
    >>> round(jaccard_similarity("a b", "b c"), 4)
    0.3333
    >>> cosine_similarity("", "x")
    0.0
    >>> Formatter().truncate("Hello world", 5)
    'He...'
    >>> Formatter().wrap("aa bb cc", 5)
    ['aa bb', 'cc']
    >>> Formatter().wrap("a verylongword b", 4)
    ['a', 'verylongword', 'b']
    >>> Formatter().to_titlecase("don't STOP")
    "Don't Stop"
    >>> Formatter().remove_extra_whitespace("  a   b ")
    'a b'
    >>> Pipeline([add_sentiment, add_keywords]).run("Great food. Slow service but great staff.").metadata
    {'sentiment': {'score': 1.0, 'label': 'positive', 'positive_count': 2, 'negative_count': 0}, 'keywords': ['great', 'food', 'slow', 'service', 'staff']}
    >>> Pipeline([add_summary]).run("Cats purr. Dogs bark loudly at dogs.").metadata
    {'summary': 'Dogs bark loudly at dogs.'}
    >>> Pipeline().run("text").text
    'text'

The public test (python -m pytest -q test_interfaces.py tests) only checks that the interfaces
exist; it does not check correctness. Write your own tests (e.g. under tests/) as you go.
"""

SUCCESS = """\
The library implements everything in the description: the public interface test passes and a
private suite (behaviour and edge cases of every module) is run after the team marks completion."""


_UNITS: tuple[dict, ...] = (
    {
        "id": "tokenizer", "title": "Complete Tokenizer", "files": ("tokenizer.py",),
        "symbols": ("Tokenizer.tokenize_sentences", "Tokenizer.get_ngrams", "Tokenizer.get_bigrams"),
        "deps": (), "tests": ("TestTokenizerExtensions", "tokenizer::"), "effort": 1.0,
        "description": "Add tokenize_sentences (split after .!? + whitespace, keep punctuation), "
        "get_ngrams (tuples) and get_bigrams.",
    },
    {
        "id": "document", "title": "Complete Document", "files": ("document.py",),
        "symbols": ("Document.__init__", "Document.add_metadata", "Document.get_metadata", "Document.sentences",
                    "Document.sentence_count", "Document.char_count", "Document.unique_words",
                    "Document.unique_word_count"),
        "deps": ("tokenizer",), "tests": ("TestDocumentExtensions", "document::"), "effort": 1.0,
        "description": "Per-instance metadata dict with add/get, and the sentence, character and "
        "unique-word properties.",
    },
    {
        "id": "sentiment", "title": "Write sentiment.py", "files": ("sentiment.py",),
        "symbols": ("SentimentAnalyzer",), "deps": (),
        "tests": ("TestSentiment", "TestPipelineIntegration::test_sentiment", "sentiment::"), "effort": 1.0,
        "description": "SentimentAnalyzer.analyze returning score/label/positive_count/negative_count.",
    },
    {
        "id": "keywords", "title": "Write keywords.py", "files": ("keywords.py",),
        "symbols": ("KeywordExtractor",), "deps": (), "tests": ("TestKeywords", "keywords::"), "effort": 1.0,
        "description": "KeywordExtractor.extract / extract_ngrams by frequency, ties by first occurrence.",
    },
    {
        "id": "summarizer", "title": "Write summarizer.py", "files": ("summarizer.py",),
        "symbols": ("Summarizer",), "deps": ("tokenizer",), "tests": ("TestSummarizer", "summarizer::"),
        "effort": 1.0,
        "description": "Frequency-scored extractive summary, sentences kept in text order.",
    },
    {
        "id": "similarity", "title": "Write similarity.py", "files": ("similarity.py",),
        "symbols": ("cosine_similarity", "jaccard_similarity"), "deps": (), "tests": ("TestSimilarity", "similarity::"),
        "effort": 0.8, "description": "Cosine over token counts and Jaccard over token sets.",
    },
    {
        "id": "formatter", "title": "Write formatter.py", "files": ("formatter.py",),
        "symbols": ("Formatter.truncate", "Formatter.wrap", "Formatter.to_uppercase", "Formatter.to_titlecase",
                    "Formatter.remove_extra_whitespace"),
        "deps": (), "tests": ("TestFormatter", "formatter::"), "effort": 1.0,
        "description": "truncate (suffix within max_length), greedy wrap, case and whitespace helpers.",
    },
    {
        "id": "pipeline", "title": "Write pipeline.py", "files": ("pipeline.py",),
        "symbols": ("Pipeline", "add_sentiment", "add_keywords", "add_summary"),
        "deps": ("document", "sentiment", "keywords", "summarizer"), "tests": ("TestPipelineIntegration", "pipeline::"),
        "effort": 1.2,
        "description": "Pipeline(steps).run and the three metadata steps; integrates the other modules.",
    },
    {
        "id": "apostrophes", "title": "Read typographic apostrophes in the shared tokenizer", "files": ("tokenizer.py",),
        "symbols": ("APOSTROPHES", "Tokenizer.tokenize_words"), "deps": (), "visible": False,
        "tests": ("TestTypographicApostrophes", "apostrophes::"), "effort": 0.5,
        "description": "tokenize_words splits words at a typographic apostrophe (\u2019); map it to ' before "
        "matching, so every module built on the tokenizer reads real text right.",
    },
)


@register
class TextprocTask(Task):
    id = "textproc"
    title = "Extend a text-processing library"
    description = DESCRIPTION
    success_criteria = SUCCESS
    public_tests = PUBLIC_TESTS
    test_args = ("test_interfaces.py", "tests")
    required_outputs = ("sentiment.py", "keywords.py", "pipeline.py")  # as the released evaluator
    accuracy_metric = "hidden_pass_rate"

    def setup(self, workspace: Workspace) -> None:
        for path, text in starting_files().items():
            workspace.setup_file(path, text)
        workspace.protect(*self.public_tests)
        workspace.test_args = self.test_args

    def hidden_files(self) -> dict[str, str]:
        """What ``evaluate`` adds to the temporary copy (never to the agents' workspace)."""
        return {HIDDEN_SUITE: _package_text("hidden", HIDDEN_SUITE)}

    def missing_outputs(self, workspace: Workspace) -> tuple[str, ...]:
        """Required outputs absent or still identical to their stub."""
        start = starting_files()
        missing = []
        for path in self.required_outputs:
            if not workspace.exists(path) or workspace.read(path).strip() == start[path].strip():
                missing.append(path)
        return tuple(missing)

    def evaluate(self, workspace: Workspace) -> EvalResult:
        return run_hidden_suite(
            workspace, self.hidden_files(), HIDDEN_SUITE, missing=self.missing_outputs(workspace),
            confirm=self.public_files(),
        )

    def reference_solution(self) -> dict[str, str]:
        return dict(_solution())

    def work_units(self) -> list[WorkUnit]:
        return [
            WorkUnit(
                id=u["id"], title=u["title"], description=u["description"], files=u["files"],
                symbols=u["symbols"], deps=u["deps"], visible=u.get("visible", True), tests=u["tests"],
                effort=u["effort"],
            )
            for u in _UNITS
        ]


__all__ = ["TextprocTask", "starting_files"]
