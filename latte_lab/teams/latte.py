"""``latte``: the paper's LATTE team (Algorithm 1, Appendix A4; the released code's ``dynamic``).

A Lead plans the initial graph, then workers self-claim from the frontier while the Lead keeps the
graph correct: Discover, Assign, Release, Close and Verify stay open for the whole trial. When every
node is done and the public tests still fail, the orchestrator adds a fix task that depends on every
node (so it is ready at once) and tells the team; the trial goes on.
"""

from __future__ import annotations

from latte_lab import prompts
from latte_lab.graph import SYSTEM_AGENT
from latte_lab.teams import register
from latte_lab.teams.graph_team import EXPLORE_ACTIONS, GraphTeam

FIX_TASK_ID = "fix-failing-tests"
FIX_DESCRIPTION_TAIL = 2000  # test output characters in a fix task's description (reference §6)
FIX_BROADCAST_TAIL = 800  # test output characters in the fix-task broadcast (reference §6)


@register("latte")
class LatteTeam(GraphTeam):
    """LATTE: adaptive task graph, self-scheduling workers, a Lead invoked only when needed."""

    lead_prompt = "latte_lead"
    planning_prompt = "latte_lead_planning"
    worker_prompt = "latte_worker"

    LEAD_PLANNING_ACTIONS = ("discover_task", *EXPLORE_ACTIONS)
    LEAD_ACTIONS = ("assign_task", "broadcast", "run_script", "request_status", "run_tests", "discover_task",
                    "verify_task", "release_task", "close_task", "synthesize")
    WORKER_ACTIONS = ("claim_task", "complete_task", "edit_file", "read_file", "run_script", "run_tests",
                      "discover_task", "broadcast")

    def on_red_tests(self, run) -> bool:
        """All nodes done but tests red: discover a fix task ready at once, tell everyone, carry on."""
        fid = FIX_TASK_ID
        k = 0
        while fid in self.graph:
            k += 1
            fid = f"{FIX_TASK_ID}-{k}"
        tail = self.stable_tail(run.stdout, FIX_DESCRIPTION_TAIL)
        desc = ("All planned tasks are done but the tests fail. Run <run_tests />, read the failing tests and the "
                "sources, fix every failure and re-run the tests; add tasks with <discover_task> if the fix is "
                f"large.\n\nTest output (tail):\n{tail}")
        self.graph.discover(fid, deps=list(self.graph.nodes()), title="Fix failing tests", description=desc,
                            by=SYSTEM_AGENT)
        self.log.emit("discover_task", agent=SYSTEM_AGENT, task=fid, title="Fix failing tests",
                      dependencies=list(self.graph.node(fid)["deps"]))
        self.log.emit("fix_task_injected", task=fid)
        note = prompts.render_fix_note(fid, self.stable_tail(run.stdout, FIX_BROADCAST_TAIL))
        for agent in self.agents.values():
            agent.receive(note)
            agent.see_tests(run, note)
        return False
