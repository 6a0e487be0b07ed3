"""The trial viewer (latte_lab.viz.viewer, latte-lab view): pages for a LATTE trial and a flat team, agent
text escaped, the sweep table, the compare page, --serve on loopback, the notebook transcript, and the size
of a 300-round trial's page (a simulated trial stitched end to end until it has 300 rounds)."""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from pathlib import Path

import pytest

import latte_lab as ll
from latte_lab import rundir
from latte_lab.cli import main
from latte_lab.viz import viewer

SCRIPT = "<script>alert(1)</script>"
MAX_PAGE_BYTES = 5_000_000


def make_trial(runs: Path, team: str, max_rounds: int | None = None, seed: int = 0) -> Path:
    cfg = ll.TrialConfig(task="debug", team=team, model="simulated", max_rounds=max_rounds, runs_dir=str(runs),
                         cache="off", seed=seed)
    return Path(ll.run_trial(cfg).run_dir)


def inject_script(run_dir: Path, round: int = 5) -> str:
    """Put SCRIPT into a worker's reply at ``round`` (the cassette's text of it), into a broadcast and into an
    edit's content; returns the worker's name."""
    calls = rundir.read_jsonl(run_dir / rundir.CALLS_FILE)
    events = rundir.read_jsonl(run_dir / rundir.EVENTS_FILE)
    rounds = {(e.get("agent"), e.get("call_index")): e.get("round") for e in events if e["type"] == "agent_reply"}
    worker = None
    for c in calls:
        agent = c["scope"]["agent"]
        if worker is None and agent != "Lead" and rounds.get((agent, c["scope"]["call_index"])) == round:
            text_id = c["response"]["text_id"]
            for m in c["new_messages"]:
                if m[0] == text_id:
                    m[2] = f"I found this in a file: {SCRIPT}\n\n" + m[2]
                    worker = agent
    assert worker, f"no worker replied in round {round}"
    for e in events:
        if e["type"] == "broadcast":
            e["message"] = f"note {SCRIPT}"
        if e["type"] == "edit_file":
            e["content"] = e["content"] + f"\n# {SCRIPT}\n"
    for name, records in ((rundir.CALLS_FILE, calls), (rundir.EVENTS_FILE, events)):
        (run_dir / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    return worker


def stitch(src: Path, dst: Path, min_rounds: int) -> Path:
    """A synthetic long trial: ``src``'s rounds repeated one after another (rounds, call indices and message
    numbers shifted; every message of each copy made distinct, so nothing deduplicates that would not in a
    real long run) until there are ``min_rounds`` rounds."""
    dst.mkdir(parents=True)
    for name in (rundir.CONFIG_FILE, rundir.LEDGER_FILE):
        shutil.copy(src / name, dst / name)
    events = rundir.read_jsonl(src / rundir.EVENTS_FILE)
    calls = rundir.read_jsonl(src / rundir.CALLS_FILE)
    snaps = rundir.read_jsonl(src / rundir.SNAPSHOTS_FILE)
    body = [e for e in events if isinstance(e.get("round"), int) and e["type"] not in ("run_end", "evaluation")]
    span = max(e["round"] for e in body) + 1
    copies = -(-min_rounds // span)
    n_msgs = 1 + max(m[0] for c in calls for m in c["new_messages"])
    n_calls = 1 + max(c["scope"]["call_index"] for c in calls)
    out_events, out_calls, out_snaps, seq = [], [], [], 0
    for k in range(copies):
        for e in body:
            e = dict(e, round=e["round"] + k * span, seq=seq)
            seq += 1
            if "call_index" in e:
                e["call_index"] += k * n_calls
            out_events.append(e)
        for c in calls:
            c = json.loads(json.dumps(c))
            c["scope"]["call_index"] += k * n_calls
            c["request"]["scope"] = c["scope"]
            c["request"]["system_id"] += k * n_msgs
            c["request"]["message_ids"] = [n + k * n_msgs for n in c["request"]["message_ids"]]
            c["response"]["text_id"] += k * n_msgs
            c["new_messages"] = [[n + k * n_msgs, role, f"{text}\n[copy {k}]"] for n, role, text in c["new_messages"]]
            out_calls.append(c)
        out_snaps += [dict(s, round=s["round"] + k * span) for s in snaps]
    rounds = copies * span
    out_events += [dict(e, round=rounds - 1, seq=seq + i) for i, e in enumerate(events) if e["type"] in ("run_end", "evaluation")]
    for name, records in ((rundir.EVENTS_FILE, out_events), (rundir.CALLS_FILE, out_calls),
                          (rundir.SNAPSHOTS_FILE, out_snaps)):
        (dst / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    payload = json.loads((src / rundir.RESULT_FILE).read_text())
    payload["row"]["total_rounds"] = rounds
    (dst / rundir.RESULT_FILE).write_text(json.dumps(payload))
    return dst


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("viewer")
    latte = make_trial(root / "sweep", "latte", max_rounds=8)
    flat = make_trial(root / "sweep", "decentralized", max_rounds=6)
    worker = inject_script(latte)
    return {"root": root, "latte": latte, "flat": flat, "sweep": root / "sweep", "worker": worker}


def _data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="latte-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def test_latte_trial_page(runs):
    page = viewer.trial_html(runs["latte"])
    data, texts = _data(page), viewer.unpack_texts(page)
    tr = data["trials"][0]
    assert data["kind"] == "trial" and tr["config"]["team"] == "latte"
    assert tr["graph"]["nodes"] and tr["graph"]["frames"]
    pos = ll.viz.layout(rundir.load_trial(runs["latte"]))  # the same layout as ll.viz.draw
    x0, y1 = pos.plan.xlim[0], pos.plan.ylim[1]
    for n in tr["graph"]["nodes"]:
        assert (n["x"], n["y"]) == pytest.approx(((pos[n["id"]][0] - x0) * viewer.PX_PER_IN,
                                                  (y1 - pos[n["id"]][1]) * viewer.PX_PER_IN), abs=0.06)
    assert set(tr["agents"]) >= {"Lead", "Dev1", "Dev2"}
    round5 = [c for c in tr["calls"] if c["round"] == 5 and c["agent"] == runs["worker"]]
    assert round5 and round5[0]["acts"], "the worker's round-5 reply and its actions"
    assert any(a[3] >= 0 for c in tr["calls"] for a in c["acts"]), "actions are paired with their outcomes"
    edits = [e for e in tr["events"] if e["type"] == "edit_file"]
    assert edits and all(texts[e["diff"]].startswith(("--- ", "")) for e in edits)
    assert any("@@" in texts[e["diff"]] for e in edits)
    # a prompt's messages are stored once: the table holds each text once, calls name them by index
    assert len(texts) == len(set(texts))
    assert sum(len(c["msgs"]) for c in tr["calls"]) > len(texts) / 2
    assert len(tr["tokens"]) == tr["last"] - tr["first"] + 1 and sum(tr["tokens"]) > 0
    assert any(e["type"] == "lead_invoked" for e in tr["events"])


def test_flat_team_page(runs):
    page = viewer.trial_html(runs["flat"])
    tr = _data(page)["trials"][0]
    assert tr["graph"] is None and tr["calls"] and tr["config"]["team"] == "decentralized"


def test_page_without_cassette(runs, tmp_path):
    run = shutil.copytree(runs["flat"], tmp_path / "flat")
    (run / rundir.CALLS_FILE).unlink()
    tr = _data(viewer.trial_html(run))["trials"][0]
    assert tr["calls"] and all(c["msgs"] == [] and c["reply"] is not None for c in tr["calls"])


def test_agent_text_is_escaped(runs):
    page = viewer.trial_html(runs["latte"])
    assert SCRIPT not in page and "<script>alert" not in page
    assert "</script" not in re.search(r'id="latte-data">(.*?)</script>', page, re.S).group(1)
    assert "<\\/script>" in page  # the broadcast, kept in the JSON, with </ escaped
    assert any(SCRIPT in t for t in viewer.unpack_texts(page))  # the reply keeps its text
    js = page.split('<script>', 1)[1]
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "document.write" not in js
    assert viewer.page._json_for_html({"a": "</script><!--"}) == '{"a":"<\\/script>\\u003c!--"}'


def test_sweep_table_and_pages(runs, tmp_path):
    out = viewer.build_page(runs["sweep"], tmp_path / "sweep.html")
    data = _data(out.read_text())
    assert data["kind"] == "sweep" and len(data["rows"]) == 2 and "team" in data["columns"]
    for link in data["links"]:
        assert (tmp_path / link).is_file()
    assert viewer.is_sweep_dir(runs["sweep"]) and not viewer.is_sweep_dir(runs["latte"])


def test_compare_page(runs, tmp_path):
    out = viewer.build_page(runs["latte"], tmp_path / "ab.html", compare=runs["flat"])
    data = _data(out.read_text())
    assert data["kind"] == "compare" and [t["config"]["team"] for t in data["trials"]] == ["latte", "decentralized"]


def test_cli_view(runs, tmp_path, capsys):
    assert main(["view", str(runs["latte"]), "-o", str(tmp_path / "t.html")]) == 0
    assert (tmp_path / "t.html").is_file() and "wrote" in capsys.readouterr().out
    assert main(["view", "--compare", str(runs["latte"]), str(runs["flat"]), "-o", str(tmp_path / "c.html")]) == 0
    assert main(["view", str(tmp_path / "missing")]) == 2
    assert main(["view"]) == 2


def test_serve_binds_loopback(runs, tmp_path):
    page = viewer.build_page(runs["latte"], tmp_path / "p.html")
    server = viewer.serve(page, open_browser=False, block=False)
    try:
        assert server.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(server.url, timeout=5) as r:
            assert b"latte-data" in r.read()
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str, host: str | None = None) -> tuple[int, bytes]:
    import http.client
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        conn.putrequest("GET", parts.path or "/", skip_host=host is not None)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def test_serve_gives_the_viewer_pages_only_never_workspace_files_or_calls(runs):
    run_dir = runs["latte"]
    page = viewer.build_page(run_dir)  # view.html inside the run directory, beside calls.jsonl and workspace/
    server = viewer.serve(page, open_browser=False, block=False)
    try:
        base = server.url.rsplit("/", 1)[0]
        assert _get(server.url)[0] == 200 and b"latte-data" in _get(base + "/")[1]
        for path in ("calls.jsonl", "config.json", "result.json", "events.jsonl", "workspace/signal_toolkit.py",
                     "workspace/", "..%2Fconfig.json", "%2Fetc%2Fpasswd", "workspace%2Fsignal_toolkit.py"):
            assert (run_dir / path.split("%2F")[0]).exists() or "%2F" in path
            status, body = _get(f"{base}/{path}")
            assert status == 404 and b"def " not in body and b"messages" not in body, (path, status)
    finally:
        server.shutdown()
        server.server_close()


def test_serve_gives_a_sweeps_trial_pages_beside_its_table(runs, tmp_path):
    import shutil

    sweep = tmp_path / "sweep"
    shutil.copytree(runs["latte"], sweep / runs["latte"].name)
    page = viewer.build_page(sweep)
    server = viewer.serve(page, open_browser=False, block=False)
    try:
        base = server.url.rsplit("/", 1)[0]
        trial_page = next(p.name for p in sweep.glob("*.html") if p.name != page.name)
        assert _get(f"{base}/{trial_page}")[0] == 200
        assert _get(f"{base}/{runs['latte'].name}/calls.jsonl")[0] == 404
    finally:
        server.shutdown()
        server.server_close()


def test_serve_refuses_a_host_header_that_is_not_its_loopback_address(runs, tmp_path):
    page = viewer.build_page(runs["latte"], tmp_path / "p.html")
    server = viewer.serve(page, open_browser=False, block=False)
    try:
        port = server.server_address[1]
        assert _get(server.url, host=f"127.0.0.1:{port}")[0] == 200
        assert _get(server.url, host=f"localhost:{port}")[0] == 200
        for host in ("evil.example:80", f"evil.example:{port}", "127.0.0.1", f"127.0.0.1:{port + 1}", ""):
            status, body = _get(server.url, host=host)
            assert status == 403 and b"latte-data" not in body, host
    finally:
        server.shutdown()
        server.server_close()


def test_transcript_widget(runs):
    pytest.importorskip("ipywidgets")
    w = ll.viz.transcript(runs["latte"], round=5)
    slider, out = w.children[0], w.children[1]
    assert slider.value == 5 and runs["worker"] in out.value
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out.value and SCRIPT not in out.value
    slider.value = 2
    assert "round 2" in out.value


def test_300_round_page_size(runs, tmp_path):
    src = make_trial(tmp_path / "full", "latte")
    long = stitch(src, tmp_path / "long", 300)
    page = viewer.build_page(long, tmp_path / "long.html")
    tr = _data(page.read_text())["trials"][0]
    assert tr["last"] >= 299
    assert page.stat().st_size < MAX_PAGE_BYTES, f"{page.stat().st_size / 1e6:.2f} MB"


def test_a_page_embeds_in_a_notebook_without_a_file(runs, tmp_path):
    """A notebook shows the viewer inline (an iframe holding the page): no file:// link, nothing written."""
    import html as html_mod

    latte = runs["latte"]
    before = sorted(p.name for p in latte.iterdir())
    shown = viewer.embed(latte)._repr_html_()
    assert shown.startswith('<iframe class="latte-viewer" srcdoc="') and "file://" not in shown
    srcdoc = re.search(r'srcdoc="([^"]*)"', shown).group(1)
    assert html_mod.unescape(srcdoc) == viewer.trial_html(latte)  # the whole page, escaped once
    assert sorted(p.name for p in latte.iterdir()) == before
    both = viewer.embed(latte, compare=runs["flat"])._repr_html_()
    assert "data-trial" in html_mod.unescape(both) or '"trials"' in html_mod.unescape(both)
    with pytest.raises(ll.LatteError, match="not a finished trial"):
        viewer.embed(tmp_path)


def test_the_pages_markup_style_and_script_are_package_files():
    """The page's HTML, CSS and JavaScript are files of the package (read with importlib.resources), so that tools
    for those languages can check them; a page holds each of them whole."""
    from importlib import resources

    assets = resources.files("latte_lab.viz.viewer").joinpath("assets")
    texts = {name: assets.joinpath(name).read_text(encoding="utf-8") for name in viewer.page.ASSETS}
    assert texts["page.js"].startswith('\n"use strict";') and "function trialApp" in texts["page.js"]
    assert "__CSS__" in texts["page.html"] and "__JS__" in texts["page.html"] and "body{" in texts["page.css"]
    page = viewer.sweep_html(Path(__file__).parent)  # any directory: a sweep page with no rows
    assert texts["page.js"] in page and texts["page.css"] in page and page.startswith("<!DOCTYPE html>")
