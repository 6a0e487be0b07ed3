"""The documentation site shows its pictures: the site is built as ``make docs`` builds it (every notebook run
first, ``LATTE_DOCS_EXECUTE=1``, then ``mkdocs build --strict``), and every notebook page, the page that
reproduces the paper and the concept pages that draw something must show images: ``<img>`` elements and
inline ``<svg>`` drawings in the page's content (the theme's icons are not counted). Every image a page
links to must be in the site.

This is ``make test``'s build of the site too: strict (a broken link or a missing docstring reference fails
it), and the check that what a reader sees is there. Marked slow: the build runs the notebooks (about 40 s of
CPU). In ``make test`` it runs last and shows the notebooks as the browser test's Run All in JupyterLab left
them (``$LATTE_TEST_NOTEBOOK_RUNS``), running only those it finds no run of, so each notebook runs once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb"))
REPRODUCE = "reproduce.html"
PAPER_FIGURES = ("figure2a", "figure2b", "figure3a", "figure3b", "figure3c", "figure4")
DRAWN_PAGES = {  # concept page: the fewest pictures it shows
    "concepts/graph.html": 1, "concepts/scheduling.html": 3, "concepts/workspace.html": 1, "concepts/teams.html": 2,
    "concepts/analysis.html": 1,
}
SITE_ENV = "LATTE_DOCS_SITE"
BUILD_TIMEOUT = 900  # seconds: the notebooks take about 40 s of CPU, slower while the rest of the suite runs
# Theme furniture inside the content: copy buttons of code cells, edit buttons, icons.
NOT_CONTENT = ("zeroclipboard-container", "md-content__button", "md-icon", "twemoji", "headerlink")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_TIMEOUT + 60)]


class ContentImages(HTMLParser):
    """The images inside the page's ``<article>``: ``<img>`` elements and outermost ``<svg>`` elements, each as
    its ``src`` (or ``"<svg>"``), leaving out the theme's icons and buttons."""

    VOID = {"img", "br", "hr", "meta", "link", "input", "source", "wbr", "area", "col", "embed", "param", "track"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, str]] = []  # open elements: (tag, class)
        self.images: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        in_article = any(t == "article" for t, _ in self.stack)
        furniture = any(any(name in cls for name in NOT_CONTENT) for _, cls in self.stack)
        in_svg = any(t == "svg" for t, _ in self.stack)
        if in_article and not furniture and not in_svg:
            if tag == "img":
                self.images.append(attrs.get("src") or "")
            elif tag == "svg":
                self.images.append("<svg>")
        if tag not in self.VOID:
            self.stack.append((tag, attrs.get("class") or ""))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return


def content_images(page: Path) -> list[str]:
    parser = ContentImages()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.images


RUNS: list[Path] = []  # where the build keeps the run notebooks it shows (LATTE_DOCS_KEEP_RUNS)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built as make docs builds it, in a temporary folder; ``LATTE_DOCS_SITE=site`` reads one
    already built there instead (after ``make docs``, to check it without building again)."""
    RUNS.append(tmp_path_factory.mktemp("runs"))
    if os.environ.get(SITE_ENV):
        return Path(os.environ[SITE_ENV]).resolve()
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "LATTE_DOCS_EXECUTE": "1", "NO_MKDOCS_2_WARNING": "1", "LATTE_DOCS_KEEP_RUNS": str(RUNS[0])}
    if os.environ.get("LATTE_TEST_NOTEBOOK_RUNS"):  # the notebooks the browser test ran (tests/conftest.py)
        env["LATTE_DOCS_EXECUTED_DIR"] = os.environ["LATTE_TEST_NOTEBOOK_RUNS"]
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert proc.returncode == 0, f"mkdocs build failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def _counts(site: Path, pages) -> dict[str, list[str]]:
    counts = {page: content_images(site / page) for page in pages}
    for page, images in counts.items():
        print(f"{page}: {len(images)} images")
    return counts


def test_every_notebook_page_shows_what_it_draws(site):
    counts = _counts(site, [f"notebooks/{name}.html" for name in NOTEBOOKS])
    assert len(counts) >= 6
    empty = [page for page, images in counts.items() if not images]
    assert not empty, f"notebook pages without a single image (were the notebooks run?): {empty}"


def test_every_drawing_cell_of_every_notebook_shows_an_image(site):
    """Each notebook as the site shows it (run in JupyterLab by the browser test, or by the build): every cell
    that calls a drawing function shows at least one image, whatever it ends with; a cell of the student
    edition that waits for an exercise's answer shows that it waits instead. The build itself fails on a
    drawing cell without an image; this counts them."""
    import nbformat

    sys.path.insert(0, str(REPO / "docs"))
    import hooks

    if os.environ.get(SITE_ENV):
        pytest.skip(f"{SITE_ENV} names a site built elsewhere: its run notebooks were not kept")
    counted = 0
    for name in NOTEBOOKS:
        nb = nbformat.read(RUNS[0] / f"{name}.ipynb", as_version=4)
        cells = hooks.drawing_cells(nb)
        print(f"{name}: " + ", ".join(f"cell {d['cell']}: {d['images']}" + (" (locked)" if d["locked"] else "")
                                      for d in cells))
        for d in cells:
            if d["locked"]:
                shown = "".join(o.get("text", "") for o in nb.cells[d["cell"]].outputs)
                assert "correctly above, or run ll.teaching.give_up(" in shown, (name, d)
            else:
                assert d["images"] >= 1, (name, d)
                counted += 1
    assert counted >= 25  # 29 when written: every notebook draws


def test_the_reproduce_page_shows_table2_and_figures_2_to_4(site):
    images = _counts(site, [REPRODUCE])[REPRODUCE]
    shown = {Path(urlsplit(src).path).stem for src in images}
    assert set(PAPER_FIGURES) <= shown, f"missing figures: {sorted(set(PAPER_FIGURES) - shown)}"
    for name in PAPER_FIGURES:
        png = site / "img" / "paper" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        assert (site / "img" / "paper" / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"
    html = (site / REPRODUCE).read_text(encoding="utf-8")
    assert "<!-- latte-lab paper:" not in html  # every marker was replaced
    # Table 2: the pooled block (LATTE's accuracy over all tasks) and the agreement with the paper.
    assert "<td>Acc. (%)</td>" in html and "<th>LATTE</th>" in html
    assert "printed numbers agree at the paper's precision" in html


def test_concept_pages_show_their_pictures(site):
    counts = _counts(site, DRAWN_PAGES)
    short = {page: len(images) for page, images in counts.items() if len(images) < DRAWN_PAGES[page]}
    assert not short, f"pages with fewer pictures than they draw (page: found): {short}"
    html = (site / "concepts" / "graph.html").read_text(encoding="utf-8")
    assert "latte-lab drawing" not in html  # every placeholder was replaced
    assert "<title>T1 plan" in html  # the drawn graph keeps its hover tooltips


def test_the_teaching_page_shows_the_guide_and_no_answer(site):
    html = (site / "teaching.html").read_text(encoding="utf-8")
    assert "make class" in html and "answer-key.md" in html and "give_up" in html
    assert "Learning objectives" in html and "A 90-minute class" in html and "<td>0-10</td>" in html
    assert "latte-lab teaching: guide" not in html  # the marker was replaced
    lesson = (REPO / "teaching" / "04_teaching_scheduling.ipynb").read_text(encoding="utf-8")
    for phrase in ("ex1, common wrong answers", "a node with no dependencies is ready from the start"):
        assert phrase in lesson and phrase not in html  # the teacher's notes on answers stay in the edition
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="teaching.html"' in index  # in the navigation


def test_every_image_a_page_shows_is_in_the_site(site):
    missing = []
    for page in site.rglob("*.html"):
        for src in content_images(page):
            # "": the frame of an animation's player, which its script fills in
            if src in ("<svg>", "") or src.startswith(("data:", "http:", "https:")):
                continue
            target = (page.parent / unquote(urlsplit(src).path)).resolve()
            if not target.is_file():
                missing.append(f"{page.relative_to(site)}: {src}")
    assert not missing, missing


class Links(HTMLParser):
    """Every ``href`` of a page's ``<a>`` and ``<link>`` elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        href = dict(attrs).get("href")
        if tag in ("a", "link") and href:
            self.hrefs.append(href)


def test_the_site_opens_from_disk(site):
    """use_directory_urls is off: pages are .html files and links name them, so file:// works: every link
    within the site, from every page, names a file that is there (not a folder, which a browser opening
    site/index.html from disk shows as a listing). 404.html is left out: a server shows it at any depth, so
    its links start at the site's root."""
    assert (site / "notebooks" / f"{NOTEBOOKS[0]}.html").is_file()
    assert (site / "concepts" / "graph.html").is_file()
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="reproduce.html"' in index and 'href="concepts/graph/"' not in index
    broken, checked = [], 0
    for page in site.rglob("*.html"):
        if page.name == "404.html":
            continue
        parser = Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for href in parser.hrefs:
            url = urlsplit(href)
            if url.scheme or url.netloc or not url.path:  # another site, or an anchor on this page
                continue
            checked += 1
            if not (page.parent / unquote(url.path)).resolve().is_file():
                broken.append(f"{page.relative_to(site)}: {href}")
    assert checked > 500 and not broken, broken[:20]


def test_no_page_asks_the_network_for_anything(site):
    """Opened from disk, offline, a page waits for nothing: no web font, no script from a CDN (the search's
    worker shim ships with the site)."""
    remote = re.compile(r'<(?:script|link|img)\b[^>]*\b(?:src|href)="(https?:)?//[^"]*"')
    asking = {str(p.relative_to(site)): remote.findall(p.read_text(encoding="utf-8"))
              for p in site.rglob("*.html")}
    assert not {k: v for k, v in asking.items() if v}
    assert (site / "search" / "search_index.js").is_file()  # what search reads from disk
    assert (site / "javascripts" / "iframe-worker-shim.js").is_file()


def _chromium():
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    chromium = os.environ.get("LATTE_CHROMIUM", "/usr/bin/chromium")
    if not Path(chromium).is_file():
        pytest.skip(f"chromium not found at {chromium}: apt-get install -y chromium (or set LATTE_CHROMIUM)")
    return playwright_api, chromium


def test_from_disk_search_works_offline_and_no_notebook_code_is_cut(site):
    playwright_api, chromium = _chromium()
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            asked = []
            page.on("request", lambda r: asked.append(r.url) if not r.url.startswith(("file:", "data:", "blob:",
                                                                                       "about:")) else None)
            page.goto((site / "concepts" / "graph.html").as_uri())
            page.fill("input.md-search__input", "frontier")
            page.locator(".md-search-result__item").first.wait_for(timeout=20_000)
            assert page.locator(".md-search-result__item").count() >= 3
            cut = []
            for name in NOTEBOOKS:
                page.goto((site / "notebooks" / f"{name}.html").as_uri())
                cut += page.evaluate("""name => [...document.querySelectorAll('.jupyter-wrapper .jp-InputArea pre')]
                    .filter(p => p.scrollWidth > p.clientWidth + 1)
                    .map(p => `${name}: ${p.textContent.slice(0, 60)}`)""", name)
            assert not cut, cut  # every line of code shows whole (wrapped), none runs under the cell's edge
            assert not asked, asked  # nothing from the network: fonts, scripts, the search index
        finally:
            browser.close()
