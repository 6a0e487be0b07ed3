"""``decentralized``: N+1 symmetric peers and no Lead (paper A5.3).

The same orchestrator and actions as Leader-Worker with no designated leader: every peer acts in
parallel every round, coordinating only by broadcast; the latest test output opens each step; success
needs green tests and any peer's ``<certify_complete />`` while they are green.
"""

from __future__ import annotations

from latte_lab.teams import register
from latte_lab.teams.engine import WORKER_WINDOW, Agent
from latte_lab.teams.flat import FlatTeam
from latte_lab.teams.prompt_text import prompt


@register("decentralized")
class DecentralizedTeam(FlatTeam):
    """N+1 symmetric peers coordinating only by broadcast, all acting every round."""

    PEER_ACTIONS = ("edit_file", "read_file", "run_script", "run_tests", "broadcast", "certify_complete")

    def _build_agents(self) -> None:
        n = self.config.n_workers + 1
        self.workers = [f"Dev{i}" for i in range(1, n + 1)]
        for w in self.workers:
            mates = ", ".join(x for x in self.workers if x != w)
            self.add_agent(Agent(w, "peer", prompt("peer", agent=w, teammates=mates), window=WORKER_WINDOW))

    def allowed_actions(self, agent: Agent) -> tuple[str, ...]:
        return self.PEER_ACTIONS

    def run_round(self, r: int) -> bool:
        self.begin_round(r)
        self._certified_by = None
        peers = [self.agents[w] for w in self.workers]
        self.log.emit("round_dispatch", n_dispatched=len(peers), n_total=len(peers), agents=list(self.workers),
                      n_dispatched_released=len(peers), n_total_released=len(peers))
        for p in peers:
            self.inject_test_status(p)
        self.apply_in_order(self.call(peers))
        finished = self.end_of_round_check()
        self.end_round()
        return finished
