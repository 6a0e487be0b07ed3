"""What a hidden evaluation costs: the median wall time of ``task.evaluate(ws)`` (memo off) on each task's reference
solution and starting workspace, on each backend, in this checkout and, with ``--baseline DIR``, in another one
(its own ``.venv``, e.g. a worktree of an earlier commit), alternating between the two so that both see the same
machine. Every figure comes from a fresh process of the checkout it names.

Run: ``.venv/bin/python benchmarks/bench_judge.py [--baseline DIR] [--repeats N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# run in the checkout measured (its own latte_lab): one evaluation per state and backend, timed, as JSON
MEASURE = r"""
import json, sys, tempfile, time
from pathlib import Path
import latte_lab as ll
from latte_lab.sandbox import bwrap
backends = ["local"] + (["bwrap"] if bwrap.probe()[0] else [])
repeats = int(sys.argv[1])
out = {}
with tempfile.TemporaryDirectory() as tmp:
    for backend in backends:
        for task in ("textproc", "debug", "eda"):
            t = ll.tasks.get(task)
            for state in ("reference", "start"):
                ws = ll.Workspace(Path(tmp) / f"{backend}-{task}-{state}", memo=False, sandbox=backend)
                t.setup(ws)
                if state == "reference":
                    for path, text in t.reference_solution().items():
                        ws.write(path, text, agent="Dev1")
                t.evaluate(ws)  # servers started, caches warm: not counted
                times = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    ev = t.evaluate(ws)
                    times.append(time.perf_counter() - start)
                out[f"{backend} {task} {state}"] = {"seconds": times, "passed": ev.passed, "total": ev.total}
print("RESULT " + json.dumps(out))
"""


def measure(checkout: Path, repeats: int) -> dict:
    python = checkout / ".venv" / "bin" / "python"
    out = subprocess.run([str(python), "-c", MEASURE, str(repeats)], cwd=checkout, capture_output=True, text=True,
                         timeout=3600)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{checkout}: no result\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return json.loads(line[7:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, help="another checkout, with its own .venv, measured in the same run")
    ap.add_argument("--repeats", type=int, default=9, help="evaluations per figure (a median)")
    ap.add_argument("--rounds", type=int, default=3, help="alternations between the checkouts")
    args = ap.parse_args()
    checkouts = {"this": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    runs: dict[str, dict[str, list[float]]] = {name: {} for name in checkouts}
    scores: dict[str, dict[str, tuple]] = {name: {} for name in checkouts}
    for _ in range(args.rounds):
        for name, checkout in checkouts.items():
            for key, value in measure(checkout, args.repeats).items():
                runs[name].setdefault(key, []).extend(value["seconds"])
                scores[name][key] = (value["passed"], value["total"])
    keys = list(runs["this"])
    header = f"{'evaluation (median ms)':32s} {'this':>8s}" + (f" {'baseline':>9s} {'ratio':>6s}" if args.baseline else "")
    print(header)
    for key in keys:
        this = 1000 * statistics.median(runs["this"][key])
        line = f"{key:32s} {this:8.0f}"
        if args.baseline and key in runs["baseline"]:
            base = 1000 * statistics.median(runs["baseline"][key])
            same = "" if scores["this"][key] == scores["baseline"][key] else \
                f"  (score {scores['this'][key]} vs {scores['baseline'][key]})"
            line += f" {base:9.0f} {this / base:6.2f}x{same}"
        print(f"{line}   {scores['this'][key][0]}/{scores['this'][key][1]} passed")


if __name__ == "__main__":
    sys.exit(main())
