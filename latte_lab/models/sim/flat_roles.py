"""Roles of a team without a graph: peers who announce what they take, and a Lead who directs workers by
broadcast ("Dev2: work on X") and certifies the result once the tests are green."""

from __future__ import annotations

import re

from latte_lab.errors import ModelError
from latte_lab.models.sim.text import WORK_MARKER, marked_task
from latte_lab.models.sim.turn import BLOCKED, FINISHED, Turn, unit_files, unit_state, work
from latte_lab.tasks.base import WorkUnit

_TAKING = re.compile(r"I'm taking ([\w\-]+(?:, [\w\-]+)*)")
_DONE = re.compile(r"Done: ([\w\-]+)")
GREEN_NOTE = "Tests are green."  # the flat Lead's note to itself that it has seen a green run


def _uniq(units: list[WorkUnit]) -> list[WorkUnit]:
    """Units without repeats (by id), order kept. WorkUnit holds a dict, so it is not hashable."""
    seen: set[str] = set()
    out = []
    for u in units:
        if u.id not in seen:
            seen.add(u.id)
            out.append(u)
    return out


def _directions(t: Turn) -> list[WorkUnit]:
    """The latest units another agent told this agent to work on (lines ``DevN: ...``)."""
    names = [t.view.agent, *t.view.teammates]
    split = re.compile(r"(?<![\w])(" + "|".join(re.escape(n) for n in names) + r"):")
    latest: list[WorkUnit] = []
    for sender, text in t.heard:
        if sender == t.view.agent:
            continue
        parts = split.split(text)
        for i in range(1, len(parts) - 1, 2):
            if parts[i] == t.view.agent:
                units = t.skill.units_in_text(parts[i + 1])
                if units:
                    latest = units
    return latest


def _finished_flat(t: Turn, u: WorkUnit) -> bool:
    """Whether a unit looks finished from this agent's seat (tests for covered units, code otherwise)."""
    if t.skill.covered.get(u.id):
        return t.tests_known() and not t.failing(u)
    if not t.skill.patchable(u):
        return True
    return unit_state(t, u) != "start"


def _claimed_by_others(t: Turn) -> set[str]:
    out: set[str] = set()
    for sender, text in t.heard:
        if sender == t.view.agent:
            continue
        for m in _TAKING.finditer(text):
            out.update(x.strip() for x in m.group(1).split(","))
    return out


def flat_member(t: Turn) -> None:
    """A worker or peer without a task graph: directions or failing tests decide what to work on."""
    view, sk = t.view, t.skill
    current = marked_task(t.history[-1]) if t.history else None
    cur_unit = sk.unit(current) if current else None
    if cur_unit is not None and not _finished_flat(t, cur_unit):
        return _flat_work(t, cur_unit, announce=False)
    if cur_unit is not None and t.allows("broadcast"):
        if t.stable("forget", current, len(t.history)).random() >= t.profile.p_forget_complete:
            t.add("broadcast", f"Done: {cur_unit.id}")
    directed = [u for u in _directions(t) if u != cur_unit and not _finished_flat(t, u)]
    if directed:
        return _flat_work(t, directed[0], announce=False)
    if view.role == "worker" and _directions(t):
        return _flat_wrapup(t)
    others = _claimed_by_others(t)
    candidates = [u for u in sk.order(sk.failing_units(t.failures()) + sk.visible_units())
                  if u != cur_unit and not _finished_flat(t, u)]
    candidates = _uniq(candidates)
    free = [u for u in candidates if u.id not in others]
    unread = [f for f in unit_files(t, sk.visible_units()) if f in sk.start and f not in view.files_read]
    if not candidates and unread and t.allows("read_file"):
        for f in unread:
            t.add("read_file", path=f)
        t.note("Reading the code to see what is left.")
        return
    if free:
        weights = [1.0 / (i + 1) for i in range(len(free))]
        return _flat_work(t, t.rng.choices(free, weights=weights, k=1)[0], announce=True)
    if candidates and t.rng.random() < 0.5:
        return _flat_work(t, t.rng.choice(candidates), announce=True)
    return _flat_wrapup(t)


def _flat_work(t: Turn, u: WorkUnit, *, announce: bool) -> None:
    t.note(f"{WORK_MARKER} {u.id}: {u.title}.")
    if announce and t.allows("broadcast"):
        t.add("broadcast", f"I'm taking {u.id}")
    elapsed = t.turns_on(u.id)
    status = work(t, [u], u.id, elapsed, (u.id, t.view.round - elapsed))  # keyed by its start round
    if status == FINISHED:
        t.note(f"{u.id} passes now.")
    elif status == BLOCKED:
        t.note(f"{u.id} still fails although my change is in; it may need another piece first.")
        if t.allows("run_tests") and not any(a.tag == "run_tests" for a in t.acts):
            t.add("run_tests")


def _flat_wrapup(t: Turn) -> None:
    sk, view = t.skill, t.view
    if not t.tests_known() and t.allows("run_tests"):
        t.add("run_tests")
        t.note("Checking where the tests stand.")
        return
    if view.tests_passed and t.allows("certify_complete"):
        if all(_finished_flat(t, u) for u in sk.visible_units()):
            t.add("certify_complete")
            t.note("All tests pass and every part is in place; the project is complete.")
            return
    t.note("Nothing left for me right now; waiting for the next test results.")


def flat_lead(t: Turn) -> None:
    """Leader-Worker Lead: reads the test status, directs each worker by broadcast, certifies."""
    view, sk = t.view, t.skill
    workers = list(view.teammates)
    if not workers:
        raise ModelError("the Lead has no teammates in its view; the team must list them in AgentView.teammates")
    green = bool(view.tests_passed)
    prev = _my_directions(t)
    directed = {uid for units in prev.values() for uid in units}
    reported = {m.group(1) for _, text in t.heard for m in _DONE.finditer(text)}
    visible = sk.order(sk.visible_units())
    failing = sk.failing_units(t.failures()) if t.tests_known() else []

    def settled(u: WorkUnit) -> bool:  # passing its public tests, or reported done by its worker
        return u.id in reported or bool(sk.covered.get(u.id) and t.tests_known() and not t.failing(u))

    if green:
        t.note(GREEN_NOTE)
        seen_green = any(GREEN_NOTE in h for h in t.history[-1:])
        if (seen_green or all(settled(u) for u in visible)) and t.allows("certify_complete"):
            t.add("certify_complete")
            t.note("The suite passes and every part is reported done; certifying completion.")
            return
    remaining = sk.order(failing + [u for u in visible if u.id not in directed and not settled(u)])
    remaining = _uniq(remaining)
    lines = []
    busy: dict[str, list[str]] = {}
    for w in workers:
        units = [sk.unit(uid) for uid in prev.get(w, []) if sk.unit(uid) is not None]
        still = [u for u in units if u.id not in reported and not (sk.covered.get(u.id) and t.tests_known()
                                                                     and not t.failing(u))]
        if still:
            busy[w] = [u.id for u in still]
    owned = {uid for ids in busy.values() for uid in ids}
    todo = [u for u in remaining if u.id not in owned]
    free = [w for w in workers if w not in busy]
    if not prev:  # first turn: split all visible work, in dependency order, round-robin
        share: dict[str, list[str]] = {w: [] for w in workers}
        for i, u in enumerate(todo):
            share[workers[i % len(workers)]].append(u.id)
        lines = [f"{w}: work on {', '.join(ids)}" for w, ids in share.items() if ids]
    else:
        for w, u in zip(free, todo):
            lines.append(f"{w}: work on {u.id}")
    if lines and t.allows("broadcast"):
        t.add("broadcast", "\n".join(lines))
        t.note("Directing the team so nobody edits the same function.")
    elif not t.tests_known() and t.allows("run_tests"):
        t.add("run_tests")
        t.note("Checking the test status.")
    else:
        t.note("Everyone has work; waiting for the next test status.")


def _my_directions(t: Turn) -> dict[str, list[str]]:
    """The latest unit ids this Lead gave each worker, from its own earlier broadcasts."""
    names = list(t.view.teammates)
    out: dict[str, list[str]] = {}
    if not names:
        return out
    pat = re.compile(r"^(" + "|".join(re.escape(n) for n in names) + r"): work on (.+)$", re.MULTILINE)
    for text in t.history:
        for m in pat.finditer(text):
            out[m.group(1)] = [x.strip() for x in m.group(2).split(",") if x.strip()]
    return out
