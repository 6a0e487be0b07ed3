"""Tests of the coordination graph: every operator, every precondition, both rule sets, and a stateful
property test comparing the graph with an independent model of Appendix A3 after every step."""

from __future__ import annotations

import doctest
import json

import networkx as nx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import latte_lab
import latte_lab.graph as graph_module
import latte_lab.graph._core as graph_core
import latte_lab.graph._nodes as graph_nodes
import latte_lab.graph._serial as graph_serial
from latte_lab.errors import DataError, LatteError, OperatorError
from latte_lab.graph import CoordinationGraph, Status, UnknownNodeError, frontier_bruteforce


def state(g: CoordinationGraph):
    return json.dumps(g.snapshot(), sort_keys=True), json.dumps(g.log), g.frontier(), g.counts()


def rejected(g: CoordinationGraph, fn, *args, match: str = "", **kwargs) -> OperatorError:
    """Call an operator that must be rejected; the graph must be exactly as before."""
    before = state(g)
    with pytest.raises(OperatorError, match=match) as info:
        fn(*args, **kwargs)
    assert state(g) == before
    return info.value


def chain(roles: str = "paper") -> CoordinationGraph:
    """a -> b -> c, plus an independent d."""
    g = CoordinationGraph(roles)
    g.discover("a", title="A", by="Lead")
    g.discover("b", ["a"], title="B", by="Dev1")
    g.discover("c", ["b"], title="C", by="System")
    g.discover("d", title="D", by="Lead")
    return g


# ------------------------------------------------------------------------------------------ success paths

def test_public_api_names_and_status_is_str():
    g = latte_lab.CoordinationGraph()
    g.discover("t1", deps=[], title="Fix rms", description="fix it", by="Lead")
    assert g.status("t1") == "pending" and g.status("t1") is latte_lab.Status.PENDING
    assert str(Status.IN_PROGRESS) == "in_progress"
    assert g.agent("t1") is None and len(g) == 1 and "t1" in g and "nope" not in g


def test_discover_builds_edges_and_frontier_in_creation_order():
    g = chain()
    assert g.nodes() == ["a", "b", "c", "d"]
    assert g.frontier() == ["a", "d"]
    assert g.deps("c") == ["b"] and g.successors("a") == ["b"]
    rec = g.node("b")
    assert rec["created_by"] == "Dev1" and rec["created_seq"] == 1 and rec["title"] == "B"
    assert g.log[1] == {"op": "discover", "node": "b", "deps": ["a"], "title": "B", "description": "",
                        "by": "Dev1"}
    g.discover("e", ["a", "a", "d"], by="Dev2")  # repeated deps count once
    assert g.deps("e") == ["a", "d"]


def test_full_lifecycle_assign_claim_complete():
    g = chain()
    g.assign("a", "Dev1", by="Lead")
    assert (g.status("a"), g.agent("a")) == ("assigned", "Dev1")
    assert g.frontier() == ["d"] and g.nodes_of("Dev1") == ["a"]
    assert g.log[-1]["deps_done"] is True
    g.claim("a", "Dev1")
    assert g.status("a") == "in_progress" and g.nodes_of("Dev1") == ["a"]
    g.complete("a", "Dev1")
    assert g.status("a") == "done" and g.agent("a") == "Dev1" and g.node("a")["completed_by"] == "Dev1"
    assert g.nodes_of("Dev1") == [] and g.frontier() == ["b", "d"]
    g.claim("d", "Dev2")  # self-scheduling from the frontier, no Assign
    assert g.frontier() == ["b"] and g.nodes_of("Dev2") == ["d"]


def test_assign_does_not_require_finished_deps_but_records_it():
    g = chain()
    g.assign("c", "Dev2", by="Lead")
    assert g.log[-1]["deps_done"] is False
    rejected(g, g.claim, "c", "Dev2", match="dependencies not finished: b")


def test_release_returns_to_pending_and_frontier():
    g = chain()
    g.claim("a", "Dev1")
    g.release("a", by="Lead")
    assert g.status("a") == "pending" and g.agent("a") is None and g.frontier() == ["a", "d"]
    assert g.log[-1] == {"op": "release", "node": "a", "by": "Lead", "prev_agent": "Dev1",
                         "prev_status": "in_progress"}
    g.assign("a", "Dev2", by="Lead")
    g.release("a", by="Lead")
    assert g.frontier() == ["a", "d"] and g.nodes_of("Dev2") == []


def test_close_force_completes_and_keeps_owner():
    g = chain()
    g.assign("a", "Dev1", by="Lead")
    g.close("a", by="Lead")
    rec = g.node("a")
    assert rec["status"] == "done" and rec["agent"] == "Dev1" and rec["closed"] and rec["completed_by"] == "Lead"
    assert g.frontier() == ["b", "d"]


def test_verify_reroutes_unstarted_successors():
    g = CoordinationGraph()
    g.discover("a", by="Lead")
    for s in ("p", "q", "r", "s"):
        g.discover(s, ["a"], by="Lead")
    g.claim("a", "Dev1"); g.complete("a", "Dev1")
    g.assign("q", "Dev2", by="Lead")
    g.claim("r", "Dev3")
    g.claim("s", "Dev4"); g.complete("s", "Dev4")
    vid = g.verify("a", by="Lead")
    assert vid == "a-verify"
    rec = g.node(vid)
    assert rec["is_verify"] and rec["verify_of"] == "a" and rec["deps"] == ["a"] and rec["status"] == "pending"
    assert rec["title"] == "Verify: " + g.node("a")["title"]
    assert g.successors(vid) == ["p", "q"]  # pending and assigned; r started, s finished
    assert g.deps("p") == ["a", vid] and g.deps("r") == ["a"]
    assert g.frontier() == [vid]
    assert g.log[-1]["rerouted"] == ["p", "q"]
    rejected(g, g.claim, "q", "Dev2", match="dependencies not finished: a-verify")
    g.claim(vid, "Dev1"); g.complete(vid, "Dev1")
    assert g.status("a") == "verified" and g.log[-1]["verified"] == "a"
    assert g.frontier() == ["p"]
    g.claim("q", "Dev2")  # verified counts as finished


def test_counts_all_done_and_critical_path():
    g = chain()
    assert not CoordinationGraph().all_done()
    assert g.critical_path() == ["a", "b", "c"]
    assert g.counts() == {"pending": 4, "assigned": 0, "in_progress": 0, "done": 0, "verified": 0}
    for n, w in (("a", "Dev1"), ("b", "Dev1"), ("d", "Dev2")):
        g.claim(n, w); g.complete(n, w)
    assert g.critical_path() == ["c"] and not g.all_done()
    g.claim("c", "Dev1"); g.complete("c", "Dev1")
    assert g.all_done() and g.critical_path() == [] and g.counts()["done"] == 4


def test_critical_path_follows_verify_edges_and_prefers_earliest():
    g = CoordinationGraph()
    g.discover("x", by="Lead"); g.discover("y", by="Lead")
    g.discover("z", ["x", "y"], by="Lead")
    assert g.critical_path() == ["x", "z"]
    g.claim("x", "Dev1"); g.complete("x", "Dev1")
    g.verify("x", by="Lead")
    assert g.critical_path() == ["y", "z"]  # tie with x-verify -> z: y was created first
    g.claim("y", "Dev2"); g.complete("y", "Dev2")
    assert g.critical_path() == ["x-verify", "z"]


def test_snapshot_json_and_networkx():
    g = chain()
    g.claim("a", "Dev1"); g.complete("a", "Dev1"); g.verify("a", by="Lead")
    s = g.snapshot()
    assert json.loads(json.dumps(s)) == s
    assert CoordinationGraph.from_snapshot(json.loads(json.dumps(s))).snapshot() == s
    G = g.to_networkx()
    assert isinstance(G, nx.DiGraph) and list(G.nodes) == g.nodes()
    assert set(G.edges) == {("a", "b"), ("b", "c"), ("a", "a-verify"), ("a-verify", "b")}
    assert G.nodes["a"]["status"] == "done" and G.nodes["a-verify"]["is_verify"]
    assert nx.is_directed_acyclic_graph(G)


def test_from_log_rebuilds_and_keeps_dropped_deps():
    g = CoordinationGraph(on_unknown_dep="drop")
    g.discover("a", ["ghost"], by="Lead")
    assert g.log[-1]["dropped_deps"] == ["ghost"] and g.deps("a") == []
    rejected(g, g.discover, "b", ["ghost"], on_unknown_dep="reject", match="unknown dependency")
    g.log_since(0)[0]["node"] = "mutated"  # callers get copies
    assert g.log_since(0)[0]["node"] == "a" and g.log_since(1) == []
    g.claim("a", "Dev1"); g.complete("a", "Dev1"); g.verify("a", by="Lead")
    h = CoordinationGraph.from_log(g.log, on_unknown_dep="drop")
    assert h.snapshot() == g.snapshot() and h.log == g.log


def test_from_log_replays_official_logs_and_rejects_garbage():
    g = CoordinationGraph("official")
    g.discover("a", by="Dev1"); g.assign("a", "Dev2", by="Dev1"); g.complete("a", "Dev2")
    g.discover("b", by="Dev1"); g.close("b", by="Lead")
    assert CoordinationGraph.from_log(g.log, "official").snapshot() == g.snapshot()
    with pytest.raises(DataError, match="cannot be replayed"):
        CoordinationGraph.from_log([{"op": "claim", "node": "zz", "agent": "Dev1"}])
    with pytest.raises(DataError, match="unknown operation"):
        CoordinationGraph.from_log([{"op": "explode", "node": "a"}])
    with pytest.raises(DataError, match="malformed"):
        CoordinationGraph.from_log([{"op": "discover"}])


@pytest.mark.parametrize("mutate, why", [
    (lambda s: s.update(nodes="x"), "nodes"),
    (lambda s: s["nodes"][1].update(status="weird"), "unknown status"),
    (lambda s: s["nodes"][1].update(deps=["nope"]), "dependency"),
    (lambda s: s["nodes"][0].update(deps=["b"]), "successors|cycle"),
    (lambda s: s["nodes"][0].update(agent="Dev1"), "pending node"),
    (lambda s: s["nodes"][1].pop("title"), "lacks"),
    (lambda s: s.update(format=99), "format"),
    (lambda s: s["nodes"].append(dict(s["nodes"][0], created_seq=4)), "twice"),
])
def test_from_snapshot_rejects_malformed(mutate, why):
    s = chain().snapshot()
    mutate(s)
    with pytest.raises(DataError, match=why):
        CoordinationGraph.from_snapshot(s)


def test_from_snapshot_rejects_cycles():
    s = chain().snapshot()
    s["nodes"][0]["deps"] = ["c"]
    s["nodes"][2]["successors"] = ["a"]
    with pytest.raises(DataError, match="cycle"):
        CoordinationGraph.from_snapshot(s)


def test_bad_configuration_and_unknown_queries():
    with pytest.raises(LatteError, match="roles"):
        CoordinationGraph("chaos")
    with pytest.raises(LatteError, match="on_unknown_dep"):
        CoordinationGraph(on_unknown_dep="ignore")
    g = chain()
    for query in (g.status, g.agent, g.node, g.deps, g.successors):
        with pytest.raises(UnknownNodeError, match="no node 'zz'"):
            query("zz")
    with pytest.raises(KeyError):
        g.status("zz")


# ------------------------------------------------------------------------------ precondition violations

def test_discover_violations():
    g = chain()
    rejected(g, g.discover, "a", match="already exists")
    rejected(g, g.discover, "n", ["a", "ghost"], match="unknown dependency 'ghost'")
    rejected(g, g.discover, "n", ["n"], match="itself")
    rejected(g, g.discover, "n", "a", match="not the string")
    rejected(g, g.discover, "", match="non-empty")
    rejected(g, g.discover, "n", [3], match="strings")
    rejected(g, g.discover, "n", by="", match="caller")
    rejected(g, g.discover, "n", on_unknown_dep="maybe", match="on_unknown_dep")
    rejected(g, g.discover, "n", ["n"], on_unknown_dep="drop", match="itself")


def test_assign_violations():
    g = chain()
    rejected(g, g.assign, "zz", "Dev1", by="Lead", match="no such node")
    rejected(g, g.assign, "a", "Dev1", by="Dev2", match="only the Lead")
    rejected(g, g.assign, "a", "Lead", by="Lead", match="not a worker")
    rejected(g, g.assign, "a", "System", by="Lead", match="not a worker")
    rejected(g, g.assign, "a", "", by="Lead", match="non-empty")
    g.assign("a", "Dev1", by="Lead")
    rejected(g, g.assign, "a", "Dev2", by="Lead", match="status is assigned")
    g.claim("a", "Dev1")
    rejected(g, g.assign, "a", "Dev2", by="Lead", match="status is in_progress")
    g.complete("a", "Dev1")
    rejected(g, g.assign, "a", "Dev2", by="Lead", match="status is done")


def test_claim_violations():
    g = chain()
    rejected(g, g.claim, "zz", "Dev1", match="no such node")
    rejected(g, g.claim, "a", "Lead", match="not a worker")
    rejected(g, g.claim, "a", "System", match="not a worker")
    rejected(g, g.claim, "a", "", match="non-empty")
    rejected(g, g.claim, "b", "Dev1", match="dependencies not finished: a")
    g.assign("a", "Dev1", by="Lead")
    rejected(g, g.claim, "a", "Dev2", match="assigned to 'Dev1'")
    g.claim("a", "Dev1")
    rejected(g, g.claim, "a", "Dev2", match="status is in_progress by 'Dev1'")  # first claim wins
    rejected(g, g.claim, "a", "Dev1", match="status is in_progress")
    g.complete("a", "Dev1")
    rejected(g, g.claim, "a", "Dev1", match="status is done")


def test_complete_violations():
    g = chain()
    rejected(g, g.complete, "zz", "Dev1", match="no such node")
    rejected(g, g.complete, "a", "Dev1", match="status is pending")
    g.assign("a", "Dev1", by="Lead")
    rejected(g, g.complete, "a", "Dev1", match="status is assigned; Complete needs in_progress")
    g.claim("a", "Dev1")
    rejected(g, g.complete, "a", "Dev2", match="owned by 'Dev1'")
    rejected(g, g.complete, "a", "Lead", match="not a worker")
    g.complete("a", "Dev1")
    rejected(g, g.complete, "a", "Dev1", match="status is done")


def test_release_violations():
    g = chain()
    rejected(g, g.release, "zz", match="no such node")
    rejected(g, g.release, "a", by="Lead", match="status is pending")
    g.claim("a", "Dev1")
    rejected(g, g.release, "a", by="Dev1", match="only the Lead")
    g.complete("a", "Dev1")
    rejected(g, g.release, "a", by="Lead", match="status is done")


def test_close_violations():
    g = chain()
    rejected(g, g.close, "zz", match="no such node")
    rejected(g, g.close, "a", by="Lead", match="status is pending")
    g.claim("a", "Dev1")
    rejected(g, g.close, "a", by="Dev1", match="only the Lead")
    g.complete("a", "Dev1")
    rejected(g, g.close, "a", by="Lead", match="status is done")


def test_verify_violations():
    g = chain()
    rejected(g, g.verify, "zz", match="no such node")
    rejected(g, g.verify, "a", by="Lead", match="status is pending; Verify needs done")
    g.claim("a", "Dev1"); g.complete("a", "Dev1")
    rejected(g, g.verify, "a", by="Dev1", match="only the Lead")
    g.verify("a", by="Lead")
    rejected(g, g.verify, "a", by="Lead", match="already exists")
    g.claim("a-verify", "Dev2"); g.complete("a-verify", "Dev2")
    rejected(g, g.verify, "a", by="Lead", match="status is verified")


def test_custom_lead_name():
    g = CoordinationGraph(lead="Boss")
    g.discover("a", by="Boss")
    rejected(g, g.assign, "a", "Dev1", by="Lead", match="only the Lead \\('Boss'\\)")
    g.assign("a", "Lead", by="Boss")  # "Lead" is an ordinary worker name here
    assert g.agent("a") == "Lead"


# ----------------------------------------------------------------------------------- official rule set

def test_official_roles_are_looser():
    g = chain("official")
    g.assign("a", "Dev1", by="Dev2")  # anyone assigns
    g.complete("a", "Dev1")  # owner completes an assigned node
    assert g.status("a") == "done"
    g.verify("b", by="Dev3")  # anyone verifies, target need not be done
    assert g.frontier() == ["b", "d"]  # b-verify waits for b
    g.claim("b", "Dev1")
    g.release("b", by="Dev1")  # anyone releases
    g.close("c", by="Lead")  # close works on pending
    assert g.status("c") == "done" and g.agent("c") is None
    g.assign("d", "Lead", by="Dev1")  # the released code lets a node go to the Lead


def test_official_roles_keep_the_rules_the_code_enforced():
    g = chain("official")
    rejected(g, g.close, "a", by="Dev1", match="only the Lead")
    rejected(g, g.claim, "a", "Lead", match="not a worker")
    g.claim("a", "Dev1")
    rejected(g, g.complete, "a", "Dev2", match="owned by")
    rejected(g, g.complete, "d", "Dev1", match="status is pending; Complete needs assigned or in_progress")
    g.complete("a", "Dev1")
    rejected(g, g.close, "a", by="Lead", match="already finished")
    g.verify("a", by="Dev1")
    rejected(g, g.verify, "a", by="Dev1", match="already exists")
    rejected(g, g.verify, "zz", by="Dev1", match="no such node")
    rejected(g, g.release, "d", by="Dev1", match="status is pending")
    rejected(g, g.release, "a", by="Lead", match="status is done")
    rejected(g, g.assign, "a", "Dev3", by="Dev1", match="status is done")
    rejected(g, g.assign, "d", "", by="Dev1", match="non-empty")
    rejected(g, g.assign, "d", "Dev2", by=None, match="caller must be")
    rejected(g, g.release, "d", by="", match="caller must be")
    rejected(g, g.verify, "d", by=None, match="caller must be")
    rejected(g, g.claim, "c", "Dev1", match="dependencies not finished: b")
    rejected(g, g.discover, "a", by="Dev1", match="already exists")


def test_verify_node_completed_before_target_does_not_verify():
    g = CoordinationGraph("official")
    g.discover("a", by="Lead")
    vid = g.verify("a", by="Lead")
    g.assign(vid, "Dev1", by="Lead")
    g.complete(vid, "Dev1")  # official: owner completes an assigned node without its deps
    assert g.status("a") == "pending" and "verified" not in g.log[-1]


def test_closing_a_verify_node_verifies_its_target_under_paper_rules_only():
    for roles, expected in (("paper", "verified"), ("official", "done")):
        g = CoordinationGraph(roles)
        g.discover("a", by="Lead")
        g.claim("a", "Dev1")
        g.complete("a", "Dev1")
        vid = g.verify("a", by="Lead")
        g.assign(vid, "Dev2", by="Lead")
        g.close(vid, by="Lead")
        assert g.status("a") == expected and g.log[-1].get("verified") == ("a" if roles == "paper" else None)
        assert CoordinationGraph.from_log(g.log, roles).snapshot() == g.snapshot()


def test_assign_rejects_a_name_outside_the_workers():
    g = CoordinationGraph(workers=["Dev1", "Dev2"])
    g.discover("a", by="Lead")
    rejected(g, g.assign, "a", "Dev9", by="Lead", match="'Dev9' is not a worker of this team; workers: Dev1, Dev2")
    g.assign("a", "Dev2", by="Lead")
    assert CoordinationGraph.from_snapshot(g.snapshot()).workers == ("Dev1", "Dev2")
    loose = CoordinationGraph("official", workers=["Dev1"])
    loose.discover("a", by="Lead")
    loose.assign("a", "Dev9", by="Dev1")  # the released code: a ghost owner
    assert loose.agent("a") == "Dev9"
    with pytest.raises(latte_lab.LatteError, match="workers must be"):
        CoordinationGraph(workers=["Lead", "Dev1"])


@pytest.mark.parametrize("mode, rerouted", [("unstarted", ["b"]), ("all", ["b", "c"]), ("none", [])])
def test_verify_reroute_modes(mode, rerouted):
    g = CoordinationGraph(verify_reroute=mode)
    g.discover("a", by="Lead")
    g.discover("b", ["a"], by="Lead")
    g.discover("c", ["a"], by="Lead")
    g.claim("a", "Dev1")
    g.complete("a", "Dev1")
    g.claim("c", "Dev2")  # c has started: only "all" puts it behind the review
    vid = g.verify("a", by="Lead")
    assert g.successors(vid) == rerouted and g.log[-1]["reroute"] == mode
    assert g.frontier() == (["b", vid] if mode == "none" else [vid])
    assert CoordinationGraph.from_log(g.log).snapshot()["nodes"] == g.snapshot()["nodes"]
    with pytest.raises(latte_lab.LatteError, match="verify_reroute"):
        CoordinationGraph(verify_reroute="some")


# ------------------------------------------------------------------------------------ frontier ordering

def test_frontier_stays_in_creation_order_when_nodes_become_ready_out_of_order():
    g = CoordinationGraph()
    for i in range(6):
        g.discover(f"n{i}", by="Lead")
    for i in (4, 1, 3):
        g.claim(f"n{i}", f"Dev{i}")
    assert g.frontier() == ["n0", "n2", "n5"]
    for i in (3, 1, 4):
        g.release(f"n{i}", by="Lead")
    assert g.frontier() == [f"n{i}" for i in range(6)] == frontier_bruteforce(g)
    f = g.frontier()
    f.append("junk")
    assert "junk" not in g.frontier()


# --------------------------------------------------------------------------------- stateful model check

NEW_IDS = [f"n{i}" for i in range(10)]
AGENTS = ["Lead", "Dev1", "Dev2", "Dev3", "System"]
FINISHED = ("done", "verified")


class GraphMachine(RuleBasedStateMachine):
    """Random operator sequences, valid and invalid; each is predicted by an independent reading of A3."""

    def __init__(self):
        super().__init__()
        self.g: CoordinationGraph | None = None
        self.verified = 0

    @precondition(lambda self: self.g is None)
    @rule(roles=st.sampled_from(["paper", "official"]), drop=st.booleans())
    def start(self, roles, drop):
        self.g = CoordinationGraph(roles, on_unknown_dep="drop" if drop else "reject")
        self.roles = roles

    def rec(self):
        return {r["id"]: r for r in self.g.snapshot()["nodes"]}

    def pick(self, data, prefer=()):
        """A node id, mostly one the operation can apply to, sometimes any node or an unknown id."""
        ids = self.g.nodes()
        if prefer and data.draw(st.integers(0, 6)) > 0:
            return data.draw(st.sampled_from(list(prefer)))
        return data.draw(st.sampled_from(ids + ["ghost"]) if ids else st.just("ghost"))

    def who(self, data, likely=None):
        """An agent name, mostly the one the operation needs."""
        if likely and data.draw(st.integers(0, 3)) > 0:
            return likely
        return data.draw(st.sampled_from(AGENTS))

    def attempt(self, expect_ok: bool, fn, *args, **kwargs):
        before = state(self.g)
        try:
            out = fn(*args, **kwargs)
        except OperatorError:
            assert not expect_ok, f"{fn.__name__}{args} rejected but A3 allows it"
            assert state(self.g) == before
            return False, None
        assert expect_ok, f"{fn.__name__}{args} accepted but A3 forbids it"
        return True, out

    def worker_ok(self, agent):
        return agent not in ("Lead", "System")

    def with_status(self, r, *statuses):
        return [i for i, x in r.items() if x["status"] in statuses]

    @precondition(lambda self: self.g is not None)
    @rule(data=st.data(), node=st.sampled_from(NEW_IDS), by=st.sampled_from(AGENTS))
    def discover(self, data, node, by):
        ids = self.g.nodes()
        deps = data.draw(st.lists(st.sampled_from(ids + ["ghost", node]), max_size=3))
        ok = node not in ids and node not in deps and (self.g.on_unknown_dep == "drop" or "ghost" not in deps)
        done, _ = self.attempt(ok, self.g.discover, node, deps, title=node.upper(), by=by)
        if done:
            assert self.g.deps(node) == list(dict.fromkeys(d for d in deps if d in ids))
            assert self.g.status(node) == "pending" and self.g.agent(node) is None

    @precondition(lambda self: self.g is not None)
    @rule(data=st.data())
    def assign(self, data):
        r = self.rec()
        v = self.pick(data, self.with_status(r, "pending"))
        agent = self.who(data, data.draw(st.sampled_from(["Dev1", "Dev2", "Dev3"])))
        by = self.who(data, "Lead")
        ok = v in r and r[v]["status"] == "pending"
        if self.roles == "paper":
            ok = ok and by == "Lead" and self.worker_ok(agent)
        done, _ = self.attempt(ok, self.g.assign, v, agent, by=by)
        if done:
            assert (self.g.status(v), self.g.agent(v)) == ("assigned", agent)

    @precondition(lambda self: self.g is not None)
    @rule(data=st.data())
    def claim(self, data):
        r = self.rec()
        v = self.pick(data, self.g.frontier() + self.with_status(r, "assigned"))
        owner = r[v]["agent"] if v in r and r[v]["agent"] else data.draw(st.sampled_from(["Dev1", "Dev2"]))
        agent = self.who(data, owner)
        ok = (v in r and self.worker_ok(agent)
              and (r[v]["status"] == "pending" or (r[v]["status"] == "assigned" and r[v]["agent"] == agent))
              and all(r[d]["status"] in FINISHED for d in r[v]["deps"]))
        done, _ = self.attempt(ok, self.g.claim, v, agent)
        if done:
            assert (self.g.status(v), self.g.agent(v)) == ("in_progress", agent)

    @precondition(lambda self: self.g is not None)
    @rule(data=st.data())
    def complete(self, data):
        r = self.rec()
        v = self.pick(data, self.with_status(r, "in_progress", "assigned"))
        agent = self.who(data, r[v]["agent"] if v in r else None)
        statuses = ("in_progress",) if self.roles == "paper" else ("assigned", "in_progress")
        ok = v in r and self.worker_ok(agent) and r[v]["status"] in statuses and r[v]["agent"] == agent
        done, _ = self.attempt(ok, self.g.complete, v, agent)
        if done:
            assert self.g.status(v) == "done"
            self.check_verified(r, v)

    @precondition(lambda self: self.g is not None and self.g.frontier())
    @rule(data=st.data())
    def work(self, data):
        """A worker takes a ready node and finishes it, driving the graph forward."""
        v = data.draw(st.sampled_from(self.g.frontier()))
        target = self.g.node(v)["verify_of"]
        agent = data.draw(st.sampled_from(["Dev1", "Dev2", "Dev3"]))
        self.g.claim(v, agent)
        self.g.complete(v, agent)
        assert self.g.status(v) == "done" and v not in self.g.frontier()
        if target is not None and self.g.log[-1].get("verified"):
            assert self.g.status(target) == "verified"

    @precondition(lambda self: self.g is not None)
    @rule(data=st.data())
    def release(self, data):
        r = self.rec()
        v = self.pick(data, self.with_status(r, "assigned", "in_progress"))
        by = self.who(data, "Lead")
        ok = v in r and r[v]["status"] in ("assigned", "in_progress") and (self.roles == "official" or by == "Lead")
        done, _ = self.attempt(ok, self.g.release, v, by=by)
        if done:
            assert (self.g.status(v), self.g.agent(v)) == ("pending", None)

    @precondition(lambda self: self.g is not None)
    @rule(data=st.data())
    def close(self, data):
        r = self.rec()
        v = self.pick(data, self.with_status(r, "assigned", "in_progress"))
        by = self.who(data, "Lead")
        allowed = ("assigned", "in_progress") if self.roles == "paper" else ("pending", "assigned", "in_progress")
        ok = v in r and by == "Lead" and r[v]["status"] in allowed
        done, _ = self.attempt(ok, self.g.close, v, by=by)
        if done:
            assert self.g.status(v) == "done" and self.g.agent(v) == r[v]["agent"]
            self.check_verified(r, v)

    def check_verified(self, r, v):
        """A finished verify node makes a done target verified under the paper's rules only."""
        target = r[v]["verify_of"]
        if r[v]["is_verify"] and r[target]["status"] == "done":
            assert self.g.status(target) == ("verified" if self.roles == "paper" else "done")
            self.verified += self.roles == "paper"

    @precondition(lambda self: self.g is not None)
    @rule(data=st.data())
    def verify(self, data):
        r = self.rec()
        v = self.pick(data, self.with_status(r, "done"))
        by = self.who(data, "Lead")
        ok = v in r and f"{v}-verify" not in r
        if self.roles == "paper":
            ok = ok and by == "Lead" and r[v]["status"] == "done"
        done, vid = self.attempt(ok, self.g.verify, v, by=by)
        if done:
            unstarted = [s for s in r[v]["successors"] if r[s]["status"] in ("pending", "assigned")]
            assert vid == f"{v}-verify" and self.g.deps(vid) == [v] and self.g.successors(vid) == unstarted

    @invariant()
    def consistent(self):
        if self.g is None:
            return
        g = self.g
        snap = g.snapshot()
        recs = snap["nodes"]
        for r in recs:
            if r["status"] == "pending":
                assert r["agent"] is None
            if r["status"] in ("assigned", "in_progress"):
                assert r["agent"]
            if r["is_verify"]:
                assert r["verify_of"] in r["deps"]
            if r["status"] == "verified":
                assert any(x["verify_of"] == r["id"] and x["status"] in FINISHED for x in recs)
        assert nx.is_directed_acyclic_graph(g.to_networkx())
        assert g.frontier() == frontier_bruteforce(g)
        counts = {s.value: sum(r["status"] == s.value for r in recs) for s in Status}
        assert g.counts() == counts
        for a in AGENTS:
            assert g.nodes_of(a) == [r["id"] for r in recs
                                     if r["agent"] == a and r["status"] in ("assigned", "in_progress")]
        assert CoordinationGraph.from_snapshot(json.loads(json.dumps(snap))).snapshot() == snap
        rebuilt = CoordinationGraph.from_log(g.log, g.roles, on_unknown_dep=g.on_unknown_dep)
        assert rebuilt.snapshot() == snap
        assert rebuilt.frontier() == g.frontier()
        path = g.critical_path()
        open_ids = {r["id"] for r in recs if r["status"] not in FINISHED}
        assert set(path) <= open_ids and all(path[i] in g.deps(path[i + 1]) for i in range(len(path) - 1))
        if open_ids:
            sub = g.to_networkx().subgraph(open_ids)
            assert len(path) == nx.dag_longest_path_length(sub) + 1


TestGraphMachine = GraphMachine.TestCase
TestGraphMachine.settings = settings(max_examples=150, stateful_step_count=50, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------------- doctests

@pytest.mark.parametrize("module", [graph_module, graph_core, graph_nodes, graph_serial], ids=lambda m: m.__name__)
def test_module_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    if module is graph_module:
        assert result.attempted > 5


def test_discover_dependency_forms_and_repeats():
    g = CoordinationGraph(on_unknown_dep="drop")
    for i in range(12):
        g.discover(f"n{i}", by="Lead")
    many = [f"n{i % 12}" for i in range(40)] + ["ghost", "ghost"]  # past the point where Discover uses a set
    g.discover("join", many, by="Lead")
    assert g.deps("join") == [f"n{i}" for i in range(12)]
    assert g.log[-1]["deps"] == [f"n{i}" for i in range(12)] and g.log[-1]["dropped_deps"] == ["ghost"]
    g.discover("gen", (d for d in ["n1", "n0", "n1"]), by="Lead")  # any iterable of ids
    assert g.deps("gen") == ["n1", "n0"]

    class Id(str):
        pass

    g.discover(Id("sub"), [Id("n2")], title="", by="Lead")  # str subclasses are ids
    assert g.deps("sub") == ["n2"] and g.successors("n2") == ["join", "sub"]
    with pytest.raises(OperatorError, match="dependency ids must be strings"):
        g.discover("bad", ["n1", 3], by="Lead")
    with pytest.raises(OperatorError, match="cannot depend on itself"):
        g.discover("self", ["n1", "self"], by="Lead")
    assert "bad" not in g and "self" not in g


def test_log_entries_are_fresh_plain_dicts():
    g = CoordinationGraph()
    g.discover("a", title="A", description="do a", by="Lead")
    g.discover("b", ("a",), by="Dev1")
    entry = g.log[1]
    assert entry == {"op": "discover", "node": "b", "deps": ["a"], "title": "", "description": "", "by": "Dev1"}
    entry["deps"].append("x")
    entry["node"] = "changed"
    assert g.log[1]["deps"] == ["a"] and g.log[1]["node"] == "b"
    assert json.loads(json.dumps(g.log)) == g.log
    rebuilt = CoordinationGraph.from_log(g.log)
    assert rebuilt.log == g.log and rebuilt.snapshot() == g.snapshot()


def test_the_graph_package_keeps_its_public_names_in_one_place():
    names = ["CoordinationGraph", "Status", "UnknownNodeError", "frontier_bruteforce", "LEAD", "SYSTEM_AGENT",
             "VERIFY_SUFFIX", "ROLES", "UNKNOWN_DEP_POLICIES", "VERIFY_REROUTES", "SNAPSHOT_FORMAT",
             "DEDUPE_BY_SET_ABOVE"]
    for name in names:
        assert getattr(graph_module, name) is not None
    assert set(graph_module.__all__) <= set(names)
    assert latte_lab.CoordinationGraph is graph_module.CoordinationGraph and latte_lab.Status is graph_module.Status
    g = CoordinationGraph()
    assert g.lead == graph_module.LEAD and CoordinationGraph.from_snapshot({"nodes": []}).lead == graph_module.LEAD
