"""Looking for the hidden material as agent code would: the check that no process running agent or workspace code
can read a task's reference solution, hidden tests or planted data, on either backend and from any install.

The search (:data:`SEARCH`, the standard library only) starts where code in a sandbox can learn of places from
inside it: every ``sys.path`` entry, site-packages, the paths ``.pth`` lines and editable-install finders name,
the working directory and root of every process ``/proc`` shows (``/proc/<pid>/cwd``, ``/proc/<pid>/root``
joined with where the host keeps latte_lab's task folders and the judges' directories), and those host paths
themselves. It walks each and names every file whose content is hidden material (by SHA-256, read only for
files of a size some hidden file has). Run from an agent's script (:func:`search_from_script`) and from workspace
code inside a hidden evaluation (:func:`search_from_evaluation`); run on the host itself it finds them all, which
is what shows the search works.

``python -m latte_lab.tasks.hidden_search`` prints what each search found on each backend here, as JSON.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

SEARCH = r'''
import hashlib, json, os, re, site, sys

def candidates(places):
    roots = [p for p in sys.path if p and os.path.isabs(p)]
    try:
        sites = [*site.getsitepackages(), site.getusersitepackages()]
    except Exception:
        sites = []
    roots += sites
    for sp in sites:
        try:
            names = os.listdir(sp)
        except OSError:
            continue
        for name in names:
            path = os.path.join(sp, name)
            try:
                if name.endswith(".pth"):
                    roots += [line.strip() for line in open(path) if line.strip().startswith("/")]
                elif name.startswith("__editable__") and name.endswith(".py"):
                    roots += re.findall(r"""['"](/[^'"]+)['"]""", open(path).read())
            except OSError:
                continue
    roots += places
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            roots.append(f"/proc/{pid}/cwd")
            roots += [f"/proc/{pid}/root{p}" for p in places]
    return list(dict.fromkeys(roots))

def search(wanted, places, max_files=500000):
    """(paths of readable files holding hidden material, files looked at): ``wanted`` maps a size (str) to the
    digests of the hidden files of that size."""
    sizes = {int(size): set(digests) for size, digests in wanted.items()}
    found, walked, count = set(), set(), 0
    for root in candidates(places):
        for dirpath, dirnames, filenames in os.walk(root):
            try:
                st = os.stat(dirpath)
            except OSError:
                dirnames[:] = []
                continue
            if (st.st_dev, st.st_ino) in walked:
                dirnames[:] = []
                continue
            walked.add((st.st_dev, st.st_ino))
            for name in filenames:
                count += 1
                if count > max_files:
                    return sorted(found), count
                path = os.path.join(dirpath, name)
                try:
                    size = os.path.getsize(path)
                    if size in sizes:
                        with open(path, "rb") as fh:
                            if hashlib.sha256(fh.read()).hexdigest() in sizes[size]:
                                found.add(path)
                except OSError:
                    continue
    return sorted(found), count
'''


def hidden_material() -> dict[str, list[str]]:
    """{size: [SHA-256, ...]} of every task's hidden material (its hidden files and its reference solution, as
    shipped and as the task hands them over), less any text an agent is given anyway (a starting file)."""
    from latte_lab import tasks
    from latte_lab.sandbox.paths import TASKS_DIR
    from latte_lab.tasks.files import task_files

    texts: set[bytes] = set()
    public: set[bytes] = set()
    for name in tasks.names():
        task = tasks.get(name)
        public.update(task_files(task).values())
        texts.update(t.encode() for t in task.reference_solution().values())
        hidden = getattr(task, "hidden_files", None)
        if hidden is not None:
            texts.update(t.encode() for t in hidden().values())
    for path in Path(TASKS_DIR).glob("*/*"):
        if path.name in ("solution", "hidden") and path.is_dir():
            texts.update(p.read_bytes() for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        elif path.name in ("solution.py", "generator.py"):
            texts.add(path.read_bytes())
    wanted: dict[str, list[str]] = {}
    for data in texts - public:
        wanted.setdefault(str(len(data)), []).append(hashlib.sha256(data).hexdigest())
    return wanted


def places() -> list[str]:
    """Where the host keeps what is hidden: latte_lab's task folders and the judges' directories."""
    from latte_lab.sandbox.paths import PACKAGE_DIR, TASKS_DIR, judge_root

    return [TASKS_DIR, judge_root(), PACKAGE_DIR]


def search_here() -> list[str]:
    """The search, in this process (the host): it finds the material, which shows that it would elsewhere."""
    namespace: dict = {}
    exec(compile(SEARCH, "<hidden_search>", "exec"), namespace)  # noqa: S102 - our own search, on the host
    return namespace["search"](hidden_material(), places())[0]


def search_from_script(backend: str) -> list[str]:
    """What an agent's script finds on ``backend``: the files holding hidden material it could read."""
    from latte_lab.workspace import Workspace

    with tempfile.TemporaryDirectory(prefix="latte_lab-search-") as tmp:
        ws = Workspace(Path(tmp) / "ws", memo=False, sandbox=backend)
        ws.setup_file("search.py", SEARCH + "\nprint('FOUND ' + json.dumps(search(json.load(open('wanted.json')), "
                                            f"{places()!r})))\n")
        ws.setup_file("wanted.json", json.dumps(hidden_material()))
        run = ws.run_script("search.py", timeout=300)
    return _found(run.stdout, run.stderr)


def search_from_evaluation(backend: str) -> list[str]:
    """What workspace code finds from inside a hidden evaluation on ``backend`` (the search runs in the workspace's
    process; the judge's test receives what it found, as plain data)."""
    from latte_lab.sandbox.judge import run_judged

    test = ("import json\nimport finder\n\ndef test_found():\n"
            f"    print('FOUND ' + json.dumps(finder.search({hidden_material()!r}, {places()!r})))\n"
            "    assert False  # so that the session shows what it printed\n")
    with tempfile.TemporaryDirectory(prefix="latte_lab-search-") as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        (root / "finder.py").write_text(SEARCH)
        run = run_judged(root, {"test_found.py": test}, ["test_found.py"], sandbox=backend, timeout=300,
                         call_timeout=240)
    return _found(run.stdout + run.stderr, "".join(run.notes))


def _found(output: str, detail: str) -> list[str]:
    line = next((line for line in output.splitlines() if line.startswith("FOUND ")), None)
    if line is None:
        raise RuntimeError(f"the search did not report: {output[-2000:]} {detail[-2000:]}")
    found, count = json.loads(line[6:])
    if count < 100:
        raise RuntimeError(f"the search looked at only {count} files: it cannot have searched")
    return found


def main() -> None:
    from latte_lab.sandbox import bwrap

    backends = ["local"] + (["bwrap"] if bwrap.probe()[0] else [])
    report = {"host (the search works)": len(search_here())}
    for backend in backends:
        report[f"{backend}: an agent's script"] = search_from_script(backend)
        report[f"{backend}: workspace code in a hidden evaluation"] = search_from_evaluation(backend)
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
