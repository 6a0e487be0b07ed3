"""The text agents get back from tools (reference §4.1 and §6), worded by :mod:`latte_lab.prompts`.

Every tail length of tool output that reaches an agent or an event is defined in this module. Text is
normalised by :func:`stable_output` first, so that prompts, events, cached responses and replays never
depend on timings, object addresses or where the workspace happens to live.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from latte_lab import prompts
from latte_lab.sandbox.pytest import TestRun
from latte_lab.sandbox.run import RunResult

SCRIPT_STDOUT_TAIL = 3000  # run_script reply: last characters of stdout (reference §6)
SCRIPT_STDERR_TAIL = 1000  # run_script reply: last characters of stderr (reference §6)
TESTS_REPLY_TAIL = 1500  # run_tests reply: last characters of the output (reference §6)
PLANNING_TESTS_TAIL = 2000  # run_tests reply during planning (reference §6)
TEST_STATUS_TAIL = 1500  # flat teams' per-round test-status injection (reference §6)
EVENT_OUTPUT_TAIL = 2000  # output tail stored in run_tests/run_script events (reference §6)

_DURATION_RE = re.compile(r" in \d+(?:\.\d+)?s(?: \(\d+:\d+:\d+\))?")
# "0x" + 6 or more hex digits, as a whole word (``\b0x[0-9a-fA-F]{6,}\b``); the literal first, so the
# engine finds candidates by a fast search instead of trying every position of the text
_ADDRESS_RE = re.compile(r"0x(?<!\w0x)[0-9a-fA-F]{6,}\b")
_PATH_STOP = frozenset(" \t\n'\"<>:(=,[")  # characters that cannot be part of a path in tool output


def _strip_workspace_paths(text: str) -> str:
    """Drops absolute ``.../workspace/`` prefixes (a trial's workspace is <run_dir>/workspace, and a
    memoised test result may carry another trial's path). A scan, not a regex: this runs on every reply."""
    marker = "/workspace/"
    out, i = [], 0
    while (j := text.find(marker, i)) >= 0:
        k = j
        while k > i and text[k - 1] not in _PATH_STOP:
            k -= 1
        out.append(text[i:k] if text[k] == "/" else text[i : j + len(marker)])
        i = j + len(marker)
    out.append(text[i:])
    return "".join(out)


# The same tool output is normalised for the event, the reply and again when the suite's result is memoised,
# so results are kept per (text, roots); emptied when full.
_STABLE: dict[tuple[str, tuple[str, ...]], str] = {}
_STABLE_MAX = 1024


def stable_output(text: str, roots: Iterable[str] = ()) -> str:
    """Tool output without what changes from run to run: pytest's timing ("5 passed in 0.09s" ->
    "5 passed"), object addresses in tracebacks ("object at 0x7f6a24fcd750" -> "object at 0x…") and
    the workspace's absolute path (``roots``, shown as ".").

    >>> stable_output("<A object at 0x7f6a24fcd750> in /home/u/p/a.py\\n1 failed in 0.12s", ["/home/u/p"])
    '<A object at 0x…> in a.py\\n1 failed'
    """
    roots = tuple(roots)
    key = (text, roots)
    out = _STABLE.get(key)
    if out is None:
        if len(_STABLE) >= _STABLE_MAX:
            _STABLE.clear()
        out = _STABLE[key] = _stable_output(text, roots)
    return out


def _stable_output(text: str, roots: tuple[str, ...]) -> str:
    for root in sorted({r.rstrip("/") for r in roots if r}, key=len, reverse=True):
        if root in text:
            text = text.replace(root + "/", "").replace(root, ".")
    if "/workspace/" in text:
        text = _strip_workspace_paths(text)
    if "0x" in text:  # the regexes only run when they can match: this is on every tool reply
        text = _ADDRESS_RE.sub("0x…", text)
    return _DURATION_RE.sub("", text) if " in " in text else text


def stable_tail(text: str, n: int, roots: Iterable[str] = ()) -> str:
    """The last ``n`` characters of ``stable_output(text)``, normalising only a window of the end (tool
    output can be large; normalisation only ever shortens text, so a 4n window is enough)."""
    return stable_output(text[-4 * n :], roots)[-n:]


def _tail(text: str, n: int) -> str:
    return text[-n:] if n > 0 else ""


def _seconds(seconds: float | None) -> str:
    return "its time limit" if seconds is None else f"{seconds:g} s"


def run_script_reply(run: RunResult, roots: Iterable[str] = ()) -> str:
    """The message an agent gets for ``<run_script>`` (reference §4.1, with clear failure notes).

    >>> run_script_reply(RunResult(0, "hi\\n", "", 0.1, False, False))
    '✅ Script completed:\\nhi\\n'
    """
    text = prompts.render_script(_tail(run.stdout, SCRIPT_STDOUT_TAIL), run.returncode, run.notes,
                                 _tail(run.stderr, SCRIPT_STDERR_TAIL) if run.stderr else "",
                                 timed_out=_seconds(run.timeout) if run.timed_out else None)
    return stable_output(text, roots)


def run_tests_reply(run: TestRun, tail: int = TESTS_REPLY_TAIL, roots: Iterable[str] = ()) -> str:
    """The message an agent gets for ``<run_tests>``: the verdict, what the run ran into, and the last
    ``tail`` characters of pytest's output (reference §4.1; planning uses :data:`PLANNING_TESTS_TAIL`).

    >>> run_tests_reply(TestRun(0, "3 passed in 0.01s", "", 0.2, False, False, passed=3))
    '✅ Tests passed!\\n3 passed'
    """
    output = run.stdout + ("\n" + run.stderr if run.stderr.strip() else "")
    out = stable_tail(output, tail, roots).strip()
    return prompts.render_tests(run.ok, out, run.notes, _seconds(run.timeout) if run.timed_out else None)

