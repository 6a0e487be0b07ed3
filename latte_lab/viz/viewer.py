"""The trial viewer: one self-contained HTML page per trial (every round, every prompt and reply, every file
change), a table page for a sweep directory, a side-by-side page for two trials, and ``transcript``, the
same agent lanes as a notebook widget.

A page embeds its data as JSON and its script inline; it needs no server and no network, so it opens from
disk and can be mailed. What a trial page shows, for the round chosen with the slider (or the arrow keys):

- a header with the configuration, outcome, accuracy, tokens, dollars and wall clock, and the tokens over
  rounds as a sparkline (click it to jump to a round);
- the coordination graph at that round, laid out as :func:`latte_lab.viz.draw` lays it out (the positions
  are computed here by :func:`latte_lab.viz.graph_drawing.plan`); clicking a node lists its events;
- one lane per agent: each prompt (collapsible; the messages new in this call, the view the prompt was
  built from this round, are marked), the reply with its actions highlighted and each action's outcome,
  file edits as unified diffs (:mod:`difflib`) and test runs with their failures;
- the Lead's triggers and the heartbeat alerts, flagged on the round and on the slider.

Prompts repeat an agent's earlier messages at every call; a page stores each text once (as the run's
``calls.jsonl`` does) and every call names its messages by number. Agent text reaches the page only through
``textContent``, and the embedded JSON has ``</`` written ``<\\/``, so a reply holding ``<script>`` shows that
text and runs nothing.

>>> import latte_lab as ll                                        # doctest: +SKIP
>>> res = ll.run_trial(ll.TrialConfig(task="debug", model="simulated"))   # doctest: +SKIP
>>> ll.viz.build_page(res.run_dir)                                 # doctest: +SKIP
PosixPath('runs/debug-latte-s0-.../view.html')
>>> ll.viz.transcript(res)                                         # doctest: +SKIP
"""

from __future__ import annotations

import difflib
import html
import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from latte_lab import rundir
from latte_lab.errors import DataError

__all__ = ["PAGE_NAME", "EmbeddedPage", "build_page", "compare_html", "embed", "is_sweep_dir", "serve", "sweep_html",
           "transcript", "trial_data", "trial_html", "unpack_texts"]

PAGE_NAME = "view.html"  # a trial's page, written into its run directory unless told otherwise
LONG_FIELD_CHARS = 120  # an event's text longer than this is stored once in the page's text table
PX_PER_IN = 80  # graph layout inches -> SVG pixels
DROP_FIELDS = ("ts", "trial_id", "text", "content")  # event fields the page never shows (texts are stored once)
# the event types an action tag can produce, so a reply's actions are paired with their outcomes
OUTCOME_TYPES = {
    "claim_task": ("claim_task", "claim_blocked"), "complete_task": ("complete_task", "complete_blocked"),
    "discover_task": ("discover_task",), "plan_task": ("discover_task", "plan_task"),
    "assign_task": ("assign_task", "assign_blocked"), "release_task": ("release_task", "release_blocked"),
    "close_task": ("close_task", "close_blocked"), "verify_task": ("create_verify_node", "verify_task"),
    "edit_file": ("edit_file",), "read_file": ("read_file",), "run_tests": ("run_tests",),
    "run_script": ("run_script",), "broadcast": ("broadcast",), "request_status": ("request_status",),
    "synthesize": ("synthesize",), "certify_complete": ("certify",), "publish": ("publish",),
}


# --- reading a run ------------------------------------------------------------------------------------------

class _Texts:
    """A table of strings, each stored once; a page names them by index."""

    def __init__(self):
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def add(self, text: str) -> int:
        i = self._index.get(text)
        if i is None:
            i = self._index[text] = len(self.items)
            self.items.append(text)
        return i


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become None (JSON.parse refuses NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _actor(ev: dict) -> str | None:
    for key in ("agent", "sender", "assigner", "requester"):
        if isinstance(ev.get(key), str):
            return ev[key]
    return None


_TAG = re.compile(r"<(/?)([a-z]+(?:_[a-z]+)*)\b")


def action_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, tag)`` of each action tag in a reply, for highlighting (body tags span to their close).

    >>> action_spans('ok <claim_task id="a" /> then <broadcast>hi</broadcast>')
    [(3, 24, 'claim_task'), (30, 55, 'broadcast')]
    """
    from latte_lab.actions import _BODY_TAGS, ACTION_TAGS

    spans, pos = [], 0
    while (m := _TAG.search(text, pos)) is not None:
        tag = m.group(2)
        if m.group(1) or tag not in ACTION_TAGS:
            pos = m.end()
            continue
        close = text.find(">", m.end())
        if close < 0:
            break
        end = close + 1
        if tag in _BODY_TAGS and text[close - 1] != "/":
            closing = text.find(f"</{tag}>", end)
            end = len(text) if closing < 0 else closing + len(tag) + 3
        elif text[close - 1] != "/" and text.startswith(f"</{tag}>", end):
            end += len(tag) + 3
        spans.append((m.start(), end, tag))
        pos = end
    return spans


def _graph(snaps: list[dict]) -> dict | None:
    if not snaps:
        return None
    import latte_lab.viz.graph_drawing as gd

    plan = gd.plan(snaps)
    order = plan.order
    index = {n: i for i, n in enumerate(order)}
    y_top = plan.ylim[1]
    nodes = [{"id": n, "short": plan.short[n], "title": str(plan.nodes[n].get("title") or n),
              "x": round((plan.pos[n][0] - plan.xlim[0]) * PX_PER_IN, 1),
              "y": round((y_top - plan.pos[n][1]) * PX_PER_IN, 1),
              "lx": round((plan.label_end.get(n, plan.pos[n][0]) - plan.xlim[0]) * PX_PER_IN, 1),
              "verify": bool(plan.nodes[n].get("is_verify"))} for n in order]
    edges = [[index[a], index[b]] for a, b in plan.edges if a in index and b in index]
    frames, last = [], None
    for snap in snaps:
        state = [[index[n["id"]], n.get("status") or "pending", n.get("agent") or ""]
                 for n in snap["graph"]["nodes"] if n["id"] in index]
        present = [[index[d], index[n["id"]]] for n in snap["graph"]["nodes"] for d in n.get("deps", [])
                   if d in index and n["id"] in index]
        if (state, present) == last:  # an unchanged round: the earlier frame stands
            continue
        last = (state, present)
        frames.append({"round": snap["round"], "nodes": state, "edges": present})
    return {"nodes": nodes, "edges": edges, "frames": frames, "node_px": plan.node_in * PX_PER_IN,
            "w": round(plan.width * PX_PER_IN, 1), "h": round(plan.height * PX_PER_IN, 1)}


def _calls(run_dir: Path, texts: _Texts) -> list[dict]:
    """The cassette's calls, with every message text put in ``texts`` (numbers mapped to table indices)."""
    path = run_dir / rundir.CALLS_FILE
    if not path.exists():
        return []
    numbers: dict[int, int] = {}
    roles: dict[int, str] = {}
    calls = []
    for record in rundir.iter_jsonl(path):
        if record.get("type") != "call":
            continue
        req, resp = record.get("request", {}), record.get("response", {})
        if "new_messages" in record:
            for n, role, content in record["new_messages"]:
                numbers[n], roles[n] = texts.add(content), role
            system = numbers.get(req.get("system_id"))
            reply = numbers.get(resp.get("text_id"))
            ids = req.get("message_ids", [])
            messages = [[roles.get(n), numbers.get(n)] for n in ids]
        else:  # a line holding its texts whole
            system = texts.add(req.get("system", ""))
            messages = [[role, texts.add(content)] for role, content in req.get("messages", [])]
            reply = texts.add(resp.get("text", ""))
        scope = record.get("scope") or req.get("scope") or {}
        usage = resp.get("usage") or {}
        calls.append({"agent": scope.get("agent"), "ci": scope.get("call_index"), "sys": system,
                      "msgs": messages, "reply": reply, "in": usage.get("input_tokens", 0),
                      "out": usage.get("output_tokens", 0)})
    return calls


def _starting_files(task: str) -> dict[str, str]:
    try:
        from latte_lab import tasks

        files = tasks.get(task).starting_files()
    except Exception:  # noqa: BLE001 - a task not registered here: first edits show whole
        return {}
    return {str(k): v for k, v in files.items() if isinstance(v, str)}


def trial_data(run_dir: str | Path, texts: _Texts | None = None) -> dict:
    """Everything a trial page shows, JSON-ready; texts go into ``texts`` (a new table when None, returned
    under ``"T"``)."""
    run_dir = Path(run_dir)
    own_table = texts is None
    texts = texts or _Texts()
    result = rundir.load_trial(run_dir)
    events = result.event_list
    calls = _calls(run_dir, texts)
    if not calls:  # no cassette (removed, or never written): the replies the event log holds, without prompts
        calls = [{"agent": ev.get("agent"), "ci": ev.get("call_index"), "sys": None, "msgs": [],
                  "reply": texts.add(ev["text"]), "in": ev.get("input_tokens") or 0,
                  "out": ev.get("output_tokens") or 0}
                 for ev in events if ev.get("type") == "agent_reply" and isinstance(ev.get("text"), str)]
    row = result.row
    agents: list[str] = []
    for ev in events:
        if ev.get("type") == "initialize":
            agents = list(ev.get("agents") or [])
    for ev in events:
        a = _actor(ev)
        if a and a not in agents:
            agents.append(a)
    # each call's round comes from its agent_reply event; roles too
    round_of: dict[tuple, int] = {}
    for ev in events:
        if ev.get("type") == "agent_reply":
            round_of[(ev.get("agent"), ev.get("call_index"))] = ev.get("round") or 0
    seen: dict[str, set] = defaultdict(set)  # message indices an agent's earlier prompts held
    for c in calls:
        c["round"] = round_of.get((c["agent"], c["ci"]), 0)
        old = seen[c["agent"]]
        for m in c["msgs"]:
            m.append(0 if m[1] in old else 1)  # 1: new in this call (this round's view)
        old.update(m[1] for m in c["msgs"])
        old.add(c["reply"])  # the agent's own reply comes back in its next prompt: not new there
        c["acts"] = [list(s) for s in action_spans(texts.items[c["reply"]])] if c["reply"] is not None else []
        if c["agent"] and c["agent"] not in agents:
            agents.append(c["agent"])
    # events, compacted; edits become diffs
    files = _starting_files(result.config.task)  # the first edit of a file is diffed against its start
    out_events = []
    for ev in events:
        e = {k: v for k, v in ev.items() if k not in DROP_FIELDS}
        if ev.get("type") == "edit_file" and isinstance(ev.get("content"), str):
            path = str(ev.get("path"))
            before, after = files.get(path), ev["content"]
            diff = "\n".join(difflib.unified_diff(
                (before or "").splitlines(), after.splitlines(), f"a/{path}" if before is not None else "/dev/null",
                f"b/{path}", n=2, lineterm=""))
            e["diff"] = texts.add(diff)
            e["added"] = sum(1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))
            e["removed"] = sum(1 for line in diff.splitlines() if line.startswith("-") and not line.startswith("---"))
            e["first"] = before is None
            files[path] = after
        if ev.get("type") == "agent_reply" and calls:
            continue  # the cassette's call holds it, prompt and all
        if isinstance(ev.get("failed_tests"), list):
            e["failed_tests"] = "\n".join(map(str, ev["failed_tests"]))
        for k, v in list(e.items()):  # long texts go to the table, named "@key"
            if isinstance(v, str) and len(v) > LONG_FIELD_CHARS:
                del e[k]
                e["@" + k] = texts.add(v)
        e["who"] = _actor(ev)
        out_events.append(e)
    # pair each action of a reply with the event it produced (same agent, same round, in order)
    by_agent_round: dict[tuple, list[int]] = defaultdict(list)
    for i, e in enumerate(out_events):
        if e.get("who") and e.get("type") != "agent_reply" and e.get("round") is not None:
            by_agent_round[(e["who"], e["round"])].append(i)
    used: set[int] = set()
    for c in calls:
        pool = by_agent_round.get((c["agent"], c["round"]), [])
        for act in c["acts"]:
            wanted = OUTCOME_TYPES.get(act[2], (act[2],))
            hit = next((i for i in pool if i not in used and str(out_events[i].get("type", "")).startswith(wanted)), -1)
            if hit >= 0:
                used.add(hit)
            act.append(hit)
    rounds = sorted({e["round"] for e in out_events if isinstance(e.get("round"), int)} | {c["round"] for c in calls})
    if not rounds:
        rounds = [0]
    tokens = {r: 0 for r in range(rounds[0], rounds[-1] + 1)}
    for c in calls:
        tokens[c["round"]] = tokens.get(c["round"], 0) + int(c["in"] or 0) + int(c["out"] or 0)
    snaps = list(result.snapshots)
    data = {
        "id": result.trial_id, "run_dir": str(run_dir),
        "config": result.config.model_dump() if hasattr(result.config, "model_dump") else dict(result.config),
        "outcome": {"status": result.status, "error": result.error, "success": result.success,
                    "reason": result.reason, "accuracy": result.accuracy, "rounds": result.rounds,
                    "input_tokens": result.input_tokens, "output_tokens": result.output_tokens,
                    "dollars": row.get("dollars"), "virtual_seconds": result.virtual_seconds,
                    "real_seconds": result.real_seconds},
        "agents": agents, "first": rounds[0], "last": rounds[-1],
        "tokens": [tokens[r] for r in range(rounds[0], rounds[-1] + 1)],
        "calls": calls, "events": out_events, "graph": _graph(snaps),
    }
    data = _clean(data)
    if own_table:
        data["T"] = texts.items
    return data


# --- pages --------------------------------------------------------------------------------------------------

def _json_for_html(payload: Any) -> str:
    """JSON that cannot end or confuse its <script> element: ``</`` is written ``<\\/``, and ``<!--`` and
    ``<script`` (any case) start with ``\\u003c`` (either could put the HTML parser in a state where the
    element's own end tag no longer ends it)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("</", "<\\/").replace("<!--", "\\u003c!--")
    text = re.sub(r"<(?=script)", r"\\u003c", text, flags=re.I)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _pack(texts: list[str]) -> str:
    """The text table as base64 of raw-deflated JSON (prompts repeat the same files with small changes, so
    this is 10-20 times smaller); the page inflates it with the browser's DecompressionStream."""
    import base64
    import zlib

    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw = json.dumps(texts, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return base64.b64encode(z.compress(raw) + z.flush()).decode("ascii")


def unpack_texts(page: str) -> list[str]:
    """The text table of a page written by this module (for tests and tools)."""
    import base64
    import zlib

    m = re.search(r'<script type="application/json" id="latte-data">(.*?)</script>', page, re.S)
    payload = json.loads(m.group(1))
    return json.loads(zlib.decompress(base64.b64decode(payload["Tz"]), -15).decode("utf-8"))


def _page(title: str, payload: dict) -> str:
    if "T" in payload:
        payload = {**payload, "Tz": _pack(payload["T"])}
        del payload["T"]
    return (_TEMPLATE.replace("__TITLE__", html.escape(title))
            .replace("__CSS__", _CSS).replace("__JS__", _JS)
            .replace("__DATA__", _json_for_html(payload)))


def trial_html(run_dir: str | Path) -> str:
    """The page of one trial."""
    data = trial_data(run_dir)
    texts = data.pop("T")
    return _page(f"{data['id']} · latte_lab viewer", {"kind": "trial", "T": texts, "trials": [data]})


def compare_html(a: str | Path, b: str | Path) -> str:
    """Two trials side by side, one slider for both (the same round on each)."""
    texts = _Texts()
    trials = [trial_data(a, texts), trial_data(b, texts)]
    return _page(f"{trials[0]['id']} vs {trials[1]['id']} · latte_lab viewer",
                 {"kind": "compare", "T": texts.items, "trials": trials})


SWEEP_COLUMNS = ["trial_id", "task", "team", "model", "seed", "status", "success", "accuracy", "total_rounds",
                 "total_tokens", "dollars", "wall_clock_seconds"]


def is_sweep_dir(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and not (path / rundir.RESULT_FILE).exists() and any(
        (p / rundir.RESULT_FILE).exists() for p in path.iterdir() if p.is_dir())


def _sweep_rows(sweep_dir: Path) -> list[tuple[Path, dict]]:
    rows = []
    for p in sorted(sweep_dir.iterdir()):
        if not p.is_dir() or not (p / rundir.RESULT_FILE).exists():
            continue
        try:
            payload = rundir.read_result(p)
        except DataError:
            continue
        row = dict(payload.get("row") or {})
        row.setdefault("trial_id", payload.get("trial_id", p.name))
        row["status"] = payload.get("status", row.get("status"))
        if "total_tokens" not in row:
            row["total_tokens"] = int(row.get("total_input_tokens") or 0) + int(row.get("total_output_tokens") or 0)
        rows.append((p, row))
    return rows


def sweep_html(sweep_dir: str | Path, links: dict[str, str] | None = None) -> str:
    """A sortable, filterable table of a sweep directory's trials; ``links`` maps a trial id to its page."""
    sweep_dir = Path(sweep_dir)
    rows = _sweep_rows(sweep_dir)
    links = links or {}
    table = [[row.get(c) for c in SWEEP_COLUMNS] for _, row in rows]
    payload = {"kind": "sweep", "T": [], "dir": str(sweep_dir), "columns": SWEEP_COLUMNS, "rows": _clean(table),
               "links": [links.get(str(row.get("trial_id")), "") for _, row in rows]}
    return _page(f"{sweep_dir.name} · latte_lab sweep", payload)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def build_page(run_or_dir: Any, out: str | Path | None = None, *, compare: Any = None) -> Path:
    """Write the viewer page of a run directory (or a TrialResult), a sweep directory, or, with ``compare``,
    of two trials side by side; returns the page's path.

    A trial's page goes to ``out`` (default ``<run dir>/view.html``). A sweep's table goes to ``out``
    (default ``<sweep dir>/view.html``) and each trial's page beside it as ``<trial id>.html``. A compare
    page goes to ``out`` (default ``compare-<A>-<B>.html`` beside A).
    """
    a = _run_dir_of(run_or_dir)
    if compare is not None:
        b = _run_dir_of(compare)
        for p in (a, b):
            if is_sweep_dir(p) or not (p / rundir.RESULT_FILE).exists():
                raise DataError(f"{p} is not a finished trial's run directory; --compare takes two trials")
        out = Path(out) if out else a.parent / f"compare-{a.name}-{b.name}.html"
        return _write(out, compare_html(a, b))
    if is_sweep_dir(a):
        out = Path(out) if out else a / PAGE_NAME
        links = {}
        for p, row in _sweep_rows(a):
            name = f"{row.get('trial_id') or p.name}.html"
            try:
                _write(out.parent / name, trial_html(p))
            except DataError:  # a damaged trial: its row stays, without a link
                continue
            links[str(row.get("trial_id"))] = name
        return _write(out, sweep_html(a, links))
    if not (a / rundir.RESULT_FILE).exists():
        raise DataError(f"{a} is neither a finished trial's run directory nor a sweep directory")
    out = Path(out) if out else a / PAGE_NAME
    return _write(out, trial_html(a))


EMBED_HEIGHT_PX = 820  # the viewer in a notebook: its slider, header, graph and the first lanes at once


class EmbeddedPage:
    """A viewer page shown inside a notebook's output: an ``<iframe>`` holding the whole page (``srcdoc``),
    so it needs no server and no file a notebook server would have to hand out (a ``file://`` link into a
    temporary folder does not open from JupyterLab). ``.page`` is the page's HTML."""

    def __init__(self, page: str, height: int = EMBED_HEIGHT_PX):
        self.page, self.height = page, height

    def _repr_html_(self) -> str:
        return (f'<iframe class="latte-viewer" srcdoc="{html.escape(self.page, quote=True)}" '
                f'style="width:100%;height:{self.height}px;border:1px solid #d0d7de;border-radius:6px" '
                'title="latte_lab trial viewer"></iframe>')


def embed(run_or_dir: Any, *, compare: Any = None, height: int = EMBED_HEIGHT_PX) -> EmbeddedPage:
    """The viewer page of a trial (a run directory or a TrialResult), or of two with ``compare``, to show in
    a notebook: ``ll.viz.viewer.embed(res)`` on a cell's last line. Nothing is written to disk."""
    a = _run_dir_of(run_or_dir)
    if compare is not None:
        return EmbeddedPage(compare_html(a, _run_dir_of(compare)), height)
    if not (a / rundir.RESULT_FILE).exists():
        raise DataError(f"{a} is not a finished trial's run directory")
    return EmbeddedPage(trial_html(a), height)


def _run_dir_of(obj: Any) -> Path:
    if getattr(obj, "run_dir", None) is not None:
        return Path(obj.run_dir)
    path = Path(obj)
    if not path.exists():
        raise DataError(f"{path} does not exist")
    return path


def serve(page: str | Path, *, open_browser: bool = True, block: bool = True):
    """Serve ``page``'s folder on 127.0.0.1 (an ephemeral port; loopback only) and open the page in a browser
    (nothing happens where there is none). Returns the server when ``block`` is False; otherwise serves
    until interrupted."""
    import functools
    import http.server
    import threading
    import urllib.parse
    import webbrowser

    page = Path(page).resolve()
    handler = functools.partial(_QuietHandler, directory=str(page.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    url = f"http://127.0.0.1:{server.server_address[1]}/{urllib.parse.quote(page.name)}"
    server.url = url  # type: ignore[attr-defined]
    print(f"serving {url} (Ctrl-C stops)", flush=True)
    if open_browser:
        try:
            webbrowser.open(url)
        except Exception:  # noqa: BLE001 - no browser is fine
            pass
    if not block:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return None


def _handler_base():
    import http.server

    return http.server.SimpleHTTPRequestHandler


class _QuietHandler(_handler_base()):  # type: ignore[misc]
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


# --- the notebook widget ------------------------------------------------------------------------------------

def lanes_html(data: dict, texts: list[str], round: int) -> str:
    """The agent lanes of one round as HTML (every text escaped): the notebook's :func:`transcript`."""
    esc = html.escape
    events = data["events"]
    parts = [f"<div style='font:13px sans-serif'><b>{esc(data['id'])}</b> · round {round}"]
    flags = [e for e in events if e.get("round") == round and e.get("type") in ("lead_invoked", "heartbeat_alert")]
    for f in flags:
        what = ("Lead triggered: " + ", ".join(map(str, f.get("reasons") or []))) if f["type"] == "lead_invoked" \
            else f"heartbeat: {f.get('agent')} on {f.get('task')}"
        parts.append(f" <span style='background:#fde68a;padding:1px 4px'>{esc(what)}</span>")
    parts.append("<div style='display:flex;gap:8px;align-items:flex-start;overflow-x:auto'>")
    for agent in data["agents"]:
        calls = [c for c in data["calls"] if c["agent"] == agent and c["round"] == round]
        evs = [e for e in events if e.get("who") == agent and e.get("round") == round and e.get("type") != "agent_reply"]
        if not calls and not evs:
            continue
        parts.append("<div style='flex:1 1 0;min-width:220px;border:1px solid #ccc;padding:4px'>"
                     f"<b>{esc(agent)}</b>")
        for c in calls:
            new = [m for m in c["msgs"] if m[2]]
            prompt = "\n\n".join(texts[m[1]] for m in new if m[1] is not None)
            parts.append(f"<details><summary>prompt ({len(c['msgs'])} messages, {len(new)} new)</summary>"
                         f"<pre style='white-space:pre-wrap'>{esc(prompt)}</pre></details>")
            reply = texts[c["reply"]] if c["reply"] is not None else ""
            parts.append(f"<pre style='white-space:pre-wrap;background:#f6f8fa'>{_highlight(reply, c['acts'])}</pre>")
        for e in evs:
            parts.append(f"<div style='font-size:12px'>{esc(_event_line(e))}</div>")
        parts.append("</div>")
    parts.append("</div></div>")
    return "".join(parts)


def _highlight(text: str, acts: list) -> str:
    out, pos = [], 0
    for start, end, _tag, *_ in acts:
        out.append(html.escape(text[pos:start]))
        out.append(f"<mark>{html.escape(text[start:end])}</mark>")
        pos = end
    out.append(html.escape(text[pos:]))
    return "".join(out)


def _event_line(e: dict) -> str:
    skip = {"type", "seq", "round", "t", "who", "diff", "failed_tests"}
    detail = ", ".join(f"{k}={v}" for k, v in e.items()
                       if k not in skip and not k.startswith("@") and v not in (None, [], ""))
    return f"{e.get('type')}: {detail}"[:300]


def transcript(result_or_run_dir: Any, round: int | None = None):
    """A widget showing the agent lanes (prompts, replies with their actions, outcomes) of a chosen round:
    an IntSlider over the trial's rounds and the lanes under it.

    >>> w = ll.viz.transcript(res)          # doctest: +SKIP
    >>> w.children[0].value = 5             # doctest: +SKIP
    """
    import ipywidgets as widgets

    data = trial_data(_run_dir_of(result_or_run_dir))
    texts = data.pop("T")
    start = data["first"] if round is None else max(data["first"], min(data["last"], int(round)))
    slider = widgets.IntSlider(value=start, min=data["first"], max=data["last"], description="round",
                               continuous_update=False)
    out = widgets.HTML(lanes_html(data, texts, start))
    page = data["run_dir"] + "/" + PAGE_NAME
    link = widgets.HTML(f"<small>the whole trial: <code>latte-lab view {html.escape(data['run_dir'])}</code> "
                        f"writes {html.escape(page)}</small>")

    def show(change):
        out.value = lanes_html(data, texts, change["new"])

    slider.observe(show, names="value")
    box = widgets.VBox([slider, out, link])
    box.data = data  # type: ignore[attr-defined]
    return box


# --- the page's markup, style and script --------------------------------------------------------------------

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>__TITLE__</title>
<style>__CSS__</style></head>
<body><div id="app"></div>
<script type="application/json" id="latte-data">__DATA__</script>
<script>__JS__</script>
</body></html>
"""

_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:0;color:#1f2328;background:#fff}
header,.bar{padding:8px 14px;border-bottom:1px solid #d0d7de;background:#f6f8fa}
h1{font-size:16px;margin:0 0 4px}
.kv{display:flex;flex-wrap:wrap;gap:4px 14px}.kv span b{font-weight:600}
.ok{color:#1a7f37}.bad{color:#cf222e}
.cols{display:flex;gap:10px}.cols>.trial{flex:1 1 0;min-width:0;border-right:1px solid #d0d7de}
.bar{position:sticky;top:0;z-index:2;display:flex;align-items:center;gap:10px}
.slider-box{flex:1;display:flex;flex-direction:column}#round{width:100%;margin:0}
.ticks{height:8px;width:calc(100% - 16px);margin:0 8px}
.flag{display:inline-block;background:#fff3bf;border:1px solid #e3b341;border-radius:3px;padding:0 5px;margin:2px}
.flag.hb{background:#ffe2e0;border-color:#e5534b}
.flag.fork{background:#f3e8ff;border-color:#8250df}
.main{display:flex;flex-wrap:wrap;gap:10px;padding:8px 14px;align-items:flex-start}
.graph{flex:1 1 420px;min-width:0;max-width:100%;border:1px solid #d0d7de;border-radius:6px;padding:4px}
.graph .canvas{overflow:auto;max-height:85vh}.graph svg{display:block;height:auto}
.graph .head{display:flow-root;margin-bottom:2px}.graph .zoom{float:right}.graph .zoom button{min-width:26px;margin-left:2px}
.graph svg text{font-size:10px;pointer-events:none}.graph g.node{cursor:pointer}
.graph path.bundled{stroke-opacity:.35}.graph path.sel{stroke:#0969da;stroke-opacity:1;stroke-width:1.6}
.lanes{flex:1 1 480px;min-width:0;display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start}
.lane{flex:1 1 220px;min-width:0;max-width:520px;border:1px solid #d0d7de;border-radius:6px;padding:6px;background:#fff}
.lane h3{margin:0 0 4px;font-size:13px}.lane.idle{opacity:.55}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;font:12px/1.35 ui-monospace,monospace}
.reply{background:#f6f8fa;border-radius:4px;padding:4px}
.act{background:#ddf4ff;border-bottom:2px solid #0969da;border-radius:2px}
.act.fail{background:#ffebe9;border-bottom-color:#cf222e}
.outcome{font-size:12px;margin:2px 0 2px 8px}.outcome.fail{color:#cf222e}
.msg{border-left:3px solid #d0d7de;padding-left:6px;margin:4px 0}.msg.new{border-left-color:#bf8700;background:#fff8c5}
.diff .add{color:#1a7f37;background:#dafbe1}.diff .del{color:#cf222e;background:#ffebe9}.diff .hunk{color:#8250df}
details>summary{cursor:pointer;color:#0969da}
.events{padding:4px;max-height:320px;overflow:auto;border-top:1px solid #d0d7de}.events h3{margin:2px 0;font-size:13px}
.events ol{margin:0;padding-left:22px}.events li{cursor:pointer;font-size:12px}.more{font-size:11px;margin-left:4px}.events li:hover{background:#f6f8fa}
table{border-collapse:collapse;margin:8px 14px}th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left}
th{cursor:pointer;background:#f6f8fa;user-select:none}th.asc::after{content:" \\25B2"}th.desc::after{content:" \\25BC"}
.spark{cursor:pointer}.muted{color:#6e7781}
"""

_JS = r"""
"use strict";
const D = JSON.parse(document.getElementById("latte-data").textContent);
let T = [];
async function inflate(b64) {
  const bytes = Uint8Array.from(atob(b64), ch => ch.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
  return JSON.parse(await new Response(stream).text());
}
const app = document.getElementById("app");
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}
const SVGNS = "http://www.w3.org/2000/svg";
function sv(tag, attrs) { const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v); return e; }
const fmt = (v, d) => v === null || v === undefined ? "n/a" : (typeof v === "number" && d !== undefined ? v.toFixed(d) : String(v));
const COLORS = {pending:"#d0d7de", assigned:"#a5d6ff", in_progress:"#f2cc60", done:"#4ac26b", verified:"#1a7f37",
                closed:"#8c959f", failed:"#ff8182", blocked:"#ff8182"};
const BAD = /blocked|skipped|error|fail/;
let expandAll = false;
const LONG_ACTION = 600;  // characters of an action shown before "show all"
function outcomeText(e) {
  const skip = new Set(["type","seq","round","t","who","diff","failed_tests","added","removed","first"]);
  const parts = [];
  for (const [k, v] of Object.entries(e)) if (!skip.has(k) && !k.startsWith("@") && v !== null && v !== "" && !(Array.isArray(v) && !v.length))
    parts.push(k + "=" + (typeof v === "object" ? JSON.stringify(v) : v));
  return e.type + (parts.length ? ": " + parts.join(", ") : "");
}
function diffView(id) {
  const pre = el("pre", {class: "diff"});
  for (const line of T[id].split("\n")) {
    const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
    pre.append(el("span", {class: cls}, line + "\n"));
  }
  return pre;
}
function eventBlock(tr, e) {
  const d = el("div", {class: "outcome" + (BAD.test(e.type) || e.failed > 0 ? " fail" : ""), "data-seq": e.seq});
  if (e.type === "edit_file" && e.diff !== undefined) {
    const det = el("details", {class: "edit"}, el("summary", {}, `edit ${e.path}: +${e.added} −${e.removed}` + (e.first ? " (new file)" : "")));
    det.addEventListener("toggle", () => { if (det.open && det.children.length < 2) det.append(diffView(e.diff)); });
    d.append(det);
  } else if (e.type === "run_tests") {
    d.append(`run_tests: ${e.passed} passed, ${e.failed} failed` + (e.errors ? `, ${e.errors} errors` : ""));
  } else d.append(outcomeText(e));
  if (e.failed_tests) { const det = el("details", {class: "failures"}, el("summary", {}, "failed tests")); det.append(el("pre", {}, e.failed_tests)); d.append(det); }
  for (const [k, v] of Object.entries(e)) if (k.startsWith("@")) {
    const det = el("details", {}, el("summary", {}, k.slice(1))); det.append(el("pre", {}, T[v])); d.append(det); }
  return d;
}
function replyView(tr, c) {
  const text = c.reply === null ? "" : T[c.reply];
  const pre = el("pre", {class: "reply"});
  let pos = 0;
  for (const [s, e, tag, ev] of c.acts) {
    pre.append(text.slice(pos, s));
    const out = ev >= 0 ? tr.events[ev] : null;
    const body = text.slice(s, e);
    const span = el("span", {class: "act" + (out && BAD.test(out.type) ? " fail" : ""), title: out ? outcomeText(out) : "no outcome recorded"});
    if (body.length > LONG_ACTION) {  // a whole file in an edit: its first lines, the rest on demand
      const more = el("button", {class: "more"}, `… ${body.split("\n").length} lines, show all`);
      more.addEventListener("click", () => { span.replaceChildren(body); });
      span.append(body.slice(0, LONG_ACTION / 2), more);
    } else span.append(body);
    pre.append(span); pos = e;
  }
  pre.append(text.slice(pos));
  return pre;
}
function promptView(c) {
  const det = el("details", {class: "prompt"}, el("summary", {}, `prompt: ${c.msgs.length + 1} messages, ${c.msgs.filter(m => m[2]).length} new this round · ${c.in} tokens in`));
  det.addEventListener("toggle", () => {
    if (!det.open || det.dataset.filled) return; det.dataset.filled = "1";
    if (c.sys !== null) { const s = el("details", {class: "msg"}, el("summary", {}, "system prompt")); s.append(el("pre", {}, T[c.sys])); det.append(s); }
    for (const [role, id, isNew] of c.msgs) {
      if (isNew) det.append(el("div", {class: "msg new", title: "new in this call: the view this round's prompt was built from"}, el("b", {}, (role || "message") + " (new)"), el("pre", {}, T[id])));
      else { const h = el("details", {class: "msg"}, el("summary", {}, (role || "message") + " (earlier)")); h.addEventListener("toggle", () => { if (h.open && h.children.length < 2) h.append(el("pre", {}, T[id])); }); det.append(h); }
    }
  });
  return det;
}
function frameAt(g, r) { let best = g.frames[0]; for (const f of g.frames) if (f.round <= r) best = f; return best; }
const BUNDLE_MIN = 6;  // a node with more dependency edges than this gets them bundled into one arrow
const BUNDLE_GAP = 34;  // px left of the node where its bundled edges meet
const ZOOM_STEP = 1.25;
function graphView(tr, r, onNode, sel, redraw) {
  const g = tr.graph; if (!g) return el("div", {class: "muted"}, "no coordination graph (this team keeps none)");
  const f = frameAt(g, r), pad = 14, rad = g.node_px / 2, W = g.w + 2 * pad, H = g.h + 2 * pad;
  tr.zoom = tr.zoom || 1;  // 1: the whole graph fits the panel's width (never larger than drawn)
  const svg = sv("svg", {viewBox: `${-pad} ${-pad} ${W} ${H}`, preserveAspectRatio: "xMinYMin meet", "data-w": W});
  svg.style.width = `calc(${tr.zoom} * min(100%, ${W}px))`;
  const state = new Map(f.nodes.map(n => [n[0], n]));
  const selIdx = g.nodes.findIndex(n => n.id === sel);
  const fanIn = new Map(); for (const [, b] of f.edges) fanIn.set(b, (fanIn.get(b) || 0) + 1);
  // dependency edges; a crowded fan-in meets at one point, right of its sources' labels, and enters as one arrow
  const junction = new Map();
  for (const [a, b] of f.edges) if (fanIn.get(b) > BUNDLE_MIN) {
    const A = g.nodes[a], B = g.nodes[b], right = Math.max(A.lx, A.x + rad) + BUNDLE_GAP / 2;
    junction.set(b, Math.min(B.x - rad - 8, Math.max(junction.get(b) || 0, right, B.x - rad - BUNDLE_GAP)));
  }
  for (const [a, b] of f.edges) {
    const A = g.nodes[a], B = g.nodes[b], sx = Math.max(A.lx, A.x + rad);
    const bundled = junction.has(b), ex = bundled ? junction.get(b) : B.x - rad, mid = (sx + ex) / 2;
    const d = bundled ? `M${sx},${A.y} C${mid},${A.y} ${mid},${B.y} ${ex},${B.y}` : `M${sx},${A.y} C${B.x - 30},${A.y} ${B.x - 30},${B.y} ${ex},${B.y}`;
    const cls = (bundled ? "bundled" : "") + (a === selIdx || b === selIdx ? " sel" : "");
    svg.append(sv("path", {d, fill: "none", stroke: "#8c959f", "stroke-width": bundled ? 0.7 : 1, class: cls.trim()}));
  }
  for (const [b, jx] of junction) {
    const B = g.nodes[b];
    svg.append(sv("path", {d: `M${jx},${B.y} L${B.x - rad},${B.y}`, stroke: b === selIdx ? "#0969da" : "#57606a", "stroke-width": 2.5, class: "bundle"}));
  }
  g.nodes.forEach((n, i) => {
    const s = state.get(i); if (!s) return;
    const grp = sv("g", {class: "node", "data-node": n.id});
    const circ = sv("circle", {cx: n.x, cy: n.y, r: rad, fill: COLORS[s[1]] || "#d0d7de", stroke: i === selIdx ? "#0969da" : n.verify ? "#8250df" : "#57606a", "stroke-width": i === selIdx ? 2.5 : 1});
    const tip = sv("title", {}); tip.textContent = `${n.id}: ${n.title}\n${s[1]}${s[2] ? " · " + s[2] : ""}`; circ.append(tip);
    const lab = sv("text", {x: n.x, y: n.y + 3, "text-anchor": "middle"}); lab.textContent = n.short;
    const t2 = sv("text", {x: n.x + rad + 3, y: n.y - 2}); t2.textContent = n.title.length > 28 ? n.title.slice(0, 27) + "…" : n.title;
    const t3 = sv("text", {x: n.x + rad + 3, y: n.y + 10, fill: "#57606a"});
    t3.textContent = s[1].replace("_", " ") + (s[2] ? " · " + s[2] : "");
    grp.append(circ, lab, t2, t3);
    if (junction.has(i)) {  // how many edges the one arrow stands for
      const t4 = sv("text", {x: n.x + rad + 3, y: n.y + 21, fill: "#57606a", class: "bundle-count"});
      t4.textContent = `${fanIn.get(i)} deps, bundled`; grp.append(t4);
    } grp.addEventListener("click", () => onNode(n.id)); svg.append(grp);
  });
  const zoomTo = z => { tr.zoom = Math.max(0.25, Math.min(8, z)); redraw(); };
  const zoom = el("span", {class: "zoom"},
    el("button", {class: "zoom-out", title: "zoom out", onclick: () => zoomTo(tr.zoom / ZOOM_STEP)}, "−"),
    el("button", {class: "zoom-fit", title: "fit the whole graph to the panel", onclick: () => zoomTo(1)}, "fit"),
    el("button", {class: "zoom-in", title: "zoom in (the panel scrolls)", onclick: () => zoomTo(tr.zoom * ZOOM_STEP)}, "+"));
  const title = el("div", {class: "muted head"}, zoom, `round ${r}: ${f.nodes.length} nodes, ${f.nodes.filter(n => n[1] === "done" || n[1] === "verified").length} done (graph as of round ${f.round})`);
  return el("div", {}, title, el("div", {class: "canvas"}, svg));
}
function spark(tr, r, go) {
  const w = 260, h = 36, n = tr.tokens.length, mx = Math.max(1, ...tr.tokens);
  const svg = sv("svg", {width: w, height: h, class: "spark"});
  const pts = tr.tokens.map((v, i) => `${(i / Math.max(1, n - 1) * (w - 4) + 2).toFixed(1)},${(h - 2 - v / mx * (h - 6)).toFixed(1)}`).join(" ");
  svg.append(sv("polyline", {points: pts, fill: "none", stroke: "#0969da", "stroke-width": 1.2}));
  const x = (r - tr.first) / Math.max(1, n - 1) * (w - 4) + 2;
  svg.append(sv("line", {x1: x, x2: x, y1: 0, y2: h, stroke: "#cf222e"}));
  const tip = sv("title", {}); tip.textContent = `tokens per round (max ${mx}); round ${r}: ${tr.tokens[r - tr.first] || 0}`; svg.append(tip);
  svg.addEventListener("click", ev => { const b = svg.getBoundingClientRect(); go(tr.first + Math.round((ev.clientX - b.left - 2) / (w - 4) * (n - 1))); });
  return svg;
}
function header(tr) {
  const o = tr.outcome, c = tr.config;
  const cfg = el("details", {}, el("summary", {}, "configuration"), el("pre", {}, Object.entries(c).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join("\n")));
  return el("header", {}, el("h1", {}, tr.id),
    el("div", {class: "kv"},
      el("span", {}, el("b", {}, "task "), c.task), el("span", {}, el("b", {}, "team "), c.team), el("span", {}, el("b", {}, "model "), c.model),
      el("span", {}, el("b", {}, "seed "), c.seed), el("span", {}, el("b", {}, "workers "), c.n_workers),
      el("span", {class: o.success ? "ok" : "bad"}, el("b", {}, "outcome "), (o.success ? "success" : "no success") + ` (${o.reason})` + (o.status !== "ok" ? ` · ${o.status}: ${o.error}` : "")),
      el("span", {}, el("b", {}, "accuracy "), o.accuracy === null ? "n/a" : (100 * o.accuracy).toFixed(0) + "%"),
      el("span", {}, el("b", {}, "rounds "), o.rounds),
      el("span", {}, el("b", {}, "tokens "), (o.input_tokens + o.output_tokens).toLocaleString("en") + ` (in ${o.input_tokens.toLocaleString("en")} / out ${o.output_tokens.toLocaleString("en")})`),
      el("span", {}, el("b", {}, "dollars "), o.dollars === null ? "n/a" : "$" + o.dollars.toFixed(4)),
      el("span", {}, el("b", {}, "wall clock "), `${fmt(o.virtual_seconds, 1)} s virtual · ${fmt(o.real_seconds, 1)} s real`)),
    cfg);
}
function roundFlags(tr, r) {
  const box = el("div", {class: "flags"});
  for (const e of tr.byRound.get(r) || []) {
    if (e.type === "lead_invoked") box.append(el("span", {class: "flag lead"}, "Lead triggered: " + (e.reasons || []).join(", ")));
    else if (e.type === "lead_skipped") box.append(el("span", {class: "flag lead muted"}, "Lead skipped: " + (e.reason || "")));
    else if (e.type === "heartbeat_alert") box.append(el("span", {class: "flag hb"}, `heartbeat: ${e.agent} on ${e.task} (${e.rounds_without_activity} rounds idle)`));
    else if (e.type === "fix_task_injected" || e.type === "run_end") box.append(el("span", {class: "flag"}, outcomeText(e)));
    else if (e.type === "fork_point") box.append(el("span", {class: "flag fork"}, `fork point: the rounds up to ${e.fork_round} are ${e.parent}'s; from here on: ` + (Object.keys(e.changes || {}).length ? JSON.stringify(e.changes) : "no change")));
  }
  return box;
}
function lanes(tr, r) {
  const box = el("div", {class: "lanes"});
  for (const a of tr.agents) {
    const calls = tr.calls.filter(c => c.agent === a && c.round === r);
    const evs = (tr.byRound.get(r) || []).filter(e => e.who === a && e.type !== "agent_reply");
    const lane = el("div", {class: "lane" + (calls.length || evs.length ? "" : " idle"), "data-agent": a}, el("h3", {}, a));
    if (!calls.length && !evs.length) lane.append(el("div", {class: "muted"}, "idle this round"));
    const paired = new Set();
    for (const c of calls) {
      lane.append(promptView(c));
      const tags = c.acts.map(a => a[2]);
      const rep = el("details", {class: "reply-box"}, el("summary", {}, `reply (${c.out} tokens): ` + (tags.length ? tags.join(", ") : "no actions")));
      if (expandAll) rep.open = true;
      rep.append(replyView(tr, c));
      const acts = el("div", {class: "actions"});
      for (const [s, e, tag, ev] of c.acts) {
        if (ev >= 0) { paired.add(ev); acts.append(el("div", {class: "action"}, el("b", {}, tag + " → "), eventBlock(tr, tr.events[ev]))); }
        else acts.append(el("div", {class: "action"}, el("b", {}, tag + " → "), el("span", {class: "muted"}, "no outcome recorded")));
      }
      rep.append(acts); lane.append(rep);
    }
    for (const e of evs) if (!paired.has(tr.events.indexOf(e))) lane.append(eventBlock(tr, e));
    box.append(lane);
  }
  return box;
}
function nodeEvents(tr, id, go) {
  const list = el("ol", {});
  tr.events.forEach(e => {
    if (e.task === id || e.verify_id === id || e.node === id)
      list.append(el("li", {onclick: () => go(e.round)}, `round ${e.round}: ` + outcomeText(e)));
  });
  return el("div", {class: "events", id: "node-events"}, el("h3", {}, `events of ${id}`), list);
}
function prep(tr) {
  tr.byRound = new Map();
  for (const e of tr.events) { if (e.round === null || e.round === undefined) continue;
    if (!tr.byRound.has(e.round)) tr.byRound.set(e.round, []); tr.byRound.get(e.round).push(e); }
}
function trialApp(trials) {
  trials.forEach(prep);
  const first = Math.min(...trials.map(t => t.first)), last = Math.max(...trials.map(t => t.last));
  let r = Math.min(last, first + 1), nodeSel = null;
  const slider = el("input", {type: "range", id: "round", min: first, max: last, value: r});
  const label = el("span", {id: "round-label"});
  const prev = el("button", {id: "prev", title: "previous round (←)"}, "◀"), next = el("button", {id: "next", title: "next round (→)"}, "▶");
  const flagged = new Set(); trials.forEach(t => t.events.forEach(e => { if (e.type === "heartbeat_alert") flagged.add(e.round); }));
  const expand = el("button", {id: "expand", title: "open every reply (e)"}, "expand replies");
  // the Lead's invocations (amber) and heartbeat alerts (red) as ticks under the slider
  const ticks = sv("svg", {class: "ticks", viewBox: `0 0 ${Math.max(1, last - first)} 10`, preserveAspectRatio: "none"});
  trials.forEach(t => t.events.forEach(e => {
    if (e.type === "fork_point") {  // a fork's branch point: a full-height mark
      ticks.append(sv("rect", {x: e.round - first - 0.3, y: 0, width: 0.6, height: 10, fill: "#8250df"}));
      return;
    }
    const color = e.type === "heartbeat_alert" ? "#cf222e" : e.type === "lead_invoked" ? "#bf8700" : null;
    if (!color || e.round === null || e.round === undefined) return;
    const y = color === "#cf222e" ? 0 : 5;
    ticks.append(sv("rect", {x: e.round - first - 0.2, y, width: 0.4, height: 5, fill: color}));
  }));
  const sliderBox = el("div", {class: "slider-box"}, slider, ticks);
  const bar = el("div", {class: "bar"}, prev, sliderBox, next, label, expand,
    el("span", {class: "muted", title: [...flagged].join(", ")}, "← → step · Home/End · e expands · heartbeats: " +
      (flagged.size ? `${flagged.size} (rounds ${[...flagged].slice(0, 6).join(", ")}${flagged.size > 6 ? ", …" : ""})` : "none")));
  const cols = el("div", {class: "cols"});
  const views = trials.map(tr => { const col = el("div", {class: "trial", "data-trial": tr.id}); cols.append(col); return col; });
  app.append(bar, cols);
  function go(x) { r = Math.max(first, Math.min(last, x | 0)); slider.value = r; render(); }
  function render() {
    label.textContent = `round ${r} of ${first}–${last}`;
    trials.forEach((tr, k) => {
      const col = views[k]; col.replaceChildren();
      const onNode = id => { nodeSel = id; render(); };
      col.append(header(tr), el("div", {class: "bar2 kv", style: "padding:4px 14px"}, el("span", {class: "muted"}, "tokens over rounds"), spark(tr, r, go), roundFlags(tr, r)),
        el("div", {class: "main"}, el("div", {class: "graph"}, graphView(tr, r, onNode, nodeSel, render),
          nodeSel && tr.graph && tr.graph.nodes.some(n => n.id === nodeSel) ? nodeEvents(tr, nodeSel, go) : null),
          trials.length === 1 ? lanes(tr, r) : null));
      if (trials.length > 1) col.append(el("div", {class: "main"}, lanes(tr, r)));
    });
  }
  const toggle = () => { expandAll = !expandAll; expand.textContent = expandAll ? "collapse replies" : "expand replies"; render(); };
  expand.addEventListener("click", toggle);
  window.addEventListener("hashchange", () => { const m = /round=(\d+)/.exec(location.hash); if (m) go(+m[1]); });
  slider.addEventListener("input", () => go(+slider.value));
  prev.addEventListener("click", () => go(r - 1)); next.addEventListener("click", () => go(r + 1));
  document.addEventListener("keydown", ev => {
    if (ev.target.tagName === "INPUT" && ev.target !== slider) return;
    if (ev.key === "ArrowRight" || ev.key === "j") { ev.preventDefault(); go(r + 1); }
    else if (ev.key === "ArrowLeft" || ev.key === "k") { ev.preventDefault(); go(r - 1); }
    else if (ev.key === "Home") go(first); else if (ev.key === "End") go(last); else if (ev.key === "e") toggle();
  });
  const hash = /round=(\d+)/.exec(location.hash); if (hash) r = +hash[1];
  render();
}
function sweepApp() {
  const filter = el("input", {id: "filter", placeholder: "filter rows (text in any column)", size: 40});
  const table = el("table", {id: "trials"}), thead = el("thead"), tbody = el("tbody");
  let key = -1, dir = 1;
  const tr = el("tr");
  D.columns.forEach((c, i) => tr.append(el("th", {onclick: () => { dir = key === i ? -dir : 1; key = i; draw(); }}, c)));
  thead.append(tr); table.append(thead, tbody);
  app.append(el("header", {}, el("h1", {}, `sweep ${D.dir}: ${D.rows.length} trials`), filter), table);
  function draw() {
    const q = filter.value.toLowerCase();
    const idx = D.rows.map((_, i) => i).filter(i => !q || D.rows[i].some(v => String(v).toLowerCase().includes(q)));
    if (key >= 0) idx.sort((a, b) => { const x = D.rows[a][key], y = D.rows[b][key];
      if (x === y) return 0; if (x === null) return 1; if (y === null) return -1;
      return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * dir; });
    thead.querySelectorAll("th").forEach((th, i) => th.className = i === key ? (dir > 0 ? "asc" : "desc") : "");
    tbody.replaceChildren(...idx.map(i => el("tr", {}, ...D.rows[i].map((v, j) => el("td", {},
      j === 0 && D.links[i] ? el("a", {href: D.links[i]}, v) : (typeof v === "number" && !Number.isInteger(v) ? v.toFixed(3) : fmt(v)))))));
  }
  filter.addEventListener("input", draw); draw();
}
(async () => {
  if (D.Tz) T = await inflate(D.Tz);
  if (D.kind === "sweep") sweepApp(); else trialApp(D.trials);
  document.body.dataset.ready = "1";
})().catch(err => { app.replaceChildren(el("pre", {class: "bad"}, "the viewer could not start: " + err)); });
"""
