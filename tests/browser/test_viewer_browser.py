"""The trial viewer's pages in Debian's chromium, driven by Playwright, opened from disk (file://).

A LATTE trial's page: step to round 5 with the keyboard, expand a worker's reply and see its actions with
their outcomes; open an edit's diff; click a node and follow it to its events. A sweep page sorted by a
column; a compare page at one round on both trials; a reply holding ``<script>alert(1)</script>`` shown as
text with no dialog. At 1400 px a whole trial's graph fits its panel (zoom in and out, back to fit), a node
with many dependencies gets them as one bundled arrow, every agent's lane is on screen (they wrap), and a
compare page shows both columns whole. A 300-round page (a simulated trial stitched end to end) opens in under 2 s. A
screenshot of each is saved in ``$LATTE_VIEWER_SHOTS`` (``LATTE_VIEWER_SHOTS=figures/viewer`` refreshes the
committed ones; by default a temporary folder).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "viz"))  # test_viewer
from test_viewer import SCRIPT, inject_script, make_trial, stitch  # noqa: E402

from latte_lab.viz import viewer  # noqa: E402

CHROMIUM = os.environ.get("LATTE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
LOAD_S = 2.0  # the bar for a 300-round page
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed: uv sync (the dev dependency group), or pip install playwright")
if not Path(CHROMIUM).is_file():
    pytest.skip(f"chromium not found at {CHROMIUM}: apt-get install -y chromium (or set LATTE_CHROMIUM)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    root = tmp_path_factory.mktemp("viewer-browser")
    latte = make_trial(root / "sweep", "latte", max_rounds=10)
    flat = make_trial(root / "sweep", "decentralized", max_rounds=6)
    worker = inject_script(latte)
    full = make_trial(root / "full", "latte", seed=1)  # 31 rounds; its fix-the-tests node waits on 14 others
    out = root / "pages"
    return {"trial": viewer.build_page(latte, out / "trial.html"), "worker": worker,
            "full": viewer.build_page(full, out / "full.html"),
            "full_compare": viewer.build_page(full, out / "full_compare.html", compare=latte),
            "sweep": viewer.build_page(root / "sweep", out / "sweep" / "index.html"),
            "compare": viewer.build_page(latte, out / "compare.html", compare=flat),
            "long": viewer.build_page(stitch(full, root / "long", 300), out / "long.html"),
            "data": json.loads(re.search(r'id="latte-data">(.*?)</script>', (out / "trial.html").read_text(),
                                         re.S).group(1))}


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where the screenshots go: ``$LATTE_VIEWER_SHOTS`` (``figures/viewer`` to refresh the committed ones),
    else a temporary folder, so that a test run leaves the checkout as it was."""
    chosen = os.environ.get("LATTE_VIEWER_SHOTS")
    out = Path(chosen) if chosen else tmp_path_factory.mktemp("viewer-shots")
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.set_default_timeout(10_000)
    page.dialogs, page.errors = [], []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    yield page
    assert not page.errors, page.errors
    page.close()


def _open(page, path: Path, hash: str = "") -> float:
    start = time.monotonic()
    page.goto(path.as_uri() + hash)
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    return time.monotonic() - start


def _label(page) -> str:
    return page.inner_text("#round-label")


def test_trial_round5_worker_reply(page, pages, shots):
    _open(page, pages["trial"])
    page.click("#round")
    page.keyboard.press("Home")
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    assert _label(page).startswith("round 5 ")
    lane = page.locator(f".trial .lane[data-agent='{pages['worker']}']")
    reply = lane.locator("details.reply-box").first
    assert not reply.evaluate("d => d.open")
    reply.locator(":scope > summary").click()
    assert reply.locator(".act").count() >= 1  # the actions, highlighted in the reply
    assert reply.locator(".actions .action").count() >= 1  # ... and each one's outcome
    assert "→" in reply.locator(".actions").inner_text()
    page.screenshot(path=shots / "trial_round5.png")


def test_edit_diff_and_node_events(page, pages, shots):
    tr = pages["data"]["trials"][0]
    edit = next(e for e in tr["events"] if e["type"] == "edit_file")
    _open(page, pages["trial"], f"#round={edit['round']}")
    assert _label(page).startswith(f"round {edit['round']} ")
    page.click("#expand")  # an edit is the outcome of an action in its reply
    box = page.locator(f".lane[data-agent='{edit['agent']}'] details.edit").first
    box.locator(":scope > summary").click()
    diff = box.locator("pre.diff")
    diff.locator(".add, .del").first.wait_for(state="attached", timeout=10_000)  # drawn when the box opens
    assert diff.locator(".add").count() + diff.locator(".del").count() >= 1
    box.scroll_into_view_if_needed()
    page.screenshot(path=shots / "edit_diff.png")
    # follow a node to its events, then an event back to its round
    node = edit.get("task") or next(e["task"] for e in tr["events"] if e["type"] == "claim_task")
    page.click("#expand")
    page.evaluate("window.scrollTo(0, 0)")
    page.click(f"g.node[data-node='{node}'] circle")
    items = page.locator("#node-events li")
    assert items.count() >= 1 and node in page.inner_text("#node-events h3")
    page.screenshot(path=shots / "node_events.png")
    target = items.first.inner_text().split(":")[0]  # "round N"
    items.first.click()
    assert _label(page).startswith(target + " ")


def test_sweep_sorts_and_filters(page, pages, shots):
    _open(page, pages["sweep"])
    rows = page.locator("#trials tbody tr")
    assert rows.count() == 2
    teams = lambda: [rows.nth(i).locator("td").nth(2).inner_text() for i in range(rows.count())]  # noqa: E731
    page.click("#trials th:has-text('team')")
    assert teams() == sorted(teams())
    page.click("#trials th:has-text('team')")
    assert teams() == sorted(teams(), reverse=True)
    page.screenshot(path=shots / "sweep.png")
    page.fill("#filter", "decentralized")
    assert teams() == ["decentralized"]
    href = rows.first.locator("a").get_attribute("href")
    assert (pages["sweep"].parent / href).is_file()
    rows.first.locator("a").click()  # the trial's own page, from disk
    page.wait_for_selector("body[data-ready='1']")
    assert "decentralized" in page.inner_text("header h1")


def test_compare_same_round(page, pages, shots):
    _open(page, pages["compare"])
    cols = page.locator(".cols > .trial")
    assert cols.count() == 2
    page.click("#round")
    page.keyboard.press("Home")
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    assert _label(page).startswith("round 3 ")
    assert "latte" in cols.nth(0).inner_text() and "decentralized" in cols.nth(1).inner_text()
    page.screenshot(path=shots / "compare.png")


def test_script_in_reply_is_text(page, pages, shots):
    _open(page, pages["trial"], "#round=5")
    page.click("#expand")
    lane = page.locator(f".lane[data-agent='{pages['worker']}']")
    assert SCRIPT in lane.locator("pre.reply").first.inner_text()
    assert page.evaluate("document.scripts.length") == 2  # the data and the viewer, nothing an agent wrote
    page.wait_for_timeout(200)
    assert page.dialogs == []
    lane.scroll_into_view_if_needed()
    page.screenshot(path=shots / "script_as_text.png")


def test_300_round_page_opens_fast(page, pages, shots):
    size = pages["long"].stat().st_size
    seconds = _open(page, pages["long"])
    page.keyboard.press("End")
    last = page.eval_on_selector("#round", "e => +e.max")
    assert last >= 299 and _label(page).startswith(f"round {last} ")
    print(f"\n300-round page: {size / 1e6:.2f} MB, opened in {seconds:.2f} s")
    page.screenshot(path=shots / "round300.png")
    assert size < 5_000_000 and seconds < LOAD_S


VIEWPORT_1400 = {"width": 1400, "height": 1000}
LAYOUT = """() => [...document.querySelectorAll('.trial')].map(t => {
  const box = e => { const b = e.getBoundingClientRect(); return [Math.round(b.left), Math.round(b.right)]; };
  const canvas = t.querySelector('.graph .canvas'), svg = canvas && canvas.querySelector('svg');
  return {col: box(t), canvas: canvas && [canvas.clientWidth, canvas.scrollWidth], svg: svg && svg.getBoundingClientRect().width,
          lanes: [...t.querySelectorAll('.lane')].map(box), bundles: t.querySelectorAll('.graph path.bundle').length,
          // the drawing's right edge against its labels' (the browser's font, not the layout's, sets their width)
          drawn: svg && svg.viewBox.baseVal.x + svg.viewBox.baseVal.width,
          labels: svg && Math.max(...[...svg.querySelectorAll('text')].map(x => { const b = x.getBBox(); return b.x + b.width; })),
          counts: [...t.querySelectorAll('.graph .bundle-count')].map(e => e.textContent)};
})"""


@pytest.mark.parametrize("which", ["full", "full_compare"])
def test_the_graph_fits_its_panel_and_every_lane_is_on_screen_at_1400_px(browser, pages, shots, which):
    page = browser.new_page(viewport=VIEWPORT_1400)
    try:
        _open(page, pages[which])
        page.keyboard.press("End")  # the last round: the whole graph
        cols = page.evaluate(LAYOUT)
        assert len(cols) == (2 if which == "full_compare" else 1)
        for col in cols:
            assert 0 <= col["col"][0] and col["col"][1] <= VIEWPORT_1400["width"], cols  # every column whole
            width, scrolled = col["canvas"]
            assert col["svg"] <= width + 1 and scrolled <= width + 1, col  # the graph fits: no scrolling to see it
            assert col["lanes"] and all(right <= VIEWPORT_1400["width"] for _, right in col["lanes"]), col
            assert col["labels"] <= col["drawn"], col  # no node's label cut at the drawing's edge
        full = cols[0]  # the whole LATTE trial: its fix-the-tests node waits on every other node
        assert full["bundles"] >= 1 and any(c.endswith("deps, bundled") for c in full["counts"]), full
        page.screenshot(path=shots / f"{which}_1400.png")
        graph = page.locator(".trial").first.locator(".graph")
        fit = graph.locator("svg").evaluate("s => s.getBoundingClientRect().width")
        graph.locator("button.zoom-in").click()
        graph.locator("button.zoom-in").click()
        zoomed = page.locator(".trial").first.locator(".graph svg").evaluate("s => s.getBoundingClientRect().width")
        canvas = page.locator(".trial").first.locator(".graph .canvas")
        assert zoomed == pytest.approx(fit * 1.25 ** 2, rel=0.02)
        assert canvas.evaluate("c => c.scrollWidth > c.clientWidth")  # zoomed in: the panel scrolls
        page.locator(".trial").first.locator(".graph button.zoom-fit").click()
        back = page.locator(".trial").first.locator(".graph svg").evaluate("s => s.getBoundingClientRect().width")
        assert back == pytest.approx(fit, abs=1)
    finally:
        page.close()
