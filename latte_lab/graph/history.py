"""The coordination graph at every recorded round, stored as keyframes and operation deltas.

A trial records the graph once per round. Storing a full snapshot each time grows with rounds x nodes
(a 1,000-round trial wrote 133 MB); :class:`GraphHistory` keeps a full snapshot (a keyframe) every
``keyframe_every`` records and, in between, only the operations applied since the previous record (the
graph's own log). Reading round ``r`` rebuilds the graph from the keyframe before it and replays at most
``keyframe_every - 1`` deltas; reading every round in order replays each operation once.

Each record is one line of ``snapshots.jsonl``: ``{"round", "t", "n_nodes", "graph"}`` (a keyframe) or
``{"round", "t", "n_nodes", "ops"}`` (a delta). A file of keyframes only (every line with ``graph``)
reads the same way.

>>> from latte_lab.graph import CoordinationGraph
>>> g, h = CoordinationGraph(), GraphHistory(keyframe_every=2)
>>> g.discover("a", by="Lead"); h.record(0, 0.0, g)["graph"]["nodes"][0]["id"]
'a'
>>> g.discover("b", ["a"], by="Lead"); h.record(1, 5.0, g)["ops"][0]["node"]
'b'
>>> [n["id"] for n in h[1]["graph"]["nodes"]], h.sizes()
(['a', 'b'], [1, 2])
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from latte_lab.errors import DataError, LatteError
from latte_lab.graph import CoordinationGraph

KEYFRAME_EVERY = 50
"""Records between full snapshots: 1,000 rounds of a 1,000-node graph then keep 20 keyframes, and
reading any one round replays at most 49 rounds of operations."""


class GraphHistory(Sequence):
    """A sequence of ``{"round", "t", "graph"}`` dicts (``graph`` as ``CoordinationGraph.snapshot()``),
    built on demand from keyframe and delta records.

    ``records`` are the stored records; ``loader`` instead returns them on first use (a run directory
    read back does not parse its snapshots until they are asked for).
    """

    def __init__(self, records: Iterable[dict] = (), *, keyframe_every: int = KEYFRAME_EVERY,
                 loader: Callable[[], Iterable[dict]] | None = None):
        if keyframe_every < 1:
            raise LatteError(f"keyframe_every must be at least 1, got {keyframe_every!r}")
        self.keyframe_every = keyframe_every
        self._records: list[dict] | None = None if loader is not None else list(records)
        self._loader = loader
        self._graph: CoordinationGraph | None = None  # the graph being recorded
        self._log_pos = 0
        self._since_keyframe = 0
        self._cursor: tuple[int, CoordinationGraph] | None = None  # last graph rebuilt, to read on from

    # ----- recording -----

    def record(self, round: int, t: float, graph: CoordinationGraph) -> dict:
        """Appends the graph as it is now; returns the stored record (a keyframe or a delta)."""
        records = self.records
        if graph is not self._graph:  # a graph not seen before starts with a keyframe
            self._graph, self._log_pos = graph, len(graph.log_since(0))
            ops = None
        else:
            ops = graph.log_since(self._log_pos)
            self._log_pos += len(ops)
        if ops is None or not records or self._since_keyframe + 1 >= self.keyframe_every:
            record: dict[str, Any] = {"round": round, "t": t, "n_nodes": len(graph), "graph": graph.snapshot()}
            self._since_keyframe = 0
        else:
            record = {"round": round, "t": t, "n_nodes": len(graph), "ops": ops}
            self._since_keyframe += 1
        records.append(record)
        return record

    def recording_state(self) -> dict[str, int]:
        """Where recording stands: how many records, how far into the recorded graph's log, how many deltas since
        the last keyframe (a team's state at a round's end holds it; :meth:`resume` goes on from it)."""
        return {"records": len(self.records), "log_pos": self._log_pos, "since_keyframe": self._since_keyframe,
                "keyframe_every": self.keyframe_every}

    @classmethod
    def resume(cls, records: Iterable[dict], graph: CoordinationGraph | None, state: dict) -> GraphHistory:
        """A history holding ``records`` (the first ``state["records"]`` of another's) that records ``graph`` on as
        the other would have (``state``: its :meth:`recording_state`)."""
        history = cls(list(records)[:state["records"]], keyframe_every=state["keyframe_every"])
        if graph is not None:
            history._graph, history._log_pos = graph, state["log_pos"]
            history._since_keyframe = state["since_keyframe"]
        return history

    # ----- reading -----

    @property
    def records(self) -> list[dict]:
        """The stored records, oldest first (loaded on first use)."""
        if self._records is None:
            loader, self._loader = self._loader, None
            self._records = list(loader()) if loader is not None else []
        return self._records

    def __len__(self) -> int:
        return len(self.records)

    def rounds(self) -> list[int]:
        """The round of each record."""
        return [r["round"] for r in self.records]

    def sizes(self) -> list[int]:
        """Node count of each record, without rebuilding any graph."""
        return [r["n_nodes"] if "n_nodes" in r else len(r["graph"].get("nodes", ())) for r in self.records]

    def graph(self, i: int) -> CoordinationGraph:
        """The graph of record ``i`` as a CoordinationGraph (a fresh copy)."""
        return CoordinationGraph.from_snapshot(self[i]["graph"])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        k = i + n if i < 0 else i
        if not 0 <= k < n:
            raise IndexError(f"snapshot index {i} out of range ({n} snapshots)")
        if "graph" in self.records[k]:
            return self._keyframe_view(k)
        return self._view(k, self._rebuild(k))

    def __iter__(self) -> Iterator[dict]:
        graph, keyframe = None, None
        for k, rec in enumerate(self.records):
            if "graph" in rec:  # a keyframe is shown as stored; the graph is rebuilt only if a delta follows
                graph, keyframe = None, k
                yield self._keyframe_view(k)
                continue
            if graph is None:
                if keyframe is None:
                    raise DataError(f"snapshot record {k} has no keyframe before it: the snapshots are damaged")
                graph = self._load_keyframe(keyframe)
            yield self._view(k, self._apply(graph, k))

    def __eq__(self, other) -> bool:
        if not isinstance(other, GraphHistory | list | tuple):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # mutable, compared by content

    def __repr__(self) -> str:
        if self._records is None:
            return "GraphHistory(not loaded yet)"
        keyframes = sum(1 for r in self._records if "graph" in r)
        return f"GraphHistory({len(self._records)} rounds, {keyframes} keyframes)"

    def _keyframe_view(self, k: int) -> dict:
        rec = self.records[k]
        return {"round": rec["round"], "t": rec.get("t"), "graph": copy.deepcopy(rec["graph"])}

    def _view(self, k: int, graph: CoordinationGraph) -> dict:
        rec = self.records[k]
        return {"round": rec["round"], "t": rec["t"], "graph": graph.snapshot()}

    def _rebuild(self, k: int) -> CoordinationGraph:
        start = k
        while "graph" not in self.records[start]:
            start -= 1
            if start < 0:
                raise DataError(f"snapshot record {k} has no keyframe before it: the snapshots are damaged")
        if self._cursor is not None and start <= self._cursor[0] <= k:
            j, graph = self._cursor
        else:
            j, graph = start, self._load_keyframe(start)
        for m in range(j + 1, k + 1):
            graph = self._apply(graph, m)
        self._cursor = (k, graph)
        return graph

    def _load_keyframe(self, k: int) -> CoordinationGraph:
        return CoordinationGraph.from_snapshot(self.records[k]["graph"])

    def _apply(self, graph: CoordinationGraph, k: int) -> CoordinationGraph:
        rec = self.records[k]
        if "graph" in rec:
            return self._load_keyframe(k)
        try:
            for e in rec["ops"]:
                graph.replay_entry(e)
        except (LatteError, KeyError, TypeError) as exc:
            raise DataError(f"snapshot record {k} (round {rec.get('round')}) cannot be replayed: {exc}") from None
        return graph
