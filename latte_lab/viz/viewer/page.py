"""The viewer's pages: a trial's, a sweep directory's table, two trials side by side, each one self-contained HTML
file put together from the page's HTML, CSS and JavaScript (package data in ``assets/``, read with
``importlib.resources``) and its data as JSON; and a loopback server for a page.
"""

from __future__ import annotations

import functools
import html
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from latte_lab import rundir
from latte_lab.errors import DataError
from latte_lab.viz.viewer.data import _clean, _Texts, trial_data

PAGE_NAME = "view.html"  # a trial's page, written into its run directory unless told otherwise
ASSETS = ("page.html", "page.css", "page.js")  # the page's markup, style and script, in assets/


@functools.cache
def asset(name: str) -> str:
    """One of :data:`ASSETS`, as text."""
    return resources.files("latte_lab.viz.viewer").joinpath("assets", name).read_text(encoding="utf-8")


def _json_for_html(payload: Any) -> str:
    """JSON that cannot end or confuse its <script> element: ``</`` is written ``<\\/``, and ``<!--`` and
    ``<script`` (any case) start with ``\\u003c`` (either could put the HTML parser in a state where the
    element's own end tag no longer ends it)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("</", "<\\/").replace("<!--", "\\u003c!--")
    text = re.sub(r"<(?=script)", r"\\u003c", text, flags=re.I)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _pack(texts: list[str]) -> str:
    """The text table as base64 of raw-deflated JSON (prompts repeat the same files with small changes, so
    this is 10-20 times smaller); the page inflates it with the browser's DecompressionStream."""
    import base64
    import zlib

    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw = json.dumps(texts, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return base64.b64encode(z.compress(raw) + z.flush()).decode("ascii")


def unpack_texts(page: str) -> list[str]:
    """The text table of a page written by this module (for tests and tools)."""
    import base64
    import zlib

    m = re.search(r'<script type="application/json" id="latte-data">(.*?)</script>', page, re.S)
    payload = json.loads(m.group(1))
    return json.loads(zlib.decompress(base64.b64decode(payload["Tz"]), -15).decode("utf-8"))


def _page(title: str, payload: dict) -> str:
    if "T" in payload:
        payload = {**payload, "Tz": _pack(payload["T"])}
        del payload["T"]
    return (asset("page.html").replace("__TITLE__", html.escape(title))
            .replace("__CSS__", asset("page.css")).replace("__JS__", asset("page.js"))
            .replace("__DATA__", _json_for_html(payload)))


def trial_html(run_dir: str | Path) -> str:
    """The page of one trial."""
    data = trial_data(run_dir)
    texts = data.pop("T")
    return _page(f"{data['id']} · latte_lab viewer", {"kind": "trial", "T": texts, "trials": [data]})


def compare_html(a: str | Path, b: str | Path) -> str:
    """Two trials side by side, one slider for both (the same round on each)."""
    texts = _Texts()
    trials = [trial_data(a, texts), trial_data(b, texts)]
    return _page(f"{trials[0]['id']} vs {trials[1]['id']} · latte_lab viewer",
                 {"kind": "compare", "T": texts.items, "trials": trials})


SWEEP_COLUMNS = ["trial_id", "task", "team", "model", "seed", "status", "success", "accuracy", "total_rounds",
                 "total_tokens", "dollars", "wall_clock_seconds"]


def is_sweep_dir(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and not (path / rundir.RESULT_FILE).exists() and any(
        (p / rundir.RESULT_FILE).exists() for p in path.iterdir() if p.is_dir())


def _sweep_rows(sweep_dir: Path) -> list[tuple[Path, dict]]:
    rows = []
    for p in sorted(sweep_dir.iterdir()):
        if not p.is_dir() or not (p / rundir.RESULT_FILE).exists():
            continue
        try:
            payload = rundir.read_result(p)
        except DataError:
            continue
        row = dict(payload.get("row") or {})
        row.setdefault("trial_id", payload.get("trial_id", p.name))
        row["status"] = payload.get("status", row.get("status"))
        if "total_tokens" not in row:
            row["total_tokens"] = int(row.get("total_input_tokens") or 0) + int(row.get("total_output_tokens") or 0)
        rows.append((p, row))
    return rows


def sweep_html(sweep_dir: str | Path, links: dict[str, str] | None = None) -> str:
    """A sortable, filterable table of a sweep directory's trials; ``links`` maps a trial id to its page."""
    sweep_dir = Path(sweep_dir)
    rows = _sweep_rows(sweep_dir)
    links = links or {}
    table = [[row.get(c) for c in SWEEP_COLUMNS] for _, row in rows]
    payload = {"kind": "sweep", "T": [], "dir": str(sweep_dir), "columns": SWEEP_COLUMNS, "rows": _clean(table),
               "links": [links.get(str(row.get("trial_id")), "") for _, row in rows]}
    return _page(f"{sweep_dir.name} · latte_lab sweep", payload)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def build_page(run_or_dir: Any, out: str | Path | None = None, *, compare: Any = None) -> Path:
    """Write the viewer page of a run directory (or a TrialResult), a sweep directory, or, with ``compare``,
    of two trials side by side; returns the page's path.

    A trial's page goes to ``out`` (default ``<run dir>/view.html``). A sweep's table goes to ``out``
    (default ``<sweep dir>/view.html``) and each trial's page beside it as ``<trial id>.html``. A compare
    page goes to ``out`` (default ``compare-<A>-<B>.html`` beside A).
    """
    a = _run_dir_of(run_or_dir)
    if compare is not None:
        b = _run_dir_of(compare)
        for p in (a, b):
            if is_sweep_dir(p) or not (p / rundir.RESULT_FILE).exists():
                raise DataError(f"{p} is not a finished trial's run directory; --compare takes two trials")
        out = Path(out) if out else a.parent / f"compare-{a.name}-{b.name}.html"
        return _write(out, compare_html(a, b))
    if is_sweep_dir(a):
        out = Path(out) if out else a / PAGE_NAME
        links = {}
        for p, row in _sweep_rows(a):
            name = f"{row.get('trial_id') or p.name}.html"
            try:
                _write(out.parent / name, trial_html(p))
            except DataError:  # a damaged trial: its row stays, without a link
                continue
            links[str(row.get("trial_id"))] = name
        return _write(out, sweep_html(a, links))
    if not (a / rundir.RESULT_FILE).exists():
        raise DataError(f"{a} is neither a finished trial's run directory nor a sweep directory")
    out = Path(out) if out else a / PAGE_NAME
    return _write(out, trial_html(a))


def _run_dir_of(obj: Any) -> Path:
    if getattr(obj, "run_dir", None) is not None:
        return Path(obj.run_dir)
    path = Path(obj)
    if not path.exists():
        raise DataError(f"{path} does not exist")
    return path


def serve(page: str | Path, *, open_browser: bool = True, block: bool = True):
    """Serve the viewer's pages on 127.0.0.1 (an ephemeral port; loopback only) and open ``page`` in a browser
    (nothing happens where there is none). Returns the server when ``block`` is False; otherwise serves
    until interrupted.

    Only the viewer's own pages are served: ``page`` and, for a sweep's table, the trial pages beside it
    (``<trial id>.html`` for each run directory there); never a run's workspace files, ``calls.jsonl`` or
    anything else in the folder (404). A request whose ``Host`` header is not this server's loopback
    ``host:port`` (``127.0.0.1`` or ``localhost``) is refused (403), so a web page elsewhere cannot reach it
    through a DNS name rebound to 127.0.0.1."""
    import http.server
    import threading
    import urllib.parse
    import webbrowser

    page = Path(page).resolve()
    folder = page.parent
    allowed = {page.name} | {f"{d.name}.html" for d in folder.iterdir() if d.is_dir()
                             and (folder / f"{d.name}.html").is_file()}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ViewerHandler)
    port = server.server_address[1]
    server.viewer = (folder, frozenset(allowed), page.name,  # type: ignore[attr-defined]
                     frozenset({f"127.0.0.1:{port}", f"localhost:{port}"}))
    url = f"http://127.0.0.1:{port}/{urllib.parse.quote(page.name)}"
    server.url = url  # type: ignore[attr-defined]
    print(f"serving {url} (Ctrl-C stops)", flush=True)
    if open_browser:
        try:
            webbrowser.open(url)
        except Exception:  # noqa: BLE001 - no browser is fine
            pass
    if not block:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return None


def _handler_base():
    import http.server

    return http.server.BaseHTTPRequestHandler


class _ViewerHandler(_handler_base()):  # type: ignore[misc]
    """GET and HEAD of the viewer's pages only (see :func:`serve`), for the loopback Host only."""

    def do_GET(self):  # noqa: N802 - the base class's name
        self._answer(body=True)

    def do_HEAD(self):  # noqa: N802 - the base class's name
        self._answer(body=False)

    def _answer(self, body: bool) -> None:
        import urllib.parse

        folder, allowed, index, hosts = self.server.viewer
        if self.headers.get("Host", "").strip().lower() not in hosts:
            return self._refuse(403, "this server answers only to its loopback address (Host header refused)")
        name = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).lstrip("/") or index
        target = folder / name
        if name not in allowed or target.is_symlink() or not target.is_file():
            return self._refuse(404, "not a viewer page")
        data = target.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _refuse(self, code: int, why: str) -> None:
        data = why.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass
