"""The shared base of the teams without a task graph: ``leader_worker`` (A5.2) and ``decentralized`` (A5.3).

Every agent acts every round. At the start of each agent's step it sees the latest test output; after
each round the orchestrator runs the public tests. Success needs green tests and a certification
(``<certify_complete />`` by the Lead, or by any peer) accepted while the tests were green; the
``flat_success="tests"`` switch reproduces the released rule (green tests alone).
"""

from __future__ import annotations

from latte_lab import prompts
from latte_lab.graph import SYSTEM_AGENT
from latte_lab.teams.engine import TEST_STATUS_TAIL, Agent, Outcome, Team


class FlatTeam(Team):
    """Agents that coordinate only by broadcast around the shared files (not registered itself).

    Subclasses implement ``_build_agents`` (called by ``setup``: add the agents), ``allowed_actions`` and
    ``run_round``; a round shows each agent the latest test status (``inject_test_status``) before its
    step and ends with ``end_of_round_check``.
    """

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
        text = prompts.render_test_status(self.round, self.tests_text(run, TEST_STATUS_TAIL))
        agent.receive(text)
        agent.see_tests(run, text)

    def do_read_file(self, agent: Agent, action) -> None:
        if not self.config.read_file_in_flat:  # released code: advertised, silently ignored
            self.log.emit("read_file_ignored", agent=agent.name, path=action.path)
            return
        super().do_read_file(agent, action)

    def do_certify_complete(self, agent: Agent, action) -> None:
        run = self.run_tests(by=SYSTEM_AGENT)  # memoised: free when nothing changed since the last run
        accepted = run.ok
        self.log.emit("certify_complete", agent=agent.name, accepted=accepted)
        if accepted:
            self._certified_by = self._certified_by or agent.name
            agent.receive("Completion recorded: the tests pass.")
        else:
            agent.receive(prompts.render_not_accepted(self.tests_text(run)))

    def end_of_round_check(self) -> bool:
        run = self.run_tests(by=SYSTEM_AGENT)
        if run.ok and (self.config.flat_success == "tests" or self._certified_by):
            self.outcome = Outcome(True, "tests_passed" if self.config.flat_success == "tests" else "certified",
                                   tests_passed=True, certified_by=self._certified_by)
            return True
        if not run.ok:
            self._certified_by = None  # a certification only counts while the tests stay green
        return False
