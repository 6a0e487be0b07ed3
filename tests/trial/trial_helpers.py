"""Helpers shared by the protocol tests: scripted replies per agent and event filters."""

from __future__ import annotations

from latte_lab.models.scripted import ScriptedModel

WAIT = "Nothing to do this round."


def script(by_agent: dict[str, dict[int, str] | list[str]], default: str = WAIT) -> ScriptedModel:
    """A scripted model: per agent, the reply of its k-th call (missing calls answer ``default``)."""

    def reply(req):
        replies = by_agent.get(req.scope.agent, {})
        i = req.scope.call_index
        if isinstance(replies, list):
            return replies[i] if i < len(replies) else default
        return replies.get(i, default)

    return ScriptedModel(reply)


def of(res, type_: str, **match) -> list[dict]:
    """The result's events of one type whose fields equal ``match``."""
    return [e for e in res.event_list if e["type"] == type_ and all(e.get(k) == v for k, v in match.items())]


def requests_of(model: ScriptedModel, agent: str) -> list:
    """Every request the scripted model received from ``agent``, in order."""
    return [r for r in model.calls if r.scope.agent == agent]


def by_round(by_agent: dict[str, dict[int, str]], default: str = WAIT, latency_s: float = 0.0) -> ScriptedModel:
    """A scripted model: per agent, the reply it gives in round r (0 = planning), whenever it runs then."""

    def reply(req):
        return by_agent.get(req.scope.agent, {}).get(req.view.round, default)

    return ScriptedModel(reply, latency_s=latency_s)


def rounds_run(res, agent: str) -> list[int]:
    """Rounds (>= 1) in which ``agent`` ran, from round_dispatch."""
    return [e["round"] for e in res.event_list if e["type"] == "round_dispatch" and agent in e["agents"]]


def discover(*nodes: tuple[str, str], tag: str = "discover_task") -> str:
    """A planning reply discovering ``(id, comma-separated deps)`` nodes."""
    return "Planning the work.\n" + "\n".join(
        f'<{tag} id="{nid}" title="Task {nid}" dependencies="{deps}">Do {nid}.</{tag}>' for nid, deps in nodes)
