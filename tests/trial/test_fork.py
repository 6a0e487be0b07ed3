"""Forking a recorded trial at round k: the rounds up to k are the parent's, restored from the state it saved then
(or replayed from its cassette where it saved none) with no model call; from there it is a trial of its own under the
changes, with its lineage recorded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import latte_lab as ll
import latte_lab.rundir  # noqa: F401 - ll.rundir below
from latte_lab.errors import ConfigError, DataError
from latte_lab.models.cassette import read_cassette
from latte_lab.trial import comparable_events, comparable_row, fork

LINEAGE = ("trial_id", "parent", "fork_round", "billed_tokens", "replayed_tokens", "dollars")


class NoCalls:
    """A model that fails the test if it is ever asked for anything."""

    provider, base_url, model = "simulated", None, "none"

    def generate(self, request):
        raise AssertionError(f"a model call in round {request.frame.round} by {request.scope.agent}")


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    """A LATTE trial on debug (15 rounds, a success; its task-2 sits with a worker from round 4 to 14) to fork."""
    cfg = ll.TrialConfig(task="debug", team="latte", model="simulated", seed=0, sandbox="local",
                         runs_dir=str(tmp_path_factory.mktemp("runs")))
    res = ll.run_trial(cfg)
    assert res.status == "ok" and res.rounds > 13
    return res


def _events(res, after: int | None = None) -> list[dict]:
    skip = ("run_start", "fork_point")
    events = [{k: v for k, v in e.items() if k != "seq"} for e in comparable_events(res.event_list)
              if e["type"] not in skip]
    return [e for e in events if after is None or (e.get("round") or 0) > after]


def test_a_fork_with_no_change_continues_exactly_as_its_parent(parent, tmp_path):
    child = fork(parent.run_dir, 11, runs_dir=tmp_path)
    assert child.status == "ok" and child.config.parent == str(parent.run_dir) and child.config.fork_round == 11
    assert _events(child) == _events(parent)  # every event, the rounds after 11 included
    assert child.snapshots == parent.snapshots
    assert (child.success, child.rounds, child.tokens, child.accuracy) == (
        parent.success, parent.rounds, parent.tokens, parent.accuracy)
    drop = lambda row: {k: v for k, v in comparable_row(row).items() if k not in LINEAGE}  # noqa: E731
    assert drop(child.row) == drop(parent.row)
    files = lambda res: {p.relative_to(res.run_dir / "workspace"): p.read_bytes()  # noqa: E731
                         for p in (res.run_dir / "workspace").rglob("*") if p.is_file()}
    assert files(child) == files(parent)
    texts = lambda res: sorted((c["scope"]["agent"], c["scope"]["call_index"], c["response"]["text"])  # noqa: E731
                               for c in read_cassette(res.run_dir) if c.get("type") == "call")
    assert texts(child) == texts(parent)  # the cassette: the same replies to the same calls (written as they end)
    (point,) = [e for e in child.event_list if e["type"] == "fork_point"]
    assert point["fork_round"] == 11 and point["changes"] == {}
    assert child.row["parent"] == str(parent.run_dir) and child.row["fork_round"] == 11


def test_no_model_is_called_up_to_the_fork_point(parent, tmp_path):
    child = fork(parent.run_dir, 12, model_override=NoCalls(), max_rounds=12, runs_dir=tmp_path)
    assert child.status == "ok", child.error  # no call up to round 12: they are the parent's
    assert child.rounds == 12
    with pytest.warns(RuntimeWarning, match="a model call in round 13"):
        beyond = fork(parent.run_dir, 12, model_override=NoCalls(), max_rounds=13, runs_dir=tmp_path / "beyond")
    assert beyond.status == "error" and "a model call in round 13" in beyond.error  # and the next one is new


@pytest.mark.parametrize("team", ["latte", "static", "leader_worker", "decentralized", "pipeline"])
def test_graph_and_workspace_at_the_fork_point_are_the_parents(team, tmp_path):
    cfg = ll.TrialConfig(task="debug", team=team, model="simulated", seed=1, max_rounds=6, sandbox="local",
                         runs_dir=str(tmp_path / "runs"))
    parent = ll.run_trial(cfg)
    at = min(3, parent.rounds)
    child = fork(parent.run_dir, at, model_override=NoCalls(), max_rounds=at, runs_dir=tmp_path / "forks")
    assert child.status == "ok", child.error
    upto = [r for r in parent.snapshots.records if r["round"] <= at]
    assert child.snapshots.records == upto  # the graph, round by round, to the fork point
    # the parent's workspace at round k: the same trial stopped there (trials are deterministic)
    stopped = ll.run_trial(cfg.model_copy(update={"max_rounds": at, "runs_dir": str(tmp_path / "stopped")}))
    files = lambda res: {p.relative_to(res.run_dir / "workspace"): p.read_bytes()  # noqa: E731
                         for p in (res.run_dir / "workspace").rglob("*") if p.is_file()}
    assert files(child) == files(stopped)
    assert _events(child) == _events(stopped)


def test_a_change_applies_from_the_fork_point_on(parent, tmp_path):
    child = fork(parent.run_dir, 10, seed=5, heartbeat_rule="released", runs_dir=tmp_path)
    assert child.status == "ok"
    assert _events(child) != _events(parent)  # it went its own way after round 10, and only then
    assert [e for e in _events(child) if (e.get("round") or 0) <= 10] == [
        e for e in _events(parent) if (e.get("round") or 0) <= 10]
    saved = json.loads((child.run_dir / "config.json").read_text())
    assert saved["parent"] == str(parent.run_dir) and saved["fork_round"] == 10
    assert saved["fork_changes"] == {"heartbeat_rule": "released", "seed": 5} and saved["seed"] == 5
    trials = ll.load_runs(tmp_path).trials
    assert trials["fork_round"].tolist() == [10] and trials["parent"].tolist() == [str(parent.run_dir)]


def test_another_model_by_its_spec(parent, tmp_path):
    """``model=`` is a change like any other: the spec goes into the fork's config and drives its rounds."""
    child = fork(parent.run_dir, 3, model="simulated/careful", max_rounds=6, runs_dir=tmp_path)
    assert child.status == "ok", child.error
    saved = json.loads((child.run_dir / "config.json").read_text())
    assert saved["model"] == "simulated/careful" and saved["fork_changes"] == {"max_rounds": 6,
                                                                              "model": "simulated/careful"}
    (point,) = [e for e in child.event_list if e["type"] == "fork_point"]
    assert point["changes"]["model"] == "simulated/careful"
    with pytest.raises(ConfigError, match="model= is the fork's model spec.*pass a model object as model_override="):
        fork(parent.run_dir, 3, model=NoCalls(), runs_dir=tmp_path / "object")
    with pytest.raises(ConfigError, match="unknown simulated profile 'carefull'"):
        fork(parent.run_dir, 3, model="simulated/carefull", runs_dir=tmp_path / "typo")
    assert not (tmp_path / "typo").exists()  # refused before the replay and any run directory


def test_the_help_examples_fork_with_another_model(parent, tmp_path):
    """The examples of ``latte-lab fork --help`` as printed (the parent is the trial its first line names, in a
    folder of its own): ``--at 5 --set model=simulated/careful --set max_rounds=30`` above all."""
    import shlex

    from latte_lab.cli import build_parser, main

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["fork"]
    example = next(line.strip() for line in sub.format_help().splitlines() if "model=simulated/careful" in line)
    argv = shlex.split(example)[1:]
    assert argv[1] == f"runs/{parent.trial_id}"  # the run directory `latte-lab run --task debug --seed 0` writes
    argv[1] = str(parent.run_dir)
    code = main([*argv, "--runs-dir", str(tmp_path), "--quiet"])
    assert code == 0
    (run,) = tmp_path.iterdir()
    saved = json.loads((run / "config.json").read_text())
    assert saved["model"] == "simulated/careful" and saved["fork_changes"] == {"max_rounds": 30,
                                                                              "model": "simulated/careful"}
    assert json.loads((run / "result.json").read_text())["status"] == "ok"
    others = [line.strip() for line in sub.format_help().splitlines()
              if line.strip().startswith("latte-lab fork ") and line.strip() != example]
    assert len(others) == 3
    for i, line in enumerate(others):  # the other examples run as printed too (their rounds and nodes exist)
        argv = shlex.split(line)[1:]
        argv[1] = str(parent.run_dir)
        assert main([*argv, "--runs-dir", str(tmp_path / f"other{i}"), "--quiet"]) == 0, line


def test_forking_a_run_that_is_not_there_is_a_usage_error(tmp_path, capsys, monkeypatch):
    from latte_lab.cli import main

    monkeypatch.chdir(tmp_path)  # no runs/ folder here: the message is about the path (with one it lists trials)
    assert main(["fork", str(tmp_path / "nope"), "--at", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"latte-lab: error: no run directory {tmp_path / 'nope'}") and err.count("\n") == 1


@pytest.mark.parametrize(("changes", "message"), [
    ({"team": "static"}, "cannot change team at a fork: a fork continues its parent's team on its graph"),
    ({"task": "eda"}, "cannot change task at a fork: a fork continues its parent's workspace"),
    ({"n_workers": 2}, "cannot change n_workers at a fork: a fork continues its parent's agents"),
    ({"colour": "red"}, "cannot change 'colour' at a fork; what can change: "),
    ({"max_rounds": 3}, "max_rounds=3 ends before the fork point (round 5)"),
    ({"heartbeat_rule": "sometimes"}, "heartbeat_rule"),
])
def test_every_refused_change_is_one_line(parent, tmp_path, changes, message):
    with pytest.raises(ConfigError) as caught:
        fork(parent.run_dir, 5, runs_dir=tmp_path, **changes)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())  # refused before any run directory


def test_a_round_the_parent_never_reached_is_refused(parent, tmp_path):
    with pytest.raises(ConfigError, match=f"cannot fork .* at round 99: it ended after round {parent.rounds}"):
        fork(parent.run_dir, 99, runs_dir=tmp_path)
    with pytest.raises(ConfigError, match="at_round must be a round number >= 0"):
        fork(parent.run_dir, -1, runs_dir=tmp_path)


def test_the_command_line(parent, tmp_path):
    cmd = [sys.executable, "-m", "latte_lab.cli", "fork", str(parent.run_dir), "--at", "12", "--set", "seed=3",
           "--runs-dir", str(tmp_path), "--quiet"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 1), out.stderr
    assert f"forked from {parent.run_dir} after round 12 with {{'seed': 3}}" in out.stdout
    bad = subprocess.run([*cmd[:-4], "team=static"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stderr.strip().count("\n") == 0
    assert bad.stderr.startswith("latte-lab: error: cannot change team at a fork")


def test_an_intervention_is_applied_by_the_lead_at_the_fork_point(parent, tmp_path):
    graph = ll.rundir.read_snapshots(parent.run_dir)
    at8 = graph.graph([i for i, r in enumerate(graph.rounds()) if r <= 8][-1])
    busy = next(n for n in at8.nodes() if at8.status(n) == ll.Status.IN_PROGRESS)
    child = fork(parent.run_dir, 8, intervene=f'<release_task id="{busy}" />', runs_dir=tmp_path)
    assert child.status == "ok", child.error
    point = next(i for i, e in enumerate(child.event_list) if e["type"] == "fork_point")
    released = child.event_list[point + 1]
    assert (released["type"], released["task"], released["requester"], released["round"]) == (
        "release_task", busy, "Lead", 8)
    assert child.config.fork_changes == {"intervene": f'<release_task id="{busy}" />'}


@pytest.mark.parametrize(("intervene", "message"), [
    ('<release_task id="nope" />', "intervention <release_task id='nope'> cannot apply at round 8: no such node"),
    ('<claim_task id="fix-rms" />', "intervention <claim_task> is not an operator the Lead applies"),
    ("release it please", "intervention 'release it please' does not parse"),
])
def test_an_intervention_that_cannot_apply_is_refused_in_one_line(parent, tmp_path, intervene, message):
    with pytest.raises(ConfigError) as caught:
        fork(parent.run_dir, 8, intervene=intervene, runs_dir=tmp_path)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_a_sweep_of_forks_runs_each_once_and_resumes(tmp_path):
    from latte_lab.sweep.forks import fork_sweep

    cfg = ll.TrialConfig(task="debug", team="latte", model="simulated", seed=0, max_rounds=6, sandbox="local",
                         runs_dir=str(tmp_path / "runs"))
    parent = ll.run_trial(cfg)
    grid = {"seed": [1, 2], "max_rounds": [6, 8]}
    first = fork_sweep(parent.run_dir, 3, grid, out=tmp_path / "forks", n_jobs=2, progress=False)
    assert len(first) == 4 and set(first["status"]) == {"ok"}
    assert set(first["fork_round"]) == {3} and set(first["parent"]) == {str(parent.run_dir)}
    assert sorted(zip(first["seed"], first["total_rounds"])) == [(1, 6), (1, 8), (2, 6), (2, 8)]
    again = fork_sweep(parent.run_dir, 3, grid, out=tmp_path / "forks", n_jobs=2, progress=False)
    assert again["trial_id"].tolist() == first["trial_id"].tolist()  # nothing ran twice
    assert sorted(p.name for p in (tmp_path / "forks").iterdir() if not p.name.startswith(".")) == sorted(
        first["trial_id"])
    with pytest.raises(ConfigError, match=r"fork_sweep grid\['seed'\] must be a non-empty list"):
        fork_sweep(parent.run_dir, 3, {"seed": []}, out=tmp_path / "none")


def test_the_viewer_marks_the_branch_point(parent, tmp_path):
    from latte_lab.viz.viewer import build_page, trial_data

    child = fork(parent.run_dir, 11, runs_dir=tmp_path)
    data = trial_data(child.run_dir)
    points = [e for e in data["events"] if e["type"] == "fork_point"] if "events" in data else None
    page = build_page(child.run_dir, tmp_path / "view.html").read_text()
    assert "fork point: the rounds up to" in page and '"fork_point"' in page
    assert points is None or (len(points) == 1 and points[0]["fork_round"] == 11)


def test_the_animation_marks_the_branch_point(parent, tmp_path):
    child = fork(parent.run_dir, 11, runs_dir=tmp_path)
    anim = ll.viz.animate(child)
    titles = []
    for r in (11, 12):
        anim._draw_frame(anim.rounds.index(r))
        titles.append(next(t.get_text() for t in anim.fig.texts if t.get_text().startswith("round ")))
    assert titles[0].endswith("the parent's") and titles[1].endswith("forked after round 11")


# --- the state saved at each round's end -------------------------------------------------------------------------


class Replayed:
    """While installed, no saved state is found: forks replay their parent's rounds from its cassette."""

    def __init__(self, monkeypatch):
        import latte_lab.forking

        monkeypatch.setattr(latte_lab.forking, "read_state", lambda *args, **kwargs: None)


class ToolRuns:
    """Counts the workspace's tool runs (test runs and scripts) while installed."""

    def __init__(self, monkeypatch):
        self.count = 0
        for name in ("run_tests", "run_script"):
            real = getattr(ll.Workspace, name)

            def counted(ws, *args, _real=real, **kwargs):
                self.count += 1
                return _real(ws, *args, **kwargs)

            monkeypatch.setattr(ll.Workspace, name, counted)


def _files(res) -> dict:
    return {p.relative_to(res.run_dir / "workspace"): p.read_bytes()
            for p in (res.run_dir / "workspace").rglob("*") if p.is_file()}


def _texts(res) -> list:
    return sorted((c["scope"]["agent"], c["scope"]["call_index"], c["response"]["text"])
                  for c in read_cassette(res.run_dir) if c.get("type") == "call")


def _same_fork(restored, replayed) -> None:
    """Two forks of one parent at one round under one change, one restored and one replayed, are the same trial."""
    drop = lambda row: {k: v for k, v in comparable_row(row).items() if k != "trial_id"}  # noqa: E731
    assert _events(restored) == _events(replayed)
    assert drop(restored.row) == drop(replayed.row)
    assert restored.snapshots == replayed.snapshots
    assert _files(restored) == _files(replayed)
    assert _texts(restored) == _texts(replayed)
    ledger = lambda res: (res.run_dir / "ledger.csv").read_text()  # noqa: E731
    assert ledger(restored) == ledger(replayed)


@pytest.mark.parametrize("team", ["latte", "static", "leader_worker", "decentralized", "pipeline"])
def test_a_restored_fork_is_the_fork_that_replays_its_parent(team, tmp_path, monkeypatch):
    """On every team, a fork restored from the saved state (no model call, no tool run before its fork point)
    runs exactly as one that replays its parent's rounds, whatever it changes (another seed, another reading of
    tool time on the clock)."""
    cfg = ll.TrialConfig(task="textproc", team=team, model="simulated", seed=2, max_rounds=8, sandbox="local",
                         runs_dir=str(tmp_path / "runs"))
    parent = ll.run_trial(cfg)
    at = min(4, parent.rounds)
    changes = {"seed": 9, "tool_time": "summed", "max_rounds": 10}
    tools = ToolRuns(monkeypatch)
    restored = fork(parent.run_dir, at, runs_dir=tmp_path / "restored", **changes)
    after = sum(1 for e in restored.event_list if e["type"] in ("run_tests", "run_script") and e["round"] > at)
    assert tools.count == after  # the fork ran its own rounds' tools only (the evaluation is not a tool run)
    Replayed(monkeypatch)
    replayed = fork(parent.run_dir, at, runs_dir=tmp_path / "replayed", **changes)
    assert restored.status == replayed.status == "ok", (restored.error, replayed.error)
    _same_fork(restored, replayed)
    points = [next(e for e in res.event_list if e["type"] == "fork_point") for res in (restored, replayed)]
    assert [p["restored"] for p in points] == [True, False]


def test_a_fork_at_the_round_its_parent_finished_ends_there(tmp_path, monkeypatch):
    cfg = ll.TrialConfig(task="debug", team="pipeline", model="simulated", seed=0, sandbox="local",
                         runs_dir=str(tmp_path / "runs"))
    parent = ll.run_trial(cfg)
    assert parent.status == "ok" and parent.reason != "max_rounds"
    restored = fork(parent.run_dir, parent.rounds, runs_dir=tmp_path / "restored")
    assert (restored.rounds, restored.reason, restored.success) == (parent.rounds, parent.reason, parent.success)
    Replayed(monkeypatch)
    _same_fork(restored, fork(parent.run_dir, parent.rounds, runs_dir=tmp_path / "replayed"))


def test_a_fork_of_a_fork_starts_from_the_state_its_parent_saved(parent, tmp_path):
    """A fork saves its state too (the rounds up to its fork point are its parent's lines): it can be forked after
    its fork point and before it. (Replaying a fork's rounds from its cassette cannot: the calls before its fork
    point were made under its parent's seed and trial id.)"""
    child = fork(parent.run_dir, 10, seed=4, runs_dir=tmp_path / "child")
    same = fork(child.run_dir, 14, runs_dir=tmp_path / "same")  # no change: the child's own continuation
    assert same.status == "ok" and _events(same) == _events(child)
    assert (same.success, same.rounds, same.tokens) == (child.success, child.rounds, child.tokens)
    early = fork(child.run_dir, 6, seed=5, runs_dir=tmp_path / "early")  # the child's copy of its parent's state
    direct = fork(parent.run_dir, 6, seed=5, runs_dir=tmp_path / "direct")
    assert _events(early) == _events(direct) and early.tokens == direct.tokens
    again = ll.replay(same.run_dir, runs_dir=tmp_path / "replays")  # from its own cassette
    assert again.status == "ok" and _events(again) == _events(same)


def test_a_damaged_or_missing_state_file_makes_the_fork_replay(parent, tmp_path):
    import shutil

    for damage in ("missing", "cut"):
        copy = tmp_path / f"parent-{damage}"
        shutil.copytree(parent.run_dir, copy)
        state = copy / "state.jsonl"
        if damage == "missing":
            state.unlink()
        else:
            text = state.read_text()
            state.write_text(text[: len(text) // 3])  # its first third, then half a line
        child = fork(copy, 12, runs_dir=tmp_path / damage)
        assert child.status == "ok"
        (point,) = [e for e in child.event_list if e["type"] == "fork_point"]
        assert point["restored"] is False
        assert _events(child) == _events(parent)


def test_a_team_holding_an_object_of_its_own_saves_no_state_and_its_forks_replay(tmp_path):
    from latte_lab.teams import state
    from latte_lab.teams.latte import LatteTeam

    class Own:
        pass

    @ll.teams.register("latte_with_an_object")
    class WithObject(LatteTeam):
        def setup(self):
            super().setup()
            self.mine = Own()

    try:
        cfg = ll.TrialConfig(task="debug", team="latte_with_an_object", model="simulated", seed=0, max_rounds=4,
                             sandbox="local", runs_dir=str(tmp_path / "runs"))
        parent = ll.run_trial(cfg)
        lines = [json.loads(line) for line in (parent.run_dir / "state.jsonl").read_text().splitlines()]
        assert len(lines) == parent.rounds + 1 and all("Own" in line["unsaved"] for line in lines)
        assert state.read_state(parent.run_dir, 2) is None
        child = fork(parent.run_dir, 2, runs_dir=tmp_path / "forks")
        assert child.status == "ok" and next(e for e in child.event_list if e["type"] == "fork_point")["restored"] is False
    finally:
        ll.teams.REGISTRY._entries.pop("latte_with_an_object", None)


def test_the_state_codec_keeps_types_sharing_and_texts_once():
    from latte_lab.models.base import Message
    from latte_lab.teams.engine import Agent
    from latte_lab.teams.state import Codec, Unsaveable

    long = "a text longer than the short ones, written once and named by number afterwards"
    lead = Agent("Lead", "lead", long, history=[Message("user", long)])
    graph = ll.CoordinationGraph()
    graph.discover("a", by="Lead"); graph.discover("b", ["a"], by="Lead"); graph.claim("a", "Dev1")
    value = {"agents": {"Lead": lead}, "lead": lead, "set": {1, 2}, "frozen": frozenset({"x"}), ("k", 1): [1.5, None],
             "nan": float("nan"), "bytes": b"\xff\x00", "text": long.encode(), "status": ll.Status.PENDING,
             "graph": graph}
    writer = Codec()
    first, second = writer.encode(value), writer.encode(value)
    assert len(first["texts"]) == 1 and second["texts"] == [] and second["records"] == []  # each once per file
    reader = Codec()
    reader.take(first)
    back = reader.decode_line(second)
    assert back["lead"] is back["agents"]["Lead"] and back["lead"].history == [Message("user", long)]
    assert back["set"] == {1, 2} and back["frozen"] == frozenset({"x"}) and back[("k", 1)] == [1.5, None]
    assert back["nan"] != back["nan"] and back["bytes"] == b"\xff\x00" and back["text"] == long.encode()
    assert back["status"] is ll.Status.PENDING
    assert back["graph"].snapshot() == graph.snapshot() and back["graph"].log == graph.log
    with pytest.raises(Unsaveable, match="Codec"):
        Codec().encode({"x": Codec()})
    with pytest.raises(DataError, match="unknown class"):
        Codec().decode_line({"value": ["o", "Popen", {}]})  # only latte_lab's own classes are ever made


def test_rebind_is_the_fork_points_change_of_config(parent):
    from latte_lab.teams.latte import LatteTeam

    team = LatteTeam.__new__(LatteTeam)
    team.clock = __import__("latte_lab.teams.clock", fromlist=["VirtualClock"]).VirtualClock("parallel")
    config = parent.config.model_copy(update={"seed": 11, "model": "scripted", "tool_time": "event_loop"})
    team.rebind(config)
    assert (team.config, team.seed, team.trial_id, team._provider, team.clock.reading) == (
        config, 11, config.trial_id, "scripted", "event_loop")
