"""MkDocs hooks: what the site shows beyond the Markdown files of ``docs/``.

- **Notebooks.** Every ``notebooks/*.ipynb`` becomes a page, listed under "Notebooks" in file-name order
  (the notebooks stay where users open them, beside the package). With ``LATTE_DOCS_EXECUTE=1`` (``make
  docs`` sets it) each one is first run with nbclient, in a fresh kernel of this Python, into a temporary
  copy, and its page shows what it draws; the simulated model keeps that offline. Without it the pages
  show the notebooks as stored: code only, since the repository keeps them without outputs. With
  ``LATTE_DOCS_EXECUTED_DIR`` set, a notebook already run there (the test suite's JupyterLab run saves
  each one it ran) is shown as run there, when its code cells are the repository's.
- **The paper's results** (``docs/reproduce.md``). ``latte-lab figures`` runs on the published data bundled
  with latte_lab while the site builds: its figures become ``img/paper/*.png`` (and the PDFs beside them),
  and its Markdown tables replace the page's ``<!-- latte-lab paper: NAME -->`` markers.
- **Pictures drawn by a page's own code.** A ```` ```python ```` block followed by ``<!-- latte-lab: draw -->``
  is run (a page's marked blocks in order, in one namespace, as cells of a notebook, in the build's
  temporary folder, so that a trial's ``runs/`` lands there), and the value of its last line (an
  ``ll.viz.draw`` drawing, a matplotlib Axes or Figure) appears under it as an SVG, so a picture can never
  disagree with the code printed above it. The page's doctest blocks (``>>>``, which ``make test`` checks)
  run in the same namespace, in page order, so a drawing can use what an example computed.
- ``api/cli.md``: the help of every ``latte-lab`` subcommand; ``teaching.md``: the lesson's teacher's guide.
- **No widget manager from the network.** A run notebook's widgets (controls that need a kernel) are shown as
  a line saying so, not drawn by ipywidgets' manager from unpkg.com: a page asks the network for nothing.
- **Every drawing shows.** A run notebook whose drawing cell (:func:`drawing_cells`) shows no image fails the
  build; ``LATTE_DOCS_KEEP_RUNS=<folder>`` keeps a copy of each run notebook there (the tests count them).

Everything generated lives in a temporary folder for the length of the build and reaches the site as
generated files; nothing is written into ``docs/`` or ``notebooks/``.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority, get_plugin_logger
from mkdocs.structure.files import File, Files

log = get_plugin_logger(__name__)

NOTEBOOKS_DIR = "notebooks"  # beside mkdocs.yml
NAV_SECTION = "Notebooks"  # the nav entry this hook fills
EXECUTE_ENV = "LATTE_DOCS_EXECUTE"  # "1": run every notebook before rendering it
# A folder of notebooks already run (with their outputs) by another tool, e.g. the test suite's JupyterLab
# run: a notebook found there whose code cells are the repository's, cell for cell, is shown as run there
# instead of being run again.
EXECUTED_ENV = "LATTE_DOCS_EXECUTED_DIR"
CELL_TIMEOUT = 300  # seconds one cell may take, as in make test (the slowest takes about 30 s on an idle machine)
PAPER_DIR = "img/paper"  # where the site keeps the figures of `latte-lab figures`
PAPER_FILES = (".png", ".pdf")  # of its outputs, the ones the site serves (its .md tables go into the page)
PAPER_MARKER = re.compile(r"<!-- latte-lab paper: (?P<name>[\w-]+) -->")
DRAW_BLOCK = re.compile(r"```python\n(?P<code>(?:(?!```).)*?)```[ \t]*\n\s*<!-- latte-lab: draw -->", re.DOTALL)
# Any python block, marked or not: a page's doctest blocks (>>>) run before its drawings, in their namespace.
PYTHON_BLOCK = re.compile(r"```python\n(?P<code>(?:(?!```).)*?)```[ \t]*\n(?P<draw>\s*<!-- latte-lab: draw -->)?",
                          re.DOTALL)
DRAWING = "<!-- latte-lab drawing {} -->"  # placeholder between on_page_markdown and on_page_content
CLI_HELP_MARKER = "<!-- latte-lab help -->"  # api/cli.md: replaced by the help of every subcommand
GUIDE_MARKER = "<!-- latte-lab teaching: guide -->"  # teaching.md: the teacher's guide of the lesson's source
LESSON_SOURCE = "teaching/04_teaching_scheduling.ipynb"  # beside mkdocs.yml

# One build's state: its temporary folder, the running `latte-lab figures`, the drawings of each page.
_build: dict = {}


def _notebooks(config: MkDocsConfig) -> list[Path]:
    return sorted((Path(config.config_file_path).parent / NOTEBOOKS_DIR).glob("*.ipynb"))


def executing() -> bool:
    """Whether this build runs the notebooks (``LATTE_DOCS_EXECUTE`` set to 1, true or yes)."""
    return os.environ.get(EXECUTE_ENV, "").strip().lower() in ("1", "true", "yes")


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    pages = [f"{NOTEBOOKS_DIR}/{p.name}" for p in _notebooks(config)]
    for entry in config.nav or []:
        if isinstance(entry, dict) and NAV_SECTION in entry:
            entry[NAV_SECTION] = pages
    return config


def on_pre_build(config: MkDocsConfig) -> None:
    _cleanup()
    tmp = Path(tempfile.mkdtemp(prefix="latte-docs-"))
    _build.update(tmp=tmp, drawings={})
    # The paper's figures are drawn in another process while this one runs the notebooks and the drawings.
    _build["figures"] = _start_paper_figures(tmp / PAPER_DIR)


@event_priority(100)  # before mkdocs-jupyter wraps the .ipynb files as pages
def on_files(files: Files, config: MkDocsConfig) -> Files:
    tmp: Path = _build["tmp"]
    notebooks = _notebooks(config)
    # Source folder: the project root (or the executed copies' folder), so that a notebook's page sits at
    # notebooks/<name> as in the repository.
    src_dir = Path(config.config_file_path).parent
    if executing():
        src_dir = tmp / "executed"
        _execute_notebooks(notebooks, src_dir / NOTEBOOKS_DIR)
        keep = os.environ.get(KEEP_RUNS_ENV)
        for path in notebooks:
            _check_drawings(src_dir / NOTEBOOKS_DIR / path.name)
            if keep:
                Path(keep).mkdir(parents=True, exist_ok=True)
                shutil.copy(src_dir / NOTEBOOKS_DIR / path.name, Path(keep) / path.name)
            _static_widgets(src_dir / NOTEBOOKS_DIR / path.name)
    for path in notebooks:
        files.append(File(f"{NOTEBOOKS_DIR}/{path.name}", str(src_dir), config.site_dir, config.use_directory_urls))
    for path in _finish_paper_figures():
        if path.suffix in PAPER_FILES:
            files.append(File.generated(config, f"{PAPER_DIR}/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page, config: MkDocsConfig, files: Files) -> str:
    if CLI_HELP_MARKER in markdown:
        markdown = markdown.replace(CLI_HELP_MARKER, _cli_help())
    if GUIDE_MARKER in markdown:
        markdown = markdown.replace(GUIDE_MARKER, _teachers_guide(Path(config.config_file_path).parent))
    markdown = PAPER_MARKER.sub(lambda m: _paper_table(m.group("name"), page), markdown)
    if DRAW_BLOCK.search(markdown):
        markdown = _run_drawings(markdown, page)
    return markdown


def on_page_content(html: str, page, config: MkDocsConfig, files: Files) -> str:
    for i, svg in enumerate(_build.get("drawings", {}).pop(page.file.src_uri, [])):
        html = html.replace(DRAWING.format(i), f'<figure class="latte-drawing">{svg}</figure>')
    return html


def on_post_build(config: MkDocsConfig) -> None:
    _cleanup()


def on_build_error(error: Exception) -> None:
    _cleanup()


def _cleanup() -> None:
    proc = _build.pop("figures", None)
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    if "tmp" in _build:
        shutil.rmtree(_build.pop("tmp"), ignore_errors=True)
    _build.clear()


# --- notebooks ----------------------------------------------------------------------------------------

def _code_cells(path: Path) -> list[dict] | None:
    """A notebook's code cells (None when it cannot be read as one)."""
    import json

    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return [c for c in cells if c.get("cell_type") == "code"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _reuse_executed(path: Path, out_dir: Path) -> bool:
    """Copy the run of ``path`` found in ``$LATTE_DOCS_EXECUTED_DIR`` to ``out_dir``, when there is one whose
    code cells are ``path``'s and every one of them ran; whether it did."""
    folder = os.environ.get(EXECUTED_ENV)
    if not folder:
        return False
    run = Path(folder) / path.name
    ran, repo = _code_cells(run), _code_cells(path)
    if ran is None or repo is None or [_source(c) for c in ran] != [_source(c) for c in repo]:
        return False
    if any(c.get("execution_count") is None for c in ran if _source(c).strip()):
        return False
    shutil.copy(run, out_dir / path.name)
    log.info("%s: shown as run in %s", path.name, folder)
    return True


def _execute_notebooks(paths: list[Path], out_dir: Path) -> None:
    """Run each notebook in a fresh kernel (as many at once as this process has CPUs) and save it with
    its outputs in ``out_dir``, under the same name. A cell that raises fails the build, naming it."""
    import asyncio

    import nbformat
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [path for path in paths if not _reuse_executed(path, out_dir)]
    # The kernel's own inline backend draws the figures as outputs; a non-interactive MPLBACKEND (make test
    # sets Agg) would leave them as "<Figure size ...>" text.
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

    async def run(path: Path, slots: asyncio.Semaphore) -> None:
        async with slots:
            start = time.perf_counter()
            nb = nbformat.read(path, as_version=4)
            # IPC sockets, not TCP ports: a free port chosen here can be taken by another kernel meanwhile
            km = AsyncKernelManager(transport="ipc", ip=str(out_dir / f"{path.stem}.kernel"))
            client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT, resources={"metadata": {"path": str(path.parent)}})
            stderr = out_dir / f"{path.stem}.kernel.log"  # the kernel's own warnings, shown only on failure
            with open(stderr, "w") as err:
                try:
                    await client.async_execute(env=env, stderr=err)
                except CellExecutionError as exc:
                    raise PluginError(f"{NOTEBOOKS_DIR}/{path.name}: a cell failed while the site was built "
                                      f"({EXECUTE_ENV}=1):\n{exc}") from None
                except Exception as exc:
                    raise PluginError(f"{NOTEBOOKS_DIR}/{path.name} could not be run ({type(exc).__name__}: {exc}); "
                                      f"the kernel said:\n{stderr.read_text()[-2000:]}") from None
            nbformat.write(nb, out_dir / path.name)
            log.info("ran %s in %.1f s", path.name, time.perf_counter() - start)

    async def run_all() -> None:
        slots = asyncio.Semaphore(max(1, min(cpus, len(paths))))
        await asyncio.gather(*(run(p, slots) for p in paths))

    if not paths:
        return
    start = time.perf_counter()
    asyncio.run(run_all())
    log.info("ran %d notebooks in %.1f s", len(paths), time.perf_counter() - start)


# Drawing calls of a notebook cell: latte_lab's drawing functions (ll.viz.*) and pyplot's
# own figures. A cell that makes one must show an image once it has run (latte_lab.viz.notebook's convention).
DRAWING_FUNCTIONS = frozenset({
    "draw", "draw_graph", "graph_panels", "gantt", "flow", "animate", "figure2a", "figure2b", "figure3a",
    "figure3b", "figure3c", "figure4", "sensitivity_figure", "draw_workload", "plot_makespan", "plot_discovery",
    "plot_efficiency", "straggler_figure", "discovery_figure", "explore", "fork_outcomes", "subplots", "figure"})
DRAWING_ROOTS = ("ll.viz.", "plt.")
LOCKED = "ll.teaching.unlocked("  # a cell that waits for an exercise's answer (the student edition shows none)
KEEP_RUNS_ENV = "LATTE_DOCS_KEEP_RUNS"  # a folder: the run notebooks the site shows are copied there


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def drawing_calls(source: str) -> list[str]:
    """The drawing calls of a cell's code, as dotted names (``ll.viz.graph_panels``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython syntax (a magic): not a drawing of ours
        return []
    calls = [_dotted(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    return [c for c in calls if c.rsplit(".", 1)[-1] in DRAWING_FUNCTIONS and c.startswith(DRAWING_ROOTS)]


def drawing_cells(nb) -> list[dict]:
    """Every code cell of ``nb`` (an nbformat notebook) that calls a drawing function, with the number of
    images its outputs show (an ``image/*`` output, or HTML holding an ``<img>`` or an ``<svg>``) and whether
    it waits for an exercise's answer (:data:`LOCKED`): ``{"cell", "line", "images", "locked"}``."""
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if not drawing_calls(cell.source):
            continue
        images = 0
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            html = data.get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            if any(k.startswith("image/") for k in data) or "<img" in html or "<svg" in html:
                images += 1
        lines = [line for line in cell.source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        found.append({"cell": i, "line": lines[-1].strip() if lines else "", "images": images,
                      "locked": LOCKED in cell.source})
    return found


def _check_drawings(path: Path) -> None:
    """Fails the build when a drawing cell of the run notebook ``path`` shows no image (a locked cell of the
    student edition aside: it shows that it waits)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    blank = [f"cell {d['cell']} ({d['line']})" for d in drawing_cells(nb) if not d["images"] and not d["locked"]]
    if blank:
        raise PluginError(f"{NOTEBOOKS_DIR}/{path.name}: drawing cells that showed no image when run: "
                          f"{'; '.join(blank)} (latte_lab.viz.notebook: a picture shows whatever the cell ends with)")


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ('<p class="latte-widget"><em>An interactive control (ipywidgets): it works when the notebook runs '
               "in Jupyter; this page shows what the cell drew besides.</em></p>")


def _static_widgets(path: Path) -> None:
    """The run notebook at ``path`` without its widgets' state and views, each view replaced by a line saying
    what it is: a page would otherwise load the widget manager from unpkg.com to draw controls that do nothing
    without a kernel (a request, and a wait, for a page opened offline). What a widget cell drew besides (a
    picture, a table) stays."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if WIDGET_VIEW in out.get("data", {}):
                out["data"] = {"text/html": WIDGET_NOTE}
                out["metadata"] = {}
    nbformat.write(nb, path)


# --- the paper's tables and figures -------------------------------------------------------------------

def _start_paper_figures(out: Path) -> subprocess.Popen:
    """``latte-lab figures --out out`` on the bundled published data (never ``$LATTE_PUBLISHED_DIR``: the
    site shows the authors' data as shipped), started in the background."""
    env = {k: v for k, v in os.environ.items() if k != "LATTE_PUBLISHED_DIR"}
    env["MPLBACKEND"] = "Agg"
    return subprocess.Popen([sys.executable, "-m", "latte_lab.cli", "figures", "--out", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish_paper_figures() -> list[Path]:
    proc: subprocess.Popen = _build["figures"]
    output, _ = proc.communicate()
    if proc.returncode != 0:
        raise PluginError(f"latte-lab figures failed (exit {proc.returncode}):\n{output}")
    return sorted((_build["tmp"] / PAPER_DIR).iterdir())


def _sections(text: str, level: str) -> dict[str, str]:
    """A Markdown file's sections under headings of ``level`` ("##"), by heading, without the heading."""
    parts = re.split(rf"^{level} (.+)$", text, flags=re.MULTILINE)
    return {title.strip(): body.strip() for title, body in zip(parts[1::2], parts[2::2])}


def _paper_output(name: str) -> str:
    path = _build["tmp"] / PAPER_DIR / name
    if not path.is_file():
        raise PluginError(f"latte-lab figures wrote no {name}; docs/hooks.py reads it for docs/reproduce.md")
    return path.read_text()


def _paper_table(name: str, page) -> str:
    """The Markdown for ``<!-- latte-lab paper: NAME -->``: ``table2`` (both models pooled, then each model
    in a collapsed block) or ``comparison`` (how many printed numbers agree, and the known deviations)."""
    if name == "table2":
        blocks = _sections(_paper_output("table2.md"), "##")
        if "all" not in blocks:
            raise PluginError("table2.md has no '## all' section (both models pooled)")
        out = [blocks.pop("all")]
        for model, table in blocks.items():
            indented = "\n".join("    " + line if line else "" for line in table.splitlines())
            out.append(f'??? note "{model} alone"\n\n{indented}')
        return "\n\n".join(out)
    if name == "comparison":
        section = _sections(_paper_output("report.md"), "##").get("Paper vs recomputed")
        if section is None:
            raise PluginError("report.md has no '## Paper vs recomputed' section")
        summary, *parts = re.split(r"^### ", section, flags=re.MULTILINE)
        out = [summary.strip()]
        for part in parts:  # each table of numbers that do not agree, collapsed under its title
            title, _, body = part.partition("\n")
            table = next((block for block in body.split("\n\n") if block.lstrip().startswith("|")), "")
            if table:
                rows = len(table.strip().splitlines()) - 2  # less the header and its rule
                indented = "\n".join("    " + line for line in table.strip().splitlines())
                out.append(f'??? note "{title.strip()} ({rows})"\n\n{indented}')
        return "\n\n".join(out).strip()
    raise PluginError(f"{page.file.src_uri}: unknown marker <!-- latte-lab paper: {name} --> "
                      "(known: table2, comparison)")


# --- pictures drawn by a page's code ------------------------------------------------------------------

def _run_drawings(markdown: str, page) -> str:
    """Run the page's marked code blocks in order in one namespace and put a placeholder for the drawing
    of each block's last line after it (:func:`on_page_content` puts the SVG there)."""
    import contextlib

    import matplotlib

    matplotlib.use("Agg")  # this process draws files only; the notebooks' kernels have their own backend
    namespace: dict = {"__name__": f"docs:{page.file.src_uri}"}
    # What the code writes to relative paths (a trial's runs/ folder) goes to the build's temporary folder.
    cwd = _build["tmp"] / "drawings"
    cwd.mkdir(exist_ok=True)
    drawings: list[str] = []

    def draw(m: re.Match) -> str:
        code = m.group("code")
        tree = ast.parse(code)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        if last is None:
            raise PluginError(f"{page.file.src_uri}: a block marked <!-- latte-lab: draw --> must end with an "
                              "expression to draw")
        try:
            with contextlib.chdir(cwd):
                exec(compile(tree, page.file.src_uri, "exec"), namespace)
                value = eval(compile(ast.Expression(last.value), page.file.src_uri, "eval"), namespace)
                svg = _svg(value)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"{page.file.src_uri}: the code block before <!-- latte-lab: draw --> failed: "
                              f"{type(exc).__name__}: {exc}\n{code}") from exc
        finally:
            import matplotlib.pyplot as plt

            plt.close("all")
        drawings.append(svg)
        return f"```python\n{code}```\n\n{DRAWING.format(len(drawings) - 1)}"

    def run_examples(code: str) -> None:
        """A doctest block's examples, for what they define (an example whose page shows it raising may)."""
        import doctest

        for example in doctest.DocTestParser().get_examples(code):
            try:
                with contextlib.chdir(cwd):
                    exec(compile(example.source, page.file.src_uri, "exec"), namespace)
            except Exception as exc:
                if example.exc_msg is None:
                    raise PluginError(f"{page.file.src_uri}: the example {example.source.strip()!r} failed: "
                                      f"{type(exc).__name__}: {exc}") from exc

    def block(m: re.Match) -> str:
        if m.group("draw"):
            return draw(m)
        if m.group("code").lstrip().startswith(">>>"):
            run_examples(m.group("code"))
        return m.group(0)

    markdown = PYTHON_BLOCK.sub(block, markdown)
    _build.setdefault("drawings", {})[page.file.src_uri] = drawings
    return markdown


def _svg(value) -> str:
    """An SVG element for a drawing: an ``ll.viz.draw`` result keeps its hover tooltips; an Axes or a Figure
    is saved as SVG."""
    import io

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    if hasattr(value, "svg") and callable(value.svg):
        text = value.svg()
    elif isinstance(value, (Axes, Figure)):
        fig = value.figure if isinstance(value, Axes) else value
        buf = io.StringIO()
        fig.savefig(buf, format="svg", bbox_inches="tight")
        text = buf.getvalue()
    else:
        raise PluginError(f"cannot draw a {type(value).__name__}: end the block with a drawing, an Axes or a Figure")
    return text[text.find("<svg"):]  # no XML prologue or doctype inside HTML


# --- teaching.md --------------------------------------------------------------------------------------

def _teachers_guide(root: Path) -> str:
    """The lesson's first cell tagged ``teacher`` (objectives and the 90-minute plan), from its heading's
    next paragraph on, its headings a level down; never a solution or a common wrong answer."""
    import nbformat

    nb = nbformat.read(root / LESSON_SOURCE, as_version=4)
    guide = next((c.source for c in nb.cells if "teacher" in c.metadata.get("tags", ())), None)
    if guide is None:
        raise PluginError(f"{LESSON_SOURCE} has no cell tagged teacher; docs/teaching.md shows its guide")
    body = guide.split("\n", 1)[1] if guide.startswith("#") else guide
    return re.sub(r"^(#+) ", r"\1# ", body.strip(), flags=re.MULTILINE)


# --- api/cli.md ---------------------------------------------------------------------------------------

def _cli_help() -> str:
    from latte_lab.cli import build_parser

    parser = build_parser()
    sections = [f"```text\n{parser.format_help()}```"]
    subparsers = next(a for a in parser._actions if a.dest == "command")
    for name, sub in subparsers.choices.items():
        sections.append(f"## latte-lab {name}\n\n```text\n{sub.format_help()}```")
        nested = [a for a in sub._actions if getattr(a, "choices", None) and isinstance(a.choices, dict)]
        for action in nested:
            for sub_name, subsub in action.choices.items():
                sections.append(f"### latte-lab {name} {sub_name}\n\n```text\n{subsub.format_help()}```")
    return "\n\n".join(sections)
