"""The shared base of the teams that coordinate through a task graph (``latte`` and ``static``).

A round (paper Algorithm 1): heartbeat, frontier, Lead invocation, worker dispatch, parallel worker
steps applied in a fixed order, then the termination check (all nodes done -> public tests). What the
two teams do differently is in their modules: LATTE adds a fix task when the tests are red and keeps
every operator open; the static team refuses discovery, self-claims, release and verify after
planning, runs every worker every round and ends on red tests.
"""

from __future__ import annotations

from collections.abc import Callable

from latte_lab import prompts
from latte_lab.errors import OperatorError
from latte_lab.graph import LEAD, SYSTEM_AGENT, CoordinationGraph
from latte_lab.teams.engine import (
    LEAD_WINDOW,
    PLANNING_WINDOW,
    READY_PREVIEW_CHARS,
    WORKER_WINDOW,
    Agent,
    Outcome,
    Team,
    action_tag,
)
from latte_lab.teams.prompt_text import prompt

EXPLORE_ACTIONS = ("run_tests", "read_file", "run_script")
PREDECESSOR_PREVIEW_CHARS = 300  # description characters shown per predecessor (D4 context; keeps it scoped)


class GraphTeam(Team):
    """A Lead and N workers around a :class:`~latte_lab.graph.CoordinationGraph` (not registered itself).

    Subclasses set the prompts and the action sets, and implement :meth:`on_red_tests`. The round is
    built from further hooks, each called once per round in this order:

    ``heartbeat(r) -> bool``
        Step 1. May append alerts to the Lead's buffer; returns whether any fired.
    ``invoke_lead(r, fired) -> bool``
        Step 3 for the Lead: decides whether the Lead runs, runs it (``call`` then ``apply``) and
        returns whether it ran. May change the graph (through the Lead's actions).
    ``select_workers() -> list[Agent]``
        Step 3 for the workers, after the Lead's step. Pure. Returns the workers to run, in team order.
    ``worker_context(agent)``
        Called for each selected worker before the calls; puts its round message in its buffer.
    ``termination_check() -> bool`` / ``on_red_tests(run) -> bool``
        Step 5. When every node is done the public tests run; green ends the trial, red calls
        ``on_red_tests``, which returns True to end the trial (after setting ``self.outcome``).
    """

    lead_prompt = "latte_lead"
    planning_prompt = "latte_lead_planning"
    worker_prompt = "latte_worker"
    lead_at_start = False  # invoke the Lead in round 1 whatever the triggers say (the static team's assignments)

    LEAD_PLANNING_ACTIONS: tuple[str, ...] = ("discover_task", *EXPLORE_ACTIONS)
    LEAD_ACTIONS: tuple[str, ...] = ()
    WORKER_ACTIONS: tuple[str, ...] = ()

    # ----- set-up and planning -----
    def setup(self) -> None:
        n = self.config.n_workers
        self.workers = [f"Dev{i}" for i in range(1, n + 1)]
        self.graph = CoordinationGraph(roles=self.config.roles, lead=LEAD, workers=self.workers,
                                       verify_reroute=self.config.verify_reroute)
        lead_system = prompt(self.lead_prompt, workers=", ".join(self.workers))
        lead_system += f"\n\nYou are coordinating {n} teammates: {', '.join(self.workers)}."
        self.lead = self.add_agent(Agent(LEAD, "lead", lead_system, window=PLANNING_WINDOW))
        for name in self.workers:
            self.add_agent(Agent(name, "worker", prompt(self.worker_prompt, agent=name), window=WORKER_WINDOW))
        self._alerted: set[str] = set()
        self._lead_sig: tuple | None = None  # the graph as the Lead last saw it (``_graph_sig``)
        self._lead_skips = 0
        self.node_outputs: dict[str, dict[str, set[str]]] = {}  # node -> path -> symbols written for it
        self._seen_state: dict[str, tuple | None] = {}  # worker -> its task as it was shown at its last turn
        self._planning_turn = 0
        self._dispatched_prev = True
        self.log.emit("initialize", agents=list(self.agents), lead=LEAD, num_teammates=n)

    def planning(self) -> bool:
        self.round = 0
        self.log.round = 0
        self.log.emit("planning_phase_start")
        lead = self.lead
        lead.receive(prompt(self.planning_prompt))
        lead.receive(self.project_text())
        turns = 0
        for turn in range(1, self.config.planning_turns + 1):
            turns = turn
            self._planning_turn = turn
            [(_, resp)] = self.call([lead])
            self.log.emit("planning_reply", agent=LEAD, turn=turn, text=resp.text)
            explored = False
            for action in self.parse(lead, resp.text):
                tag = action_tag(action)
                explored = explored or tag in EXPLORE_ACTIONS
                if tag not in self.allowed_actions(lead):
                    self.log.emit("operator_blocked", agent=LEAD, operator=tag, task=getattr(action, "id", None),
                                  reason="planning")
                    lead.receive(f"⚠️ <{tag}> is not available while planning; emit <discover_task> tags.")
                    continue
                try:
                    getattr(self, f"do_{tag}")(lead, action)
                except OperatorError as exc:
                    lead.receive(f"⚠️ {tag} failed: {exc}")
            self.end_round()
            if len(self.graph) > 0:
                break
            if not explored:
                lead.receive("Your reply had no <discover_task> tags and no exploration actions. Explore with "
                             "<run_tests />, <read_file /> or <run_script />, then emit <discover_task> tags.")
        reason = "max_turns" if len(self.graph) == 0 else "graph_ready"
        self.log.emit("planning_phase_end", tasks_discovered=len(self.graph), turns=turns, reason=reason)
        self.record_snapshot()
        if len(self.graph) == 0:
            self.outcome = Outcome(False, "planning_failed")
            self.log.emit("planning_failed", message=f"the Lead produced no task in {turns} planning turns")
            return False
        lead.wipe()
        lead.window = LEAD_WINDOW
        self._lead_sig = self._graph_sig()  # the Lead made G_0: changes are counted from there
        intro = self.project_text()
        for agent in self.agents.values():
            agent.receive(intro)
        self.log.round = None
        return True

    # ----- views -----
    def allowed_actions(self, agent: Agent) -> tuple[str, ...]:
        if agent.role == "lead":
            return self.LEAD_PLANNING_ACTIONS if self.round == 0 else self.LEAD_ACTIONS
        return self.WORKER_ACTIONS

    def _node_dict(self, nid: str, preview: int | None = None) -> dict:
        node = self.graph.node(nid)
        desc = node["description"] or ""
        return {"id": nid, "title": node["title"], "description": desc[:preview] if preview else desc,
                "status": str(node["status"])}

    def view(self, agent: Agent):
        return self.base_view(agent, phase="planning" if agent.role == "lead" and self.round == 0 else "execution")

    def lead_summary(self) -> str:
        """The graph as the Lead sees it each time it is invoked (reference §5.1)."""
        g = self.graph
        done = [n for n in g.nodes() if str(g.status(n)) in ("done", "verified")]
        nodes = []
        for nid in g.nodes():
            st = str(g.status(nid))
            if st in ("done", "verified"):
                continue
            node = g.node(nid)
            nodes.append({"id": nid, "title": node["title"], "status": st, "owner": node["agent"],
                          "deps": node["deps"]})
        return prompts.render_graph({
            "done_count": len(done), "nodes": nodes,
            "ready": [{"id": nid, "title": g.node(nid)["title"]} for nid in g.frontier()],
            "workers": {w: self.agents[w].current_task for w in self.workers},
            "critical_path": g.critical_path(),
        })

    def worker_context(self, agent: Agent) -> None:
        if agent.current_task is None:
            ready = [self._node_dict(nid, READY_PREVIEW_CHARS) for nid in self.graph.frontier()]
            agent.receive(prompts.render_ready(ready))
        elif agent.task_shown != agent.current_task:
            task = self._node_dict(agent.current_task)
            if self.config.worker_context == "paper":
                task["predecessors"] = self.predecessors(agent.current_task)
            agent.receive(prompts.render_task(task))
            agent.task_shown = agent.current_task
        elif self.config.dispatch == "paper" and self._task_state(agent) != self._seen_state.get(agent.name):
            agent.receive(self._task_update(agent))
        elif not agent.buffer:  # dispatched with nothing new: only a dispatch rule that runs busy workers anyway
            agent.receive(f"Continue working on task {agent.current_task}.")
        self._seen_state[agent.name] = self._task_state(agent)

    def _task_state(self, agent: Agent) -> tuple | None:
        """The worker's task as G_t shows it: id, status, owner, dependencies, and which of its
        predecessors are finished (its context per D4 includes its predecessors)."""
        nid = agent.current_task
        if nid is None or nid not in self.graph:
            return None
        node = self.graph.node(nid)
        deps = tuple(node["deps"])
        finished = tuple(d for d in deps if d in self.graph and str(self.graph.status(d)) in ("done", "verified"))
        return (nid, str(node["status"]), node["agent"], deps, finished)

    def _task_update(self, agent: Agent) -> str:
        nid, status, _, deps, finished = self._task_state(agent)
        seen = self._seen_state.get(agent.name)
        same = seen is not None and seen[0] == nid
        new_deps = [d for d in deps if not same or d not in seen[3]]
        newly_done = [d for d in finished if not same or d not in seen[4]]
        return prompts.render_task_update(nid, status, new_deps, newly_done)

    def predecessors(self, nid: str) -> list[dict]:
        """The direct predecessors of a node as its worker sees them (D4): what they were and produced."""
        out = []
        for d in self.graph.deps(nid):
            node = self.graph.node(d)
            files = self.node_outputs.get(d, {})
            out.append({"id": d, "title": node["title"], "status": str(node["status"]),
                        "description": (node["description"] or "")[:PREDECESSOR_PREVIEW_CHARS],
                        "done_by": node["completed_by"], "files": {p: sorted(files[p]) for p in sorted(files)}})
        return out

    def predecessors_text(self, nid: str) -> str:
        return prompts.render_predecessors(self.predecessors(nid))

    # ----- the round -----
    def run_round(self, r: int) -> bool:
        self.begin_round(r)
        fired = self.heartbeat(r)
        ran = [LEAD] if self.invoke_lead(r, fired) else []
        dispatched = self.select_workers()
        self.log.emit("round_dispatch", n_dispatched=len(dispatched), n_total=len(self.workers),
                      agents=ran + [a.name for a in dispatched], n_dispatched_released=len(dispatched),
                      n_total_released=len(self.workers))
        for agent in dispatched:
            self.worker_context(agent)
        self.apply_in_order(self.call(dispatched))
        names = {a.name for a in dispatched}
        for w in self.workers:
            self.agents[w].dispatched_last_round = w in names
        self._dispatched_prev = bool(dispatched)
        finished = self.termination_check()
        self.record_snapshot()  # after the check, so a fix task shows in the round that added it
        self.end_round()
        return finished

    def heartbeat(self, r: int) -> bool:
        """Step 1: flags stalled workers to the Lead (``heartbeat_rule``); returns whether any alert fired."""
        H = self.config.heartbeat
        fired = False
        for name in self.workers:
            w = self.agents[name]
            if not w.current_task or w.task_since is None:
                continue
            rounds_active = r - w.task_since
            if self.config.heartbeat_rule == "paper":
                # Algorithm 1: no actions in H consecutive rounds; counted from the later of its last action
                # and the round it got the task, and repeated after every further H silent rounds
                last = max(w.last_action_round, w.task_since)
                silent = r - 1 - last
                if silent < H or silent % H:
                    continue
                alert = prompts.render_heartbeat(name, w.current_task, silent, w.last_action_round, rule="paper")
            else:
                last = w.last_activity_round
                silent = r - last
                if w.current_task in self._alerted or rounds_active < H or silent < H:
                    continue
                self._alerted.add(w.current_task)
                alert = prompts.render_heartbeat(name, w.current_task, rounds_active, last, rule="activity")
            fired = True
            self.log.emit("heartbeat_alert", agent=name, task=w.current_task, rounds_active=rounds_active,
                          last_activity_round=last, rounds_without_activity=silent, rule=self.config.heartbeat_rule)
            self.lead.alerts.append({"agent": name, "task": w.current_task, "rounds_active": rounds_active,
                                     "rounds_silent": silent})
            self.lead.receive(alert)
        return fired

    def invoke_lead(self, r: int, fired: bool) -> bool:
        """Step 3 for the Lead (``lead_triggers``): runs it when a trigger holds; returns whether it ran."""
        lead = self.lead
        paper = self.config.lead_triggers == "paper"
        sig = self._graph_sig()
        reasons = []
        if r == 1 and (self.lead_at_start or not paper):
            reasons.append("first_round")
        if self._lead_sig is not None and sig != self._lead_sig:
            reasons.append("graph_changed")
        if fired:
            reasons.append("heartbeat")
        if not paper and lead.buffer:
            reasons.append("messages")
        if self._lead_skips >= self.config.lead_idle_limit:
            reasons.append("idle_limit")
        if not paper and not self.graph.all_done() and not self.graph.frontier() \
                and all(self.agents[w].current_task is None for w in self.workers):
            reasons.append("team_stuck")
        if not reasons:
            self._lead_skips += 1
            self.log.emit("lead_skipped", reason="no_change", consecutive_skips=self._lead_skips)
            return False
        self._lead_skips = 0
        lead.receive(self.lead_summary())
        self.log.emit("lead_invoked", reasons=reasons)
        [(_, resp)] = self.call([lead])
        self.apply(lead, resp.text)
        self._lead_sig = self._graph_sig()
        return True

    def _graph_sig(self) -> tuple:
        """What "the graph changed" compares (``graph_change``): every applied operator, or the counts."""
        if self.config.graph_change == "any":
            return (self.graph.version,)
        counts = self.graph.counts()
        return (len(self.graph), counts.get("done", 0) + counts.get("verified", 0))

    def has_new_context(self, agent: Agent) -> bool:
        """Whether a busy worker has something new since its last turn: a message or a tool result, a task it
        has not been shown, or a change of its task in G_t (its own claim of an assigned task included)."""
        return (bool(agent.buffer) or agent.task_shown != agent.current_task
                or self._task_state(agent) != self._seen_state.get(agent.name))

    def select_workers(self) -> list[Agent]:
        """Busy workers per ``dispatch``, plus min(|frontier|, idle) idle workers, in team order."""
        mode = self.config.dispatch
        frontier = self.graph.frontier()
        workers = [self.agents[w] for w in self.workers]
        active = [w for w in workers if w.current_task]
        idle = [w for w in workers if not w.current_task]
        if mode == "paper":
            active = [w for w in active if self.has_new_context(w)]
        elif mode == "released":
            active = [w for w in active if w.buffer or not w.dispatched_last_round]
        chosen_idle = idle[:len(frontier)]
        if mode != "paper" and not active and not chosen_idle and idle and not self._dispatched_prev:
            chosen_idle = idle[:1]  # nobody ran last round either: let one idle worker look around
        chosen = {a.name for a in active + chosen_idle}
        return [w for w in workers if w.name in chosen]

    def termination_check(self) -> bool:
        """Step 5: every node done -> run the public tests; green ends the trial, red is ``on_red_tests``."""
        if len(self.graph) == 0 or not self.graph.all_done():
            return False
        run = self.run_tests(by=SYSTEM_AGENT)
        if run.ok:
            self.outcome = Outcome(True, "all_tasks_done", tests_passed=True)
            return True
        return self.on_red_tests(run)

    def on_red_tests(self, run) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must implement on_red_tests(run)")

    # ----- graph operators -----
    def _take(self, agent: Agent, nid: str) -> None:
        agent.current_task = nid
        agent.task_since = self.round

    def _free(self, name: str | None, nid: str, note: str | None = None) -> None:
        if name is None or name not in self.agents:
            return
        agent = self.agents[name]
        if agent.current_task == nid:
            agent.current_task = None
            agent.task_since = None
            agent.wipe()
            if note:
                agent.receive(note)
            while agent.queue:  # a task the Lead assigned while the agent was busy
                nxt = agent.queue.pop(0)
                if nxt in self.graph and self.graph.agent(nxt) == name and str(self.graph.status(nxt)) == "assigned":
                    self._take(agent, nxt)
                    break
        elif nid in agent.queue:
            agent.queue.remove(nid)

    def _operate(self, agent: Agent, operator: str, nid: str, apply, *, blocked: str = "operator_blocked",
                 message: Callable[[str], str] | None = None) -> bool:
        """Applies one graph operator; a refusal becomes an event and a message to the agent."""
        try:
            apply()
            return True
        except OperatorError as exc:
            fields = {"agent": agent.name, "task": nid, "reason": exc.reason}
            if blocked == "operator_blocked":
                fields["operator"] = operator
            self.log.emit(blocked, **fields)
            text = message(exc.reason) if message is not None else f"⚠️ {operator} '{nid}' rejected: {exc.reason}"
            if text:
                agent.receive(text)
            return False

    def do_discover_task(self, agent: Agent, action) -> None:
        if action.id in self.graph:
            self.log.emit("discover_task_skipped", agent=agent.name, task=action.id, reason="duplicate_id")
            agent.receive(prompts.render_duplicate_task(action.id))
            return
        deps = list(action.dependencies)
        unknown = [d for d in deps if d not in self.graph]
        if unknown and self.config.unknown_deps == "drop":
            for d in unknown:
                self.log.emit("discover_task_warning", agent=agent.name, task=action.id, dropped_dep=d,
                              reason="unknown_dependency_id")
            deps = [d for d in deps if d in self.graph]
        if not self._operate(agent, "discover_task", action.id, lambda: self.graph.discover(
                action.id, deps=deps, title=action.title, description=action.description, by=agent.name)):
            return
        self.log.emit("discover_task", agent=agent.name, task=action.id, title=action.title, dependencies=deps)

    def do_assign_task(self, agent: Agent, action) -> None:
        to = action.to  # the graph refuses a name that is not a worker (paper rules; official: a ghost owner)
        if not self._operate(agent, "assign_task", action.id, lambda: self.graph.assign(action.id, to, by=agent.name)):
            return
        self.log.emit("assign_task", task=action.id, assigner=agent.name, assignee=to)
        if to not in self.workers:
            return
        node = self.graph.node(action.id)
        worker = self.agents[to]
        worker.receive(prompts.render_assigned(action.id, node["title"], node["description"]), sender=agent.name)
        if worker.current_task is None:
            self._take(worker, action.id)
        else:
            worker.queue.append(action.id)

    def do_claim_task(self, agent: Agent, action) -> None:
        nid = action.id
        if agent.current_task and agent.current_task != nid:
            self.log.emit("claim_blocked", agent=agent.name, task=nid, reason="busy")
            agent.receive(prompts.render_claim_busy(nid, agent.current_task))
            return
        # order: the loser is told (paper A4.4); arrival: silently ignored (released code)
        if self.config.claim_resolution == "order":
            def loser_note(reason: str) -> str:
                return prompts.render_claim_lost(nid, reason)
        else:
            def loser_note(reason: str) -> str:
                return ""
        if not self._operate(agent, "claim_task", nid, lambda: self.graph.claim(nid, agent.name),
                             blocked="claim_blocked", message=loser_note):
            return
        self.log.emit("claim_task", agent=agent.name, task=nid)
        if agent.current_task != nid:
            self._take(agent, nid)

    def do_complete_task(self, agent: Agent, action) -> None:
        nid = action.id
        if not self._operate(agent, "complete_task", nid, lambda: self.graph.complete(nid, agent.name)):
            return
        self.log.emit("complete_task", agent=agent.name, task=nid)
        self._log_verified(nid)
        self._free(agent.name, nid)

    def _log_verified(self, nid: str) -> None:
        """A task_verified event when finishing verify node ``nid`` made its target verified."""
        verified = self.graph.log_since(self.graph.version - 1)[0].get("verified")
        if verified:
            self.log.emit("task_verified", task=verified, verify_id=nid)

    def do_release_task(self, agent: Agent, action) -> None:
        nid = action.id
        prev = self.graph.agent(nid) if nid in self.graph else None
        if not self._operate(agent, "release_task", nid, lambda: self.graph.release(nid, by=agent.name),
                             blocked="release_task_blocked"):
            return
        self.log.emit("release_task", task=nid, prev_owner=prev, requester=agent.name, reason="lead_requested")
        self._free(prev, nid, note=prompts.render_task_released(nid, agent.name))

    def do_close_task(self, agent: Agent, action) -> None:
        nid = action.id
        prev = self.graph.agent(nid) if nid in self.graph else None
        if not self._operate(agent, "close_task", nid, lambda: self.graph.close(nid, by=agent.name),
                             blocked="close_task_blocked"):
            return
        self.log.emit("close_task", task=nid, prev_owner=prev, agent=agent.name)
        self._log_verified(nid)
        self._free(prev, nid, note=prompts.render_task_closed(nid, agent.name))

    def do_verify_task(self, agent: Agent, action) -> None:
        nid = action.id
        before = set(self.graph.successors(nid)) if nid in self.graph else set()
        made: list[str] = []
        if not self._operate(agent, "verify_task", nid, lambda: made.append(self.graph.verify(nid, by=agent.name)),
                             blocked="verify_task_blocked"):
            return
        vid = made[0]
        rerouted = sorted(s for s in self.graph.successors(vid) if s in before)
        self.log.emit("create_verify_node", task=nid, verify_id=vid, requester=agent.name,
                      successors_rerouted=rerouted, reroute=self.graph.verify_reroute)
        agent.receive(f"Verify node '{vid}' created for task '{nid}'. Assign it to a teammate with "
                      f"<assign_task id=\"{vid}\" to=\"DevN\" /> (ideally not the one who did '{nid}').")

    def do_edit_file(self, agent: Agent, action):
        if self.config.edit_requires_task and agent.role != "lead" and agent.current_task is None \
                and self.ws.exists(action.path):
            self.log.emit("edit_blocked", agent=agent.name, path=action.path, reason="no_active_task")
            agent.receive(prompts.render_edit_needs_task(action.path))
            return None
        record = super().do_edit_file(agent, action)
        if record is not None and agent.current_task is not None:  # what the node produced (D4 context)
            paths = self.node_outputs.setdefault(agent.current_task, {})
            paths.setdefault(record.path, set()).update(record.symbols)
        return record

    def progress(self) -> tuple[int, int]:
        if self.graph is None:  # stopped before setup() built it (a SIGTERM at the trial's start)
            return super().progress()
        counts = self.graph.counts()
        return counts.get("done", 0) + counts.get("verified", 0), len(self.graph)
