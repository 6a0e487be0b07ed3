"""Size of a 1,000-round run directory and the cost of reading it back with ``load_trial``.

A scripted LATTE team whose graph grows every round: each round the Lead discovers and assigns one new
node (a 300-character description) and a worker claims and completes the node it was given, while one
node nobody takes keeps the trial from ending. After 1,000 rounds the graph has about 1,000 nodes.
Target: the run directory stays under 20 MB.

Prints the size of each file, the seconds to run the trial, and for ``load_trial`` (in a fresh process)
the seconds and the growth of peak memory (max RSS), then the same for one late snapshot and for
reading every snapshot in turn. ``--read DIR`` only reads an existing run directory back.

    python benchmarks/bench_rundir.py [--rounds 1000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import latte_lab as ll
from latte_lab.models.scripted import ScriptedModel

DESCRIPTION = ("Implement and check one more piece of the signal toolkit; the notes below say what it must do. " * 4)[:300]

READ_BACK = """
import json, sys, time, resource
import latte_lab as ll

def rss_mb():
    # VmHWM, not ru_maxrss: the latter keeps the high-water mark of the (large) parent across exec
    try:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

run_dir = sys.argv[1]
ll.TrialConfig(task="debug")  # imports (the task and team registries) are not what is measured
base = rss_mb()
t0 = time.perf_counter()
res = ll.load_trial(run_dir)
load_s, load_mb = time.perf_counter() - t0, rss_mb() - base
t0 = time.perf_counter()
late = res.snapshots[len(res.snapshots) - 2]["graph"]
one_s, one_mb = time.perf_counter() - t0, rss_mb() - base
t0 = time.perf_counter()
n_nodes = sum(len(s["graph"]["nodes"]) for s in res.snapshots)
all_s, all_mb = time.perf_counter() - t0, rss_mb() - base
print(json.dumps({"load_s": load_s, "load_mb": load_mb, "events": len(res.event_list),
                  "snapshots": len(res.snapshots), "one_s": one_s, "one_mb": one_mb, "late_nodes": len(late["nodes"]),
                  "all_s": all_s, "all_mb": all_mb, "nodes_summed": n_nodes}))
"""


def reply(req) -> str:
    v = req.view
    if v.role == "lead":
        if v.round == 0:
            return ('<discover_task id="hold" title="Held back" description="Nobody takes this one." '
                    'dependencies="" />')
        k = v.round
        return (f'<discover_task id="n{k}" title="Task {k}" description="{DESCRIPTION}" dependencies="" />\n'
                f'<assign_task id="n{k}" to="Dev1" />')
    task = (v.current_task or {}).get("id")
    if v.agent == "Dev1" and task:
        return f'<claim_task id="{task}" />\n<complete_task id="{task}" />'
    return "Nothing to do this round."


def mb(n: int) -> str:
    return f"{n / 1e6:8.2f} MB"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--keep", help="write the run directory here instead of a temporary folder")
    ap.add_argument("--read", help="only read this run directory back")
    args = ap.parse_args()
    if args.read:
        read_back(Path(args.read))
        return
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(args.keep or tmp)
        cfg = ll.TrialConfig(task="debug", team="latte", model="scripted", n_workers=2, max_rounds=args.rounds,
                             runs_dir=str(runs))
        t0 = time.perf_counter()
        res = ll.run_trial(cfg, model=ScriptedModel(reply))
        run_s = time.perf_counter() - t0
        files = sorted(p for p in res.run_dir.rglob("*") if p.is_file())
        total = sum(p.stat().st_size for p in files)
        print(f"{res.rounds} rounds, status {res.status}, reason {res.reason}, "
              f"{res.metrics['graph_size_final']} nodes at the end; trial ran in {run_s:.1f} s")
        for name in ("snapshots.jsonl", "events.jsonl", "calls.jsonl", "result.json", "ledger.csv"):
            p = res.run_dir / name
            print(f"  {name:<16} {mb(p.stat().st_size) if p.exists() else '   absent'}")
        print(f"  run directory    {mb(total)}  (target < 20 MB)")
        read_back(res.run_dir)


def read_back(run_dir: Path) -> None:
    out = subprocess.run([sys.executable, "-c", READ_BACK, str(run_dir)], capture_output=True, text=True,
                         check=True).stdout
    r = json.loads(out)
    print(f"load_trial: {r['load_s']:.2f} s, +{r['load_mb']:.0f} MB peak memory "
          f"({r['events']} events, {r['snapshots']} snapshots)")
    print(f"then one late snapshot ({r['late_nodes']} nodes): {1000 * r['one_s']:.1f} ms, "
          f"+{r['one_mb']:.0f} MB peak memory since before load_trial")
    print(f"then every snapshot in turn ({r['nodes_summed']:,} node records): {r['all_s']:.2f} s, "
          f"+{r['all_mb']:.0f} MB peak memory since before load_trial")


if __name__ == "__main__":
    main()
