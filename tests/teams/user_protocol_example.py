"""A team and a task as a user would write them outside latte_lab (notebook 06 has the same two).

Importing this module registers team ``round_robin`` and task ``mini``; running its text in
``__main__`` (as a notebook cell does) registers them from there instead.
"""

from __future__ import annotations

import latte_lab as ll

MINI_SOURCE = '''def mean(xs):
    """Arithmetic mean of a non-empty list."""
    return sum(xs) / (len(xs) + 1)


def clamp(x, lo, hi):
    """x limited to [lo, hi]."""
    return max(lo, min(x, lo))
'''
MINI_SOLUTION = MINI_SOURCE.replace("(len(xs) + 1)", "len(xs)").replace("min(x, lo)", "min(x, hi)")
MINI_TESTS = '''from mini import clamp, mean


class TestMean:
    def test_mean(self):
        assert mean([1, 2, 3]) == 2


class TestClamp:
    def test_inside(self):
        assert clamp(5, 0, 10) == 5

    def test_above(self):
        assert clamp(15, 0, 10) == 10
'''


@ll.tasks.register("mini")
class MiniTask(ll.tasks.Task):
    """Two one-line bugs in a tiny module; the public suite is the criterion."""

    title = "Fix mini.py"
    description = "mini.py has a bug in mean() and one in clamp(); make test_mini.py pass."
    success_criteria = "`python -m pytest -q test_mini.py` passes, test_mini.py unchanged."
    public_tests = test_args = ("test_mini.py",)
    required_outputs = ("mini.py",)
    accuracy_metric = "success"
    default_max_rounds = 12

    def starting_files(self):
        return {"mini.py": MINI_SOURCE, "test_mini.py": MINI_TESTS}

    def reference_solution(self):
        return {"mini.py": MINI_SOLUTION}

    def work_units(self):
        return [ll.tasks.WorkUnit(f"fix-{f}", f"Fix {f}", f"Fix the bug in {f}() in mini.py.", files=("mini.py",),
                                  symbols=(f,), tests=(cls,)) for f, cls in (("mean", "TestMean"), ("clamp", "TestClamp"))]


@ll.teams.register("round_robin")
class RoundRobinTeam(ll.teams.LatteTeam):
    """LATTE's graph and workers without a Lead after planning: each round the orchestrator assigns the
    ready tasks to idle workers in turn."""

    def setup(self):
        super().setup()
        self.turn = 0

    def invoke_lead(self, r, fired):
        idle = [w for w in self.workers if self.agents[w].current_task is None]
        orders = []
        for nid in self.graph.frontier():
            if not idle:
                break
            w = idle.pop(self.turn % len(idle))
            self.turn += 1
            orders.append(f'<assign_task id="{nid}" to="{w}" />')
        self.apply(self.lead, "".join(orders))  # the orchestrator speaks for the Lead; the Lead never runs
        return False
