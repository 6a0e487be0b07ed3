"""Round machinery shared by every team: agents, the event log, model calls, and the actions every team
understands (files, scripts, tests, messages).

A team module subclasses :class:`Team`, says which actions each role may use, builds each agent's view,
and runs its rounds. Model calls for the agents acting in a round run concurrently in threads (so a
trial works inside Jupyter's running event loop); their actions are applied afterwards in a fixed,
recorded order, so a trial replays exactly.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from latte_lab import actions as A
from latte_lab import prompts
from latte_lab.errors import LatteError, WorkspaceError
from latte_lab.events import REPLY_LOG_CHARS, EventLog
from latte_lab.graph import SYSTEM_AGENT
from latte_lab.graph.history import GraphHistory
from latte_lab.models.base import AgentView, Message, ModelRequest, ModelResponse, Scope
from latte_lab.models.view import note_reply
from latte_lab.teams.clock import VIRTUAL_SCRIPT_SECONDS, VIRTUAL_TEST_SECONDS, VirtualClock
from latte_lab.teams.replies import (
    EVENT_OUTPUT_TAIL,
    PLANNING_TESTS_TAIL,
    TEST_STATUS_TAIL,  # noqa: F401 - the flat teams import it from here
    TESTS_REPLY_TAIL,
    run_script_reply,
    run_tests_reply,
    stable_output,
    stable_tail,
)

if TYPE_CHECKING:  # pragma: no cover
    from latte_lab.config import TrialConfig
    from latte_lab.sandbox.pytest import TestRun
    from latte_lab.tasks.base import Task
    from latte_lab.workspace import Workspace

LEAD_WINDOW = 10  # Lead's history window during execution, in messages (paper A4.1)
WORKER_WINDOW = 20  # every other agent's history window, in messages (paper A4.1)
PLANNING_WINDOW = 20  # the Lead's window while planning (released code)
READY_PREVIEW_CHARS = 600  # description characters shown per ready task (reference §6)


@dataclass
class Agent:
    """One team member: a system prompt, a message history window and a buffer of unseen messages."""

    name: str
    role: str
    system: str
    window: int = WORKER_WINDOW
    history: list[Message] = field(default_factory=list)
    buffer: list[tuple[str, str]] = field(default_factory=list)  # (sender, text) not yet shown
    current_task: str | None = None
    task_since: int | None = None  # round the current task was taken
    task_shown: str | None = None  # the task id whose details were last shown to the agent
    queue: list[str] = field(default_factory=list)  # tasks assigned while busy
    call_index: int = 0
    files_read: dict[str, str] = field(default_factory=dict)
    test_output: str | None = None
    test_failures: tuple[str, ...] = ()
    tests_passed: bool | None = None
    last_activity_round: int = 0  # latest round with a successful edit or script run (released heartbeat)
    last_action_round: int = 0  # latest round in which a reply of the agent carried any action (paper heartbeat)
    dispatched_last_round: bool = False
    alerts: list[dict] = field(default_factory=list)

    def receive(self, text: str, sender: str = SYSTEM_AGENT) -> None:
        self.buffer.append((sender, text))

    def wipe(self) -> None:
        """Fresh context for the next task (history cleared; unseen messages kept)."""
        self.history.clear()
        self.task_shown = None

    def see_tests(self, run: TestRun, text: str) -> None:
        self.test_output = text
        self.test_failures = tuple(run.failed_tests)
        self.tests_passed = run.ok


@dataclass
class Outcome:
    """How a trial ended (set by the team)."""

    success: bool = False
    reason: str = "max_rounds"
    tests_passed: bool | None = None
    certified_by: str | None = None


class Team:
    """Base of every team structure: a protocol that decides who acts in each round and what they see.

    ``run_trial`` builds the team, then calls ``setup()`` once, ``planning()`` once (round 0), then
    ``run_round(r)`` for r = 1, 2, ... until it returns True or the round budget is spent, then
    ``progress()``. A subclass implements the hooks below; the other methods (``call``, ``apply``,
    ``base_view``, ``begin_round``/``end_round``, ``run_tests``, the ``do_*`` handlers of the file, test
    and message actions) are the machinery it builds them from. Register a subclass with
    ``@latte_lab.teams.register("name")`` to make it a ``TrialConfig(team="name")``.

    Hook contracts (what the engine guarantees, what the hook may change, what it must return):

    ``setup() -> None``
        Called once, after construction, before any model call; ``self.round`` is 0. Must create the
        agents with :meth:`add_agent` (names are unique; the Lead, if any, is ``latte_lab.graph.LEAD``),
        create ``self.graph`` for a graph team, emit one ``initialize`` event listing the agents, and
        put each agent's opening messages in its buffer (``agent.receive``). Must not call the model.
    ``planning() -> bool``
        Called once after ``setup``, in round 0. May call the model (``call``) and mutate the graph and
        the workspace; ends with ``record_snapshot()`` for a graph team. Returns False when the trial
        cannot start, after setting ``self.outcome`` to say why; the engine then runs no round. The
        default does nothing and returns True.
    ``run_round(r) -> bool``
        Called for r = 1, 2, ... Must call ``begin_round(r)`` first and ``end_round()`` last, emit one
        ``round_dispatch`` event naming the agents that ran, build every view of the round before any
        of its calls (``call`` does), and apply replies in a fixed order (``apply``/``apply_in_order``)
        so that a replay is exact. May mutate the graph, the workspace and the agents. Returns True when
        the trial is over, after setting ``self.outcome``; False to continue.
    ``allowed_actions(agent) -> tuple[str, ...]``
        Called while building a view and again for every action the agent emits. Pure (no state
        change). Returns the action tags the agent may use now; any other tag is refused with an
        ``operator_blocked`` event and a message, and its ``do_<tag>`` is never called.
    ``view(agent) -> AgentView``
        Called once per model call, before the round's calls start. Pure. Returns the frame of the
        agent's view (``base_view(agent, phase=...)``: role, round, phase, actions, teammates). The
        request carries it as ``frame``; ``request.view`` reads the rest from the prompt text
        (:func:`latte_lab.models.view.view_from_prompt`) when a model asks for it, so the view a model
        gets carries nothing its prompt does not show.
    ``do_<tag>(agent, action) -> None``
        Called by ``apply`` for each allowed action of a reply, in document order. May change the
        graph, the workspace and any agent's buffer; must emit an event for every effect and tell the
        agent (``agent.receive``) about a refusal. Raising ``LatteError`` is allowed: it becomes an
        ``action_error`` event and a message to the agent, never a crashed trial. A tag with no handler
        is answered "has no effect in this team".
    ``progress() -> tuple[int, int]``
        Called once after the last round. Pure. Returns (tasks_done, total_tasks) in the released
        results.csv sense; the default counts passed/total public tests of the last run.

    State: at each round's end the trial saves the team's :meth:`state` (every attribute but those of
    :data:`WIRING`), so that a fork restores it (:meth:`restore`, then :meth:`rebind` to the fork's config)
    instead of running the rounds again. A subclass's own attributes are saved with it when they hold plain
    data (numbers, strings, lists, tuples, dicts, sets) and latte_lab's own records (agents, messages, test
    runs, the graph); a team holding anything else saves no state, and its forks replay their parent's rounds.
    """

    name = ""  # the registered name (set by ``register``)

    def __init__(self, config: TrialConfig, task: Task, workspace: Workspace, model, log: EventLog,
                 *, seed: int, trial_id: str):
        self.config = config
        self.task = task
        self.ws = workspace
        self.model = model
        self.log = log
        self.seed = seed
        self.trial_id = trial_id
        self.agents: dict[str, Agent] = {}
        self.graph = None
        self.round = 0
        self.clock = VirtualClock(config.tool_time)  # model latency and tool time (teams/clock.py)
        self.input_tokens = 0
        self.output_tokens = 0
        self.n_calls = 0
        self.outcome = Outcome()
        self.last_tests: TestRun | None = None
        self.written_this_round: dict[str, str] = {}
        self.snapshots = GraphHistory()  # the graph per round, as keyframes and operation deltas
        self._pool: ThreadPoolExecutor | None = None
        from latte_lab.models.ledger import CostLedger

        self.ledger = CostLedger()
        self._provider = config.model.partition("/")[0]
        self._calls_wait = calls_wait(model)
        self._roots: tuple | None = None

    # ----- state at a round's end -----
    # What a team is wired to rather than what it holds: given anew to a team that is restored.
    WIRING = ("config", "task", "ws", "model", "log", "seed", "trial_id", "ledger", "snapshots", "clock", "_pool",
              "_provider", "_calls_wait", "_roots")

    def state(self) -> dict:
        """What the team holds at a round's end (its agents, graph, counters, outcome, and a subclass's own
        attributes), its clock's reading and where its graph's history stands: the live objects, not copies (the
        caller encodes them before the next round changes them; :mod:`latte_lab.teams.state`). Everything the
        team is wired to (:data:`WIRING`: config, task, workspace, model, log, ledger, ...) is left out."""
        held = {name: value for name, value in vars(self).items() if name not in self.WIRING}
        return {"attributes": held, "clock": self.clock.state(), "history": self.snapshots.recording_state()}

    def restore(self, state: dict, records: list[dict]) -> None:
        """Become the team whose :meth:`state` was ``state`` (decoded), on a team built with the same team, task
        and size but not set up; ``records`` are the graph's history records up to that point. The workspace
        and the ledger are restored by their owners."""
        vars(self).update(state["attributes"])
        self.clock.restore(state["clock"])
        self.snapshots = GraphHistory.resume(records, self.graph, state["history"])

    def rebind(self, config: TrialConfig) -> None:
        """From the next call on, the team runs under ``config`` (a fork's, at its fork point): its model, seed,
        switches and round budget; the team, task and size stay."""
        self.config, self.seed, self.trial_id = config, config.seed, config.trial_id
        self._provider = config.model.partition("/")[0]
        self.clock.reading = config.tool_time

    # ----- hooks for subclasses (contracts in the class docstring) -----
    def setup(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement setup()")

    def planning(self) -> bool:
        return True

    def run_round(self, r: int) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must implement run_round(r)")

    def allowed_actions(self, agent: Agent) -> tuple[str, ...]:
        raise NotImplementedError(f"{type(self).__name__} must implement allowed_actions(agent)")

    def view(self, agent: Agent) -> AgentView:
        return self.base_view(agent)

    def progress(self) -> tuple[int, int]:
        run = self.last_tests
        if run is None or run.passed + run.failed == 0:
            return 0, 0
        return run.passed, run.passed + run.failed

    def roots(self) -> tuple[str, str]:
        """The workspace's absolute paths, as tool output may show them."""
        root = self.ws.root
        cached = self._roots
        if cached is None or cached[0] is not root:  # resolving costs a system call per path component
            cached = self._roots = (root, (str(root), str(root.resolve())))
        return cached[1]

    def stable(self, text: str) -> str:
        """``stable_output`` for this trial's workspace."""
        return stable_output(text, self.roots())

    def stable_tail(self, text: str, n: int) -> str:
        """``stable_tail`` for this trial's workspace."""
        return stable_tail(text, n, self.roots())

    def project_text(self) -> str:
        """The project introduction every agent receives: title, description, criteria, files."""
        t = self.task
        return prompts.render_project(t.title, t.description, t.success_criteria, self.ws.list_files())

    # ----- agents and calls -----
    def add_agent(self, agent: Agent) -> Agent:
        self.agents[agent.name] = agent
        return agent

    def base_view(self, agent: Agent, phase: str = "execution") -> AgentView:
        """The frame of the agent's view: who is asked, in which role, round and phase, with which actions
        and teammates. The rest of the view is read from the prompt text (:meth:`_request`)."""
        return AgentView(
            task=self.task.id, role=agent.role, agent=agent.name, round=self.round, phase=phase,
            allowed_actions=self.allowed_actions(agent),
            teammates=tuple(n for n in self.agents if n != agent.name),
        )

    def _request(self, agent: Agent, frame: AgentView) -> tuple[ModelRequest, str]:
        history = agent.history[-agent.window:] if agent.window else []
        while history and history[0].role == "assistant":
            history = history[1:]
        new_text = prompts.render_turn(agent.buffer)
        messages = list(history)
        if messages and messages[-1].role == "user":  # never send two user turns in a row
            messages[-1] = Message("user", messages[-1].content + "\n\n" + new_text)
        else:
            messages.append(Message("user", new_text))
        provider, _, model_name = self.config.model.partition("/")
        request = ModelRequest(
            provider=provider, model=model_name or provider, system=agent.system, messages=messages,
            temperature=self.config.temperature, max_tokens=self.config.max_tokens, top_p=self.config.top_p,
            base_url=self.config.base_url,
            scope=Scope(seed=self.seed, agent=agent.name, call_index=agent.call_index, trial=self.trial_id),
            frame=frame,  # the simulated model reads the rest of its view from the prompt
        )
        return request, new_text

    def call(self, agents: list[Agent], *, sequential: bool = False) -> list[tuple[Agent, ModelResponse]]:
        """Calls the model for each agent (concurrently), records replies and returns them in input order.

        Views are built before any call, so agents acting in the same round see the same state.
        """
        if not agents:
            return []
        prepared = [(agent, *self._request(agent, self.view(agent))) for agent in agents]
        # A call that fails (a budget spent, an API error) must not lose the replies of the round that were
        # already paid for: those are recorded first, then the first failure is raised.
        answered: list[tuple[tuple, ModelResponse]] = []
        failure: BaseException | None = None
        if sequential or len(prepared) == 1 or not self._calls_wait:
            for item in prepared:
                try:
                    answered.append((item, self.model.generate(item[1])))
                except Exception as exc:  # noqa: BLE001 - raised below, after the recording
                    failure = exc
                    break
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=max(4, len(self.agents)), thread_name_prefix="latte-call")
            futures = [(item, self._pool.submit(self.model.generate, item[1])) for item in prepared]
            for item, future in futures:
                try:
                    answered.append((item, future.result()))
                except Exception as exc:  # noqa: BLE001 - raised below, after the recording
                    failure = failure or exc
        out = []
        for (agent, req, new_text), resp in answered:
            agent.history.append(Message("user", new_text))
            agent.history.append(Message("assistant", resp.text))
            agent.buffer.clear()
            agent.call_index += 1
            agent.alerts = []
            self.input_tokens += resp.usage.input_tokens
            self.output_tokens += resp.usage.output_tokens
            self.n_calls += 1
            self.ledger.record(agent.name, self.round, resp, provider=self._provider)
            self.log.emit(
                "agent_reply", agent=agent.name, role=agent.role, text=resp.text, n_chars=len(resp.text),
                n_chars_logged=min(len(resp.text), REPLY_LOG_CHARS), input_tokens=resp.usage.input_tokens,
                output_tokens=resp.usage.output_tokens, latency_s=resp.latency_s, cached=resp.cached,
                call_index=req.scope.call_index,
            )
            out.append((agent, resp))
        self.clock.step({agent.name: resp.latency_s for agent, resp in out})
        if failure is not None:
            raise failure
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    # ----- applying actions -----
    def parse(self, agent: Agent, text: str) -> list:
        result = A.parse_actions(text)
        note_reply(text, result.actions)  # the reply comes back in the agent's next prompts
        for err in result.errors:
            self.log.emit("parse_error", agent=agent.name, tag=err.tag, message=err.message)
            agent.receive(f"⚠️ Could not read your <{err.tag}> tag: {err.message}")
        acts = list(result.actions)
        if self.config.dedupe_actions:
            acts = A.dedupe(acts)
        return acts

    def apply(self, agent: Agent, text: str) -> None:
        """Parses one reply and applies its actions in document order."""
        actions = self.parse(agent, text)
        if actions:
            agent.last_action_round = self.round
        for action in actions:
            tag = action_tag(action)
            if tag not in self.allowed_actions(agent):
                self.log.emit("operator_blocked", agent=agent.name, operator=tag,
                              task=getattr(action, "id", None), reason="not_available")
                agent.receive(f"⚠️ <{tag}> is not available to you ({agent.role}) in this team; "
                              f"your actions are: {', '.join(self.allowed_actions(agent))}.")
                continue
            handler = getattr(self, f"do_{tag}", None)
            if handler is None:  # an action this team does not implement
                agent.receive(f"⚠️ <{tag}> has no effect in this team.")
                continue
            try:
                handler(agent, action)
            except LatteError as exc:  # a refused action is a message to the agent, never a crash
                self.log.emit("action_error", agent=agent.name, action=tag, message=str(exc))
                agent.receive(f"⚠️ {tag} failed: {exc}")

    def apply_in_order(self, replies: list[tuple[Agent, ModelResponse]]) -> list[Agent]:
        """Applies a round's replies: fixed agent order, or reply-arrival order (released code)."""
        order = list(replies)
        if self.config.claim_resolution == "arrival":
            names = list(self.agents)
            order.sort(key=lambda ar: (ar[1].latency_s, names.index(ar[0].name)))
        self.log.emit("apply_order", agents=[a.name for a, _ in order])
        for agent, resp in order:
            self.apply(agent, resp.text)
        return [a for a, _ in order]

    # ----- common action handlers -----
    def do_edit_file(self, agent: Agent, action):
        """Writes the file; returns the workspace's write record, or None when the edit was refused."""
        path = action.path
        if self.config.file_lock:
            owner = self.written_this_round.get(path)
            if owner is not None and owner != agent.name:
                self.log.emit("edit_blocked", agent=agent.name, path=path, reason=f"file_locked_by_{owner}")
                agent.receive(prompts.render_edit_locked(path, owner))
                return None
        try:
            record = self.ws.write(path, action.content, agent=agent.name, round=self.round)
        except WorkspaceError as exc:
            self.log.emit("edit_blocked", agent=agent.name, path=path, reason=str(exc))
            agent.receive(prompts.render_edit_refused(path, str(exc)))
            return None
        self.written_this_round.setdefault(path, agent.name)
        agent.files_read[record.path] = action.content  # it knows what it wrote
        agent.last_activity_round = self.round
        self.log.emit("edit_file", agent=agent.name, path=record.path, n_chars=record.n_chars,
                      symbols=list(record.symbols), created=record.created, content=action.content)
        return record

    def do_read_file(self, agent: Agent, action) -> None:
        try:
            text = self.ws.read(action.path, agent=agent.name)
        except WorkspaceError as exc:
            self.log.emit("read_file", agent=agent.name, path=action.path, ok=False)
            agent.receive(prompts.render_file_not_found(action.path, str(exc)))
            return
        cap = self.config.read_file_cap
        shown = text[:cap]
        agent.files_read[action.path] = shown
        self.log.emit("read_file", agent=agent.name, path=action.path, ok=True)
        agent.receive(prompts.render_file(action.path, shown, len(text) - cap))

    def do_run_script(self, agent: Agent, action) -> None:
        try:
            run = self.ws.run_script(action.path)
        except WorkspaceError as exc:
            agent.receive(prompts.render_script_error(action.path, str(exc)))
            self.log.emit("run_script", agent=agent.name, path=action.path, returncode=None, error=str(exc))
            return
        self.clock.tool_ran(agent.name, VIRTUAL_SCRIPT_SECONDS)
        agent.last_activity_round = self.round
        self.log.emit("run_script", agent=agent.name, path=action.path, returncode=run.returncode,
                      timed_out=run.timed_out, real_seconds=run.seconds,
                      stdout_tail=self.stable_tail(run.stdout, EVENT_OUTPUT_TAIL),
                      stderr_tail=self.stable_tail(run.stderr, EVENT_OUTPUT_TAIL))
        agent.receive(run_script_reply(run, self.roots()))

    def run_tests(self, by: str = SYSTEM_AGENT) -> TestRun:
        """Runs the public tests (memoised on identical workspace contents) and logs the run."""
        run = self.ws.run_tests()
        self.clock.tool_ran(by, VIRTUAL_TEST_SECONDS)
        self.last_tests = run
        from latte_lab.sandbox.pytest import infrastructure_error

        infrastructure = infrastructure_error(run)
        self.log.emit("run_tests", agent=by, returncode=run.returncode, passed=run.passed, failed=run.failed,
                      errors=run.errors, real_seconds=run.seconds, test_cached=run.cached,
                      failed_tests=list(run.failed_tests), stdout_tail=self.stable_tail(run.stdout, EVENT_OUTPUT_TAIL),
                      **({"infrastructure_error": infrastructure} if infrastructure else {}))
        return run

    def tests_text(self, run: TestRun, tail: int = TESTS_REPLY_TAIL) -> str:
        """``run_tests_reply`` for this trial's workspace."""
        return run_tests_reply(run, tail, self.roots())

    def do_run_tests(self, agent: Agent, action) -> None:
        run = self.run_tests(by=agent.name)
        tail = PLANNING_TESTS_TAIL if self.round == 0 else TESTS_REPLY_TAIL
        text = self.tests_text(run, tail)
        agent.see_tests(run, text)
        agent.receive(text)

    def do_broadcast(self, agent: Agent, action) -> None:
        self.log.emit("broadcast", sender=agent.name, message=action.text)
        for other in self.agents.values():
            if other.name != agent.name:
                other.receive(action.text, sender=agent.name)

    def do_synthesize(self, agent: Agent, action) -> None:
        self.log.emit("synthesize", agent=agent.name, text=action.text)

    def do_request_status(self, agent: Agent, action) -> None:
        self.log.emit("request_status", agent=agent.name)
        agent.receive(prompts.render_team_status({a.name: a.current_task for a in self.agents.values()}))

    # ----- round bookkeeping -----
    def begin_round(self, r: int) -> None:
        self.round = r
        self.log.round = r
        self.written_this_round = {}
        self.clock.begin_round()
        self.log.emit("round_start")

    def end_round(self) -> None:
        self.clock.end_round()

    @property
    def vclock(self) -> float:
        """The virtual clock's reading (seconds): model latency and tool time so far."""
        return self.clock.now

    def record_snapshot(self) -> dict | None:
        if self.graph is None:
            return None
        return self.snapshots.record(self.round, round(self.vclock, 6), self.graph)


def calls_wait(model) -> bool:
    """Whether the model's calls wait on something outside this process (a server), so that a round's calls
    gain from running in threads. A model that computes its replies here (the simulated agents, a cassette's
    replay, a script) only pays the threads' hand-offs under the GIL: its calls run one after another."""
    from latte_lab.models.cassette import CassetteModel
    from latte_lab.models.scripted import ScriptedModel

    inner = model
    while hasattr(inner, "inner"):  # recording, budget and cache wrappers
        inner = inner.inner
    local: tuple[type, ...] = (CassetteModel, ScriptedModel)
    sim = sys.modules.get("latte_lab.models.sim")  # not imported: the model is not a simulated one
    if sim is not None:
        local += (sim.SimulatedModel,)
    return not isinstance(inner, local)


def action_tag(action) -> str:
    """The tag name of a parsed action (``plan_task`` counts as ``discover_task``)."""
    tag = getattr(action, "tag", None)
    if not tag:
        name = type(action).__name__
        tag = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
    return "discover_task" if tag == "plan_task" else tag

