"""The simulated agent's policy: what an agent in a given role does with what its prompt shows.

Every decision is made from the agent's own prompt (``turn.Turn``: the view read back from the prompt
text, and its own earlier replies) and the units it builds from that prompt (``skill.Skill``). Behaviour is chosen from the
role, the phase and the actions the prompt offers, never from the name of a team structure or a task,
which the prompt does not carry.

Roles: a graph worker (this module), a graph or flat Lead (``lead``), a flat worker or peer (``flat``)
and the roles that talk through published documents (``documents``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from latte_lab import prompts
from latte_lab.errors import ModelError
from latte_lab.models.sim import documents, flat, lead
from latte_lab.models.sim.nodes import FIX_SUFFIX, discover, discover_fix, node_targets
from latte_lab.models.sim.skill import WorkUnit
from latte_lab.models.sim.turn import Turn, stable_seed
from latte_lab.models.sim.work import (
    BLOCKED,
    FINISHED,
    WORKING,
    blamed,
    can_observe,
    files_of,
    observe,
    revealed,
    stalled,
    upstream,
    work,
)

__all__ = ["Turn", "decide", "stable_seed"]

FORGET_RECALL_TURNS = 6  # turns after which a worker who forgot complete_task notices its open task


# ============================================================================== graph worker ====

def graph_worker(t: Turn) -> None:
    view = t.view
    node = view.current_task or _remembered_task(t)
    if node is None:
        return idle_graph_worker(t)
    nid = node["id"]
    t.mark(nid, node.get("title", ""))
    targets, review = node_targets(t, node)
    claimed = _claimed(t, nid)
    refused_now = any(prompts.claim_refused(m.get("text", ""), nid) for m in t.view.messages)
    if node.get("status") == "assigned" and refused_now:
        t.note(f"{nid} cannot start yet; waiting for what it depends on.")
        return
    if node.get("status") == "assigned" and t.allows("claim_task") and not claimed:
        t.add("claim_task", id=nid)
        start_work(t, nid, targets)
        return
    if stalled(t, nid):
        return
    if len(targets) > 1 and not review and t.skill.unit(nid) is None and t.allows("discover_task") \
            and not t.history_on(nid, "<discover_task") and t.stable("split", nid).random() < t.profile.p_split:
        split(t, nid, targets)
    if t.skill.unit(nid) is None and not review and t.history_on(nid, "<discover_task"):
        targets = targets[:1]
    targets = targets + _unplanned(t, nid, targets)
    if not targets:
        if not t.observed_last() and t.allows("run_tests"):
            t.add("run_tests")
            t.note("Running the tests to see what this task needs.")
            return
        status = FINISHED if not t.failures() else BLOCKED
    else:
        status = work(t, targets, nid)
    if status == WORKING:
        return
    if status == BLOCKED:
        failing = [u for u in blamed(t, t.failures()) if u not in targets]
        t.note(f"My part of {nid} is in place but checks still fail "
               f"({', '.join(u.id for u in failing) or 'unclear why'}).")
        if failing and t.allows("discover_task"):
            discover_fix(t, failing[0])
        elif t.allows("broadcast"):
            t.add("broadcast", f"{nid}: done on my side, but checks still fail for "
                               f"{', '.join(u.id for u in failing) or 'other parts'}.")
    start = t.request.scope.call_index - t.turns_on(nid)
    if t.stable("forget", nid, start).random() < t.profile.p_forget_complete and t.turns_on(nid) < FORGET_RECALL_TURNS:
        t.note("This looks finished to me.")
        return
    t.add("complete_task", id=nid)
    t.note(f"{nid} is done; marking it complete.")
    if t.allows("broadcast") and t.rng.random() < t.profile.chattiness:
        t.add("broadcast", f"Finished {nid}.")


def start_work(t: Turn, nid: str, targets: list[WorkUnit]) -> None:
    """The rest of a reply that claims a task (paper A4.3: a reply carries several actions). With every file the
    work needs already in its prompt and a fresh observation pointing at the work, it patches at once (and runs
    the tests, and may report the task done: a small task can take one turn). Otherwise it reads the files the
    work needs and, as it usually does before its first patch (``p_observe_first``), runs the tests or the checks
    in the same reply, so that its next turn can patch."""
    needed = files_of(t, targets + upstream(t, targets))
    ready = targets and all(t.seen(f) is not None for f in needed if f in t.skill.start) and t.observed_last() \
        and any(t.points_at(u) for u in targets)
    if ready:
        status = work(t, targets, nid)
        if status == FINISHED and t.allows("complete_task"):
            t.add("complete_task", id=nid)
            t.note(f"{nid} is done; marking it complete.")
        return
    reads = [f for f in needed if t.seen(f) is None and f in t.skill.start]
    for f in reads:
        t.add("read_file", path=f)
    observed = can_observe(t, targets) and t.stable("observe", nid).random() < t.profile.p_observe_first \
        and observe(t, targets)
    t.note("Claiming it" + (f", reading {', '.join(reads)}" if reads else "") +
           (" and running the checks to see what fails." if observed else "."))


def split(t: Turn, nid: str, targets: list[WorkUnit]) -> None:
    """Keep the first unit of a task that covers several, and add the others as tasks of their own (Discover),
    depending only on what they really build on, so that idle teammates can take them in parallel."""
    kept, rest = targets[0], targets[1:]
    fix = nid.endswith(FIX_SUFFIX) or FIX_SUFFIX + "-" in nid or t.skill.unit(nid.split(FIX_SUFFIX)[0]) is not None
    ids = {u.id: (f"{u.id}{FIX_SUFFIX}" if fix else u.id) for u in rest}
    ids[kept.id] = nid
    for u in rest:
        deps = tuple(dict.fromkeys(ids[d] for d in u.deps if d in ids and ids[d] != ids[u.id]))
        discover(t, u, ids[u.id], f"{u.title} (checks failing again)" if fix else u.title, deps=deps)
    t.note(f"This covers {len(targets)} parts; splitting off {', '.join(u.id for u in rest)} as tasks of their own "
           f"and doing {kept.id} myself.")


def _remembered_task(t: Turn) -> dict | None:
    """The task its own recent replies say it is working on, when the message that gave it the task has
    left the window (it has not completed it, and nobody released or closed it since)."""
    from latte_lab.models.sim.text import marked_task

    nid = marked_task(t.history[-1]) if t.history else None
    if nid is None or t.history_on(nid, f'<complete_task id="{nid}"'):
        return None
    if any(prompts.task_taken(text, nid) or prompts.claim_refused(text, nid) for _, text in t.heard):
        return None
    return {"id": nid, "title": "", "description": "", "status": "in_progress"}


def _claimed(t: Turn, nid: str) -> bool:
    """Whether its latest claim of the node in the window was not refused afterwards."""
    claim, refusal = -1, -1
    for i, m in enumerate(t.request.messages):
        if m.role == "assistant" and f'<claim_task id="{nid}"' in m.content:
            claim = i
        elif m.role == "user" and prompts.claim_refused(m.content, nid):
            refusal = i
    return claim > refusal


def _unplanned(t: Turn, nid: str, targets: list[WorkUnit]) -> list[WorkUnit]:
    """Work its observations reveal that no plan contains: added to the graph when the agent may
    discover tasks, taken on in place when it blocks the agent's own checks, else reported."""
    known = {n.get("id") for n in t.view.frontier} | {nid} | {u.id for u in targets}
    own_tests = {x for u in targets for x in u.tests}
    take = []
    for u in revealed(t):
        if u.id in known:
            continue
        if own_tests & set(u.tests):  # its failure is this task's own test failing: the task is to fix it
            take.append(u)
            t.note(f"{u.id} is not in the plan but its failure is my task's own; fixing it here.")
        elif t.allows("discover_task"):
            if not t.history_on(nid, f'id="{u.id}"') and discover(t, u):
                t.note(f"The checks show work nobody planned: {u.id}. Adding it to the graph.")
        elif t.allows("broadcast") and not t.history_on(nid, f"Found: {u.id}"):
            t.add("broadcast", f"Found: {u.id} ({u.title}) needs work and is not in the plan.")
    return take


def idle_graph_worker(t: Turn) -> None:
    view = t.view
    lost = {nid for _, text in t.heard for nid in prompts.parse_claims_refused(text)}
    options = [n for n in view.frontier if n.get("id") not in lost]
    if options and t.allows("claim_task") and t.allows("complete_task") and may_self_claim(t):
        pick = preferred(t, options)
        targets, _ = node_targets(t, pick)
        t.add("claim_task", id=pick["id"])
        t.mark(pick["id"], pick.get("title", ""))
        t.note(f"{pick['id']} is ready and nobody has it." +
               (" My earlier claim was taken, so I picked another." if lost else ""))
        start_work(t, pick["id"], targets)
        return
    t.note("Nothing is assigned to me yet; waiting for a task.")


def may_self_claim(t: Turn) -> bool:
    """False when its prompt says workers do not take unassigned tasks themselves, or a claim was refused
    for that reason."""
    texts = [t.request.system] + [text for _, text in t.heard]
    return not any(prompts.forbids_self_claim(text) for text in texts)


def preferred(t: Turn, options: list[dict]) -> dict:
    """An idle worker's pick among ready tasks: files it already has in its context, tasks early in the
    list (upstream work is planned first), tasks whose checks it has seen fail; plus Gumbel noise of
    the profile's ``claim_noise``, so two workers sometimes want the same task."""
    mine = set(t.view.files_read)
    n = len(options)
    best, best_score = options[0], -math.inf
    for i, node in enumerate(options):
        units, _ = node_targets(t, node)
        score = 1.0 - i / max(1, n)
        score += 1.0 if set(files_of(t, units)) & mine else 0.0
        score += 0.5 if any(t.failing(u) for u in units) else 0.0
        u = t.rng.random()
        score += t.profile.claim_noise * -math.log(-math.log(min(max(u, 1e-12), 1 - 1e-12)))
        if score > best_score:
            best, best_score = node, score
    return best


# ================================================================================== dispatch ====

ROLE_POLICIES: dict[str, Callable[[Turn], None]] = {
    "peer": flat.member,
    "product_manager": documents.product_manager,
    "architect": documents.architect,
    "project_manager": documents.project_manager,
    "engineer": documents.engineer,
    "qa": documents.qa,
}
_GRAPH_TAGS = ("assign_task", "discover_task", "plan_task", "claim_task", "complete_task")


def decide(t: Turn) -> None:
    """Fills ``t.notes`` and ``t.acts`` for the agent's role (graph or flat by the actions offered)."""
    role = t.view.role
    graph_like = any(t.allows(tag) for tag in _GRAPH_TAGS) or bool(t.view.graph) or t.view.current_task is not None
    if role == "lead":
        return lead.graph_lead(t) if graph_like else lead.flat_lead(t)
    if role == "worker":
        return graph_worker(t) if graph_like else flat.member(t)
    policy = ROLE_POLICIES.get(role)
    if policy is None:
        known = ", ".join(["lead", "worker", *ROLE_POLICIES])
        raise ModelError(f"the simulated model has no policy for role {role!r}; known roles: {known}")
    return policy(t)

