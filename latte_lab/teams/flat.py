"""Teams without a task graph: ``leader_worker`` (paper A5.2) and ``decentralized`` (A5.3).

Every agent acts every round. At the start of each agent's step it sees the latest test output; after
each round the orchestrator runs the public tests. Success needs green tests and a certification
(``<certify_complete />`` by the Lead, or by any peer) accepted while the tests were green; the
``flat_success="tests"`` switch reproduces the released rule (green tests alone).
"""

from __future__ import annotations

from latte_lab.teams.engine import TEST_STATUS_TAIL, WORKER_WINDOW, Agent, Outcome, Team
from latte_lab.teams.prompt_text import prompt


class FlatTeam(Team):
    uses_graph = False
    lead_name: str | None = None

    def setup(self) -> None:
        self._certified_by: str | None = None
        self._build_agents()
        self.log.emit("initialize", agents=list(self.agents), lead=self.lead_name)
        intro = self.project_text()
        for agent in self.agents.values():
            agent.receive(intro)

    def _build_agents(self) -> None:
        raise NotImplementedError

    def view(self, agent: Agent):
        return self.base_view(agent, phase="execution")

    def inject_test_status(self, agent: Agent) -> None:
        run = self.last_tests
        if run is None:
            return
        text = f"=== CURRENT TEST STATUS (round {self.round}) ===\n" + self.tests_text(run, TEST_STATUS_TAIL)
        agent.receive(text)
        agent.see_tests(run, text)

    def do_read_file(self, agent: Agent, action) -> None:
        if not self.config.read_file_in_flat:  # released code: advertised, silently ignored
            self.log.emit("read_file_ignored", agent=agent.name, path=action.path)
            return
        super().do_read_file(agent, action)

    def do_certify_complete(self, agent: Agent, action) -> None:
        run = self.run_tests(by="System")  # memoised: free when nothing changed since the last run
        accepted = run.ok
        self.log.emit("certify_complete", agent=agent.name, accepted=accepted)
        if accepted:
            self._certified_by = self._certified_by or agent.name
            agent.receive("Completion recorded: the tests pass.")
        else:
            agent.receive("⚠️ Completion not accepted: the tests still fail.\n" + self.tests_text(run))

    def end_of_round_check(self) -> bool:
        run = self.run_tests(by="System")
        if run.ok and (self.config.flat_success == "tests" or self._certified_by):
            self.outcome = Outcome(True, "tests_passed" if self.config.flat_success == "tests" else "certified",
                                   tests_passed=True, certified_by=self._certified_by)
            return True
        if not run.ok:
            self._certified_by = None  # a certification only counts while the tests stay green
        return False


class LeaderWorkerTeam(FlatTeam):
    """A Lead directing N workers by broadcast; the Lead acts first, then all workers."""

    name = "leader_worker"
    lead_name = "Lead"
    LEAD_ACTIONS = ("broadcast", "run_script", "run_tests", "certify_complete")
    WORKER_ACTIONS = ("edit_file", "read_file", "run_script", "run_tests", "broadcast")

    def _build_agents(self) -> None:
        n = self.config.n_workers
        self.workers = [f"Dev{i}" for i in range(1, n + 1)]
        self.lead = self.add_agent(Agent("Lead", "lead", prompt("lw_lead", workers=", ".join(self.workers)),
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
        self.log.emit("round_dispatch", n_dispatched=n_all, n_total=n_all, agents=["Lead", *self.workers],
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


class DecentralizedTeam(FlatTeam):
    """N+1 symmetric peers coordinating only by broadcast, all acting every round."""

    name = "decentralized"
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
