"""How a simulated agent works on units: read, observe, patch, check, and notice what it did not plan.

One call is one turn. An agent reads the files it is about to change and the files of the units its
work builds on; it observes (runs the tests, or writes and runs the unit's check script) before its
first patch now and then and always after one; it patches whole files with its units spliced in; it is
finished when its observations show its units passing.

Whether a patch is right depends on what the prompt has shown (:func:`p_correct`): the current file,
an observation pointing at the unit, the upstream units correct in the files it has seen and, in a project
with a data file, the data (its profile's output). A patch that is not right is the correct one with a
generic slip in it; constants hold only the data values the prompt has shown
(``latte_lab.models.sim.evidence``), and a unit written before they were shown is written again.

Work the plan did not contain shows up here too (:func:`revealed`): a unit the description does not
reveal whose check fails while everything it builds on is in place.
"""

from __future__ import annotations

from latte_lab.models.sim.skill import CHECK_HELPERS, CHECK_HELPERS_TEXT, CHECK_PREFIX, WorkUnit
from latte_lab.models.sim.text import marked_task
from latte_lab.models.sim.turn import OBSERVE_TAGS, Turn

WORKING, FINISHED, BLOCKED = "working", "finished", "blocked"


def uniq(units: list[WorkUnit]) -> list[WorkUnit]:
    """Units without repeats (by id), order kept. WorkUnit holds a tuple of files; ids are the identity."""
    seen: set[str] = set()
    out = []
    for u in units:
        if u.id not in seen:
            seen.add(u.id)
            out.append(u)
    return out


def files_of(t: Turn, units: list[WorkUnit]) -> list[str]:
    out: list[str] = []
    for u in units:
        for f in t.skill.unit_files(u):
            if f not in out:
                out.append(f)
    return out


def upstream(t: Turn, units: list[WorkUnit]) -> list[WorkUnit]:
    """The units the given ones build on (their dependencies, not themselves)."""
    ids = {u.id for u in units}
    return uniq([d for u in units for d in (t.skill.unit(x) for x in u.deps) if d is not None and d.id not in ids])


# ============================================================================== evidence ====

def upstream_ok(t: Turn, unit: WorkUnit) -> bool:
    """Whether every unit this one builds on looks in place to the agent: written in the files its prompt
    shows and not failing in its observations. Work the description does not reveal counts once the agent
    has seen what it is about (knowing the problem is what the dependency carries); a check-only unit has
    nothing to be wrong."""
    for dep in upstream(t, [unit]):
        if not t.skill.patchable(dep):
            continue
        if not dep.visible and t.points_at(dep):
            continue
        if t.written(dep) and not t.failing(dep):
            continue
        return False
    return True


def file_ok(t: Turn, unit: WorkUnit) -> bool:
    """Whether the prompt shows the current version of every existing file the unit edits."""
    return all(t.seen(f) is not None for f in t.skill.unit_files(unit) if f in t.skill.start)


def p_correct(t: Turn, unit: WorkUnit) -> float:
    """The chance that this agent's patch of the unit is right, from what its prompt shows."""
    p = t.profile
    chance = p.p_correct_patch
    if not file_ok(t, unit):
        chance *= p.blind_factor
    if t.skill.observable(unit) and not t.points_at(unit) and not t.skill.about_data(unit):
        chance *= p.unguided_factor  # (a report about the data is guided by the analysis it is computed from)
    if not upstream_ok(t, unit):
        chance *= p.upstream_factor
    if t.skill.data_files and not t.data_shown():
        chance *= p.blind_factor  # a deliverable about data the prompt has not shown: written blind
    return chance


def in_place(t: Turn, unit: WorkUnit) -> bool:
    """Whether the agent can tell the unit is done: written, and passing the tests or checks it has seen run
    (its own runs, or a report of someone else's). Nothing but an observation says so: a unit whose code is
    right but that nobody has checked is not known to be in place."""
    informed = t.tests_known() or bool(t.reported)
    return (t.written(unit) and t.skill.observable(unit) and informed
            and not t.skill.unit_failing(unit, t.failures() + t.reported))


def revealed(t: Turn) -> list[WorkUnit]:
    """Units the description does not reveal that the agent's observations now point at: a check of theirs
    fails while every unit they build on is in place as far as its observations tell. The diagnosis is the
    agent's own: a failure that comes from elsewhere can be pinned on the wrong unit."""
    out = []
    fails = t.failures() + t.reported
    for u in t.skill.units:
        if u.visible or not t.skill.unit_failing(u, fails):
            continue
        if all(in_place(t, d) for d in upstream(t, [u]) if t.skill.patchable(d)):
            out.append(u)
    return out


def blamed(t: Turn, failures) -> list[WorkUnit]:
    """The units an agent takes the failures to be about: the ones the description shows, and work it
    did not show only once this agent's observations revealed it or someone told it."""
    known = {u.id for u in revealed(t)} | {u.id for u in t.heard_units()}
    return [u for u in t.skill.failing_units(failures) if u.visible or u.id in known]


# ============================================================================= observing ====

def _scripted(t: Turn, units: list[WorkUnit]) -> bool:
    return t.allows("run_script") and t.allows("edit_file") and any(t.skill.probe(u) for u in units)


def can_observe(t: Turn, units: list[WorkUnit]) -> bool:
    return bool(units) and (t.allows("run_tests") or _scripted(t, units))


def observe(t: Turn, units: list[WorkUnit]) -> bool:
    """Adds the actions that observe the units: the tests when they cover one, or when the agent has no check of
    its own for them (it cannot know what the tests cover before it has seen them run), and each unit's check
    script (written first when its prompt does not show it). Returns whether anything was added."""
    added = False
    if t.allows("run_tests") and units and (any(t.skill.covered.get(u.id) for u in units) or not _scripted(t, units)):
        added = t.add("run_tests") or added
    if t.allows("run_script") and t.allows("edit_file"):
        scripts = dict(p for p in (t.skill.probe(u) for u in units) if p)
        if any(path.startswith(CHECK_PREFIX) for path in scripts) and t.seen(CHECK_HELPERS) is None \
                and not any(a.attr("path") == CHECK_HELPERS for a in t.acts):
            t.add("edit_file", CHECK_HELPERS_TEXT, path=CHECK_HELPERS)
        for path, text in scripts.items():
            if t.seen(path) != text:
                t.add("edit_file", text, path=path)
            added = t.add("run_script", path=path) or added
    return added


# ============================================================================== the work ====

def work(t: Turn, targets: list[WorkUnit], key: str) -> str:
    """One turn of work on a set of units; returns WORKING, FINISHED or BLOCKED."""
    sk, p = t.skill, t.profile
    units = [u for u in targets if sk.patchable(u)]
    fresh = t.observed_last()
    want_observe = (not fresh and can_observe(t, targets) and not t.history_on(key, "<edit_file")
                    and not any(t.points_at(u) for u in targets)
                    and (t.stable("observe", key).random() < p.p_observe_first or not units))
    # 1. read what the change needs: its files and the files of what it builds on
    wanted = files_of(t, units) + files_of(t, upstream(t, targets))
    unread = [f for f in dict.fromkeys(wanted) if t.seen(f) is None and not t.tried_read(key, f) and f in sk.start]
    if unread and t.allows("read_file"):
        for f in unread:
            t.add("read_file", path=f)
        if want_observe:
            observe(t, targets)
        t.note(f"Reading {', '.join(unread)} first.")
        return WORKING
    # 2. observe before the first patch, now and then
    if want_observe:
        observe(t, targets)
        t.note("Running the checks first to see what fails.")
        return WORKING
    # 3. patch what is unwritten, or failing in a fresh observation (unless what it builds on fails)
    todo, blocked = [], []
    patches = sum(1 for h in t.history if marked_task(h) == key and "<edit_file" in h)
    for u in units:
        # unwritten, or written before the data showed what it lacks
        if not t.written(u) or (t.stale(u) and patches < p.max_patches):
            todo.append(u)
        elif fresh and t.failing(u):
            ups = [d for d in upstream(t, [u]) if t.failing(d) and d not in targets]
            (blocked if ups or patches >= p.max_patches else todo).append(u)
    waiting = [u for u in todo if sk.needs_report(u)]
    if waiting and can_observe(t, waiting) and not fresh:
        # a report about the data is written from an analysis the agent ran: run it first
        observe(t, waiting)
        t.note(f"Analysing the data before writing {', '.join(files_of(t, waiting))}.")
        return WORKING
    # a report about the data waits for what its analysis builds on when that is being written in this reply
    # (the analysis then runs after the edit, and the next turn writes the report from it)
    ids = {u.id for u in todo}
    todo = [u for u in todo if not sk.needs_report(u) and not (sk.about_data(u) and ids & set(u.deps))]
    if todo:
        # a copy older than its last reply may have been changed by a teammate since: re-read it first, now and
        # then (else the patch is spliced into the old copy, and a teammate's change to another function is lost)
        old = [f for f in files_of(t, todo) if t.seen(f) is not None and f in sk.start
               and not t.last_had("read_file", path=f) and not t.last_had("edit_file", path=f)]
        if old and t.allows("read_file") and t.rng.random() < p.p_reread:
            for f in old:
                t.add("read_file", path=f)
            t.note(f"Re-reading {', '.join(old)} before patching {', '.join(u.id for u in todo)}.")
            return WORKING
        write(t, todo)
        if observe(t, targets):
            if t.stable("complete-with-patch", key, patches).random() < p.p_complete_with_patch:
                return FINISHED  # it reports the task done in the reply that makes the change
            return WORKING
        # nothing it can run says anything about these units: it trusts the patch and, in the same reply
        # (A4.3: a reply carries several actions), reports the work done; a reply with edits alone would leave
        # it waiting for context that never comes (a busy worker is re-engaged only on new context)
        return FINISHED
    # 4. check what is written
    if not fresh and can_observe(t, targets):
        observe(t, targets)
        t.note("Checking my change.")
        return WORKING
    if not fresh and not can_observe(t, targets):
        return FINISHED  # nothing it can run says anything about these units: it trusts its work
    failing = [u for u in targets if t.failing(u)]
    return BLOCKED if failing or blocked else FINISHED


def write(t: Turn, todo: list[WorkUnit]) -> None:
    """Patches every file of the units: the file as the prompt shows it, with each unit's output spliced
    in (right or with a slip, by :func:`p_correct`); an unseen file is written from scratch."""
    sk = t.skill
    draws = {u.id: t.rng.random() < p_correct(t, u) for u in todo}
    for f in files_of(t, todo):
        base = t.seen(f)
        merged: dict[str, str] = {}
        whole: str | None = None
        for u in todo:
            if f not in sk.unit_files(u):
                continue
            v = sk.version(u, f, draws[u.id], t.rng)
            if v is None:
                continue
            if isinstance(v, str):
                whole = v
            else:
                merged.update(v)
        if whole is not None:
            content = sk.patch(whole, f, merged) if merged else whole
        elif not merged and f not in sk.start:
            continue  # nothing to write it from yet
        else:
            content = sk.patch(base if base is not None else ("" if f in sk.start else None), f, merged)
        t.add("edit_file", content, path=f)
    t.note(f"Patching {', '.join(u.id for u in todo)} in {', '.join(files_of(t, todo))}.")


def stalled(t: Turn, key: str) -> bool:
    """Whether the agent is stuck on this subtask now (a straggler: silent for a few of its turns)."""
    p = t.profile
    done = t.turns_on(key)
    start = t.request.scope.call_index - done  # the call on which it took the subtask
    rng = t.stable("stall", key, start)
    if rng.random() >= p.p_straggler:
        return False
    a, b = p.straggler_turns
    if done < rng.randint(a, b):
        t.note("Still thinking about how to approach this.")
        return True
    return False


def observing(acts) -> bool:
    return any(a.tag in OBSERVE_TAGS for a in acts)
