"""The simulated agent's policy: what an agent in a given role does with what its prompt shows.

Every decision is made from the agent's own view (``AgentView``), its own earlier replies (the chat
history in the request) and its skill (``TaskSkill``). Behaviour is chosen from the role, the phase and
the actions the prompt offers — never from the name of a team structure, which the view does not carry.

:func:`decide` picks the role's policy: ``graph_roles`` (Lead and workers around a coordination graph),
``flat_roles`` (a directing Lead and peers without a graph) or ``pipeline_roles`` (an SOP pipeline). They
are pure: randomness comes from the two generators of a :class:`~latte_lab.models.sim.turn.Turn` (one per
call, one per subtask), both seeded by the caller.
"""

from __future__ import annotations

from collections.abc import Callable

from latte_lab.errors import ModelError
from latte_lab.models.sim.flat_roles import flat_lead, flat_member
from latte_lab.models.sim.graph_roles import graph_lead, graph_worker
from latte_lab.models.sim.pipeline_roles import architect, engineer, product_manager, project_manager, qa
from latte_lab.models.sim.turn import Turn

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
