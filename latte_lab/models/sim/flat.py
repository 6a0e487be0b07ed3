"""A worker or peer without a task graph: directions, announcements and failing checks decide what it
works on; what it learns it tells the others by broadcast."""

from __future__ import annotations

import re

from latte_lab.models.sim.skill import WorkUnit
from latte_lab.models.sim.text import marked_task
from latte_lab.models.sim.turn import Turn
from latte_lab.models.sim.work import BLOCKED, FINISHED, WORKING, blamed, revealed, stalled, uniq, work
from latte_lab.models.view import SYSTEM

_TAKING = re.compile(r"I'm taking ([\w\-]+(?:, [\w\-]+)*)")
_FOUND = "Found: "  # how an agent announces work the description did not show


def directions(t: Turn) -> list[WorkUnit]:
    """The latest units another agent told this agent to work on (lines ``DevN: ...``)."""
    names = [t.view.agent, *t.view.teammates]
    split = re.compile(r"(?<![\w])(" + "|".join(re.escape(n) for n in names) + r"):")
    latest: list[WorkUnit] = []
    for sender, text in t.heard:
        if sender in (SYSTEM, t.view.agent):
            continue
        parts = split.split(text)
        for i in range(1, len(parts) - 1, 2):
            if parts[i] == t.view.agent:
                units = t.skill.units_in_text(parts[i + 1])
                if units:
                    latest = units
    return latest


def finished(t: Turn, u: WorkUnit) -> bool:
    """Whether a unit looks finished from this agent's seat: written, and no observation shows it failing."""
    if not t.skill.patchable(u):
        return t.tests_known() and not t.failing(u)
    return t.written(u) and not t.failing(u)


def claimed_by_others(t: Turn) -> set[str]:
    out: set[str] = set()
    for sender, text in t.heard:
        if sender in (SYSTEM, t.view.agent):
            continue
        for m in _TAKING.finditer(text):
            out.update(x.strip() for x in m.group(1).split(","))
    return out


def member(t: Turn) -> None:
    """One turn of a flat worker or peer: go on with its unit until its checks pass, then pick the next
    (a direction for it, else a failing or unfinished unit nobody announced)."""
    view, sk = t.view, t.skill
    _announce(t)
    current = marked_task(t.history[-1]) if t.history else None
    cur = sk.unit(current) if current else None
    if cur is not None:
        if _work_on(t, cur, announce=False) != "done":
            return
        t.notes.clear()  # on to the next unit: this turn's words are about that one
        start = t.request.scope.call_index - t.turns_on(cur.id)
        if t.allows("broadcast") and t.stable("forget", cur.id, start).random() >= t.profile.p_forget_complete:
            t.add("broadcast", f"Done: {cur.id}")
    directed = [u for u in directions(t) if u != cur and not finished(t, u)]
    if directed:
        _work_on(t, directed[0], announce=False)
        return
    if view.role == "worker" and directions(t):
        return wrapup(t)
    others = claimed_by_others(t)
    heard_hidden = [u for u in t.heard_units() if not u.visible] + revealed(t)
    pool = blamed(t, t.failures()) + sk.visible_units() + heard_hidden
    candidates = [u for u in uniq(sk.order(pool)) if u != cur and (u.visible or u in heard_hidden)
                  and not finished(t, u)]
    free = [u for u in candidates if u.id not in others]
    if free:
        weights = [1.0 / (i + 1) for i in range(len(free))]
        _work_on(t, t.rng.choices(free, weights=weights, k=1)[0], announce=True)
        return
    if candidates and t.rng.random() < 0.5:
        _work_on(t, t.rng.choice(candidates), announce=True)
        return
    return wrapup(t)


def _announce(t: Turn) -> None:
    """Tells the team about work its observations reveal that nobody has mentioned yet."""
    if not t.allows("broadcast"):
        return
    heard = {u.id for u in t.heard_units()}
    for u in revealed(t):
        if u.id not in heard and not any(f"{_FOUND}{u.id}" in h for h in t.history):
            t.add("broadcast", f"{_FOUND}{u.id} ({u.title}) needs work; the description does not mention it.")
            t.note(f"The checks show {u.id} needs work too; telling the team.")


def _work_on(t: Turn, u: WorkUnit, *, announce: bool) -> str:
    """A turn on one unit; "done" when there was nothing left to do on it this turn."""
    t.mark(u.id, u.title)
    if stalled(t, u.id):
        return "stalled"
    if announce and t.allows("broadcast") and not t.history_on(u.id, "I'm taking"):
        t.add("broadcast", f"I'm taking {u.id}")
    status = work(t, [u], u.id)
    if status == FINISHED:
        t.note(f"{u.id} passes now.")
    elif status == BLOCKED:
        t.note(f"{u.id} still fails although my change is in; it may need another piece first.")
    return "working" if status == WORKING else "done"


def wrapup(t: Turn) -> None:
    sk, view = t.skill, t.view
    if not t.tests_known() and t.allows("run_tests"):
        t.add("run_tests")
        t.note("Checking where the tests stand.")
        return
    if view.tests_passed and t.allows("certify_complete"):
        known = sk.visible_units() + [u for u in t.heard_units() if not u.visible]
        if all(finished(t, u) or sk.covered.get(u.id) for u in known):
            t.add("certify_complete")
            t.note("All tests pass and every part is in place; the project is complete.")
            return
    t.note("Nothing left for me right now; waiting for the next test results.")
