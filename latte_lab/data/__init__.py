"""Files shipped inside latte_lab, read as package resources so they work from a wheel as from a clone.

- ``prices.csv``: list prices per million tokens, with their source and date (the cost ledger).
- ``paper_reference.csv``: the numbers printed in the paper, typed by hand with their section.
- ``sensitivity.csv``: per-trial results of the simulated model's sensitivity study (notebook 05).
- ``published/``: the authors' per-trial data (their ``experiments/`` folder, unmodified; see its
  ``SOURCE.md``), the default input of ``latte-lab figures`` and notebook 03.
- ``published_sha256.txt``: the SHA-256 of every file of that folder at the commit ``SOURCE.md`` names
  (:func:`check_published` compares a copy with it).

>>> from latte_lab import data
>>> data.read_text("prices.csv").splitlines()[0]
'provider,model,input_per_mtok,output_per_mtok,source,as_of'
>>> (data.bundled_published_dir() / "experiment1" / "n4" / "results.csv").is_file()
True
>>> data.check_published()
[]
"""

from __future__ import annotations

import os
import shutil
import tempfile
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from latte_lab.errors import DataError

PUBLISHED_ENV = "LATTE_PUBLISHED_DIR"  # use another copy of the authors' experiments/ folder
PUBLISHED = "published"
PUBLISHED_MANIFEST = "published_sha256.txt"  # sha256sum's format: "<hex digest>  <path in the folder>"
OUR_FILES = ("README.md",)  # what latte_lab added to the authors' folder

_extracted: Path | None = None  # the published folder copied out of a zipped install, once per process


def resource(name: str) -> Traversable:
    """A bundled file by name (``"prices.csv"``); DataError when the installation lacks it."""
    item = files(__name__).joinpath(name)
    if not item.is_file():
        raise DataError(f"latte_lab's bundled {name} is missing from {files(__name__)}; the installation is "
                        "incomplete: reinstall latte_lab")
    return item


def read_text(name: str) -> str:
    """The text of a bundled file (UTF-8)."""
    return resource(name).read_text(encoding="utf-8")


def _copy_tree(src: Traversable, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if item.is_dir():
            _copy_tree(item, dest / item.name)
        else:
            (dest / item.name).write_bytes(item.read_bytes())


def bundled_published_dir() -> Path:
    """The authors' published data as shipped in the package (a real folder, for the loaders)."""
    global _extracted
    folder = files(__name__).joinpath(PUBLISHED)
    if isinstance(folder, Path):  # an ordinary installation: the files are on disk already
        if not (folder / "SOURCE.md").is_file():
            raise DataError(f"latte_lab's bundled published data is missing from {folder}; reinstall latte_lab")
        return folder
    if _extracted is None:  # a zipped installation: copy the 232 KB out once
        target = Path(tempfile.mkdtemp(prefix="latte_lab_published_"))
        try:
            _copy_tree(folder, target)
        except (OSError, FileNotFoundError) as exc:
            shutil.rmtree(target, ignore_errors=True)
            raise DataError(f"cannot extract latte_lab's bundled published data: {exc}") from None
        _extracted = target
    return _extracted


def check_published(folder: str | os.PathLike | None = None) -> list[str]:
    """How ``folder`` (default: the bundled copy) differs from the authors' ``experiments/`` folder at the
    commit its ``SOURCE.md`` names, file by file against :data:`PUBLISHED_MANIFEST`: one line per file
    missing, changed or not theirs (latte_lab's own README.md aside); ``[]`` when it is their folder byte for
    byte."""
    import hashlib

    root = Path(folder) if folder is not None else bundled_published_dir()
    expected = {}
    for line in read_text(PUBLISHED_MANIFEST).splitlines():
        digest, _, name = line.partition("  ")
        expected[name] = digest
    found = {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(root.rglob("*")) if p.is_file()}
    problems = [f"{name}: missing" for name in expected if name not in found]
    problems += [f"{name}: changed (its SHA-256 is not the published file's)" for name in expected
                 if name in found and found[name] != expected[name]]
    problems += [f"{name}: not in the authors' folder" for name in found
                 if name not in expected and name not in OUR_FILES]
    return problems


def published_dir() -> Path:
    """``$LATTE_PUBLISHED_DIR`` when set (it must exist), else the bundled published data."""
    override = os.environ.get(PUBLISHED_ENV, "").strip()
    if override:
        path = Path(override).expanduser()
        if not path.is_dir():
            raise DataError(f"{PUBLISHED_ENV}={override} is not a folder; point it at the authors' experiments/ "
                            "folder, or unset it to use the copy bundled with latte_lab")
        return path
    return bundled_published_dir()


__all__ = ["PUBLISHED_ENV", "bundled_published_dir", "check_published", "published_dir", "read_text", "resource"]
