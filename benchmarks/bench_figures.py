"""Seconds for `latte-lab figures` on the published data in a fresh process (target: under 15 s).

Runs `.venv/bin/latte-lab figures --data <published> --out <tmp>` as a subprocess, so the time includes
interpreter start-up and imports, as a user sees it. The published folder is the copy bundled with
latte_lab, or $LATTE_PUBLISHED_DIR when set.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 15.0  # the budget for regenerating every figure and table
REPEATS = 2  # fresh processes; the best time discounts a cold disk cache


def main() -> int:
    from latte_lab.data import published_dir

    data = published_dir()
    exe = REPO / ".venv" / "bin" / "latte-lab"
    if not exe.exists():
        exe = Path(sys.executable).with_name("latte-lab")
    env = {**os.environ, "MPLBACKEND": "Agg"}
    times, cpu = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(REPEATS):
            out = Path(tmp) / f"figures{i}"
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run([str(exe), "figures", "--data", str(data), "--out", str(out)],
                                  capture_output=True, text=True, env=env, check=False)
            times.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if proc.returncode != 0:
                print(proc.stdout, proc.stderr, sep="\n")
                return 1
        figures = sorted(p.name for p in out.iterdir() if p.suffix in (".png", ".pdf"))
        tables = sorted(p.name for p in out.iterdir() if p.suffix in (".csv", ".md"))
    print(f"latte-lab figures (published data, fresh process): best {min(times):.2f} s, "
          f"runs {', '.join(f'{t:.2f}' for t in times)} s; target < {TARGET_SECONDS:.0f} s")
    # CPU time is what the machine's load cannot inflate; wall time includes waiting for a core
    print(f"CPU time of the process (user + sys): best {min(cpu):.2f} s; load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"figures written ({len(figures)}): {', '.join(figures)}")
    print(f"tables and report written ({len(tables)}): {', '.join(tables)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
