"""Tests of the text agents get back from tools (latte_lab.teams.replies): one renderer, tails of the
reference's lengths, clear failure notes, output that does not change from run to run."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from latte_lab.sandbox import RunResult, TestRun
from latte_lab.teams import replies
from latte_lab.teams.replies import run_script_reply, run_tests_reply, stable_output, stable_tail


def test_script_reply_keeps_the_reference_tails():
    ok = RunResult(0, "out" * 2000, "warn", 0.1, False, False)
    text = run_script_reply(ok)
    assert text.startswith("✅ Script completed:\n") and text.endswith("\n[stderr]\nwarn")
    assert text.count("out") == 1000  # last 3 000 chars of stdout
    long_err = RunResult(1, "", "e" * 5000 + "END", 0.1, False, False)
    assert run_script_reply(long_err).endswith("[stderr]\n" + ("e" * 5000 + "END")[-replies.SCRIPT_STDERR_TAIL :])
    bad = RunResult(2, "", "Traceback\nValueError: x", 0.1, False, False)
    assert run_script_reply(bad).startswith("❌ Script exited with code 2:")
    timed = RunResult(-15, "spinning\n", "", 2.1, True, False, timeout=2.0)
    assert run_script_reply(timed).startswith("⏱️ Script timed out after 2 s and was stopped:\nspinning")
    noted = RunResult(1, "", "MemoryError", 0.1, False, False, notes=("memory limit exceeded",))
    assert run_script_reply(noted).startswith("❌ Script exited with code 1:\nmemory limit exceeded\n")


def test_tests_reply_verdicts_notes_and_tails():
    failing = TestRun(1, "F" * 5000 + "\n1 failed in 0.1s", "", 0.3, False, False, failed=1)
    reply = run_tests_reply(failing)
    assert reply.startswith("❌ Tests failed:\n") and len(reply) == len("❌ Tests failed:\n") + 1500
    assert reply.endswith("F\n1 failed")  # the timing is not part of what agents see
    assert run_tests_reply(TestRun(0, "", "", 0.1, False, False, passed=1)) == "✅ Tests passed!\n"
    passed = TestRun(0, ".." + "\n2 passed in 0.02s", "", 0.1, False, False, passed=2)
    assert run_tests_reply(passed) == "✅ Tests passed!\n..\n2 passed"
    timed = TestRun(-9, "", "", 5.0, True, False, errors=1, timeout=5.0)
    assert run_tests_reply(timed).startswith("⏱️ Tests timed out after 5 s and were stopped")
    noted = TestRun(1, "x", "", 0.1, False, False, failed=1, notes=("file size limit exceeded (1 MiB per file)",))
    assert run_tests_reply(noted) == "❌ Tests failed:\nfile size limit exceeded (1 MiB per file)\nx"
    planning = TestRun(1, "P" * 5000, "", 0.1, False, False, failed=1)
    assert run_tests_reply(planning, replies.PLANNING_TESTS_TAIL).count("P") == 2000
    with_stderr = TestRun(1, "out", "warning: x", 0.1, False, False, failed=1)
    assert run_tests_reply(with_stderr).endswith("out\nwarning: x")


def test_replies_show_no_workspace_path_timing_or_address():
    root = "/runs/t1/workspace"
    run = TestRun(1, f"{root}/test_suite.py:3: AssertionError\n<A object at 0x7f00deadbeef>\n1 failed in 0.12s",
                  "", 0.3, False, False, failed=1)
    text = run_tests_reply(run, roots=[root])
    assert root not in text and "0.12s" not in text and "0x7f00deadbeef" not in text
    assert "test_suite.py:3: AssertionError" in text
    script = RunResult(1, "", f"File \"{root}/a.py\", line 1", 0.1, False, False)
    assert run_script_reply(script, [root]) == '❌ Script exited with code 1:\n\n[stderr]\nFile "a.py", line 1'
    other_trial = "/elsewhere/t2/workspace/mod.py line 4"  # a memoised result from another trial's path
    assert stable_output(other_trial) == "mod.py line 4"
    assert stable_tail("x" * 10 + " 3 passed in 0.01s", 12) == "xxx 3 passed"


def test_normalised_output_depends_on_the_roots_it_is_given():
    text = "/runs/a/workspace/x.py failed in 0.5s"
    assert stable_output(text, ["/runs/a/workspace"]) == "x.py failed"
    assert stable_output(text, ["/runs/b"]) == "x.py failed"  # the generic workspace prefix rule
    assert stable_output("/runs/a/y.py", ["/runs/a"]) == "y.py"
    assert stable_output("/runs/a/y.py", ["/runs/b"]) == "/runs/a/y.py"


def test_tail_lengths_have_one_home():
    from latte_lab.teams import engine

    for name in ("TESTS_REPLY_TAIL", "PLANNING_TESTS_TAIL", "TEST_STATUS_TAIL", "EVENT_OUTPUT_TAIL"):
        assert getattr(engine, name) is getattr(replies, name)
    assert (replies.SCRIPT_STDOUT_TAIL, replies.SCRIPT_STDERR_TAIL) == (3000, 1000)  # reference §6


_AROUND = st.sampled_from(["", " ", "a", "_", "0", "x", "é", ".", "\n", "0x", "<"])


@given(st.lists(st.tuples(_AROUND, st.text("0123456789abcdefABCDEFg", max_size=9), _AROUND), max_size=4)
       .map(lambda parts: "".join(f"{before}0x{digits}{after}" for before, digits, after in parts)))
def test_addresses_are_masked_exactly_where_a_whole_word_0x_and_six_hex_digits_stand(text):
    import re

    whole_word = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")  # the rule, written the plain way
    assert replies._ADDRESS_RE.sub("0x…", text) == whole_word.sub("0x…", text)
