"""One call of the simulated agent and the work it does on units: the machinery every role shares.

A :class:`Turn` holds the request, what the agent knows (its view, its own earlier replies, what it has
heard) and the reply being built; :func:`work` advances an agent on a set of work units (think, read,
write, run the tests) and says whether it is still working, finished or blocked. The role policies
(``graph_roles``, ``flat_roles``, ``pipeline_roles``) decide what to work on; :mod:`.policy` picks the
role. Everything is pure: randomness comes from the two generators of a Turn, seeded by the caller.

>>> stable_seed("call", 0, "Dev1", 3) == stable_seed("call", 0, "Dev1", 3)
True
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from dataclasses import dataclass, field

from latte_lab.models.base import AgentView, ModelRequest
from latte_lab.models.sim.profiles import Profile
from latte_lab.models.sim.skill import TaskSkill, failures_in_text
from latte_lab.models.sim.text import Act, act, marked_task, tags_in
from latte_lab.tasks.base import WorkUnit

MAX_TARGET_EXPANSION = 1  # how many times a check-only task widens to the helpers it depends on
_FROM = re.compile(r"\[From ([^\]]+)\]: ")

WORKING, FINISHED, BLOCKED = "working", "finished", "blocked"


def stable_seed(*parts) -> int:
    """A 64-bit seed from the parts (SHA-256 of their repr): same parts, same seed, on any machine."""
    digest = hashlib.sha256(repr(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass
class Turn:
    """One call: the request, the agent's knowledge, and the reply being built."""

    request: ModelRequest
    view: AgentView
    profile: Profile
    skill: TaskSkill
    rng: random.Random
    notes: list[str] = field(default_factory=list)
    acts: list[Act] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.history = [m.content for m in self.request.messages if m.role == "assistant"]
        self.last = tags_in(self.history[-1]) if self.history else []
        self.heard = _heard(self.request, self.view)

    # ----- helpers -----
    def allows(self, tag: str) -> bool:
        return tag in self.view.allowed_actions

    def add(self, tag: str, body: str | None = None, **attrs: str) -> None:
        if self.allows(tag) or (tag == "plan_task" and self.allows("discover_task")):
            self.acts.append(act(tag, body, **attrs))

    def note(self, text: str) -> None:
        self.notes.append(text)

    def stable(self, *key) -> random.Random:
        """A generator that gives the same draws for the same agent and key across calls."""
        s = self.request.scope
        return random.Random(stable_seed(s.seed, s.agent or self.view.agent, *key))

    def last_had(self, tag: str, **attrs: str) -> bool:
        return any(a.tag == tag and all(a.attr(k) == v for k, v in attrs.items()) for a in self.last)

    def turns_on(self, key: str) -> int:
        """Consecutive earlier replies, newest first, that said they were working on ``key``."""
        n = 0
        for text in reversed(self.history):
            if marked_task(text) != key:
                break
            n += 1
        return n

    def seen_on(self, key: str, path: str) -> bool:
        """Whether the file is in the agent's context for this task: read or written since it began.

        A view with no history at all (built by hand) counts the files it shows as read. A read that
        found no file counts too (the agent then creates it).
        """
        if not self.history:
            return path in self.view.files_read
        needles = (f'<read_file path="{path}"', f'<edit_file path="{path}"')
        return any(marked_task(h) == key and any(n in h for n in needles) for h in self.history)

    def history_on(self, key: str, needle: str) -> bool:
        """Whether an earlier reply about ``key`` contained ``needle``."""
        return any(marked_task(h) == key and needle in h for h in self.history)

    def edited_on(self, key: str) -> bool:
        return any(marked_task(t) == key and "<edit_file" in t for t in self.history)

    def failures(self) -> tuple[str, ...]:
        v = self.view
        if v.tests_passed:
            return ()
        return tuple(v.test_failures) or failures_in_text(v.test_output)

    def tests_known(self) -> bool:
        return self.view.test_output is not None or self.view.tests_passed is not None

    def failing(self, unit: WorkUnit) -> bool:
        return self.tests_known() and self.skill.unit_failing(unit, self.failures())


def _heard(request: ModelRequest, view: AgentView) -> list[tuple[str, str]]:
    """(sender, text) of every message the agent has seen in its window, oldest first."""
    out: list[tuple[str, str]] = []
    for m in request.messages:
        if m.role != "user":
            continue
        parts = _FROM.split(m.content)
        # parts = [prefix, sender1, text1, sender2, text2, ...]
        for i in range(1, len(parts) - 1, 2):
            out.append((parts[i], parts[i + 1].strip()))
    seen = {(s, t) for s, t in out}
    for msg in view.messages:
        pair = (msg.get("sender", ""), (msg.get("text") or "").strip())
        if pair not in seen:
            out.append(pair)
    return out


# ======================================================================================= work ====

def duration(t: Turn, key: tuple, units: list[WorkUnit]) -> int:
    """Rounds of thought before the first write on a subtask: effort x per-unit rounds, plus a
    straggler's extra rounds now and then. Stable for the same agent, subtask and start round."""
    p = t.profile
    rng = t.stable("duration", *key)
    effort = sum(u.effort for u in units if t.skill.patchable(u)) or 0.5
    lo, hi = p.rounds_per_unit
    rounds = effort * rng.uniform(lo, hi)
    if rng.random() < p.p_straggler:
        a, b = p.straggler_extra_rounds
        rounds += rng.randint(a, b)
    return max(0, int(math.floor(rounds)))


def unit_state(t: Turn, u: WorkUnit) -> str:
    states = [t.skill.state(u, f, t.view.files_read.get(f)) for f in t.skill.unit_files(u)]
    if not states or all(s == "solution" for s in states):
        return "solution"
    if any(s == "start" for s in states):
        return "start"
    return "wrong" if "wrong" in states else "other"


def unit_files(t: Turn, units: list[WorkUnit]) -> list[str]:
    out: list[str] = []
    for u in units:
        for f in t.skill.unit_files(u):
            if f not in out:
                out.append(f)
    return out


def work(t: Turn, targets: list[WorkUnit], key: str, elapsed: int, stable_key: tuple, *,
         review: bool = False, depth: int = 0) -> str:
    """One turn of work on a set of units; returns WORKING, FINISHED or BLOCKED.

    The agent reads what it has not seen, thinks for the rounds its subtask takes, patches each file
    once (re-reading first now and then), runs the tests, and is finished when the tests show its
    units passing. A unit it believes done but whose tests fail is re-read, then rewritten.
    """
    sk, p = t.skill, t.profile
    patchable = [u for u in targets if sk.patchable(u)]
    files = unit_files(t, targets)
    unread = [f for f in files if not t.seen_on(key, f)]
    if unread and t.allows("read_file"):
        for f in unread:
            t.add("read_file", path=f)
        t.note(f"Reading {', '.join(unread)} first.")
        return WORKING
    fresh = t.last_had("run_tests") or (not t.history and t.tests_known())
    todo, recheck = [], []
    for u in patchable:
        st = unit_state(t, u)
        if st == "start" and depth > 0 and not t.failing(u):
            continue  # a neighbour that is untouched but not failing is not the cause
        if st == "start":
            todo.append(u)
        elif review and st in ("wrong", "other") and t.rng.random() < p.p_correct_patch:
            t.note(f"The current {u.id} does not match its contract; fixing it.")
            todo.append(u)
        elif fresh and t.failing(u):
            ufiles = sk.unit_files(u)
            if all(t.last_had("read_file", path=f) for f in ufiles) or not t.allows("read_file"):
                # looking at the current code, a skilful agent tells whether its own part is at fault
                right = t.rng.random() < p.p_correct_patch
                if (st != "solution") == right:
                    todo.append(u)
            else:
                recheck.append(u)
    if recheck and not todo:
        rfiles = unit_files(t, recheck)
        for f in rfiles:
            t.add("read_file", path=f)
        t.add("run_tests")
        t.note(f"The tests still fail for {', '.join(u.id for u in recheck)}; re-reading the code.")
        return WORKING
    if todo:
        return _write(t, todo, key, elapsed, stable_key)
    if not fresh and t.allows("run_tests"):
        t.add("run_tests")
        t.note("Checking the tests.")
        return WORKING
    failing = [u for u in targets if t.failing(u)]
    if not failing:
        return FINISHED
    if depth < MAX_TARGET_EXPANSION:
        # the cause may be a helper it builds on, or another part of the same file
        extra: list[WorkUnit] = []
        ids = {u.id for u in targets}
        for u in failing:
            near = [sk.unit(d) for d in u.deps]
            near += [o for o in sk.units if o.id != u.id and set(o.files) & set(u.files)
                     and sk.unit_failing(o, t.failures())]
            for dep in near:
                if dep is not None and dep.id not in ids and sk.patchable(dep):
                    ids.add(dep.id)
                    extra.append(dep)
        if extra:
            t.note(f"{', '.join(u.id for u in failing)} depends on {', '.join(d.id for d in extra)}; checking those.")
            return work(t, targets + extra, key, elapsed, stable_key, review=True, depth=depth + 1)
    return BLOCKED


def _write(t: Turn, todo: list[WorkUnit], key: str, elapsed: int, stable_key: tuple) -> str:
    sk, view, p = t.skill, t.view, t.profile
    names = ", ".join(u.id for u in todo)
    first = not t.edited_on(key)
    files = unit_files(t, todo)
    existing = [f for f in files if f in sk.start or f in view.files_read]
    just_read = bool(existing) and all(t.last_had("read_file", path=f) for f in existing)
    rounds = duration(t, stable_key, todo)
    if first and elapsed < rounds:
        # the last round of thought is when a careful agent refreshes its copy of the file
        if elapsed >= rounds - 1 and existing and t.allows("read_file") and t.rng.random() < p.p_reread:
            for f in existing:
                t.add("read_file", path=f)
            t.note(f"Nearly ready to patch {names}; re-reading {', '.join(existing)} first.")
        else:
            t.note(f"Still working out the change for {names}.")
        return WORKING
    if not first and existing and not just_read and t.allows("read_file") and t.rng.random() < p.p_reread:
        for f in existing:
            t.add("read_file", path=f)
        t.note(f"Re-reading {', '.join(existing)} before patching {names} again.")
        return WORKING
    draws = {u.id: t.rng.random() < p.p_correct_patch for u in todo}
    for f in files:
        merged: dict[str, str] = {}
        whole: str | None = None
        for u in todo:
            if f not in sk.unit_files(u):
                continue
            v = sk.version(u, f, draws[u.id])
            if isinstance(v, str):
                whole = v
            else:
                merged.update(v)
        content = whole if whole is not None and not merged else sk.patch(view.files_read.get(f), f, merged)
        if whole is not None and merged:
            content = sk.patch(whole, f, merged)
        t.add("edit_file", content, path=f)
    t.add("run_tests")
    t.note(f"Patching {names} in {', '.join(files)} and running the tests.")
    return WORKING
