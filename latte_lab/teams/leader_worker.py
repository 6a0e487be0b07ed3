"""``leader_worker``: a Leader-Worker hierarchy without a task graph (paper A5.2; released ``no_graph``).

The Lead directs N workers by broadcast; there is no planning and no task state. At the start of each
agent's step it sees the latest test output; the Lead acts first, then every worker in parallel; after
each round the orchestrator runs the public tests. Success needs green tests and the Lead's
``<certify_complete />`` while they are green (``flat_success="tests"``: green tests alone, released).
"""

from __future__ import annotations

from latte_lab.graph import LEAD
from latte_lab.teams import register
from latte_lab.teams.engine import WORKER_WINDOW, Agent
from latte_lab.teams.flat import FlatTeam
from latte_lab.teams.prompt_text import prompt


@register("leader_worker")
class LeaderWorkerTeam(FlatTeam):
    """A Lead directing N workers by broadcast; the Lead acts first, then all workers."""

    lead_name = LEAD
    LEAD_ACTIONS = ("broadcast", "run_script", "run_tests", "certify_complete")
    WORKER_ACTIONS = ("edit_file", "read_file", "run_script", "run_tests", "broadcast")

    def _build_agents(self) -> None:
        n = self.config.n_workers
        self.workers = [f"Dev{i}" for i in range(1, n + 1)]
        self.lead = self.add_agent(Agent(LEAD, "lead", prompt("lw_lead", workers=", ".join(self.workers)),
                                         window=WORKER_WINDOW))
        for w in self.workers:
            self.add_agent(Agent(w, "worker", prompt("lw_worker", agent=w), window=WORKER_WINDOW))

    def allowed_actions(self, agent: Agent) -> tuple[str, ...]:
        return self.LEAD_ACTIONS if agent.role == "lead" else self.WORKER_ACTIONS

    def run_round(self, r: int) -> bool:
        self.begin_round(r)
        self._certified_by = None
        workers = [self.agents[w] for w in self.workers]
        n_all = len(workers) + 1
        self.log.emit("round_dispatch", n_dispatched=n_all, n_total=n_all, agents=[LEAD, *self.workers],
                      n_dispatched_released=len(workers), n_total_released=n_all)
        self.inject_test_status(self.lead)
        [(_, resp)] = self.call([self.lead])
        self.apply(self.lead, resp.text)
        for w in workers:
            self.inject_test_status(w)
        self.apply_in_order(self.call(workers))
        finished = self.end_of_round_check()
        self.end_round()
        return finished
