"""``static``: the static-graph ablation (paper A5.4).

The same graph orchestrator as LATTE, but the Lead plans the complete graph once and it is frozen
after planning: discovery, self-claims, release, verify and fix-task injection are refused at the
orchestrator level, the Lead assigns every task, every worker is dispatched every round, and red tests
after the last node end the trial.
"""

from __future__ import annotations

from latte_lab import prompts
from latte_lab.teams import register
from latte_lab.teams.engine import Agent, Outcome
from latte_lab.teams.graph_team import EXPLORE_ACTIONS, GraphTeam


@register("static")
class StaticTeam(GraphTeam):
    """The graph is planned once and never changes; no recovery mechanism after planning."""

    lead_prompt = "static_lead"
    planning_prompt = "static_lead_planning"
    worker_prompt = "static_worker"
    lead_at_start = True  # "the Lead was responsible for assigning every task at the start of execution" (A5.4)

    LEAD_PLANNING_ACTIONS = ("plan_task", "discover_task")
    LEAD_ACTIONS = ("assign_task", "broadcast", "run_tests", "run_script", "request_status", "close_task",
                    "synthesize")
    WORKER_ACTIONS = ("claim_task", "complete_task", "edit_file", "read_file", "run_script", "run_tests",
                      "broadcast")

    def allowed_actions(self, agent: Agent) -> tuple[str, ...]:
        if agent.role == "lead" and self.round == 0 and self.config.static_planning_explore:
            return (*self.LEAD_PLANNING_ACTIONS, *EXPLORE_ACTIONS)  # the same planning phase as LATTE's
        return super().allowed_actions(agent)

    def select_workers(self) -> list[Agent]:
        if self.config.dispatch == "released":
            return super().select_workers()
        return [self.agents[w] for w in self.workers]  # A5.4: every worker acts every round

    def on_red_tests(self, run) -> bool:
        self.outcome = Outcome(False, "tests_failed", tests_passed=False)
        return True

    def do_discover_task(self, agent: Agent, action) -> None:
        if self.round > 0:
            self.log.emit("operator_blocked", agent=agent.name, operator="discover_task", task=action.id,
                          reason="static_graph")
            agent.receive("⚠️ The task graph is fixed after planning in this run; new tasks cannot be added. "
                          "Tell the Lead with <broadcast> if something is missing.")
            return
        super().do_discover_task(agent, action)

    def do_claim_task(self, agent: Agent, action) -> None:
        nid = action.id
        if nid not in self.graph or self.graph.agent(nid) != agent.name:  # accepting an assignment only
            self.log.emit("claim_blocked", agent=agent.name, task=nid, reason="static_graph")
            agent.receive(prompts.SELF_CLAIM_OFF)
            return
        super().do_claim_task(agent, action)

    def do_release_task(self, agent: Agent, action) -> None:
        self.log.emit("release_task_blocked", agent=agent.name, task=action.id, reason="static_graph")
        agent.receive("⚠️ Tasks cannot be released in this run: the graph is fixed after planning.")

    def do_verify_task(self, agent: Agent, action) -> None:
        self.log.emit("verify_task_blocked", agent=agent.name, task=action.id, reason="static_graph")
        agent.receive("⚠️ Verification tasks cannot be added in this run: the graph is fixed after planning.")
