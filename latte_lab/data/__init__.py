"""Files shipped inside latte_lab, read as package resources so they work from a wheel as from a clone.

- ``prices.csv``: list prices per million tokens, with their source and date (the cost ledger).
- ``paper_reference.csv``: the numbers printed in the paper, typed by hand with their section.
- ``sensitivity.csv``: per-trial results of the simulated model's sensitivity study (notebook 05).
- ``published/``: the authors' per-trial data (their ``experiments/`` folder, unmodified; see its
  ``SOURCE.md``), the default input of ``latte-lab figures`` and notebook 03.

>>> from latte_lab import data
>>> data.read_text("prices.csv").splitlines()[0]
'provider,model,input_per_mtok,output_per_mtok,source,as_of'
>>> (data.bundled_published_dir() / "experiment1" / "n4" / "results.csv").is_file()
True
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


__all__ = ["PUBLISHED_ENV", "bundled_published_dir", "published_dir", "read_text", "resource"]
