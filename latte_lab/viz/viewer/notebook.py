"""The viewer in a notebook: a trial's page in an output's ``<iframe>`` (:func:`embed`), and its agent lanes as a
widget (:func:`transcript`).
"""

from __future__ import annotations

import html
from typing import Any

from latte_lab import rundir
from latte_lab.errors import DataError
from latte_lab.viz.viewer.data import trial_data
from latte_lab.viz.viewer.page import PAGE_NAME, _run_dir_of, compare_html, trial_html

EMBED_HEIGHT_PX = 820  # the viewer in a notebook: its slider, header, graph and the first lanes at once


class EmbeddedPage:
    """A viewer page shown inside a notebook's output: an ``<iframe>`` holding the whole page (``srcdoc``),
    so it needs no server and no file a notebook server would have to hand out (a ``file://`` link into a
    temporary folder does not open from JupyterLab). ``.page`` is the page's HTML."""

    def __init__(self, page: str, height: int = EMBED_HEIGHT_PX):
        self.page, self.height = page, height

    def _repr_html_(self) -> str:
        return (f'<iframe class="latte-viewer" srcdoc="{html.escape(self.page, quote=True)}" '
                f'style="width:100%;height:{self.height}px;border:1px solid #d0d7de;border-radius:6px" '
                'title="latte_lab trial viewer"></iframe>')


def embed(run_or_dir: Any, *, compare: Any = None, height: int = EMBED_HEIGHT_PX) -> EmbeddedPage:
    """The viewer page of a trial (a run directory or a TrialResult), or of two with ``compare``, to show in
    a notebook: ``ll.viz.viewer.embed(res)`` on a cell's last line. Nothing is written to disk."""
    a = _run_dir_of(run_or_dir)
    if compare is not None:
        return EmbeddedPage(compare_html(a, _run_dir_of(compare)), height)
    if not (a / rundir.RESULT_FILE).exists():
        raise DataError(f"{a} is not a finished trial's run directory")
    return EmbeddedPage(trial_html(a), height)


def lanes_html(data: dict, texts: list[str], round: int) -> str:
    """The agent lanes of one round as HTML (every text escaped): the notebook's :func:`transcript`."""
    esc = html.escape
    events = data["events"]
    parts = [f"<div style='font:13px sans-serif'><b>{esc(data['id'])}</b> · round {round}"]
    flags = [e for e in events if e.get("round") == round and e.get("type") in ("lead_invoked", "heartbeat_alert")]
    for f in flags:
        what = ("Lead triggered: " + ", ".join(map(str, f.get("reasons") or []))) if f["type"] == "lead_invoked" \
            else f"heartbeat: {f.get('agent')} on {f.get('task')}"
        parts.append(f" <span style='background:#fde68a;padding:1px 4px'>{esc(what)}</span>")
    parts.append("<div style='display:flex;gap:8px;align-items:flex-start;overflow-x:auto'>")
    for agent in data["agents"]:
        calls = [c for c in data["calls"] if c["agent"] == agent and c["round"] == round]
        evs = [e for e in events if e.get("who") == agent and e.get("round") == round and e.get("type") != "agent_reply"]
        if not calls and not evs:
            continue
        parts.append("<div style='flex:1 1 0;min-width:220px;border:1px solid #ccc;padding:4px'>"
                     f"<b>{esc(agent)}</b>")
        for c in calls:
            new = [m for m in c["msgs"] if m[2]]
            prompt = "\n\n".join(texts[m[1]] for m in new if m[1] is not None)
            parts.append(f"<details><summary>prompt ({len(c['msgs'])} messages, {len(new)} new)</summary>"
                         f"<pre style='white-space:pre-wrap'>{esc(prompt)}</pre></details>")
            reply = texts[c["reply"]] if c["reply"] is not None else ""
            parts.append(f"<pre style='white-space:pre-wrap;background:#f6f8fa'>{_highlight(reply, c['acts'])}</pre>")
        for e in evs:
            parts.append(f"<div style='font-size:12px'>{esc(_event_line(e))}</div>")
        parts.append("</div>")
    parts.append("</div></div>")
    return "".join(parts)


def _highlight(text: str, acts: list) -> str:
    out, pos = [], 0
    for start, end, _tag, *_ in acts:
        out.append(html.escape(text[pos:start]))
        out.append(f"<mark>{html.escape(text[start:end])}</mark>")
        pos = end
    out.append(html.escape(text[pos:]))
    return "".join(out)


def _event_line(e: dict) -> str:
    skip = {"type", "seq", "round", "t", "who", "diff", "failed_tests"}
    detail = ", ".join(f"{k}={v}" for k, v in e.items()
                       if k not in skip and not k.startswith("@") and v not in (None, [], ""))
    return f"{e.get('type')}: {detail}"[:300]


def transcript(result_or_run_dir: Any, round: int | None = None):
    """A widget showing the agent lanes (prompts, replies with their actions, outcomes) of a chosen round:
    an IntSlider over the trial's rounds and the lanes under it.

    >>> w = ll.viz.transcript(res)          # doctest: +SKIP
    >>> w.children[0].value = 5             # doctest: +SKIP
    """
    from latte_lab.errors import require_extra

    widgets = require_extra("ipywidgets", "lab", "the transcript widget")

    data = trial_data(_run_dir_of(result_or_run_dir))
    texts = data.pop("T")
    start = data["first"] if round is None else max(data["first"], min(data["last"], int(round)))
    slider = widgets.IntSlider(value=start, min=data["first"], max=data["last"], description="round",
                               continuous_update=False)
    out = widgets.HTML(lanes_html(data, texts, start))
    page = data["run_dir"] + "/" + PAGE_NAME
    link = widgets.HTML(f"<small>the whole trial: <code>latte-lab view {html.escape(data['run_dir'])}</code> "
                        f"writes {html.escape(page)}</small>")

    def show(change):
        out.value = lanes_html(data, texts, change["new"])

    slider.observe(show, names="value")
    box = widgets.VBox([slider, out, link])
    box.data = data  # type: ignore[attr-defined]
    return box
