"""Roles of a team with a coordination graph: the worker (claim, work, complete, follow up) and the Lead
(plan, assign, release on heartbeat alerts, request reviews, add fix tasks while the tests stay red)."""

from __future__ import annotations

import re

from latte_lab.models.sim.skill import failures_in_text
from latte_lab.models.sim.text import WORK_MARKER
from latte_lab.models.sim.turn import BLOCKED, FINISHED, WORKING, Turn, duration, unit_files, work
from latte_lab.tasks.base import WorkUnit

VERIFY_MIN_SUCCESSORS = 3  # a done node with this many dependants is worth a review pass
FIX_SUFFIX = "-fix"  # id of a follow-up task for a unit whose tests fail again: "<unit id>-fix"
FORGET_RECALL_ROUNDS = 6  # rounds after which a worker who forgot complete_task notices its open task
_EXPLORE = ("run_tests", "read_file", "run_script")
_LOST_CLAIM = re.compile(r"Claim of '([^']+)' rejected")


def _node_targets(t: Turn, node: dict) -> tuple[list[WorkUnit], bool]:
    """The units a graph node stands for, and whether it is a review (verify) node."""
    sk = t.skill
    nid = node.get("id", "")
    u = sk.unit(nid)
    if u is not None:
        return [u], False
    if nid.endswith("-verify") and sk.unit(nid[: -len("-verify")]) is not None:
        return [sk.unit(nid[: -len("-verify")])], True
    base = nid.removesuffix(FIX_SUFFIX)
    if base != nid and sk.unit(base) is not None:
        return [sk.unit(base)], False
    text = f"{node.get('title', '')}\n{node.get('description', '')}"
    found = sk.failing_units(failures_in_text(node.get("description")))
    for m in sk.units_in_text(node.get("title", "")):
        if m not in found:
            found.append(m)
    if not found:
        found = sk.failing_units(t.failures()) if t.tests_known() else []
    if not found:
        found = [m for m in sk.units_in_text(text) if m not in found]
    return sk.order(found), False


def graph_worker(t: Turn) -> None:
    view = t.view
    node = view.current_task
    if node is None:
        return _idle_graph_worker(t)
    nid = node["id"]
    t.note(f"{WORK_MARKER} {nid}: {node.get('title', '')}.")
    targets, review = _node_targets(t, node)
    if node.get("status") == "assigned" and t.allows("claim_task") and not t.last_had("claim_task", id=nid):
        t.add("claim_task", id=nid)
        reads = [f for f in unit_files(t, targets) if not t.seen_on(nid, f)]
        for f in reads:
            t.add("read_file", path=f)
        t.note("Claiming it to start" + (f" and reading {', '.join(reads)}." if reads else "."))
        return
    if len(targets) > 1 and not review and t.skill.unit(nid) is None and t.allows("discover_task") \
            and not t.history_on(nid, "<discover_task"):
        # a broad fix task: keep the first failure, split the rest into tasks others can take in parallel
        for u in targets[1:]:
            _discover_fix(t, u)
        t.note(f"This covers {len(targets)} failures; splitting off {', '.join(u.id for u in targets[1:])} "
               "as separate tasks and fixing the first myself.")
    if t.skill.unit(nid) is None and not review and t.history_on(nid, "<discover_task"):
        targets = targets[:1]
    since = node.get("since_round")
    elapsed = view.round - since if since is not None else t.turns_on(nid)
    skey = (nid, since)
    if not targets:
        if not t.last_had("run_tests") and t.allows("run_tests"):
            t.add("run_tests")
            t.note("Running the tests to see what this task needs.")
            return
        status = FINISHED if not t.failures() else BLOCKED
    else:
        status = work(t, targets, nid, elapsed, skey, review=review)
    if status == WORKING:
        return
    if status == BLOCKED:
        failing = [u for u in t.skill.failing_units(t.failures())]
        t.note(f"My part of {nid} is in place but tests still fail ({', '.join(u.id for u in failing) or 'unclear'}).")
        if t.allows("discover_task") and failing:
            _discover_fix(t, failing[0])
        elif t.allows("broadcast"):
            t.add("broadcast", f"{nid}: done on my side, but tests still fail for "
                               f"{', '.join(u.id for u in failing) or 'other parts'}.")
    _reveal(t, targets)
    forget_rng = t.stable("forget", *skey)
    forgets = forget_rng.random() < t.profile.p_forget_complete
    if forgets and elapsed < duration(t, skey, targets) + FORGET_RECALL_ROUNDS:
        t.note("This looks finished to me.")
        return
    t.add("complete_task", id=nid)
    t.note(f"{nid} is done; marking it complete.")
    if t.allows("broadcast") and t.rng.random() < t.profile.chattiness:
        t.add("broadcast", f"Finished {nid}.")


def _discover_fix(t: Turn, u: WorkUnit) -> None:
    t.add("discover_task", _failure_report(t, [u]), id=f"{u.id}{FIX_SUFFIX}",
          title=f"{u.title} (tests failing again)", dependencies="")


def _reveal(t: Turn, targets: list[WorkUnit]) -> None:
    """Adds units the test output reveals (not visible from the description) as follow-up tasks."""
    if not t.allows("discover_task"):
        return
    for u in t.skill.failing_units(t.failures()):
        if u.visible or u in targets:
            continue
        t.add("discover_task", _failure_report(t, [u]), id=u.id, title=u.title,
              dependencies=",".join(d for d in u.deps if d in {x.id for x in targets}))
        t.note(f"The test output shows {u.id} also needs work; adding it as a task.")


def _failure_report(t: Turn, units: list[WorkUnit]) -> str:
    fails = [f for f in t.failures() if any(t.skill.unit_failing(u, [f]) for u in units)][:6]
    lines = [f"{u.title}: {u.description}" for u in units]
    if fails:
        lines.append("Failing tests: " + ", ".join(fails))
    lines.append("Run the tests, fix the code and re-run the tests.")
    return "\n".join(lines)


def _idle_graph_worker(t: Turn) -> None:
    view = t.view
    lost = {m.group(1) for _, text in t.heard for m in _LOST_CLAIM.finditer(text)}
    options = [n for n in view.frontier if n.get("id") not in lost]
    if options and t.allows("claim_task") and t.allows("complete_task") and _can_self_claim(t):
        weights = [1.0 / (i + 1) for i in range(len(options))]
        pick = t.rng.choices(options, weights=weights, k=1)[0]
        targets, _ = _node_targets(t, pick)
        t.add("claim_task", id=pick["id"])
        reads = unit_files(t, targets)
        for f in reads:
            t.add("read_file", path=f)
        t.note(f"{WORK_MARKER} {pick['id']}: {pick.get('title', '')}.")
        t.note(f"{pick['id']} is ready and nobody has it; claiming it." +
               (" My earlier claim was taken, so I picked another." if lost else ""))
        return
    t.note("Nothing is assigned to me yet; waiting for a task.")


def _can_self_claim(t: Turn) -> bool:
    """False once the team has told this agent that self-assignment is not available."""
    return not any("Self-assignment is not available" in text for _, text in t.heard)


# ================================================================================ graph lead ====

def graph_lead(t: Turn) -> None:
    view = t.view
    if view.phase == "planning" or view.round == 0:
        return _plan(t)
    nodes = {n["id"]: n for n in view.graph}
    status = {nid: n.get("status") for nid, n in nodes.items()}
    workers = dict(view.extra.get("workers") or {w: None for w in view.teammates})
    idle = [w for w, cur in workers.items() if cur is None]
    fixed_plan = not t.allows("release_task") and not t.allows("discover_task")
    done_like = {"done", "verified"}
    taken: set[str] = set()
    # 1. heartbeat alerts: close finished work, or release and reassign a stuck task
    for alert in view.alerts:
        nid, who = alert.get("task"), alert.get("agent")
        if nid not in nodes or status.get(nid) in done_like:
            continue
        rounds = alert.get("rounds_active", alert.get("rounds", "?"))
        if view.tests_passed and t.allows("close_task"):
            t.add("close_task", id=nid)
            t.note(f"{who} has held {nid} for {rounds} rounds and the tests pass; closing it.")
            continue
        if t.allows("release_task"):
            t.add("release_task", id=nid)
            to = next((w for w in idle if w != who and w not in taken), who)
            t.add("broadcast", f"{to}: {nid} was stuck with {who} for {rounds} rounds. Patch the code early, "
                               "run the tests right after, and complete the task when they pass.")
            if t.allows("assign_task"):
                t.add("assign_task", id=nid, to=to)
                taken.add(to)
                if to in idle:
                    idle.remove(to)
            t.note(f"Releasing {nid} from {who} and reassigning it to {to}.")
        elif t.allows("broadcast"):
            t.add("broadcast", f"{who}: how is {nid} going? Write your patch and run the tests.")
    # 2. assignments
    if t.allows("assign_task"):
        if fixed_plan:
            pending = [nid for nid in nodes if status[nid] == "pending" and not nodes[nid].get("owner")]
            order = sorted(workers, key=lambda w: (sum(1 for n in nodes.values() if n.get("owner") == w), w))
            for i, nid in enumerate(pending):
                t.add("assign_task", id=nid, to=order[i % len(order)])
            if pending:
                t.note(f"Assigning all {len(pending)} tasks up front, evenly across the team.")
        else:
            ready = [f["id"] for f in view.frontier if f["id"] not in taken]
            free = [w for w in idle if w not in taken]
            pairs = list(zip(ready, free))
            for nid, w in pairs:
                t.add("assign_task", id=nid, to=w)
            if pairs:
                t.note("Assigning ready tasks: " + ", ".join(f"{n} to {w}" for n, w in pairs) + ".")
    # 3. review high-stakes work: many tasks build on it, or its tests failed while dependants wait
    verifying: set[str] = set()
    if t.allows("verify_task"):
        verified_of = {n.get("verify_of") for n in nodes.values() if n.get("is_verify")}
        fails = t.failures() if _lead_fresh(t) else ()
        for nid, n in nodes.items():
            if n.get("is_verify") or status[nid] != "done" or nid in verified_of:
                continue
            u = t.skill.unit(nid)
            waiting = _real_successors(nid, nodes)
            troubled = bool(fails) and u is not None and waiting > 0 and t.skill.unit_failing(u, fails)
            if waiting >= VERIFY_MIN_SUCCESSORS or troubled:
                t.add("verify_task", id=nid)
                verifying.add(nid)
                t.note(f"{nid} {'fails its tests' if troubled else 'is upstream of several tasks'} and work "
                       "builds on it; asking for a review pass.")
                break
    # 4. fix tasks when the tests stay red
    active = [nid for nid in nodes if status[nid] not in done_like]
    if t.allows("discover_task") and _lead_fresh(t) and t.failures():
        targeted = {x for nid in active for x in (nid, nid.removesuffix(FIX_SUFFIX), nid.removesuffix("-verify"))}
        targeted |= verifying
        for u in t.skill.failing_units(t.failures()):
            if u.id not in nodes:
                t.add("discover_task", _failure_report(t, [u]), id=u.id, title=u.title, dependencies="")
                t.note(f"The tests reveal {u.id}; adding it.")
            elif u.id not in targeted and f"{u.id}{FIX_SUFFIX}" not in nodes:
                _discover_fix(t, u)
                t.note(f"{u.id} is done but its tests fail; adding a fix task.")
    # 5. tests when everything looks done, or as a checkpoint: before work builds on finished upstream
    #    tasks (so a broken one can be reviewed) and when teammates seem stuck (so their work can be closed)
    if t.allows("run_tests") and not t.last_had("run_tests"):
        upstream_done = t.allows("verify_task") and any(
            status[nid] in done_like and not nodes[nid].get("is_verify") and _real_successors(nid, nodes) > 0
            for nid in nodes)
        stuck = bool(view.alerts) and t.allows("close_task")
        if not active and view.tests_passed is not True:
            t.add("run_tests")
            t.note("Everything is marked done; running the tests.")
        elif upstream_done or stuck:
            t.add("run_tests")
            t.note("Checking the tests before more work builds on what is done.")
    if t.allows("broadcast") and t.rng.random() < t.profile.chattiness and nodes:
        n_done = sum(1 for s in status.values() if s in done_like)
        t.add("broadcast", f"Status: {n_done}/{len(nodes)} tasks done. Keep edits to your own functions.")
    if not t.acts:
        t.note("The team is on track; nothing to change this round.")


def _real_successors(nid: str, nodes: dict[str, dict]) -> int:
    """Pending tasks that build on ``nid``, not counting catch-all tasks that depend on most of the graph
    (a fix-everything task makes every node look high-stakes)."""
    broad = max(3, len(nodes) // 2)
    return sum(1 for n in nodes.values()
               if nid in (n.get("deps") or ()) and n.get("status") == "pending" and len(n.get("deps") or ()) <= broad)


def _lead_fresh(t: Turn) -> bool:
    """Whether the Lead's test result is current: its own last run, or a fix-task notice just now."""
    if not t.tests_known():
        return False
    return t.last_had("run_tests") or any("tests still fail" in (m.get("text") or "") for m in t.view.messages)


def _plan(t: Turn) -> None:
    """Planning: explore then seed the graph (discovery later), or emit the whole plan at once."""
    view, sk = t.view, t.skill
    existing = {n["id"] for n in view.graph}
    explore = any(t.allows(a) for a in _EXPLORE)
    whole_plan = t.allows("plan_task") or not explore
    if not whole_plan and not t.tests_known() and not t.history:
        t.add("run_tests")
        for f in unit_files(t, sk.visible_units()):
            if f in sk.start and f not in sk.public_tests:
                t.add("read_file", path=f)
        t.note("Exploring first: running the tests and reading the code.")
        return
    units = sk.visible_units()
    if not whole_plan:
        units = units + [u for u in sk.failing_units(t.failures()) if u not in units]
    units = [u for u in sk.order(units) if u.id not in existing]
    ids = {u.id for u in units} | existing
    tag = "plan_task" if whole_plan else "discover_task"
    for u in units:
        deps = ",".join(d for d in u.deps if d in ids)
        t.add(tag, f"{u.description}\nFiles: {', '.join(u.files)}.", id=u.id, title=u.title, dependencies=deps)
    t.note(f"Planning {len(units)} tasks" + (" (the complete plan)." if whole_plan else
                                              "; only real ordering becomes a dependency."))
