"""``latte-lab teams`` and ``latte-lab tasks``: what is registered, one line each (a team or task of your own
shows once its module has registered it; see ``ll.teams.register`` and ``ll.tasks.register``)."""

from __future__ import annotations

import argparse

TEAMS_EPILOG = """\
examples:
  latte-lab teams
  latte-lab run --team leader_worker --task textproc"""

TASKS_EPILOG = """\
examples:
  latte-lab tasks
  latte-lab run --task eda --team latte"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    teams = subparsers.add_parser(
        "teams", help="list the registered teams, one line each",
        description="List every registered team: its name (what --team takes), whether it keeps a task graph, "
        "its one-line description, and the other names it answers to.", epilog=TEAMS_EPILOG)
    teams.set_defaults(func=run_teams)
    tasks = subparsers.add_parser(
        "tasks", help="list the registered tasks, one line each",
        description="List every registered task: its name (what --task takes), its default round budget, how "
        "accuracy is measured, its title, and the other names it answers to.", epilog=TASKS_EPILOG)
    tasks.set_defaults(func=run_tasks)
    return teams


def _aliases(aliases: dict[str, str], name: str) -> str:
    others = sorted(a for a, target in aliases.items() if target == name)
    return f" (also: {', '.join(others)})" if others else ""


def _first_line(text: str | None) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")


def team_lines() -> list[str]:
    """One line per registered team: name, graph or messages, description, aliases."""
    from latte_lab import teams
    from latte_lab.teams.graph_team import GraphTeam

    width = max(len(n) for n in teams.names())
    lines = []
    for name in teams.names():
        cls = teams.get(name)
        kind = "task graph" if isinstance(cls, type) and issubclass(cls, GraphTeam) else "messages"
        lines.append(f"{name:<{width}}  {kind:<10}  {_first_line(cls.__doc__)}{_aliases(teams.TEAM_ALIASES, name)}")
    return lines


def task_lines() -> list[str]:
    """One line per registered task: name, default rounds, accuracy measure, title, aliases."""
    from latte_lab import tasks

    width = max(len(n) for n in tasks.names())
    lines = []
    for name in tasks.names():
        task = tasks.get(name)
        lines.append(f"{name:<{width}}  {task.default_max_rounds:>3} rounds  accuracy: {task.accuracy_metric:<16}  "
                     f"{task.title}{_aliases(tasks.TASK_ALIASES, name)}")
    return lines


def run_teams(args) -> int:
    print("\n".join(team_lines()))
    return 0


def run_tasks(args) -> int:
    print("\n".join(task_lines()))
    return 0
