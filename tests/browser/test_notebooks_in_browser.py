"""Every notebook, run the way a user runs it: JupyterLab on loopback, Debian's chromium driven by Playwright.

One JupyterLab page opens the notebooks one after another, as a user does in one browser tab. For each
notebook: open it, Run All, and check that no cell shows an error, every widget output renders as a control
and no image is blank (in 03, no table runs past the output area's right edge); then close it and shut
its kernel down. In 01, pressing Play on the animation moves it
to another round within 3 s; in 02, the trial viewer shows inside the notebook, and choosing a team without a
task graph and pressing Run, compared with Leader-Worker, shows both result rows and plots, none blank, and the
form's button shows that trial's viewer under it. A screenshot of each notebook is saved in
``$LATTE_BROWSER_SHOTS`` (default ``figures/browser/``). Each notebook, once its checks pass, is saved as Run
All left it into ``$LATTE_TEST_NOTEBOOK_RUNS`` (tests/conftest.py makes that folder for the session), where
tests/package/test_docs_site.py's build shows it rather than run it again.

Playwright comes from pip (the dev dependency group) and drives the system chromium (``/usr/bin/chromium``; no browser
download). ``.ci/run`` installs both; where either is missing the test is skipped and says which.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHROMIUM = os.environ.get("LATTE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVER_START_S = 90  # JupyterLab's first start builds its settings; slow on a loaded machine
RUN_ALL_S = 300  # one notebook's Run All, 03 and 04 included
PLAY_S = 3  # the bar: Play shows another round within 3 s
RUN_TRIAL_S = 180  # one trial from the explorer's Run button, with its animation
TOKEN = "latte-browser-test"
# A notebook's test may also start the server and the browser (the first) and run a trial from the explorer.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(SERVER_START_S + RUN_ALL_S + RUN_TRIAL_S)]

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed: uv sync (the dev dependency group), or pip install playwright")
if not Path(CHROMIUM).is_file():
    pytest.skip(f"chromium not found at {CHROMIUM}: apt-get install -y chromium (or set LATTE_CHROMIUM)",
                allow_module_level=True)


LAB_DIR: list[Path] = []  # the folder the JupyterLab server works in (the lab fixture's)
RUNS_ENV = "LATTE_TEST_NOTEBOOK_RUNS"


def _save_run(page, notebook: str) -> None:
    """Save the notebook as Run All left it and copy it into ``$LATTE_TEST_NOTEBOOK_RUNS`` (when set)."""
    folder = os.environ.get(RUNS_ENV)
    if not folder:
        return
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save').then(() => true)")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
                           timeout=SERVER_START_S * 1000)
    shutil.copy(LAB_DIR[-1] / notebook, Path(folder) / notebook)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on loopback over a copy of the notebooks (Run All never touches the repository)."""
    work = tmp_path_factory.mktemp("lab")
    LAB_DIR.append(work)
    for nb in NOTEBOOKS:
        shutil.copy(nb, work / nb.name)
    port = _free_port()
    # The language-server extension scans for servers by starting node and npm at every start; no notebook
    # here uses one.
    (work / ".jupyter").mkdir()
    (work / ".jupyter" / "jupyter_server_config.json").write_text(
        '{"ServerApp": {"jpserver_extensions": {"jupyter_lsp": false}}}')
    env = {**os.environ, "MPLBACKEND": "module://matplotlib_inline.backend_inline",
           "JUPYTER_CONFIG_DIR": str(work / ".jupyter"), "JUPYTERLAB_SETTINGS_DIR": str(work / ".settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(work / ".workspaces")}
    log = open(work / "server.log", "w")  # noqa: SIM115 - closed with the server
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--ServerApp.port={port}",
         "--ServerApp.ip=127.0.0.1", f"--ServerApp.root_dir={work}", f"--IdentityProvider.token={TOKEN}",
         "--LabApp.news_url=None", "--LabApp.expose_app_in_browser=True", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--ServerApp.port_retries=0"],
        cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_S
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                log.close()
                raise RuntimeError(f"JupyterLab did not start; its log:\n{(work / 'server.log').read_text()[-3000:]}") \
                    from None
            time.sleep(0.5)
    yield url
    os.killpg(server.pid, 15)
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, 9)
    log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with playwright_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(  # a fresh --user-data-dir
            str(tmp_path_factory.mktemp("chromium")), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000})
        yield context
        context.close()


@pytest.fixture(scope="module")
def shots() -> Path:
    out = Path(os.environ.get("LATTE_BROWSER_SHOTS", ROOT / "figures" / "browser"))
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def page(browser, lab):
    """The one JupyterLab tab every notebook opens in (the application loads once)."""
    page = browser.new_page()
    page.goto(f"{lab}/lab?token={TOKEN}&reset")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=SERVER_START_S * 1000)
    page.evaluate("() => window.jupyterapp.restored")
    page.add_style_tag(content=".jp-toast-container, .Toastify { display: none !important; }")  # the news prompt
    yield page
    page.close()


def _open(page, name: str):
    page.evaluate("name => window.jupyterapp.commands.execute('docmanager:open', {path: name}).then(() => true)",
                  name)
    page.wait_for_function("name => { const w = window.jupyterapp.shell.currentWidget;"
                           " return w && w.context && w.context.path === name; }", arg=name,
                           timeout=SERVER_START_S * 1000)
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=SERVER_START_S * 1000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=SERVER_START_S * 1000)


KERNEL_SHUTDOWN_S = 10  # how long the page waits for its kernel to stop before the server is asked directly


def _close(page) -> None:
    """Close the notebook without saving it and shut its kernel down (the next one starts from a clean page).

    The page asks its session to stop the kernel, waiting at most KERNEL_SHUTDOWN_S (a kernel still busy
    drawing an animation can leave that promise unsettled, and the browser may collect it); then every
    kernel the server still has is shut down through its REST API, since only one notebook is open at a time."""
    page.evaluate("""async (ms) => {
        const w = window.jupyterapp.shell.currentWidget;
        if (!w || !w.sessionContext) return;
        await Promise.race([w.sessionContext.shutdown(), new Promise(done => setTimeout(done, ms))]);
        w.context.model.dirty = false;
        w.dispose();
    }""", KERNEL_SHUTDOWN_S * 1000)
    base = page.url.split("/lab", 1)[0]
    with urllib.request.urlopen(f"{base}/api/kernels?token={TOKEN}", timeout=10) as r:
        kernels = json.load(r)
    for k in kernels:
        req = urllib.request.Request(f"{base}/api/kernels/{k['id']}?token={TOKEN}", method="DELETE")
        urllib.request.urlopen(req, timeout=KERNEL_SHUTDOWN_S).close()


def _prompts(page) -> list[str]:
    return page.eval_on_selector_all(".jp-CodeCell .jp-InputPrompt", "els => els.map(e => e.textContent)")


def _run_all(page) -> None:
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                           " && window.jupyterapp.shell.currentWidget.sessionContext"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel",
                           timeout=SERVER_START_S * 1000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    deadline = time.monotonic() + RUN_ALL_S
    time.sleep(0.3)
    while time.monotonic() < deadline:
        prompts = _prompts(page)
        busy = page.eval_on_selector(".jp-Notebook-ExecutionIndicator", "e => e.dataset.status")
        if prompts and all(re.search(r"\[\d+\]", p) for p in prompts) and busy == "idle":
            return
        time.sleep(0.2)
    raise AssertionError(f"Run All did not finish within {RUN_ALL_S} s; prompts: {_prompts(page)}")


def _errors(page) -> list[str]:
    texts = page.eval_on_selector_all(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']", "els => els.map(e => e.innerText)")
    return [t[:300] for t in texts if "Traceback" in t or re.search(r"^\w*(Error|Exception)\b", t, re.M)]


def _widgets_render(page) -> list[str]:
    """Problems with widget outputs: a placeholder or an error instead of a control."""
    return page.eval_on_selector_all(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.widget-view+json']",
        """els => els.flatMap(e => {
             const t = e.innerText;
             if (/Error displaying widget|Loading widget|model not found/.test(t)) return [t.slice(0, 200)];
             if (!e.querySelector('.jupyter-widgets, .widget-box, .widget-inline-hbox, .lm-Widget.jp-OutputArea'))
               return ['no control rendered: ' + t.slice(0, 100)];
             return [];
           })""")


@pytest.mark.parametrize("notebook", [nb.name for nb in NOTEBOOKS])
def test_notebook_runs_in_a_browser(notebook, page, shots):
    _open(page, notebook)
    try:
        _run_all(page)
        assert _errors(page) == []
        assert _widgets_render(page) == []
        assert _blank_images(page.locator(".jp-NotebookPanel").first) == []
        if notebook.startswith("03_"):  # its tables' notes wrap within the page, none runs off to the right
            assert _wider_tables(page) == []
        _save_run(page, notebook)
        if notebook.startswith("01_"):
            _press_play(page)
        if notebook.startswith("02_"):
            _viewer_inline(page.locator(".jp-NotebookPanel").first)  # the notebook's own cell
            _run_flat_team(page)
        page.screenshot(path=str(shots / f"{Path(notebook).stem}.png"))
    finally:
        _close(page)


def _press_play(page) -> None:
    player = page.locator("div.animation").first
    player.scroll_into_view_if_needed()
    slider = player.locator("input.anim-slider")
    img = player.locator("img")
    before = (slider.input_value(), img.get_attribute("src"))
    player.locator("button[title='Play']").click()
    start = time.monotonic()
    while time.monotonic() - start < PLAY_S:
        now = (slider.input_value(), img.get_attribute("src"))
        if now[0] != before[0] and now[1] != before[1]:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"Play did not change the drawn round within {PLAY_S} s (frame {before[0]})")
    time.sleep(0.5)  # a few more rounds, for the screenshot


def _blank_images(area) -> list[str]:
    """The images in ``area`` that are loaded but show nothing: every pixel the same colour."""
    return area.locator("img").evaluate_all(
        """imgs => imgs.flatMap((img, i) => {
             const c = document.createElement('canvas');
             c.width = img.naturalWidth; c.height = img.naturalHeight;
             if (!img.complete || !c.width || !c.height) return [];  // not drawn yet (off screen)
             const ctx = c.getContext('2d');
             ctx.drawImage(img, 0, 0);
             const px = ctx.getImageData(0, 0, c.width, c.height).data;
             for (let k = 4; k < px.length; k += 4)
               if (px[k] !== px[0] || px[k + 1] !== px[1] || px[k + 2] !== px[2]) return [];
             return [`image ${i} (${c.width}x${c.height}) is blank`];
           })""")


def _wider_tables(page) -> list[str]:
    """Table outputs wider than the output area (a column cut off at its right edge until scrolled)."""
    return page.eval_on_selector_all(
        ".jp-OutputArea-output:has(table)",
        "els => els.filter(e => e.scrollWidth > e.clientWidth + 2).map(e => "
        "`${e.scrollWidth} px in ${e.clientWidth} px: ${e.innerText.slice(0, 80)}`)")


def _viewer_inline(area) -> None:
    """The trial viewer shown inside JupyterLab (an iframe holding the page: no file:// link to follow) starts
    and draws its graph and lanes."""
    frame = area.frame_locator("iframe.latte-viewer").first
    frame.locator("body[data-ready='1']").wait_for(state="attached", timeout=RUN_TRIAL_S * 1000)
    assert frame.locator(".lane").count() >= 2 and frame.locator("#round").count() == 1


def _run_flat_team(page) -> None:
    form = page.locator(".jp-OutputArea-output:has(button:has-text('Run trial'))").first
    form.scroll_into_view_if_needed()
    form.locator(".widget-dropdown:has(label:text-is('team')) select").select_option("decentralized")
    form.locator(".widget-checkbox:has-text('compare with') input").check()  # beside the Leader-Worker team
    form.locator("button:has-text('Run trial')").click()
    page.wait_for_function(
        """() => [...document.querySelectorAll('.widget-html-content')].some(
              e => /decentralized-s\\d+-\\w+: (SUCCESS|no success).*leader_worker-s\\d+-\\w+: (SUCCESS|no success)/
                   .test(e.innerText))""",
        timeout=RUN_TRIAL_S * 1000)
    form.locator(".widget-output table:has-text('leader_worker')").first.wait_for(timeout=30_000)
    area = form.locator(".widget-output:has(table:has-text('decentralized'))").last
    area.locator("img").first.wait_for(timeout=30_000)
    assert area.locator("img").count() >= 2  # the message-flow player and the Gantt chart
    assert form.locator("img").count() >= 4  # and the Leader-Worker team's
    assert _blank_images(form) == []
    area.locator("img").first.scroll_into_view_if_needed()
    label = area.locator(".widget-label:has-text('round ')").first
    start = label.inner_text().strip()
    assert start == "round 1"  # a flat team's player starts at its first action (nobody acts in round 0)
    form.locator("button:has-text('show the trial viewer')").first.click()  # the form's own: shown under it
    _viewer_inline(form)
    area.locator(".widget-play button").first.click()  # the explorer's player: frames drawn by the kernel
    page.wait_for_function("([el, start]) => el.innerText.trim() !== start", arg=[label.element_handle(), start],
                           timeout=RUN_TRIAL_S * 1000)
    time.sleep(0.8)  # a few rounds in, for the screenshot (each frame is drawn by the kernel)
