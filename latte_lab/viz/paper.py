"""The writer behind ``latte-lab figures``: every paper figure (PNG and PDF) beside the tables and report.md.

:func:`write_all` draws Figures 2-4 (:mod:`latte_lab.viz.figures`), in forked processes while this one
computes the tables when asked to, and has :func:`latte_lab.analysis.report.write_tables` write the tables,
the paper comparison and report.md.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pandas as pd

from latte_lab.analysis import report
from latte_lab.errors import DataError
from latte_lab.viz import figures

PNG_COMPRESS_LEVEL = 1  # zlib level of saved PNGs: level 6 (PIL's default) takes 4x the time for files 10 % smaller


def _save_figure(fig, out: Path, name: str, written: list[Path]) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from latte_lab.viz.style import FIG_DPI, pyplot, saving

    engine = fig.get_layout_engine()
    if engine is not None:
        # Lay the figure out (constrained layout) as savefig would for the PNG, measuring text with the PNG's
        # renderer at its resolution, but without the whole unpainted draw savefig makes around that. With the
        # engine off, the PNG and the PDF keep these positions and each is drawn once.
        canvas, dpi = fig.canvas, fig.dpi
        FigureCanvasAgg(fig)
        fig.dpi = FIG_DPI
        try:
            engine.execute(fig)
        finally:
            fig.dpi = dpi
            fig.set_canvas(canvas)
        fig.set_layout_engine(None)
    fig.savefig(out / f"{name}.png", dpi=FIG_DPI, pil_kwargs={"compress_level": PNG_COMPRESS_LEVEL})
    with saving():  # TrueType fonts in the PDF (matplotlib's default is Type 3, which journals refuse)
        fig.savefig(out / f"{name}.pdf", dpi=FIG_DPI)
    written += [out / f"{name}.png", out / f"{name}.pdf"]
    pyplot().close(fig)


FIGURES = ("figure2a", "figure2b", "figure3a", "figure3b", "figure3c", "figure4")
"""The figures :func:`write_all` draws, in the order it lists them."""
_BY_COST = ("figure4", "figure2a", "figure3c", "figure2b", "figure3b", "figure3a")  # slowest first: even workers


def _make_figure(name: str, data):
    trials = data.trials
    if name == "figure2a":
        return figures.figure2a(trials)
    if name == "figure2b":
        return figures.figure2b(trials)
    if name == "figure3a":
        return figures.figure3a(data.operator_usage)
    if name == "figure3b":
        return figures.figure3b(data.trajectories)
    if name == "figure3c":
        return figures.figure3c(data.snapshots)
    return figures.figure4(trials)


def _draw(name: str, data, out: Path) -> tuple[list[Path], str | None]:
    """(written paths, None), or ([], why) when the data lack the figure's inputs."""
    from latte_lab.viz.notebook import not_shown

    try:
        with not_shown():  # written to files, not shown in the notebook that asked for them
            fig = _make_figure(name, data)
    except DataError as exc:
        return [], (str(exc) if str(exc).startswith(name) else f"{name}: {exc}")
    written: list[Path] = []
    _save_figure(fig, out, name, written)
    return written, None


_FORKED_DATA = None  # what forked figure workers draw from: inherited at the fork, never pickled


def _draw_forked(name: str, out: str) -> tuple[list[Path], str | None]:
    return _draw(name, _FORKED_DATA, Path(out))


def _import_figure_stack() -> None:
    """What every figure's drawing and saving imports, loaded once so that forked drawers inherit it."""
    import matplotlib.backends.backend_pdf  # noqa: F401  (and fontTools' subsetter, which embeds PDF fonts)
    from PIL import Image

    from latte_lab.viz.style import pyplot

    pyplot()
    Image.preinit()  # the image plugins PIL loads on a first save


def _draw_all_forked(workers: int, out: str) -> dict[str, tuple[list[Path], str | None]]:
    """Every figure, drawn by ``workers`` processes: this one, once it has imported matplotlib, and ``workers`` - 1
    forked from it (which inherit the import). This one draws every ``workers``-th figure of the slowest-first
    order and the others share the rest, so the drawers end together; a process fewer than a pool of
    ``workers`` drawers beside an idle parent, which a busy machine feels (another process to fork, schedule
    and page in, while a core is taken)."""
    _import_figure_stack()
    if workers < 2:
        return {name: _draw_forked(name, out) for name in _BY_COST}
    gc.freeze()  # the drawers' full collections then skip the heap they inherit (0.1 s each)
    mine = _BY_COST[::workers]
    with _fork_pool(workers - 1) as pool:
        drawn = {name: pool.submit(_draw_forked, name, out) for name in _BY_COST if name not in mine}
        here = {name: _draw_forked(name, out) for name in mine}
        return {name: here[name] if name in here else drawn[name].result() for name in _BY_COST}


def _fork_pool(workers: int):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))


def _figure_pool(workers: int):
    """One forked process that draws the figures with ``workers`` drawers while this one computes the tables
    (Linux only: forking is unsafe on macOS and absent on Windows)."""
    if workers < 1 or not sys.platform.startswith("linux"):
        return None
    return _fork_pool(1)


def write_all(data, out_dir, reference: pd.DataFrame | None = None, *, figure_workers: int = 0) -> list[Path]:
    """Write every figure (PNG, PDF), every table (CSV, Markdown) and report.md into ``out_dir``.

    Figures whose inputs the data lack (e.g. Figure 3 for runs without graph teams) are skipped and
    the report says why. Returns the written paths: the tables', the figures', then the paper comparison
    and report.md (:func:`latte_lab.analysis.report.write_tables` writes the tables and the report).
    ``figure_workers`` > 0 (Linux): that many forked processes draw the figures while this one computes the
    tables (``latte-lab figures`` does this; the default draws them here, which is what a notebook kernel
    wants).
    """
    global _FORKED_DATA
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _FORKED_DATA = data
    pool = _figure_pool(figure_workers)
    try:
        drawn = None
        if pool is not None:
            frozen = gc.get_freeze_count()
            gc.freeze()  # the forked process's full collections skip the heap it inherits
            try:
                drawn = pool.submit(_draw_all_forked, figure_workers, str(out))  # forks
            finally:
                if not frozen:
                    gc.unfreeze()  # this process's heap as it was (collected as usual)

        def figures() -> tuple[list[Path], list[str]]:
            results = drawn.result() if drawn else {}
            written: list[Path] = []
            skipped: list[str] = []
            for name in FIGURES:
                paths, why = results[name] if drawn else _draw(name, data, out)
                written += paths
                if why:
                    skipped.append(why)
            return written, skipped

        return report.write_tables(data, out, reference, figures=figures)
    finally:
        _FORKED_DATA = None
        if pool is not None:
            pool.shutdown(cancel_futures=True)
