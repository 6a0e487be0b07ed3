"""The cheats of tests/sandbox/cheat_corpus.py against the hidden evaluation, as a table: for each cheat and each backend,
the hidden tests an honest workspace passes against the same workspace with the cheat, and what was recorded of
the attempt (the evaluation's tampering, the static scan's findings); then one trial per cheat, in which a worker
writes it into the starting textproc workspace (hidden pass rate, and whether the trial is marked tampered).

Run: ``.venv/bin/python benchmarks/tampering_table.py [--baseline DIR]``: with ``--baseline`` the same table from
another checkout (its own .venv), e.g. one from before the judge, for the "before" column.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TABLE = r"""
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/sandbox")  # the corpus (this checkout's tests/sandbox)
import cheat_corpus as cc
import latte_lab as ll
from latte_lab.sandbox import bwrap

def evaluate(ws, task):
    return ll.tasks.get(task).evaluate(ws)

def recorded(ev, ws):
    try:
        return len(cc.recorded(ev, ws)), bool(ev.tampering)
    except Exception:
        return len(ev.tampering), bool(ev.tampering)

backends = ["local"] + (["bwrap"] if bwrap.probe()[0] else [])
rows = []
with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    for backend in backends:
        cases = []
        for name, (code, what) in sorted(getattr(cc, "JUDGE_CHEATS", {}).items()):
            for task, target, solved in (("textproc", "tokenizer.py", 0.5), ("debug", "signal_toolkit.py", 0.0)):
                cases.append((f"{name} ({task})", task, target, solved, code))
        for name, code in sorted(cc.VARIANTS.items()):
            cases.append((f"{name} (textproc)", "textproc", "tokenizer.py", 0.5, code))
        cases.append(("patch_reports (textproc)", "textproc", "tokenizer.py", 0.5, cc.PATCH_REPORTS))
        for i, (label, task, target, solved, code) in enumerate(cases):
            honest = cc.workspace(tmp / f"{backend}-{i}-h", task, backend, solved)
            cheat = cc.workspace(tmp / f"{backend}-{i}-c", task, backend, solved)
            cc.with_import(cheat, target, "helpers_cheat", code)
            h, c = evaluate(honest, task), evaluate(cheat, task)
            n, by_eval = recorded(c, cheat)
            rows.append([backend, label, f"{h.passed}/{h.total}", f"{c.passed}/{c.total}", n, by_eval])
        if hasattr(cc, "anything_instead_of_raising"):
            honest = cc.workspace(tmp / f"{backend}-any-h", "textproc", backend, 0.5)
            cheat = cc.workspace(tmp / f"{backend}-any-c", "textproc", backend, 0.5)
            for name in cc.unsolved(honest):
                honest.write(name, cc.anything_instead_of_raising(honest.read(name), cheat=False), agent="Dev1")
                cheat.write(name, cc.anything_instead_of_raising(cheat.read(name), cheat=True), agent="Dev1")
            h, c = evaluate(honest, "textproc"), evaluate(cheat, "textproc")
            n, by_eval = recorded(c, cheat)
            rows.append([backend, "anything (textproc)", f"{h.passed}/{h.total}", f"{c.passed}/{c.total}", n, by_eval])
        for name, (path, text) in sorted(cc.STARTUP_FILES.items()):
            honest = cc.workspace(tmp / f"{backend}-{name}-h", "textproc", backend, 0.5)
            cheat = cc.workspace(tmp / f"{backend}-{name}-c", "textproc", backend, 0.5)
            cheat.write(path, text, agent="Dev1")
            h, c = evaluate(honest, "textproc"), evaluate(cheat, "textproc")
            n, by_eval = recorded(c, cheat)
            rows.append([backend, f"{name} (textproc)", f"{h.passed}/{h.total}", f"{c.passed}/{c.total}", n, by_eval])
    trials = []
    if hasattr(cc, "JUDGE_CHEATS"):
        from latte_lab.trial import run_trial
        sys.path.insert(0, sys.argv[1] + "/trial")
        from trial_helpers import script
        for backend in backends:
            start = cc.workspace(tmp / f"{backend}-start", "textproc", backend, 0.0)
            base = evaluate(start, "textproc").rate
            for name in [*sorted(cc.JUDGE_CHEATS), cc.ANYTHING]:
                if name == cc.ANYTHING:
                    files = {n: cc.anything_instead_of_raising(start.read(n), cheat=True) for n in cc.unsolved(start)}
                else:
                    files = {f"helpers_{name}.py": cc.JUDGE_CHEATS[name][0],
                             "tokenizer.py": f"import helpers_{name}\n" + start.read("tokenizer.py")}
                model = script({"Dev1": {0: "".join(f'<edit_file path="{p}">{t}</edit_file>' for p, t in files.items())}})
                cfg = ll.TrialConfig(task="textproc", team="leader_worker", model="scripted", max_rounds=2,
                                     sandbox=backend, flat_success="tests", runs_dir=str(tmp / "runs"))
                res = run_trial(cfg, model=model)
                trials.append([backend, name, round(base, 3), round(res.row["hidden_pass_rate"], 3), res.row["tampered"],
                               sorted({e.get("source") for e in res.event_list if e["type"] == "tampering"})])
print("RESULT " + json.dumps({"rows": rows, "trials": trials}))
"""


def table(checkout: Path) -> dict:
    out = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-c", TABLE, str(ROOT / "tests")],
                         cwd=checkout, capture_output=True, text=True, timeout=3600)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{checkout}: no result\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return json.loads(line[7:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, help="another checkout (its own .venv): its table too")
    args = ap.parse_args()
    this = table(ROOT)
    before = table(args.baseline.resolve()) if args.baseline else None
    earlier = {(r[0], r[1]): r for r in before["rows"]} if before else {}
    print("| backend | cheat | honest | cheat | recorded (findings) | by the evaluation |"
          + (" before: cheat | before: recorded |" if before else ""))
    print("|---|---|---|---|---|---|" + ("---|---|" if before else ""))
    for backend, label, honest, cheat, n, by_eval in this["rows"]:
        line = f"| {backend} | {label} | {honest} | {cheat} | {'yes' if n else 'NO'} ({n}) | {'yes' if by_eval else 'no'} |"
        if before:
            old = earlier.get((backend, label))
            line += f" {old[3]} | {'yes' if old[4] else 'no'} |" if old else " - | - |"
        print(line)
    print()
    print("| backend | cheat in a trial | starting code's hidden pass rate | trial's hidden pass rate | tampered | recorded by |")
    print("|---|---|---|---|---|---|")
    for backend, name, base, rate, tampered, sources in this["trials"]:
        print(f"| {backend} | {name} | {base} | {rate} | {tampered} | {', '.join(s for s in sources if s)} |")


if __name__ == "__main__":
    sys.exit(main())
