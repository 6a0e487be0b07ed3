"""The simulated Lead: a graph Lead that plans, assigns part of the ready queue and keeps the graph
correct; a Lead without a graph that directs workers by broadcast and certifies completion.

A graph Lead sees what its prompt shows: while planning, the project and what it explored; later, the
summary of the graph (active tasks only, with owners and dependencies, the ready queue and the team),
heartbeat alerts, messages and the test results it asked for.
"""

from __future__ import annotations

import re

from latte_lab import prompts
from latte_lab.errors import ModelError
from latte_lab.models.sim.nodes import FIX_SUFFIX, discover, discover_fix, exists, failure_report, node_targets
from latte_lab.models.sim.skill import WorkUnit
from latte_lab.models.sim.turn import Turn
from latte_lab.models.sim.work import blamed, files_of, uniq

EXPLORE = ("run_tests", "read_file", "run_script")
GREEN_NOTE = "Tests are green."  # the flat Lead's note to itself that it has seen a green run
_DONE = re.compile(r"Done: ([\w\-]+)")


# ================================================================================ graph lead ====

def graph_lead(t: Turn) -> None:
    view = t.view
    if view.phase == "planning" or view.round == 0:
        return plan(t)
    shown = {n["id"]: n for n in view.graph}  # active tasks; finished ones are not shown
    workers = dict(view.extra.get("workers") or {w: None for w in view.teammates})
    idle = [w for w, cur in workers.items() if cur is None]
    ready = [nid for nid in view.extra.get("ready", []) if nid in shown]
    fixed_plan = not t.allows("release_task") and not t.allows("discover_task")
    referenced = {d for n in shown.values() for d in n.get("deps") or ()}
    done = referenced - set(shown)  # finished tasks it can name: those others wait on
    taken: set[str] = set()
    _alerts(t, shown, idle, taken)
    if t.allows("assign_task"):
        if fixed_plan:
            pending = [nid for nid, n in shown.items() if n["status"] == "pending" and not n.get("owner")]
            order = sorted(workers, key=lambda w: (sum(1 for n in shown.values() if n.get("owner") == w), w))
            for i, nid in enumerate(pending):
                t.add("assign_task", id=nid, to=order[i % len(order)])
            if pending:
                t.note(f"Assigning all {len(pending)} tasks up front, evenly across the team.")
        else:
            free = [w for w in idle if w not in taken]
            pairs = []
            for nid in ready:
                if not free:
                    break
                if t.rng.random() < t.profile.p_delegate:
                    pairs.append((nid, free.pop(0)))
            for nid, w in pairs:
                t.add("assign_task", id=nid, to=w)
            if pairs:
                t.note("Assigning " + ", ".join(f"{n} to {w}" for n, w in pairs) + "; the rest of the ready "
                       "queue is open for self-claiming.")
    verifying = _verify(t, shown, done)
    _fix_tasks(t, shown, done, verifying)
    if t.allows("run_tests") and not t.last_had("run_tests"):
        upstream_done = t.allows("verify_task") and bool(done)
        stuck = bool(view.alerts) and t.allows("close_task")
        if not shown and view.tests_passed is not True:
            t.add("run_tests")
            t.note("Every task is finished; running the tests.")
        elif upstream_done or stuck:
            t.add("run_tests")
            t.note("Checking the tests before more work builds on what is done.")
    if t.allows("broadcast") and t.rng.random() < t.profile.chattiness and shown:
        t.add("broadcast", f"Status: {view.extra.get('done_count', 0)} tasks done, {len(shown)} open. "
                           "Keep edits to your own functions.")
    if not t.acts:
        t.note("The team is on track; nothing to change this round.")


def _alerts(t: Turn, shown: dict, idle: list[str], taken: set[str]) -> None:
    """Heartbeat alerts: close finished work, release and reassign a stuck task, or nudge its owner."""
    for alert in t.view.alerts:
        nid, who = alert.get("task"), alert.get("agent")
        if nid not in shown:
            continue
        rounds = alert.get("rounds", "?")
        if t.view.tests_passed and t.allows("close_task"):
            t.add("close_task", id=nid)
            t.note(f"{who} has been silent on {nid} for {rounds} rounds and the tests pass; closing it.")
        elif t.allows("release_task"):
            t.add("release_task", id=nid)
            to = next((w for w in idle if w != who and w not in taken), who)
            t.add("broadcast", f"{to}: {nid} was stuck with {who}. Patch the code early, run the checks right "
                               "after, and complete the task when they pass.")
            if t.allows("assign_task"):
                t.add("assign_task", id=nid, to=to)
                taken.add(to)
                if to in idle:
                    idle.remove(to)
            t.note(f"Releasing {nid} from {who} and reassigning it to {to}.")
        elif t.allows("broadcast"):
            t.add("broadcast", f"{who}: how is {nid} going? Write your patch and run the tests.")
            t.note(f"{who} seems stuck on {nid}; checking in.")


def _verify(t: Turn, shown: dict, done: set[str]) -> set[str]:
    """Asks for a review of one finished task that much waiting work builds on, or whose tests fail."""
    if not t.allows("verify_task"):
        return set()
    fails = t.failures() if _fresh(t) else ()
    for nid in sorted(done):
        if nid.endswith("-verify") or f"{nid}-verify" in shown:
            continue
        waiting = sum(1 for n in shown.values() if nid in (n.get("deps") or ()) and n["status"] == "pending"
                      and len(n.get("deps") or ()) <= max(3, len(shown) // 2))
        u = t.skill.unit(nid)
        troubled = bool(fails) and u is not None and waiting > 0 and t.skill.unit_failing(u, fails)
        if waiting >= t.profile.verify_min_successors or troubled:
            t.add("verify_task", id=nid)
            t.note(f"{nid} {'fails its tests' if troubled else 'is upstream of several tasks'} and work builds on "
                   "it; asking for a review pass.")
            return {nid}
    return set()


def _fresh(t: Turn) -> bool:
    """Whether the Lead's test result is current: its own last run, or a fix-task notice just now."""
    return t.tests_known() and (t.last_had("run_tests") or any(prompts.says_tests_still_fail(m.get("text") or "")
                                                               for m in t.view.messages))


def _fix_tasks(t: Turn, shown: dict, done: set[str], verifying: set[str]) -> None:
    """Tasks for what its fresh test run shows failing and nobody is working on."""
    if not (t.allows("discover_task") and _fresh(t) and t.failures()):
        return
    targeted = {x for nid in shown for x in (nid, nid.split(FIX_SUFFIX)[0], nid.removesuffix("-verify"))}
    targeted |= {u.id for n in shown.values() for u in node_targets(t, n)[0]} | verifying
    for u in t.skill.failing_units(t.failures()):
        if u.id in targeted:
            continue
        if not u.visible and not exists(t, u.id):
            # the tests point at work nobody planned; it is real once what it builds on is finished
            if all(d in done or d not in shown for d in u.deps) and discover(t, u):
                t.note(f"The tests show work nobody planned: {u.id}; adding it.")
        elif discover_fix(t, u):
            t.note(f"{u.id} looks finished but its tests fail; adding a fix task.")


def plan(t: Turn) -> None:
    """Planning: explore, then add tasks for the units the description and the exploration reveal. A final plan
    (the prompt asks for the whole plan at once: the static graph) has a task per unit; a first decomposition of a
    graph that workers extend (LATTE) groups them into a few coarse tasks (the profile's ``seed_nodes``), whose
    parts workers split off and discover as they go (paper §3.3: "ℓ ... initializes G_0 by proposing an initial
    decomposition"; A4.3: workers "use <discover_task> whenever you uncover work that isn't already in the task
    list")."""
    sk = t.skill
    existing = {n["id"] for n in t.view.graph}
    explore = any(t.allows(a) for a in EXPLORE)
    whole_plan = t.allows("plan_task")
    if explore and not t.tests_known() and not t.history:
        t.add("run_tests")
        for f in files_of(t, sk.visible_units()):
            if f in sk.start and f not in sk.public_tests:
                t.add("read_file", path=f)
        t.note("Exploring first: running the tests and reading the code.")
        return
    units = [u for u in sk.order(sk.visible_units()) if u.id not in existing]
    tag = "plan_task" if whole_plan else "discover_task"
    if whole_plan:
        groups = [[u] for u in units]
    else:
        groups = _groups(units, _seed_count(t, len(units)))
    ids = [g[0].id if len(g) == 1 else f"task-{i}" for i, g in enumerate(groups, 1)]
    node_of = {u.id: nid for nid, g in zip(ids, groups) for u in g}
    for nid, g in zip(ids, groups):
        deps = list(dict.fromkeys(node_of[d] for u in g for d in u.deps if d in node_of and node_of[d] != nid))
        deps += [d for u in g for d in u.deps if d in existing and d not in deps]
        t.add(tag, _plan_text(t, g), id=nid, title=g[0].title if len(g) == 1 else "; ".join(u.title for u in g)[:120],
              dependencies=",".join(deps))
    t.note(f"Planning {len(groups)} tasks for {len(units)} parts of the work" + (" (the complete plan)." if whole_plan else
                                                                               "; the team will split them further."))


def _seed_count(t: Turn, n_units: int) -> int:
    """How many tasks a first decomposition has: 1 + Poisson(``seed_nodes`` - 1), at most one per unit (the same
    draw on every planning turn of a trial)."""
    import math

    rng = t.stable("seed-nodes")
    mean, k, p = max(t.profile.seed_nodes - 1.0, 0.0), 0, 1.0
    limit = math.exp(-mean)
    while True:  # Knuth's method: the number of uniform draws whose product stays above exp(-mean)
        p *= rng.random()
        if p <= limit:
            break
        k += 1
    return max(1, min(n_units, 1 + k))


def _groups(units: list[WorkUnit], k: int) -> list[list[WorkUnit]]:
    """``units`` (in dependency order) cut into ``k`` groups of near-equal size, taken level by level (a unit's
    level: the longest chain of the units it builds on), so that groups of one level do not wait for each other:
    a wide graph, not a chain (A4.2: "build a wide graph, not a deep one")."""
    ids = {u.id: u for u in units}
    level: dict[str, int] = {}
    for u in units:  # dependency order: what a unit builds on comes first
        level[u.id] = 1 + max((level[d] for d in u.deps if d in ids and d in level), default=-1)
    units = sorted(units, key=lambda u: level[u.id])  # stable: the description's order within a level
    groups, start = [], 0
    for i in range(k):
        size = (len(units) - start) // (k - i)
        groups.append(units[start:start + size])
        start += size
    return [g for g in groups if g]


def _plan_text(t: Turn, group: list[WorkUnit]) -> str:
    """A task's description: the parts it covers (``Parts: a, b``), each with its description, and the failures
    seen that point at them."""
    sk = t.skill
    lines = [f"Parts: {', '.join(u.id for u in group)}"] if len(group) > 1 else []
    for u in group:
        lines.append(f"{u.id}: {u.description}\nFiles: {', '.join(u.files) or 'none (run the checks)'}.")
        lines += [f"FAILED {f}" for f in [f for f in t.failures() if sk.unit_failing(u, [f])][:4]]
    return "\n".join(lines)


# ================================================================================= flat lead ====

def flat_lead(t: Turn) -> None:
    """A Lead without a graph: reads the test status, directs each worker by broadcast, certifies."""
    view, sk = t.view, t.skill
    workers = list(view.teammates)
    if not workers:
        raise ModelError("the Lead has no teammates in its view; the team must list them in AgentView.teammates")
    green = bool(view.tests_passed)
    prev = my_directions(t)
    directed = {uid for units in prev.values() for uid in units}
    reported = {m.group(1) for _, text in t.heard for m in _DONE.finditer(text)}
    known = sk.order(uniq(sk.visible_units() + [u for u in t.heard_units() if not u.visible]))
    failing = blamed(t, t.failures()) if t.tests_known() else []

    def settled(u: WorkUnit) -> bool:  # passing its public tests, or reported done by its worker
        return u.id in reported or bool(sk.covered.get(u.id) and t.tests_known() and not t.failing(u))

    if green:
        t.note(GREEN_NOTE)
        seen_green = any(GREEN_NOTE in h for h in t.history[-1:])
        if (seen_green or all(settled(u) for u in known)) and t.allows("certify_complete"):
            t.add("certify_complete")
            t.note("The suite passes and every part is reported done; certifying completion.")
            return
    remaining = uniq(sk.order(failing + [u for u in known if u.id not in directed and not settled(u)]))
    busy: dict[str, list[str]] = {}
    for w in workers:
        units = [sk.unit(uid) for uid in prev.get(w, []) if sk.unit(uid) is not None]
        still = [u for u in units if not settled(u)]
        if still:
            busy[w] = [u.id for u in still]
    owned = {uid for ids in busy.values() for uid in ids}
    todo = [u for u in remaining if u.id not in owned]
    free = [w for w in workers if w not in busy]
    if not prev:  # first turn: split the work the description shows, in dependency order, round-robin
        share: dict[str, list[str]] = {w: [] for w in workers}
        for i, u in enumerate(todo):
            share[workers[i % len(workers)]].append(u.id)
        lines = [f"{w}: work on {', '.join(ids)}" for w, ids in share.items() if ids]
    else:
        lines = [f"{w}: work on {u.id}" for w, u in zip(free, todo)]
    if lines and t.allows("broadcast"):
        t.add("broadcast", "\n".join(lines))
        t.note("Directing the team so nobody edits the same function.")
    elif not t.tests_known() and t.allows("run_tests"):
        t.add("run_tests")
        t.note("Checking the test status.")
    else:
        t.note("Everyone has work; waiting for the next test status.")


def my_directions(t: Turn) -> dict[str, list[str]]:
    """The latest unit ids this Lead gave each worker, from its own earlier broadcasts in the window."""
    names = list(t.view.teammates)
    out: dict[str, list[str]] = {}
    if not names:
        return out
    pat = re.compile(r"^(" + "|".join(re.escape(n) for n in names) + r"): work on (.+)$", re.MULTILINE)
    for text in t.history:
        for m in pat.finditer(text):
            out[m.group(1)] = [x.strip() for x in m.group(2).split(",") if x.strip()]
    return out


__all__ = ["failure_report", "flat_lead", "graph_lead", "my_directions", "plan"]
