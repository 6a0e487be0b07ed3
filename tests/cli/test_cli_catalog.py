"""``latte-lab teams`` and ``latte-lab tasks`` list what is registered, one line each."""

from __future__ import annotations

import latte_lab as ll
from latte_lab.cli import main


def test_teams_lists_every_registered_team_on_one_line(capsys):
    assert main(["teams"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ll.teams.names()
    latte = next(line for line in lines if line.startswith("latte "))
    assert "task graph" in latte and "also: dynamic" in latte
    assert "messages" in next(line for line in lines if line.startswith("decentralized"))


def test_tasks_lists_every_registered_task_on_one_line(capsys):
    assert main(["tasks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ll.tasks.names()
    for name, line in zip(ll.tasks.names(), lines):
        task = ll.tasks.get(name)
        assert task.title in line and f"{task.default_max_rounds} rounds" in line
