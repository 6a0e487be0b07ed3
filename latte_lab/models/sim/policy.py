"""The simulated agent's policy: what an agent in a given role does with what its prompt shows.

Every decision is made from the agent's own view (``AgentView``), its own earlier replies (the chat
history in the request) and its skill (``TaskSkill``). Behaviour is chosen from the role, the phase and
the actions the prompt offers — never from the name of a team structure, which the view does not carry.

The functions here are pure: randomness comes from the two generators in :class:`Turn` (one per call,
one per subtask), both seeded by the caller.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from latte_lab.errors import ModelError
from latte_lab.models.base import AgentView, ModelRequest
from latte_lab.models.sim.profiles import Profile
from latte_lab.models.sim.skill import TaskSkill, failures_in_text
from latte_lab.models.sim.text import WORK_MARKER, Act, act, marked_task, tags_in
from latte_lab.tasks.base import WorkUnit

VERIFY_MIN_SUCCESSORS = 3  # a done node with this many dependants is worth a review pass
FIX_SUFFIX = "-fix"  # id of a follow-up task for a unit whose tests fail again: "<unit id>-fix"
FORGET_RECALL_ROUNDS = 6  # rounds after which a worker who forgot complete_task notices its open task
MAX_TARGET_EXPANSION = 1  # how many times a check-only task widens to the helpers it depends on
_EXPLORE = ("run_tests", "read_file", "run_script")
_LOST_CLAIM = re.compile(r"Claim of '([^']+)' rejected")
_FROM = re.compile(r"\[From ([^\]]+)\]: ")
_TAKING = re.compile(r"I'm taking ([\w\-]+(?:, [\w\-]+)*)")
_DONE = re.compile(r"Done: ([\w\-]+)")
GREEN_NOTE = "Tests are green."  # the flat Lead's note to itself that it has seen a green run

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


def _uniq(units: list[WorkUnit]) -> list[WorkUnit]:
    """Units without repeats (by id), order kept. WorkUnit holds a dict, so it is not hashable."""
    seen: set[str] = set()
    out = []
    for u in units:
        if u.id not in seen:
            seen.add(u.id)
            out.append(u)
    return out


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


def _unit_state(t: Turn, u: WorkUnit) -> str:
    states = [t.skill.state(u, f, t.view.files_read.get(f)) for f in t.skill.unit_files(u)]
    if not states or all(s == "solution" for s in states):
        return "solution"
    if any(s == "start" for s in states):
        return "start"
    return "wrong" if "wrong" in states else "other"


def _files(t: Turn, units: list[WorkUnit]) -> list[str]:
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
    files = _files(t, targets)
    unread = [f for f in files if not t.seen_on(key, f)]
    if unread and t.allows("read_file"):
        for f in unread:
            t.add("read_file", path=f)
        t.note(f"Reading {', '.join(unread)} first.")
        return WORKING
    fresh = t.last_had("run_tests") or (not t.history and t.tests_known())
    todo, recheck = [], []
    for u in patchable:
        st = _unit_state(t, u)
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
        rfiles = _files(t, recheck)
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
    files = _files(t, todo)
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


# ============================================================================== graph worker ====

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
        reads = [f for f in _files(t, targets) if not t.seen_on(nid, f)]
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
        reads = _files(t, targets)
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
        for f in _files(t, sk.visible_units()):
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


# ================================================================================= flat team ====

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
    return _unit_state(t, u) != "start"


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
    unread = [f for f in _files(t, sk.visible_units()) if f in sk.start and f not in view.files_read]
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


# ================================================================================== pipeline ====

PIPELINE_TOPICS = ("requirements", "design", "tasks", "bug_report", "qa_passed")


def _doc_units(t: Turn) -> list[WorkUnit]:
    docs = t.view.extra.get("documents") or {}
    text = "\n".join(str(docs.get(k, "")) for k in ("requirements", "design", "tasks"))
    return t.skill.units_in_text(text)


def product_manager(t: Turn) -> None:
    units = t.skill.order(t.skill.visible_units())
    body = "Requirements (one per line):\n" + "\n".join(f"- {u.id}: {u.title}. {u.description}" for u in units)
    t.add("publish", body, topic="requirements")
    t.note(f"Writing the requirements: {len(units)} items from the project description.")


def architect(t: Turn) -> None:
    units = t.skill.order(_doc_units(t))
    by_file: dict[str, list[WorkUnit]] = {}
    for u in units:
        for f in u.files:
            by_file.setdefault(f, []).append(u)
    lines = []
    for f, us in by_file.items():
        syms = [s for u in us for s in u.symbols] or ["whole file"]
        lines.append(f"{f}: {', '.join(dict.fromkeys(syms))} (implements {', '.join(u.id for u in us)})")
    t.add("publish", "Design: files and interfaces\n" + "\n".join(lines), topic="design")
    t.note(f"Designing {len(by_file)} files from the requirements.")


def project_manager(t: Turn) -> None:
    units = t.skill.order(_doc_units(t))
    files: dict[str, list[str]] = {}
    for u in units:
        for f in u.files:
            files.setdefault(f, []).append(u.id)
    lines = [f"{i}. {f}: {', '.join(ids)}" for i, (f, ids) in enumerate(files.items(), 1)]
    t.add("publish", "Task list (in order)\n" + "\n".join(lines), topic="tasks")
    t.note(f"Ordering {len(files)} files for the Engineer.")


def engineer(t: Turn) -> None:
    view, sk = t.view, t.skill
    nxt = view.extra.get("next_file")
    if nxt:
        units = [u for u in _doc_units(t) if nxt in u.files and sk.patchable(u)]
        _engineer_write(t, nxt, units, "Implementing {f} from the design ({ids}).")
        return
    docs = view.extra.get("documents") or {}
    report = str(docs.get("bug_report") or "")
    fails = failures_in_text(report) or tuple(t.failures())
    units = [u for u in sk.failing_units(fails) if sk.patchable(u)]
    units += [u for u in sk.units_in_text(report) if sk.patchable(u) and u not in units]
    if not units:
        t.note("No file left to write and no open bug report.")
        return
    counts: dict[str, int] = {}
    for u in units:
        for f in sk.unit_files(u):
            counts[f] = counts.get(f, 0) + 1
    f = max(counts, key=lambda k: (counts[k], -list(counts).index(k)))
    _engineer_write(t, f, [u for u in units if f in sk.unit_files(u)], "Fixing the reported failures in {f} ({ids}).")


def _engineer_write(t: Turn, f: str, units: list[WorkUnit], why: str) -> None:
    sk = t.skill
    base = t.view.files_read.get(f)
    merged: dict[str, str] = {}
    content: str | None = None
    for u in sk.order(units):
        v = sk.version(u, f, t.rng.random() < t.profile.p_correct_patch)
        if isinstance(v, str):
            content = v
        else:
            merged.update(v)
    if content is None:
        content = sk.patch(base, f, merged)
    elif merged:
        content = sk.patch(content, f, merged)
    t.add("edit_file", content, path=f)
    t.note(why.format(f=f, ids=", ".join(u.id for u in units) or "layout only"))


def qa(t: Turn) -> None:
    sk = t.skill
    if not t.last_had("run_tests") or not t.tests_known():
        t.add("run_tests")
        t.note("Running the test suite on the Engineer's files.")
        return
    fails = t.failures()
    if fails:
        units = sk.failing_units(fails)
        body = ("Failing tests:\n" + "\n".join(f"FAILED {f}" for f in fails[:20]) +
                (f"\nLikely culprits: {', '.join(u.id for u in units)}" if units else ""))
        t.add("publish", body, topic="bug_report")
        t.note(f"{len(fails)} tests fail; reporting them to the Engineer.")
    else:
        t.add("publish", "All tests pass.", topic="qa_passed")
        t.note("Everything passes.")


# ================================================================================== dispatch ====

ROLE_POLICIES: dict[str, Callable[[Turn], None]] = {
    "peer": flat_member,
    "product_manager": product_manager,
    "architect": architect,
    "project_manager": project_manager,
    "engineer": engineer,
    "qa": qa,
}
_GRAPH_TAGS = ("assign_task", "discover_task", "plan_task", "claim_task", "complete_task")


def decide(t: Turn) -> None:
    """Fills ``t.notes`` and ``t.acts`` for the agent's role (graph or flat by the actions offered)."""
    role = t.view.role
    graph_like = any(t.allows(tag) for tag in _GRAPH_TAGS) or bool(t.view.graph) or t.view.current_task is not None
    if role == "lead":
        return graph_lead(t) if graph_like else flat_lead(t)
    if role == "worker":
        return graph_worker(t) if graph_like else flat_member(t)
    policy = ROLE_POLICIES.get(role)
    if policy is None:
        known = ", ".join(["lead", "worker", *ROLE_POLICIES])
        raise ModelError(f"the simulated model has no policy for role {role!r}; known roles: {known}")
    return policy(t)
