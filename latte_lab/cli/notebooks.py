"""``latte-lab notebooks [DIR]``: copies the notebooks that ship with latte_lab (package data; ``04`` is the
scheduling lesson's student edition) into DIR, to open with Jupyter (the ``lab`` extra). A copy already there
and unchanged is left as it is; one that differs from the shipped notebook (the user's own work) is never
overwritten: the command then copies nothing and says so in one line.
"""

from __future__ import annotations

import argparse
from importlib.resources import files
from pathlib import Path

from latte_lab.cli._common import UsageError

__all__ = ["DEFAULT_DIR", "add_parser", "copy_notebooks", "shipped_notebooks"]

DEFAULT_DIR = "latte_lab-notebooks"

EPILOG = """\
examples:
  latte-lab notebooks                      copies them into ./latte_lab-notebooks
  latte-lab notebooks ~/work/latte         into a folder of your choice (made if missing)
  jupyter lab latte_lab-notebooks          then open them (pip install 'latte-lab[lab]')"""


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "notebooks", help="copy the notebooks that ship with latte_lab into a folder",
        description="Copy latte_lab's notebooks (quickstart, trial explorer, reproducing the paper, the scheduling "
        "lesson's student edition, when LATTE helps, your own protocol, what-if forks) into DIR. A copy already "
        "there and unchanged is kept; one you changed is never overwritten: then nothing is copied.",
        epilog=EPILOG)
    p.add_argument("dir", metavar="DIR", nargs="?", default=DEFAULT_DIR,
                   help=f"folder to copy them into, made if missing (default: {DEFAULT_DIR})")
    p.set_defaults(func=run)
    return p


def shipped_notebooks() -> dict[str, bytes]:
    """File name -> content of every notebook shipped in the package, in name order."""
    root = files("latte_lab") / "notebooks"
    if not root.is_dir():
        raise UsageError("this latte_lab was installed without its notebooks (latte_lab/notebooks is missing); "
                         "reinstall it: pip install --force-reinstall latte-lab")
    return {p.name: p.read_bytes() for p in sorted(root.iterdir(), key=lambda p: p.name) if p.name.endswith(".ipynb")}


def copy_notebooks(dest: str | Path) -> tuple[list[Path], list[Path]]:
    """Copies the shipped notebooks into ``dest``; returns (copied, already there unchanged). A file there that
    differs from the shipped notebook is a one-line UsageError, and then nothing is copied."""
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"{dest} is a file, not a folder: choose a folder for the notebooks")
    shipped = shipped_notebooks()
    changed = [name for name, data in shipped.items() if (dest / name).exists() and (dest / name).read_bytes() != data]
    if changed:
        raise UsageError(f"{', '.join(str(dest / n) for n in changed)} differ{'s' if len(changed) == 1 else ''} from "
                         "the shipped notebook (your changes?): not overwritten, nothing copied; move "
                         f"{'it' if len(changed) == 1 else 'them'} away or choose another folder")
    dest.mkdir(parents=True, exist_ok=True)
    copied, kept = [], []
    for name, data in shipped.items():
        target = dest / name
        if target.exists():
            kept.append(target)
            continue
        tmp = target.with_name(f".{name}.tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
        copied.append(target)
    return copied, kept


def run(args) -> int:
    copied, kept = copy_notebooks(args.dir)
    print(f"copied {len(copied)} notebooks into {args.dir}" + (f" ({len(kept)} already there, unchanged)" if kept else ""))
    print(f"open them with: jupyter lab {args.dir}   (needs pip install 'latte-lab[lab]')")
    return 0
