"""One visual style for every latte_lab figure: paper sizes, fonts, colours, panel labels and legends.

The paper figures (:mod:`latte_lab.viz.figures`) and the notebook pictures (the rest of :mod:`latte_lab.viz`)
both draw with these constants, so a team, a node status or an edge kind has one colour everywhere.
Figures are sized for a two-column paper: :data:`ONE_COLUMN` or :data:`TWO_COLUMN` inches wide, and no
text below :data:`MIN_FONT_PT` points at that size (a journal's usual floor).

>>> with theme():
...     fig, ax = figure("one", 2.2)
>>> float(fig.get_figwidth()), bool(fig.get_figwidth() <= TWO_COLUMN)
(3.35, True)
>>> panel_label(ax, "A").get_text()
'A'
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

ONE_COLUMN = 3.35  # inches: one column of a two-column paper (85 mm)
TWO_COLUMN = 7.0  # inches: the full text width (178 mm)
MIN_FONT_PT = 7  # the smallest text a printed figure may carry
FONT_PT = 8  # body text, labels
TITLE_PT = 9  # axes titles
PANEL_LABEL_PT = 10  # the bold A, B, C of multi-panel figures
FIG_DPI = 200  # PNG resolution of saved figures (PDFs are vector)

RC = {
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "axes.axisbelow": True,
    "font.size": FONT_PT,
    "axes.titlesize": TITLE_PT,
    "axes.labelsize": FONT_PT,
    "xtick.labelsize": MIN_FONT_PT,
    "ytick.labelsize": MIN_FONT_PT,
    "legend.fontsize": MIN_FONT_PT,
    "legend.title_fontsize": MIN_FONT_PT,
    "figure.titlesize": TITLE_PT,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e4e7ec",
    "grid.linewidth": 0.6,
    "axes.edgecolor": "#667085",
    "axes.linewidth": 0.7,
    "lines.linewidth": 1.2,
    "savefig.dpi": FIG_DPI,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.03,
    "pdf.fonttype": 42,  # TrueType in PDFs: editable text, accepted by journals
    "ps.fonttype": 42,  # and in PostScript (EPS)
}
"""matplotlib rcParams of :func:`theme`."""

TEAM_PALETTE = {
    "latte": "#2196F3",
    "leader_worker": "#AB47BC",
    "decentralized": "#EF5350",
    "static": "#4CAF50",
    "metagpt": "#FF8F00",
    "pipeline": "#8D6E63",
}
"""The released notebook's team colours (reference §10); our pipeline team gets brown."""

FALLBACK_COLOR = "#757575"  # a team not in the palette

STATUS_COLORS = {
    "pending": "#d0d5dd",
    "assigned": "#f2c14e",
    "in_progress": "#f08a4b",
    "done": "#5aa469",
    "verified": "#2d6a4f",
    "closed": "#98a2b3",
}
"""Fill colour of a graph node per status, light to dark as work progresses (``closed`` is the released
code's status of a node the Lead abandoned; latte_lab's graph reopens such nodes instead)."""

STATUS_TEXT = {"pending": "#101828", "assigned": "#101828", "in_progress": "#101828", "done": "white",
               "verified": "white", "closed": "#101828"}
"""Colour of the short id written inside a node of that status (readable on its fill)."""

NODE_EDGE = "#344054"  # outline of every node
DEP_EDGE = "#667085"  # a dependency edge
REVIEW_EDGE = "#7b2cbf"  # an edge into or out of a verify node: the review rerouted the dependency
NEW_NODE_EDGE = "#FF8F00"  # ring around nodes added since the previous panel or frame
MUTED_TEXT = "#475467"  # secondary text: owners, notes
JITTER_HALF_WIDTH = 0.15  # uniform jitter of the points on Figure 4 bars


def team_color(team: str) -> str:
    return TEAM_PALETTE.get(team, FALLBACK_COLOR)


def pyplot():
    """matplotlib.pyplot with the Agg backend when there is no display (CI, servers, subprocesses)."""
    import matplotlib

    if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND") and "inline" not in str(
            matplotlib.get_backend()).lower():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextlib.contextmanager
def theme() -> Iterator[None]:
    """The figure style for the figures created inside the block; the caller's settings are restored.

    A whole Figure returns from latte_lab through :func:`finish`: a notebook shows it once, whatever the cell
    ends with (:mod:`latte_lab.viz.notebook`)."""
    pyplot()
    with _settings(RC):
        yield


@contextlib.contextmanager
def _settings(rc: dict) -> Iterator[None]:
    """``rc`` in matplotlib's rcParams inside the block, then the caller's values of those keys again.

    Only these keys are saved and restored: plt.rc_context would also restore "interactive", which the inline
    backend switches on when the first figure is made (inside a theme block), and Jupyter would then stop
    showing figures."""
    import matplotlib

    saved = {k: matplotlib.rcParams[k] for k in rc}
    matplotlib.rcParams.update(rc)
    try:
        yield
    finally:
        matplotlib.rcParams.update(saved)


SAVE_RC = {"pdf.fonttype": RC["pdf.fonttype"], "ps.fonttype": RC["ps.fonttype"]}
"""The settings of :data:`RC` that matplotlib reads when it writes a file rather than when it makes a figure:
a figure made inside :func:`theme` and saved after it needs them again (:func:`saving`)."""


@contextlib.contextmanager
def saving() -> Iterator[None]:
    """:data:`SAVE_RC` for the files written inside the block (TrueType fonts in PDFs), whose embedded font
    subsets leave out the OpenType layout tables (:func:`lean_font_subsets`); the caller's settings are
    restored (only these keys, as :func:`theme` does)."""
    with _settings(SAVE_RC), lean_font_subsets():
        yield


LAYOUT_TABLES = ("GSUB", "GPOS", "GDEF")
"""OpenType layout tables: glyph substitution and positioning rules, which a text shaper reads. A PDF or
EPS viewer draws the glyphs a file names where the file puts them and never reads these tables; matplotlib
shapes the text before it names the glyphs."""

_subset_lock = threading.Lock()
_subset_depth = 0


def glyph_subset(fontfile, glyphs):
    """The font at ``fontfile`` cut down to the glyph indices ``glyphs`` (and ``.notdef``), as matplotlib's
    PDF and PostScript writers embed it, without :data:`LAYOUT_TABLES` and without the glyphs only they
    reach (ligatures of the glyphs drawn).

    matplotlib's own subsetter keeps them: fontTools then decompiles DejaVu Sans' substitution and
    positioning tables for every subset, about 0.15 s of CPU each and most of the time spent embedding a
    font. The glyph outlines, metrics, names and the character map of what is drawn are unchanged, so the
    pages look the same. Same signature and result as ``matplotlib.backends._backend_pdf_ps.get_glyphs_subset``."""
    from fontTools import subset
    from matplotlib.backends import _backend_pdf_ps

    options = subset.Options(glyph_names=True, recommended_glyphs=True, layout_closure=False)
    options.drop_tables += [*LAYOUT_TABLES, "FFTM", "PfEd", "BDF", "meta"]
    options.font_number = getattr(fontfile, "face_index", 0)
    font = subset.load_font(fontfile, options)
    subsetter = subset.Subsetter(options=options)
    subsetter.populate(gids=glyphs)
    subsetter.subset(font)
    return _backend_pdf_ps.SubsetResults(font, subsetter.glyph_index_map)._as_cm()


@contextlib.contextmanager
def lean_font_subsets() -> Iterator[None]:
    """PDF and EPS files written inside the block embed :func:`glyph_subset`'s fonts.

    matplotlib's subsetter is swapped for it while the outermost such block runs (in every thread: the
    files any thread writes meanwhile look the same too) and put back after it. Where matplotlib has no
    subsetter of that shape (another version), its own is left in place."""
    global _subset_depth
    from matplotlib.backends import _backend_pdf_ps

    if not hasattr(_backend_pdf_ps, "SubsetResults") or not hasattr(_backend_pdf_ps, "get_glyphs_subset"):
        yield
        return
    with _subset_lock:
        if _subset_depth == 0:
            _lean_font_subsets_saved[:] = [_backend_pdf_ps.get_glyphs_subset]
            _backend_pdf_ps.get_glyphs_subset = glyph_subset
        _subset_depth += 1
    try:
        yield
    finally:
        with _subset_lock:
            _subset_depth -= 1
            if _subset_depth == 0:
                _backend_pdf_ps.get_glyphs_subset = _lean_font_subsets_saved.pop()


_lean_font_subsets_saved: list = []  # matplotlib's subsetter while lean_font_subsets has replaced it


def apply_theme() -> None:
    """Make :func:`theme` the session's default (for your own figures beside latte_lab's)."""
    pyplot().rcParams.update(RC)


_pyplot = pyplot  # for functions whose ``pyplot`` argument shadows it


def finish(fig):
    """``fig``, a whole picture a drawing function returns: closed in pyplot (it stays usable: ``savefig``,
    display) and, in a notebook, shown once when the cell ends (:func:`latte_lab.viz.notebook.shown`)."""
    from latte_lab.viz.notebook import shown

    return shown(fig)


def subplots(nrows: int = 1, ncols: int = 1, *, pyplot: bool = True, figsize=None, layout=None, **kw):
    """``plt.subplots(nrows, ncols, ...)``; with ``pyplot=False`` the same on a Figure that pyplot does not
    manage: nothing shows or closes it on its own (what a widget callback draws, see :func:`png_image`)."""
    if pyplot:
        return _pyplot().subplots(nrows, ncols, figsize=figsize, layout=layout, **kw)
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout=layout)
    return fig, fig.subplots(nrows, ncols, **kw)


def png_image(fig):
    """``fig`` drawn here as a PNG (tight bounding box) in an ``IPython.display.Image``: it displays whether
    or not pyplot manages the figure (widget callbacks draw on figures it does not: see
    :func:`~latte_lab.viz.gantt.gantt`'s ``pyplot``)."""
    import io

    from IPython.display import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return Image(data=buf.getvalue(), format="png")


def width_inches(width: str | float) -> float:
    """``"one"`` or ``"two"`` (columns) or a width in inches, at most :data:`TWO_COLUMN`."""
    if width == "one":
        return ONE_COLUMN
    if width == "two":
        return TWO_COLUMN
    return min(float(width), TWO_COLUMN)


def figure(width: str | float = "one", height: float = 2.4, nrows: int = 1, ncols: int = 1, **kw):
    """``plt.subplots`` at a paper width with constrained layout (nothing clipped, no overlaps)."""
    plt = pyplot()
    kw.setdefault("squeeze", not (nrows > 1 or ncols > 1))
    return plt.subplots(nrows, ncols, figsize=(width_inches(width), height), layout="constrained", **kw)


def panel_label(ax, letter: str):
    """The bold panel letter at the top left, outside the axes; returns the Text."""
    return ax.text(-0.02, 1.02, letter, transform=ax.transAxes, ha="right", va="bottom", fontsize=PANEL_LABEL_PT,
                   fontweight="bold")


def legend_below(fig, handles, *, ncol: int | None = None, title: str | None = None):
    """A figure legend in a row under the panels (constrained layout makes room for it)."""
    ncol = ncol or min(len(handles), 6)
    return fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False, title=title)


def status_handles(statuses=None):
    """Legend handles for node statuses (default: all but ``closed``)."""
    from matplotlib.patches import Patch

    statuses = [s for s in STATUS_COLORS if s != "closed"] if statuses is None else statuses
    return [Patch(facecolor=STATUS_COLORS[s], edgecolor=NODE_EDGE, linewidth=0.6, label=s.replace("_", " "))
            for s in statuses]
