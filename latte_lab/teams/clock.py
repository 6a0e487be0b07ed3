"""The virtual clock of a trial: model latency plus tool time, deterministic across replays and machines.

A round is a sequence of *steps* (the Lead's call, then the dispatched workers' calls, ...). A step lasts as long
as its slowest call; what the agents' tools add on top of the calls is the clock's *reading* of tool time
(``TrialConfig.tool_time``, docs/fidelity.md's "Step 4: tool time"), one strategy each:

* ``parallel`` (the paper's "all selected agents act in parallel"): each agent's call and then its own tool runs
  lie on a timeline of their own; the step ends when the last of them does;
* ``event_loop`` (the released code): replies are processed one at a time in order of arrival (ties: team
  order), so the tool runs of different agents take turns while the other calls go on;
* ``summed`` (latte_lab's earlier reading): the longest call, then every tool run of the round one after another.

Tool runs charge a nominal cost (:data:`VIRTUAL_TEST_SECONDS`, :data:`VIRTUAL_SCRIPT_SECONDS`); the measured
seconds are recorded beside, as ``real_seconds``.

>>> clock = VirtualClock("parallel")
>>> clock.begin_round()
>>> clock.step({"Dev1": 3.0, "Dev2": 4.0})            # the step's calls: the clock moves by the longest
>>> clock.tool_ran("Dev1", 2.0); clock.tool_ran("Dev2", 2.0)
>>> [round(READINGS[r](clock.steps, clock.serial, clock.total), 6) for r in ("parallel", "event_loop", "summed")]
[2.0, 3.0, 4.0]
>>> clock.end_round(); clock.now                      # 4 s of calls, then Dev2's tools beyond its call: 2 s
6.0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

VIRTUAL_TEST_SECONDS = 2.0  # what one test run adds to the clock, whatever it measured
VIRTUAL_SCRIPT_SECONDS = 1.0  # what one script run adds

Steps = list[dict[str, list[float]]]  # the round's steps: agent -> [its call's latency, its tool seconds]
ToolTime = Callable[[Steps, float, float], float]  # (steps, orchestrator's tool seconds, all tool seconds) -> seconds


def parallel(steps: Steps, serial: float, total: float) -> float:
    """Each agent's tools run right after its own call, beside the others': a step ends with the latest of them."""
    extra = serial
    for step in steps:
        longest = max(lat for lat, _ in step.values())
        extra += max(lat + tools for lat, tools in step.values()) - longest
    return extra


def event_loop(steps: Steps, serial: float, total: float) -> float:
    """Replies are processed one at a time in order of arrival (ties: team order): one agent's tools wait for the
    tools of the agents whose replies came first."""
    extra = serial
    for step in steps:
        longest = max(lat for lat, _ in step.values())
        end = 0.0
        for lat, tools in sorted(step.values(), key=lambda v: v[0]):
            end = max(end, lat) + tools
        extra += max(end, longest) - longest
    return extra


def summed(steps: Steps, serial: float, total: float) -> float:
    """Every tool run of the round one after another, after the calls."""
    return total


READINGS: dict[str, ToolTime] = {"parallel": parallel, "event_loop": event_loop, "summed": summed}
"""The readings of tool time, by ``TrialConfig.tool_time`` value."""


class VirtualClock:
    """The trial's clock (``now``, seconds) and the tool time of the round under way, read by ``reading``
    (a name of :data:`READINGS` or a function of the same signature)."""

    def __init__(self, reading: str | ToolTime = "parallel"):
        self.reading = reading
        self.now = 0.0
        self.steps: Steps = []
        self.serial = 0.0  # tool seconds of no agent's step (the orchestrator's test runs)
        self.total = 0.0  # every tool second of the round

    def begin_round(self) -> None:
        self.steps, self.serial, self.total = [], 0.0, 0.0

    def step(self, latencies: Mapping[str, float]) -> None:
        """One step's calls, by agent: the clock moves by the longest."""
        if latencies:
            self.now += max(latencies.values())
        self.steps.append({name: [latency, 0.0] for name, latency in latencies.items()})

    def tool_ran(self, who: str, seconds: float) -> None:
        """Charges a tool run to the latest step in which ``who`` was called (else to the orchestrator)."""
        self.total += seconds
        step = next((s for s in reversed(self.steps) if who in s), None)
        if step is None:
            self.serial += seconds
        else:
            step[who][1] += seconds

    def tool_seconds(self) -> float:
        """The round's tool time beyond the calls' latencies already on the clock, by the reading."""
        reading = READINGS[self.reading] if isinstance(self.reading, str) else self.reading
        return reading(self.steps, self.serial, self.total)

    def end_round(self) -> None:
        self.now += self.tool_seconds()
        self.begin_round()

    def state(self) -> dict:
        """What the clock holds at a round's end (nothing of a round is under way then)."""
        return {"now": self.now}

    def restore(self, state: Mapping) -> None:
        self.now = float(state["now"])
        self.begin_round()
