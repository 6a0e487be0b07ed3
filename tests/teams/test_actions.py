"""Tests of the action parser and renderer: the paper's prompt examples, tolerance, error entries,
fuzzing (the parser never raises) and the render -> parse round trip."""

from __future__ import annotations

import doctest
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import latte_lab
import latte_lab.actions as actions_module
from latte_lab.actions import (
    ACTION_TAGS,
    ActionRenderError,
    AssignTask,
    Broadcast,
    CertifyComplete,
    ClaimTask,
    CloseTask,
    CompleteTask,
    DiscoverTask,
    EditFile,
    ParseError,
    ParseResult,
    Publish,
    ReadFile,
    ReleaseTask,
    RequestStatus,
    RunScript,
    RunTests,
    Synthesize,
    VerifyTask,
    dedupe,
    parse_actions,
    render_action,
)


def only(text: str):
    r = parse_actions(text)
    assert r.errors == [], r.errors
    return r.actions


def errors(text: str) -> list[ParseError]:
    return parse_actions(text).errors


# ------------------------------------------------------------------------- the paper's prompt examples

# Appendix A4.2 (LATTE Lead prompt), copied verbatim, in prompt order.
LEAD_A4_2 = [
    ('<assign_task id="task-1" to="AgentName" />', AssignTask("task-1", "AgentName")),
    ("<broadcast>Your message here</broadcast>", Broadcast("Your message here")),
    ('<run_script path="script.py" />', RunScript("script.py")),
    ("<request_status />", RequestStatus()),
    ("<run_tests />", RunTests()),
    ('''<discover_task id="fix-index" title="Fix index() API bug"
        dependencies="task-2">
        Run <run_tests /> to see failures, fix search_lib.py,
        confirm all tests pass.
    </discover_task>''',
     DiscoverTask("fix-index", "Fix index() API bug", ("task-2",),
                  "Run <run_tests /> to see failures, fix search_lib.py,\n        confirm all tests pass.")),
    ('<verify_task id="task-X" />', VerifyTask("task-X")),
    ('<release_task id="task-X" />', ReleaseTask("task-X")),
    ('<assign_task id="task-X" to="DevY" />', AssignTask("task-X", "DevY")),
    ('<close_task id="task-X" />', CloseTask("task-X")),
]

# Appendix A4.3 (LATTE Worker prompt); A5.2/A5.3/A5.6 workers and peers use the same examples.
WORKER_A4_3 = [
    ('<read_file path="math_utils.py" />', ReadFile("math_utils.py")),
    ('<run_script path="script.py" />', RunScript("script.py")),
    ('''<edit_file path="check_files.py">
import os; print(os.listdir(’.’))
</edit_file>
<run_script path="check_files.py" />''',
     [EditFile("check_files.py", "import os; print(os.listdir(’.’))"), RunScript("check_files.py")]),
    ("<run_tests />", RunTests()),
    ('''<discover_task id="new-task-id" title="Short title"
dependencies="only-if-truly-required">
  Clear description of what needs to be done and why.
</discover_task>''',
     DiscoverTask("new-task-id", "Short title", ("only-if-truly-required",),
                  "Clear description of what needs to be done and why.")),
]

# Appendix A5.2 (Leader-Worker Lead) and A5.5 (static-graph Lead).
LEAD_A5_2 = [
    ("<broadcast>Your message here</broadcast>", Broadcast("Your message here")),
    ('<run_script path="script.py" />', RunScript("script.py")),
]
LEAD_A5_5 = [
    ('<assign_task id="task-1" to="AgentName" />', AssignTask("task-1", "AgentName")),
    ("<broadcast>Your message here</broadcast>", Broadcast("Your message here")),
    ('<run_script path="script.py" />', RunScript("script.py")),
    ("<request_status />", RequestStatus()),
    ("<run_tests />", RunTests()),
]


@pytest.mark.parametrize("text, expected", LEAD_A4_2 + WORKER_A4_3 + LEAD_A5_2 + LEAD_A5_5)
def test_paper_prompt_examples(text, expected):
    assert only(text) == (expected if isinstance(expected, list) else [expected])


def test_paper_examples_in_one_reply_keep_document_order():
    blocks = LEAD_A4_2 + WORKER_A4_3
    text = "\n\nSome reasoning first.\n".join(t for t, _ in blocks)
    expected = []
    for _, e in blocks:
        expected.extend(e if isinstance(e, list) else [e])
    assert only(text) == expected


# -------------------------------------------------------------------------------------------- tolerance

@pytest.mark.parametrize("text", [
    '<assign_task id="t1" to="Dev2" />',
    '<assign_task to="Dev2" id="t1"/>',
    "<assign_task id='t1' to='Dev2'>",
    "<assign_task   id = 't1'\n  to=\"Dev2\"   ></assign_task>",
    '<assign_task id=t1 to=Dev2 />',
    '<assign_task id=" t1 " to="Dev2"></assign_task >',
])
def test_attribute_order_quotes_spaces_and_closing_forms(text):
    assert only(text) == [AssignTask("t1", "Dev2")]


def test_attribute_only_tag_with_text_before_its_closer():
    assert only("<run_tests>please</run_tests> <claim_task id='a'>\n</claim_task>") == [RunTests(), ClaimTask("a")]


def test_discover_dependencies_extra_and_plan_alias():
    a = only('<plan_task id="p" title="Plan" dependencies=" a, ,b ,," difficulty="hard" rel="x">\n  do it\n'
             '</plan_task>')[0]
    assert a == DiscoverTask("p", "Plan", ("a", "b"), "do it", (("difficulty", "hard"), ("rel", "x")))
    assert a.alias == "plan_task" and render_action(a).startswith("<plan_task ")
    assert only('<discover_task id="q" title="Q" />') == [DiscoverTask("q", "Q")]
    assert only("<discover_task title='T' id='r'></discover_task>") == [DiscoverTask("r", "T")]


def test_edit_file_fences_paths_and_bodies_are_not_scanned():
    text = '''<edit_file path="repo/pkg/mod.py">
```python
def f(x):
    return x < 1 and "<run_tests />" or '<claim_task id="x" />'
```
</edit_file>
<edit_file path='./empty/__init__.py'></edit_file>
<read_file path="./repo/a.py"/>'''
    assert only(text) == [
        EditFile("pkg/mod.py", 'def f(x):\n    return x < 1 and "<run_tests />" or \'<claim_task id="x" />\'\n'),
        EditFile("empty/__init__.py", ""),
        ReadFile("a.py"),
    ]
    assert only("<edit_file path='a.py'>\n\n  x = 1\n\n</edit_file>") == [EditFile("a.py", "x = 1")]


def test_bodies_of_broadcast_publish_synthesize():
    text = ("<broadcast>\n Dev2: use <run_tests /> after <b>this</b>\n</broadcast>"
            '<publish topic="requirements">\n- rms must ignore NaN\n</publish>'
            "<synthesize>All good.</synthesize><certify_complete/>")
    assert only(text) == [Broadcast("Dev2: use <run_tests /> after <b>this</b>"),
                          Publish("requirements", "- rms must ignore NaN"), Synthesize("All good."),
                          CertifyComplete()]


def test_ordinary_markup_and_code_is_not_flagged():
    text = """Line<br>break, <b>bold</b>, <i>x</i>, List<T> and std::vector<my_type> v;
if a < b and c<d_e: pass  # x <= y, 1<2, <my_var and x>
<div class="note">html</div> <a href="x">link</a> <!-- comment --> <?xml?> << >> <>
"""
    r = parse_actions(text)
    assert r.actions == [] and r.errors == []


# ------------------------------------------------------------------------------------------ error entries

@pytest.mark.parametrize("text, tag, fragment", [
    ("<claim_task />", "claim_task", "missing its id"),
    ('<claim_task id="  " />', "claim_task", "empty id"),
    ('<assign_task id="t1" />', "assign_task", "missing its to"),
    ('<discover_task id="a" title="">x</discover_task>', "discover_task", "empty title"),
    ('<discover_task id="a">x</discover_task>', "discover_task", "missing its title"),
    ('<edit_file path="a.py">x = 1', "edit_file", "never closed"),
    ('<edit_file path="a.py" />', "edit_file", "whole file content"),
    ("<edit_file>x</edit_file>", "edit_file", "missing its path"),
    ('<read_file path="repo/" />', "read_file", "path is empty"),
    ("<broadcast></broadcast>", "broadcast", "needs a body"),
    ("<broadcast />", "broadcast", "needs a body"),
    ("<publish>text</publish>", "publish", "missing its topic"),
    ('<claim_task id="a', "claim_task", "no closing \""),
    ("<claim_task id='a' to='b' id='c' />", "claim_task", "given twice"),
    ("<claim_task: a>", "claim_task", "expected name="),
    ("<claim_task id=>", "claim_task", "has no value"),
    ('<run_tests', "run_tests", "not closed"),
    ("done </broadcast>", "broadcast", "no matching"),
    ('<delete_task id="x"/>', "delete_task", "unknown action tag"),
    ("<merge_branch/>", "merge_branch", "unknown action tag"),
    ('<claim_tasks id="x" />', "claim_tasks", "unknown action tag"),
])
def test_one_error_per_malformed_tag(text, tag, fragment):
    r = parse_actions(text)
    assert r.actions == []
    assert len(r.errors) == 1, r.errors
    e = r.errors[0]
    assert e.tag == tag and fragment in e.message and e.offset == text.index("<")
    assert e.snippet and text[e.offset:].startswith(e.snippet[:5])


def test_errors_do_not_stop_the_rest_of_the_reply():
    text = ('<claim_task /> then <edit_file path="a.py">x = 1</edit_file> '
            '<delete_task id="q"/> <complete_task id="t9" />')
    r = parse_actions(text)
    assert r.actions == [EditFile("a.py", "x = 1"), CompleteTask("t9")]
    assert [e.tag for e in r.errors] == ["claim_task", "delete_task"]
    assert [e.offset for e in r.errors] == [0, text.index("<delete_task")]


def test_unclosed_body_resumes_after_its_opening_tag():
    r = parse_actions('<broadcast>hello <run_tests />')
    assert r.actions == [RunTests()] and [e.tag for e in r.errors] == ["broadcast"]


def test_first_closing_tag_ends_a_body():
    r = parse_actions("<edit_file path='a'>x</edit_file>y</edit_file>")
    assert r.actions == [EditFile("a", "x")]
    assert [e.message for e in r.errors] == ["</edit_file> has no matching <edit_file> before it"]


def test_non_text_input_is_an_error_not_an_exception():
    r = parse_actions(None)  # type: ignore[arg-type]
    assert r.actions == [] and len(r.errors) == 1


def test_dedupe_keeps_first_of_exact_duplicates():
    acts = only("<complete_task id='a'/><run_tests/><complete_task id='a'/><complete_task id='b'/><run_tests/>"
                "<plan_task id='p' title='P'/><discover_task id='p' title='P'/>")
    assert dedupe(acts) == [CompleteTask("a"), RunTests(), CompleteTask("b"), DiscoverTask("p", "P")]
    assert dedupe(acts)[3].alias == "plan_task"


def test_exports():
    assert latte_lab.parse_actions is parse_actions and latte_lab.ParseResult is ParseResult
    assert latte_lab.render_action is render_action
    assert ACTION_TAGS == {"discover_task", "plan_task", "assign_task", "claim_task", "complete_task",
                           "release_task", "close_task", "verify_task", "broadcast", "edit_file", "read_file",
                           "run_script", "run_tests", "request_status", "synthesize", "certify_complete",
                           "publish"}


# ------------------------------------------------------------------------------------------------ fuzzing

FRAGMENTS = [
    "<", ">", "/>", "</", "<claim_task", "<edit_file", "</edit_file>", "<discover_task", "</discover_task>",
    "<broadcast>", "</broadcast>", "<run_tests", "<publish", "</publish>", "<plan_task", "<delete_task",
    ' id="', " id='", ' title="T"', ' to=', ' path="a.py"', ' dependencies="a,b"', '"', "'", "=", " ",
    "\n", "```", "```python\n", "é", "😀", "\x00", "\u2028", "<br>", "<T>", "a < b", "x_y", "<<", "<!--",
    "text ", "repo/", "./", ",", "\\", "&quot;", "<run_tests />", '<claim_task id="t1" />',
]


def random_text(rng: random.Random) -> str:
    return "".join(rng.choice(FRAGMENTS) if rng.random() < 0.8 else chr(rng.randrange(1, 0x3000))
                   for _ in range(rng.randrange(0, 40)))


def test_ten_thousand_random_texts_parse_without_raising():
    rng = random.Random(20260415)
    n_actions = n_errors = 0
    for _ in range(10_000):
        text = random_text(rng)
        r = parse_actions(text)
        assert isinstance(r, ParseResult)
        n_actions += len(r.actions)
        n_errors += len(r.errors)
        for e in r.errors:
            assert 0 <= e.offset <= len(text) and e.tag in text
        for a in r.actions:
            try:
                back = render_action(a)
            except ActionRenderError:
                continue
            assert parse_actions(back).actions == [a]
    assert n_actions > 500 and n_errors > 500  # the generator really exercises both paths


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(text):
    r = parse_actions(text)
    assert all(isinstance(e, ParseError) for e in r.errors)


@pytest.mark.parametrize("unit", ['<edit_file path="x">', '<claim_task id="', "<a_b ", "<", "<claim_task id=x>",
                                  '<discover_task id="a" title="b">', "</broadcast>", '<x_y a="<'])
def test_megabyte_of_repeated_fragments_parses(unit):
    text = unit * (1_000_000 // len(unit))
    r = parse_actions(text)
    assert len(r.actions) + len(r.errors) <= text.count("<")


# ------------------------------------------------------------------------------------------ round trip

CHARS = st.characters(exclude_categories=("Cs",)) | st.sampled_from(list("<>/\"'`=,_- \n\tabc"))
TEXT = st.text(CHARS, max_size=30)
IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_\-]{0,8}", fullmatch=True)


def attr_value(text=TEXT):
    """Values the syntax can carry: trimmed, non-empty, not both quote characters."""
    return text.map(str.strip).filter(lambda v: v and not ('"' in v and "'" in v))


def body_for(tag: str, allow_empty: bool):
    closer = re.compile(rf"</{tag}\s*>")
    return TEXT.map(str.strip).filter(lambda b: (allow_empty or b) and not closer.search(b))


def path_value():
    return attr_value().filter(lambda p: not p.startswith(("./", "repo/")))


ACTIONS = st.one_of(
    st.builds(DiscoverTask, attr_value(), attr_value(),
              # one attribute carries them all, joined by commas: together they may not hold both quotes
              st.lists(attr_value().filter(lambda d: "," not in d), max_size=3).map(tuple)
              .filter(lambda deps: not ('"' in "".join(deps) and "'" in "".join(deps))),
              body_for("discover_task", True),
              st.dictionaries(IDENT.filter(lambda k: k not in ("id", "title", "dependencies")),
                              TEXT.filter(lambda v: not ('"' in v and "'" in v)), max_size=2)
              .map(lambda d: tuple(sorted(d.items()))),
              st.sampled_from([None, "plan_task"])),
    st.builds(AssignTask, attr_value(), attr_value()),
    *(st.builds(cls, attr_value()) for cls in (ClaimTask, CompleteTask, ReleaseTask, CloseTask, VerifyTask)),
    st.builds(Broadcast, body_for("broadcast", False)),
    st.builds(Synthesize, body_for("synthesize", False)),
    st.builds(Publish, attr_value(), body_for("publish", False)),
    st.builds(EditFile, path_value(), st.text(CHARS, max_size=60).filter(
        lambda c: not re.search(r"</edit_file\s*>", c))),
    st.builds(ReadFile, path_value()),
    st.builds(RunScript, path_value()),
    st.just(RunTests()), st.just(RequestStatus()), st.just(CertifyComplete()),
)


def test_dependencies_that_together_hold_both_quotes_are_refused_with_a_clear_error():
    # Each dependency alone can be carried; joined into one attribute they cannot (found by the round trip below).
    with pytest.raises(actions_module.ActionRenderError, match="holds both quote characters; tags cannot carry it") as err:
        render_action(DiscoverTask("a", "A", ("'", '"')))
    assert str(err.value).startswith("dependencies=")


@settings(max_examples=600, deadline=None)
@given(ACTIONS)
def test_render_then_parse_round_trips(action):
    text = render_action(action)  # must not raise: the strategy obeys the documented limits
    assert parse_actions(text).actions == [action]
    assert parse_actions(text).errors == []


@settings(max_examples=150, deadline=None)
@given(st.lists(ACTIONS, max_size=6), st.lists(st.sampled_from(["\n", " ok ", "<br>", "a<b", "\n\n"]),
                                              min_size=7, max_size=7))
def test_rendered_replies_parse_in_order(acts, gaps):
    text = gaps[0] + "".join(render_action(a) + g for a, g in zip(acts, gaps[1:], strict=False))
    assert parse_actions(text).actions == acts


@pytest.mark.parametrize("action", [
    Broadcast("say </broadcast> twice"),
    Broadcast("  padded  "),
    Broadcast(""),
    ClaimTask("both ' and \""),
    ClaimTask(" padded"),
    ClaimTask("x" * 5000),
    ReadFile("repo/a.py"),
    DiscoverTask("a", "A", ("b,c",)),
    DiscoverTask("a", "A", description="ends with </discover_task>"),
    EditFile("a.py", "x\n</edit_file>\n"),
])
def test_unrepresentable_actions_are_refused(action):
    with pytest.raises(ActionRenderError):
        render_action(action)


def test_edit_file_content_edge_cases_round_trip():
    for content in ["", "\n", "  indented\n", "```", "```md\n# t\n```\n", "x```", "no newline", "\t\n x \n\t"]:
        assert only(render_action(EditFile("f.txt", content))) == [EditFile("f.txt", content)]


# ------------------------------------------------------------------------------------------- doctests

def test_module_doctests():
    result = doctest.testmod(actions_module)
    assert result.attempted >= 5 and result.failed == 0


def test_error_entries_are_capped_per_reply():
    r = parse_actions('<claim_task id="ok"/>' + "<claim_task/>" * 500 + "<run_tests/>")
    assert r.actions == [ClaimTask("ok"), RunTests()]
    assert len(r.errors) == actions_module.MAX_PARSE_ERRORS + 1
    assert "not reported" in r.errors[-1].message


def test_prose_mention_of_a_body_tag_does_not_swallow_the_real_one():
    text = "I'll use <edit_file> to write it:\n<edit_file path=\"a.py\">x = 1\n</edit_file>"
    r = parse_actions(text)
    assert r.actions == [EditFile("a.py", "x = 1")]
    assert [(e.tag, e.offset) for e in r.errors] == [("edit_file", text.index("<edit_file>"))]
    r = parse_actions('Add one with <discover_task>: <discover_task id="a" title="A">d</discover_task>')
    assert r.actions == [DiscoverTask("a", "A", (), "d")] and len(r.errors) == 1
