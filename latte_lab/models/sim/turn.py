"""One call of the simulated model: the request, what the agent's prompt shows, and the reply being built.

Everything an agent knows comes from its prompt: the structured view (read back from the prompt text,
``latte_lab.models.view``) and its own earlier replies in the window. :class:`Turn` gathers what the
policy asks of that knowledge: which files the agent has in its context, what the tests and its check
scripts showed, which messages it has heard, what it did last turn. Randomness comes from two
generators, both seeded by the caller: one per call, and :meth:`Turn.stable` for draws that must agree
across the calls of one subtask (how long a stall lasts, whether a task is reported).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field

from latte_lab.models.base import AgentView, ModelRequest
from latte_lab.models.sim.analysis import ANALYSIS_MARK
from latte_lab.models.sim.evidence import PROFILE_MARK
from latte_lab.models.sim.fixbook import FixBook
from latte_lab.models.sim.profiles import Profile
from latte_lab.models.sim.skill import Skill, WorkUnit
from latte_lab.models.sim.text import WORK_MARKER, Act, act, marked_task, tags_in
from latte_lab.models.view import SYSTEM, failures_in, segments

_CHECK_LINE = re.compile(r"^(PASSED|FAILED|ERROR)\s+(\S+)", re.MULTILINE)
OBSERVE_TAGS = ("run_tests", "run_script")


def stable_seed(*parts) -> int:
    """A 64-bit seed from the parts (SHA-256 of their repr): same parts, same seed, on any machine."""
    digest = hashlib.sha256(repr(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def _patched(reply: str, unit_id: str) -> bool:
    """Whether one of the agent's replies patched the unit (its note names it and the reply edits a file)."""
    head, _, _ = reply.partition("<edit_file")
    return bool(_) and re.search(rf"Patching [^.]*(?<![\w-]){re.escape(unit_id)}(?![\w-])", head) is not None


def _node_text(node: dict) -> str:
    """A task as its prompt showed it, one paragraph per field: its id and title, its description, and its
    predecessors' (D4)."""
    out = [f"{node.get('id', '')}: {node.get('title', '')}", str(node.get("description") or "")]
    out += [_node_text(p) for p in node.get("predecessors") or ()]
    return "\n\n".join(x for x in out if x.strip())


def view_text(view: AgentView) -> str:
    """The view's fields as text (read from the prompt, so nothing new; a view built by hand has only these)."""
    nodes = ([view.current_task] if view.current_task else []) + list(view.frontier or ()) + list(view.graph or ())
    parts = [_node_text(n) for n in nodes if isinstance(n, dict)]
    parts += [view.test_output or "", *view.script_output, *map(str, (view.extra.get("documents") or {}).values())]
    return "\n\n".join(p for p in parts if p)


@dataclass
class Turn:
    """One call: the request, the agent's knowledge, and the reply being built."""

    request: ModelRequest
    view: AgentView
    profile: Profile
    book: FixBook
    rng: random.Random
    notes: list[str] = field(default_factory=list)
    acts: list[Act] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.history = [m.content for m in self.request.messages if m.role == "assistant"]
        self.last = tags_in(self.history[-1]) if self.history else []
        self.heard = [(s, t) for m in self.request.messages if m.role == "user" for s, t in segments(m.content)]
        self.checks: dict[str, bool] = {}  # check id -> passed, latest check-script output wins
        for text in self.view.script_output:
            for status, cid in _CHECK_LINE.findall(text):
                self.checks[cid] = status == "PASSED"
        # failures others reported or a task description names (bug reports, fix tasks)
        reported = [t for s, t in self.heard if s != SYSTEM]
        reported += [str(d) for d in (self.view.extra.get("documents") or {}).values()]
        if self.view.current_task:
            reported.append(self.view.current_task.get("description") or "")
        self.reported = tuple(dict.fromkeys(f for text in reported for f in failures_in(text)))
        # what work exists, and where: only from the prompt's text (and the files it shows)
        parts = [self.request.system, *(m.content for m in self.request.messages), view_text(self.view)]
        project = self.book.project_for(self.view.files_read, parts)
        self.skill = Skill(project, parts, self.observations(), self.view.files_read)

    # ----- the reply -----
    def allows(self, tag: str) -> bool:
        return tag in self.view.allowed_actions

    def add(self, tag: str, body: str | None = None, **attrs: str) -> bool:
        if self.allows(tag) or (tag == "plan_task" and self.allows("discover_task")):
            self.acts.append(act(tag, body, **attrs))
            return True
        return False

    def note(self, text: str) -> None:
        self.notes.append(text)

    def stable(self, *key) -> random.Random:
        """A generator that gives the same draws for the same agent and key across calls."""
        s = self.request.scope
        return random.Random(stable_seed(s.seed, s.agent or self.view.agent, *key))

    # ----- its own history -----
    def last_had(self, tag: str, **attrs: str) -> bool:
        return any(a.tag == tag and all(a.attr(k) == v for k, v in attrs.items()) for a in self.last)

    def observed_last(self) -> bool:
        """Whether its last reply ran the tests or a script (so this prompt shows fresh results), or only
        re-read files right after doing so (the results still describe the code)."""
        if any(a.tag in OBSERVE_TAGS for a in self.last):
            return True
        if self.last and all(a.tag == "read_file" for a in self.last) and len(self.history) >= 2:
            before = tags_in(self.history[-2])
            return any(a.tag in OBSERVE_TAGS for a in before) and not any(a.tag == "edit_file" for a in before)
        return False

    def turns_on(self, key: str) -> int:
        """Consecutive earlier replies, newest first, that said they were working on ``key``."""
        n = 0
        for text in reversed(self.history):
            if marked_task(text) != key:
                break
            n += 1
        return n

    def history_on(self, key: str, needle: str) -> bool:
        """Whether an earlier reply about ``key`` contained ``needle``."""
        return any(marked_task(h) == key and needle in h for h in self.history)

    def tried_read(self, key: str, path: str) -> bool:
        return self.history_on(key, f'<read_file path="{path}"')

    def mark(self, key: str, title: str = "") -> None:
        self.note(f"{WORK_MARKER} {key}" + (f": {title}." if title else "."))

    # ----- what it has observed -----
    def tests_known(self) -> bool:
        return self.view.test_output is not None

    def failures(self) -> tuple[str, ...]:
        """Failing ids it currently believes: the latest test output's failures and every check that
        failed in its latest run."""
        tests = () if self.view.tests_passed else tuple(self.view.test_failures)
        return tests + tuple(cid for cid, ok in self.checks.items() if not ok)

    def failing(self, unit: WorkUnit) -> bool:
        """Whether its observations show the unit failing. A failure blamed on the unit only through its
        file (a form test of a shared file) does not count when the unit's own checks just passed."""
        fails = self.failures()
        if self.skill.names_unit(unit, fails):
            return True
        own_passed = [cid for cid, ok in self.checks.items() if ok and self.skill.names_unit(unit, [cid])]
        return not own_passed and self.skill.unit_failing(unit, fails)

    def observations(self) -> tuple[str, ...]:
        """Every test or check id its prompt shows a result for, and failures others reported."""
        return tuple(self.view.test_failures) + tuple(self.checks) + self.reported

    def points_at(self, unit: WorkUnit) -> bool:
        """Whether an observation in its prompt is about the unit (a failure, or a check's result)."""
        return self.skill.unit_failing(unit, self.observations())

    def data_shown(self) -> bool:
        """Whether the prompt shows the project's data: a profile's or an analysis's output, or a data file read."""
        return any(self.seen(f) is not None or any(f"{PROFILE_MARK}{f}:" in out or f"{ANALYSIS_MARK}{f}:" in out
                                                   for out in self.view.script_output)
                   for f in self.skill.data_files)

    def seen(self, path: str) -> str | None:
        """The file as its prompt shows it (read or written in the window), None when not there."""
        return self.view.files_read.get(path)

    def stale(self, unit: WorkUnit) -> bool:
        """Whether the unit, written, lacks facts about the data its prompt now shows (:meth:`Skill.stale`)."""
        return any(self.skill.stale(unit, f, self.seen(f)) for f in self.skill.unit_files(unit))

    def written(self, unit: WorkUnit) -> bool:
        """Whether the unit's code has been written: its prompt shows it changed from the start, or the agent's
        own replies patched it (a patch that left the code as it was, the code being right already)."""
        if not self.skill.patchable(unit):
            return False
        if any(self.skill.changed(unit, f, self.seen(f)) for f in self.skill.unit_files(unit)):
            return True
        return any(_patched(h, unit.id) for h in self.history)

    def heard_units(self) -> list[WorkUnit]:
        """Units named in what others told it (directions, announcements, reports), first mention first."""
        text = "\n".join(t for s, t in self.heard if s not in (SYSTEM, self.view.agent))
        return self.skill.units_in_text(text)
