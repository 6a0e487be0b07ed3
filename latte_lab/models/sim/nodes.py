"""Graph nodes as the simulated agent reads and writes them: which units a node stands for, and the
description of a node it adds."""

from __future__ import annotations

import re

from latte_lab import prompts
from latte_lab.models.sim.skill import WorkUnit
from latte_lab.models.sim.turn import Turn
from latte_lab.models.view import failures_in

FIX_SUFFIX = "-fix"  # id of a follow-up task for a unit whose checks fail again: "<unit id>-fix"
PARTS = re.compile(r"^Parts: ([\w\-, ]+)$", re.MULTILINE)  # the first line of a coarse task's description


def node_targets(t: Turn, node: dict) -> tuple[list[WorkUnit], bool]:
    """The units a graph node stands for, and whether it is a review (verify) node."""
    sk = t.skill
    nid = node.get("id", "")
    u = sk.unit(nid)
    if u is not None:
        return [u], False
    if nid.endswith("-verify"):  # a review of the task it follows (shown among its predecessors, D4)
        base = nid[: -len("-verify")]
        if sk.unit(base) is not None:
            return [sk.unit(base)], True
        reviewed = next((p for p in node.get("predecessors") or () if p.get("id") == base), None)
        if reviewed is not None:
            return node_targets(t, reviewed)[0], True
        return sk.order(sk.units_in_text(node.get("title", ""))), True
    base = nid.split(FIX_SUFFIX)[0]
    if base != nid and sk.unit(base) is not None:
        return [sk.unit(base)], False
    from latte_lab.models.sim.work import blamed

    text = f"{node.get('title', '')}\n{node.get('description', '')}"
    parts = PARTS.search(node.get("description") or "")
    if parts:  # a coarse task of a first decomposition names its parts
        listed = [u for uid in parts.group(1).split(",") if (u := sk.unit(uid.strip())) is not None]
        if listed:
            return sk.order(listed), False
    found = blamed(t, failures_in(node.get("description")))
    found += [m for m in sk.units_in_text(node.get("title", "")) if m not in found]
    if not found and t.tests_known():
        found = blamed(t, t.failures())
    if not found:
        found = sk.units_in_text(text)
    return sk.order(found), False


def failure_report(t: Turn, units: list[WorkUnit]) -> str:
    """A task description for units: what they are, and the failures seen that point at them."""
    fails = [f for f in t.failures() + t.reported if any(t.skill.unit_failing(u, [f]) for u in units)][:6]
    lines = [f"{u.title}: {u.description}" for u in units]
    lines += [f"FAILED {f}" for f in dict.fromkeys(fails)]
    lines.append("Run the checks, fix the code and re-run them.")
    return "\n".join(lines)


def exists(t: Turn, nid: str) -> bool:
    """Whether its prompt shows the task id is taken (shown in the graph or the ready list, or a discovery
    of it was refused as a duplicate)."""
    return (any(n.get("id") == nid for n in t.view.graph + t.view.frontier)
            or any(prompts.duplicate_task(text, nid) for _, text in t.heard))


def discover(t: Turn, unit: WorkUnit, nid: str | None = None, title: str | None = None,
             deps: tuple[str, ...] = ()) -> bool:
    """Adds a task for the unit (depending on ``deps``) unless its prompt shows that id is already taken."""
    nid = nid or unit.id
    if exists(t, nid):
        return False
    return t.add("discover_task", failure_report(t, [unit]), id=nid, title=title or unit.title,
                 dependencies=",".join(deps))


def discover_fix(t: Turn, unit: WorkUnit) -> bool:
    """Adds a follow-up task for a unit whose checks fail again, under the first id not taken
    (``<unit>-fix``, ``<unit>-fix-2``, ..., at most the profile's ``max_fix_attempts``); none when one of them is
    still open."""
    ids = [f"{unit.id}{FIX_SUFFIX}"] + [f"{unit.id}{FIX_SUFFIX}-{k}" for k in range(2, t.profile.max_fix_attempts + 1)]
    open_ids = {n.get("id") for n in t.view.graph + t.view.frontier}
    if open_ids & set(ids):
        return False
    for nid in ids:
        if not exists(t, nid):
            return discover(t, unit, nid, f"{unit.title} (checks failing again)")
    return False
