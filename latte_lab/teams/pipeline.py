"""A MetaGPT-style standard operating procedure (paper A5.1) as a latte_lab team.

Five role agents communicate through a publish-subscribe bus by message topic:

1. requirements: the Product Manager publishes ``requirements``;
2. design: the Architect publishes ``design`` (files and interfaces);
3. tasks: the Project Manager publishes ``tasks`` (the ordered file list); the decomposition is fixed
   from here on: later ``requirements``/``design``/``tasks`` publications are refused;
4. implementation: the Engineer writes the files of the task list, one ``edit_file`` per turn, in order;
5. QA: up to ``QA_ROUNDS`` rounds of QA Engineer (write tests / run / report ``bug_report``) then Engineer
   (fix). The orchestrator runs the public tests after each QA round; green ends the trial.

One role acts per round except in QA (QA Engineer, then the Engineer when a bug report is open). A phase
whose document was not published repeats next round. The trial shares the other teams' round budget.
"""

from __future__ import annotations

import re

from latte_lab import prompts
from latte_lab.graph import SYSTEM_AGENT
from latte_lab.teams import register
from latte_lab.teams.engine import WORKER_WINDOW, Agent, Outcome, Team
from latte_lab.teams.prompt_text import prompt

QA_ROUNDS = 5  # write-test / run / debug iterations allowed to the QA Engineer (MetaGPT's test_round_allowed)
PHASES = ("requirements", "design", "tasks", "implementation", "qa")
ROLES = {  # agent name -> (role id, prompt, phase it acts in)
    "ProductManager": ("product_manager", "pipeline_product_manager", "requirements"),
    "Architect": ("architect", "pipeline_architect", "design"),
    "ProjectManager": ("project_manager", "pipeline_project_manager", "tasks"),
    "Engineer": ("engineer", "pipeline_engineer", "implementation"),
    "QAEngineer": ("qa", "pipeline_qa", "qa"),
}
SUBSCRIPTIONS = {  # role id -> topics it receives
    "product_manager": (),
    "architect": ("requirements",),
    "project_manager": ("requirements", "design"),
    "engineer": ("design", "tasks", "bug_report"),
    "qa": ("requirements", "design", "tasks", "code_complete"),
}
PLAN_TOPICS = ("requirements", "design", "tasks")
_FILE_RE = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.(?:py|json|txt|csv|md))\b")


@register("pipeline")
class PipelineTeam(Team):
    """The five MetaGPT roles in a fixed SOP, communicating through a publish-subscribe bus."""

    def setup(self) -> None:
        for name, (role, prompt_name, _) in ROLES.items():
            self.add_agent(Agent(name, role, prompt(prompt_name), window=WORKER_WINDOW))
        self.phase = "requirements"
        self.documents: dict[str, str] = {}
        self.plan_files: list[str] = []
        self.written: list[str] = []
        self.qa_round = 0
        self.open_bug = False
        self._qa_files: set[str] = set()
        self._edits_this_turn = 0
        self.log.emit("initialize", agents=list(self.agents), lead=None)
        intro = self.project_text()
        self.agents["ProductManager"].receive(intro)
        self.agents["Architect"].receive(intro)
        self.log.emit("phase_start", phase=self.phase)

    def allowed_actions(self, agent: Agent) -> tuple[str, ...]:
        role = agent.role
        if role == "engineer":
            return ("edit_file", "read_file", "publish")
        if role == "qa":
            return ("edit_file", "read_file", "run_tests", "run_script", "publish")
        if role == "architect":
            return ("publish", "read_file")
        return ("publish",)

    def view(self, agent: Agent):
        return self.base_view(agent, phase=self.phase)

    def _next_file(self) -> str | None:
        for f in self.plan_files:
            if f not in self.written:
                return f
        return None

    def do_publish(self, agent: Agent, action) -> None:
        topic = action.topic.strip()
        if topic in PLAN_TOPICS and PHASES.index(self.phase) > PHASES.index("tasks"):
            self.log.emit("operator_blocked", agent=agent.name, operator="publish", task=topic, reason="plan_fixed")
            agent.receive(f"⚠️ The plan is fixed after the task list; '{topic}' cannot be republished.")
            return
        self.documents[topic] = action.text
        self.log.emit("publish", sender=agent.name, topic=topic, text=action.text)
        for other in self.agents.values():
            if other.name != agent.name and topic in SUBSCRIPTIONS[other.role]:
                other.receive(prompts.render_document(topic, action.text), sender=agent.name)
        if topic == "tasks":
            files = []
            for f in _FILE_RE.findall(action.text):
                if f not in files:
                    files.append(f)
            self.plan_files = files
        if topic == "bug_report":
            self.open_bug = True

    def do_edit_file(self, agent: Agent, action) -> None:
        if agent.role == "engineer" and self._edits_this_turn >= 1:
            self.log.emit("edit_blocked", agent=agent.name, path=action.path, reason="one_file_per_action")
            agent.receive(f"⚠️ One file per turn: '{action.path}' was not written; write it next turn.")
            return
        if agent.role == "qa" and self.ws.exists(action.path) and action.path not in self._qa_files:
            self.log.emit("edit_blocked", agent=agent.name, path=action.path, reason="qa_writes_tests_only")
            agent.receive(f"⚠️ The QA Engineer writes its own test files; '{action.path}' belongs to the Engineer.")
            return
        before = len(self.log.events)
        super().do_edit_file(agent, action)
        if any(e["type"] == "edit_file" for e in self.log.events[before:]):
            if agent.role == "engineer":
                self._edits_this_turn = self._edits_this_turn + 1
                if action.path not in self.written:
                    self.written.append(action.path)
            else:
                self._qa_files.add(action.path)

    def _act(self, names: list[str]) -> list[str]:
        ran = []
        for name in names:
            agent = self.agents[name]
            self._edits_this_turn = 0
            if agent.role == "engineer" and self.phase == "implementation":
                nxt = self._next_file()
                if nxt:  # each file is written against the design and the task list, as MetaGPT's WriteCode
                    for topic in ("design", "tasks"):
                        if topic in self.documents:
                            agent.receive(prompts.render_document(topic, self.documents[topic]))
                agent.receive(prompts.render_next_file(nxt))
            [(_, resp)] = self.call([agent])
            self.apply(agent, resp.text)
            ran.append(name)
        return ran

    def _advance(self, phase: str) -> None:
        self.phase = phase
        self.log.emit("phase_start", phase=phase)

    def run_round(self, r: int) -> bool:
        self.begin_round(r)
        phase = self.phase
        names = ["QAEngineer"] if phase == "qa" else [n for n, (_, _, p) in ROLES.items() if p == phase]
        ran = self._act(names)
        finished = False
        if phase in PLAN_TOPICS and phase in self.documents:
            self._advance(PHASES[PHASES.index(phase) + 1])
        elif phase == "implementation":
            if (self.plan_files and self._next_file() is None) or "code_complete" in self.documents:
                self._advance("qa")
                self.agents["QAEngineer"].receive("The implementation is complete; test it.")
        elif phase == "qa":
            self.qa_round += 1
            if self.open_bug:  # the Engineer answers the bug report in the same round
                self.open_bug = False
                ran += self._act(["Engineer"])
            run = self.run_tests(by=SYSTEM_AGENT)
            if run.ok:
                self.outcome = Outcome(True, "tests_passed", tests_passed=True)
                finished = True
            elif self.qa_round >= QA_ROUNDS:
                self.outcome = Outcome(False, "qa_rounds_exhausted", tests_passed=False)
                finished = True
        self.log.emit("round_dispatch", n_dispatched=len(ran), n_total=len(ROLES), agents=ran,
                      n_dispatched_released=len(ran), n_total_released=len(ROLES))
        self.end_round()
        return finished

