"""GraphHistory: keyframes plus operation deltas give back exactly the graph of every recorded round."""

from __future__ import annotations

import json
import random

import pytest

import latte_lab as ll
from latte_lab import rundir
from latte_lab.errors import DataError, OperatorError
from latte_lab.graph import CoordinationGraph
from latte_lab.graph.history import GraphHistory

AGENTS = ("Dev1", "Dev2", "Dev3")


def _random_rounds(seed: int, roles: str, n_rounds: int = 40):
    """A graph driven by random operators (refusals included), recorded after every round: (history, truth)."""
    rng = random.Random(seed)
    g = CoordinationGraph(roles, on_unknown_dep=rng.choice(["reject", "drop"]))
    history = GraphHistory(keyframe_every=rng.choice([1, 2, 3, 7]))
    truth = []
    for r in range(n_rounds):
        for _ in range(rng.randint(0, 6)):
            nodes = g.nodes()
            node = rng.choice(nodes) if nodes and rng.random() < 0.85 else f"n{rng.randint(0, 60)}"
            who = rng.choice(AGENTS)
            op = rng.choice(["discover", "discover", "assign", "claim", "complete", "release", "close", "verify"])
            try:
                if op == "discover":
                    deps = rng.sample(nodes, k=min(len(nodes), rng.randint(0, 2))) + (["ghost"] if rng.random() < 0.1 else [])
                    g.discover(f"n{r}-{rng.randint(0, 999)}", deps, title=f"t{r}", description="d" * rng.randint(0, 9),
                               by=rng.choice(("Lead", who)))
                elif op == "assign":
                    g.assign(node, who, by="Lead")
                elif op in ("claim", "complete"):  # mostly by the owner, so that work gets done
                    owner = g.agent(node) if node in g and rng.random() < 0.7 else None
                    getattr(g, op)(node, owner or who)
                else:
                    getattr(g, op)(node, by="Lead")
            except OperatorError:
                pass
        history.record(r, float(r), g)
        truth.append({"round": r, "t": float(r), "graph": g.snapshot()})
    return history, truth


@pytest.mark.parametrize("seed", range(12))
def test_every_round_reads_back_exactly_in_order_and_at_random(seed):
    history, truth = _random_rounds(seed, roles="paper" if seed % 2 else "official")
    assert list(history) == truth
    order = list(range(len(truth)))
    random.Random(seed).shuffle(order)
    for i in order:
        assert history[i] == truth[i], i
    assert history[-1] == truth[-1] and history[2:5] == truth[2:5]
    assert history.sizes() == [len(s["graph"]["nodes"]) for s in truth]
    assert history.graph(len(truth) - 1).snapshot() == truth[-1]["graph"]


def test_the_records_round_trip_through_json():
    history, truth = _random_rounds(3, roles="paper")
    again = GraphHistory(loader=lambda: json.loads(json.dumps(history.records)))
    assert repr(again) == "GraphHistory(not loaded yet)"
    assert again == truth and len(again) == len(truth)


def test_deltas_hold_only_the_new_operations():
    g = CoordinationGraph()
    h = GraphHistory(keyframe_every=3)
    g.discover("a", by="Lead")
    h.record(0, 0.0, g)
    h.record(1, 1.0, g)  # nothing happened
    g.assign("a", "Dev1")
    g.claim("a", "Dev1")
    h.record(2, 2.0, g)
    h.record(3, 3.0, g)  # the third record after a keyframe is a keyframe again
    kinds = ["graph" if "graph" in r else len(r["ops"]) for r in h.records]
    assert kinds == ["graph", 0, 2, "graph"]
    assert [op["op"] for op in h.records[2]["ops"]] == ["assign", "claim"]
    other = CoordinationGraph()
    h.record(4, 4.0, other)  # a different graph starts with a keyframe
    assert "graph" in h.records[-1] and h[-1]["graph"]["nodes"] == []


def test_a_file_of_full_snapshots_reads_as_before():
    snaps = [{"round": r, "t": 0.0, "graph": {"nodes": [{"id": f"n{k}"} for k in range(r)]}} for r in range(4)]
    h = GraphHistory(snaps)
    assert list(h) == snaps and h[2] == snaps[2] and h.sizes() == [0, 1, 2, 3]
    h[2]["graph"]["nodes"].clear()  # what a caller gets is its own copy
    assert h[2] == snaps[2]


def test_damaged_deltas_name_the_record():
    h = GraphHistory([{"round": 0, "t": 0, "n_nodes": 0, "ops": []}])
    with pytest.raises(DataError, match="no keyframe before it"):
        h[0]
    with pytest.raises(DataError, match="no keyframe before it"):
        list(h)
    g = CoordinationGraph()
    h = GraphHistory([{"round": 0, "t": 0, "n_nodes": 0, "graph": g.snapshot()},
                      {"round": 1, "t": 0, "n_nodes": 1, "ops": [{"op": "claim", "node": "x", "agent": "Dev1"}]}])
    with pytest.raises(DataError, match="snapshot record 1 \\(round 1\\) cannot be replayed"):
        h[1]


def test_a_trial_stores_deltas_and_reads_them_back_as_full_graphs(tmp_path, monkeypatch):
    truth = []
    record = GraphHistory.record

    def spy(self, round, t, graph):
        truth.append({"round": round, "t": t, "graph": graph.snapshot()})
        return record(self, round, t, graph)

    monkeypatch.setattr(GraphHistory, "record", spy)
    res = ll.run_trial(ll.TrialConfig(task="debug", team="latte", seed=2, max_rounds=12, runs_dir=str(tmp_path)))
    assert res.status == "ok" and len(truth) == len(res.snapshots) >= 10
    assert list(res.snapshots) == truth
    lines = [json.loads(x) for x in (res.run_dir / rundir.SNAPSHOTS_FILE).read_text().splitlines()]
    assert "graph" in lines[0] and any("ops" in x for x in lines)
    back = ll.load_trial(res.run_dir)
    assert back.snapshots == truth
    assert [s["round"] for s in rundir.iter_snapshots(res.run_dir)] == [s["round"] for s in truth]
