"""A trial round by round, as one object that plays offline: ``ll.viz.animate(result)``.

Every frame shows the coordination graph at that round (teams without a graph: the message-flow view up
to that round), the round's events in one line per agent, and the tokens used so far. In Jupyter the
object displays itself once as matplotlib's HTML/JavaScript player (``to_jshtml``): the frames are
embedded, so Play works without a kernel and in a notebook saved to HTML. ``.save("trial.gif")`` writes
a GIF (Pillow), ``.save("trial.mp4")`` an MP4 where ffmpeg is installed, ``.save("trial.html")`` the
player alone.

>>> from latte_lab.scheduling import chain, simulate
>>> anim = animate(simulate(chain(3), n_workers=1))
>>> len(anim), anim.rounds[:3]
(4, [0, 1, 2])
>>> "<script" in anim.to_jshtml()
True
"""

from __future__ import annotations

import shutil
from pathlib import Path

import latte_lab.viz.flow as flowmod
import latte_lab.viz.graph as graphmod
import latte_lab.viz.graph_drawing as gd
import latte_lab.viz.style as style
from latte_lab.errors import DataError, LatteError
from latte_lab.graph import SYSTEM_AGENT

__all__ = ["TrialAnimation", "animate"]

INTERVAL_MS = 800  # one round on screen: long enough to read the round's lines
PLAYER_DPI = 100  # frames in the notebook player: 7 pt labels come out about 10 px high
EVENTS_LINE_IN = 0.16  # one line of the events panel
TOKENS_PANEL_IN = 2.0  # width of the running-tokens chart
MIN_FRAME_WIDTH_IN = 7.5


class TrialAnimation:
    """Frames of a trial; displays itself once (an HTML/JS player), ``save()`` writes GIF, MP4 or HTML,
    ``save_frame(i, path)`` one frame as an image. The players start at frame ``start`` (a team without a
    graph: the first round in which an agent acted, not an empty round 0)."""

    def __init__(self, fig, draw_frame, rounds: list[int], interval_ms: int = INTERVAL_MS, start: int = 0):
        self.fig, self._draw_frame, self.rounds, self.interval_ms = fig, draw_frame, rounds, interval_ms
        self.start = start
        self._html: str | None = None

    def __len__(self) -> int:
        return len(self.rounds)

    def __repr__(self) -> str:
        return f"<TrialAnimation: {len(self)} frames, rounds {self.rounds[0]}-{self.rounds[-1]}>"

    def _animation(self):
        from matplotlib.animation import FuncAnimation

        return FuncAnimation(self.fig, self._draw_frame, frames=range(self.start, len(self.rounds)),
                             interval=self.interval_ms, repeat=False)

    def to_jshtml(self) -> str:
        """The HTML/JavaScript player with every frame embedded (rendered once, then reused); it asks the
        network for nothing (:func:`offline_player`)."""
        if self._html is None:
            import matplotlib

            with matplotlib.rc_context({"savefig.dpi": PLAYER_DPI, "savefig.bbox": None}):
                self._html = offline_player(self._animation().to_jshtml(default_mode="once"))
        return self._html

    def _repr_html_(self) -> str:
        return self.to_jshtml()

    def save(self, path, *, fps: float | None = None, dpi: int = PLAYER_DPI) -> Path:
        """Writes the animation: ``.gif`` (Pillow), ``.mp4`` (needs ffmpeg) or ``.html`` (the player)."""
        path = Path(path)
        fps = fps or 1000 / self.interval_ms
        suffix = path.suffix.lower()
        if suffix == ".html":
            path.write_text(self.to_jshtml())
            return path
        if suffix == ".gif":
            from matplotlib.animation import PillowWriter

            writer = PillowWriter(fps=fps)
        elif suffix == ".mp4":
            if shutil.which("ffmpeg") is None:
                raise LatteError(f"cannot write {path}: ffmpeg is not installed (apt-get install ffmpeg); "
                                 "save a .gif or .html instead")
            from matplotlib.animation import FFMpegWriter

            writer = FFMpegWriter(fps=fps)
        else:
            raise LatteError(f"cannot write {path}: use a .gif, .mp4 or .html file name")
        import matplotlib

        with matplotlib.rc_context({"savefig.bbox": None}):
            self._animation().save(str(path), writer=writer, dpi=dpi)
        return path

    def widget(self, *, dpi: int = PLAYER_DPI):
        """A Play button and a slider that draw each frame when it is first shown (an ipywidgets player):
        on screen at once, however many frames, but it needs a running kernel to play."""
        import io

        from latte_lab.errors import require_extra


        w = require_extra("ipywidgets", "lab", "the round-by-round player")

        cache: dict[int, bytes] = {}

        def png(i: int) -> bytes:
            if i not in cache:
                self._draw_frame(i)
                buf = io.BytesIO()
                self.fig.savefig(buf, format="png", dpi=dpi)
                cache[i] = buf.getvalue()
            return cache[i]

        image = w.Image(value=png(self.start), format="png", layout=w.Layout(max_width="100%"))
        play = w.Play(value=self.start, min=0, max=len(self) - 1, interval=self.interval_ms, description="play")
        slider = w.IntSlider(value=self.start, min=0, max=len(self) - 1, description="frame", readout=False)
        label = w.Label(value=f"round {self.rounds[self.start]}")
        w.jslink((play, "value"), (slider, "value"))

        def show(change) -> None:
            image.value = png(change["new"])
            label.value = f"round {self.rounds[change['new']]}"

        slider.observe(show, names="value")
        return w.VBox([image, w.HBox([play, slider, label])])

    def save_frame(self, i: int, path, *, dpi: int = style.FIG_DPI) -> Path:
        """Frame ``i`` (negative counts from the end) as a PNG, PDF or SVG."""
        self._draw_frame(range(len(self))[i])
        with style.saving():  # a PDF gets the theme's TrueType fonts
            self.fig.savefig(path, dpi=dpi)
        return Path(path)


class _EventsPanel:
    """``n_lines`` lines of text, one per agent, rewritten every frame."""

    def __init__(self, ax, n_lines: int, agents: list[str]):
        ax.set_axis_off()
        width_in = ax.get_position().width * ax.figure.get_figwidth()
        name_in = max(gd._text_width_in(f"{a}: ") for a in [*agents, SYSTEM_AGENT]) * 1.15 + 0.05  # bold is wider
        self.chars = int((width_in - name_in) / (style.MIN_FONT_PT * 0.56 / 72))  # what fits beside the names
        ax.set_xlim(0, width_in)
        ax.set_ylim(n_lines, 0)
        self.agents = [ax.text(0, i + 0.5, "", fontsize=style.MIN_FONT_PT, va="center", fontweight="bold")
                       for i in range(n_lines)]
        self.rest = [ax.text(name_in, i + 0.5, "", fontsize=style.MIN_FONT_PT, va="center", clip_on=True)
                     for i in range(n_lines)]

    def show(self, lines: list[str]) -> None:
        lines = lines or ["(no agent acted this round)"]
        for i, (a_txt, r_txt) in enumerate(zip(self.agents, self.rest)):
            line = lines[i] if i < len(lines) else ""
            if i == len(self.agents) - 1 and len(lines) > len(self.agents):
                line = f"… and {len(lines) - i} more agents"
            agent, sep, rest = line.partition(": ")
            if len(rest) > self.chars:
                rest = rest[:self.chars - 1] + "…"
            a_txt.set_text(f"{agent}:" if sep else "")
            r_txt.set_text(rest if sep else agent)


class _TokensPanel:
    """The running token count: the whole curve in grey, the part up to this round in blue."""

    def __init__(self, ax, tokens: dict[int, int]):
        self.ax, self.tokens = ax, tokens
        xs = list(tokens)
        ys = [tokens[r] / 1000 for r in xs]
        ax.plot(xs, ys, color="#98a2b3", lw=1)
        (self.line,) = ax.plot([], [], color="#1d4ed8", lw=1.6)
        (self.dot,) = ax.plot([], [], "o", color="#1d4ed8", ms=4)
        ax.set_xlabel("round", fontsize=style.MIN_FONT_PT)
        ax.set_ylabel("thousand tokens", fontsize=style.MIN_FONT_PT)
        ax.tick_params(labelsize=style.MIN_FONT_PT)
        ax.set_ylim(0, max(ys + [1]) * 1.08)
        ax.set_xlim(min(xs + [0]) - 0.3, max(xs + [1]) + 0.6)  # room for the dot at either end
        ax.xaxis.set_major_locator(style.pyplot().MaxNLocator(integer=True, nbins=5))
        pos = ax.get_position()  # a figure text, not an axes title: titles re-measure the axes every frame
        self.title = ax.figure.text(pos.x0, pos.y1 + 0.04 / ax.figure.get_figheight(), "", fontsize=style.FONT_PT,
                                    va="bottom")

    def show(self, upto: int) -> None:
        done = [r for r in self.tokens if r <= upto]
        ys = [self.tokens[r] / 1000 for r in done]
        self.line.set_data(done, ys)
        self.dot.set_data(done[-1:], ys[-1:])
        self.title.set_text(f"tokens so far: {self.tokens.get(upto, 0):,}")


PLAYER_GLYPHS = {"fa-minus": "−", "fa-fast-backward": "⏮", "fa-step-backward": "◂", "fa-play fa-flip-horizontal": "◀",
                 "fa-pause": "⏸", "fa-play": "▶", "fa-step-forward": "▸", "fa-fast-forward": "⏭", "fa-plus": "+"}
"""matplotlib's player buttons: Font Awesome icon -> the character shown instead."""


def offline_player(page: str) -> str:
    """matplotlib's HTML player without its one request to the network: the Font Awesome stylesheet it links
    from a CDN (offline, a wait and empty buttons) is left out, and each button shows a character instead.

    >>> offline_player('<link rel="stylesheet"\\nhref="https://cdn/font-awesome.min.css"><i class="fa fa-play"></i>')
    '<span class="latte-glyph">▶</span>'
    """
    import re

    page = re.sub(r'<link rel="stylesheet"\s+href="https?://[^"]*font-awesome[^"]*">', "", page)
    return re.sub(r'<i class="fa ([^"]+)"></i>',
                  lambda m: f'<span class="latte-glyph">{PLAYER_GLYPHS.get(m.group(1), "·")}</span>', page)


def animate(obj, *, interval_ms: int = INTERVAL_MS, widget: bool | None = None) -> TrialAnimation:
    """The trial round by round (see the module docstring); works for every team: graph teams show their
    graph, the others the message-flow view. ``widget`` is accepted for older code and ignored: the player
    needs no kernel."""
    del widget
    events = list(getattr(obj, "event_list", []) or [])
    snaps = graphmod.snapshots_of(obj) if hasattr(obj, "snapshots") or not events else []
    if snaps:
        return style.finish(_graph_animation(snaps, events, interval_ms))
    if not events:
        raise DataError("nothing to animate: the result has neither graph snapshots nor events")
    return style.finish(_flow_animation(events, interval_ms))


def _frame_figure(top_w: float, top_h: float, n_lines: int):
    """The frame's Figure and its two bottom panels. Not a pyplot figure: nothing displays or closes it on
    its own (in JupyterLab the inline backend's end-of-message hook, run on another thread for a widget's
    messages, would draw and close every pyplot figure while a frame is being drawn)."""
    from matplotlib.figure import Figure

    width = max(top_w + 2 * graphmod.MARGIN_IN, MIN_FRAME_WIDTH_IN)
    bottom_h = max(1.3, n_lines * EVENTS_LINE_IN + 0.35)
    height = graphmod.TITLE_IN + top_h + bottom_h + 0.15
    fig = Figure(figsize=(width, height))
    ev_ax = fig.add_axes((0.1 / width, 0.1 / height, (width - TOKENS_PANEL_IN - 0.75) / width,
                          (bottom_h - 0.25) / height))
    tok_ax = fig.add_axes(((width - TOKENS_PANEL_IN - 0.1) / width, 0.42 / height, TOKENS_PANEL_IN / width,
                           (bottom_h - 0.75) / height))
    return fig, ev_ax, tok_ax, width, height, bottom_h


def _graph_animation(snaps: list[dict], events: list[dict], interval_ms: int) -> TrialAnimation:
    plan = gd.plan(snaps)
    handles = gd.legend_handles(plan, new=len(snaps) > 1)
    ncol, legend_rows = graphmod._legend_rows(len(handles), max(plan.width + 2 * graphmod.MARGIN_IN, MIN_FRAME_WIDTH_IN),
                                              [h.get_label() for h in handles])
    legend_h = legend_rows * graphmod.LEGEND_ROW_IN + 0.08
    n_lines = max(len(flowmod.agents_of(events)) + 1, 3) if events else 3
    tokens = flowmod.tokens_by_round(events) if events else {}
    rounds = [int(s["round"]) for s in snaps]
    fork = next((e for e in events if e.get("type") == "fork_point"), None)  # a fork's branch point, if any
    with style.theme():
        fig, ev_ax, tok_ax, width, height, bottom_h = _frame_figure(plan.width, plan.height + legend_h, n_lines)
        left = (width - plan.width) / 2
        g_ax = fig.add_axes((left / width, (bottom_h + legend_h) / height, plan.width / width, plan.height / height))
        fig.legend(handles=handles, loc="lower center", ncol=ncol, frameon=False, fontsize=gd.LABEL_PT,
                   bbox_to_anchor=(0.5, (bottom_h + 0.02) / height))
        scene = gd.Scene(g_ax, plan)
        title = fig.text(left / width, 1 - 0.08 / height, "", fontsize=style.TITLE_PT, va="top")
        lines = _EventsPanel(ev_ax, n_lines, flowmod.agents_of(events) if events else [])
        tok = _TokensPanel(tok_ax, tokens) if tokens else None
        if tok is None:
            tok_ax.set_axis_off()

    def draw_frame(i: int):
        snap = snaps[i]
        before = {n["id"] for n in snaps[i - 1]["graph"]["nodes"]} if i > 0 else set()
        new = [n["id"] for n in snap["graph"]["nodes"] if i > 0 and n["id"] not in before]
        scene.show(snap, new=new)
        branch = ""
        if fork is not None:
            branch = (" · the parent's" if rounds[i] <= fork["fork_round"] else
                      f" · forked after round {fork['fork_round']}")
        title.set_text(graphmod.round_title(snap) + branch)
        lines.show(flowmod.round_lines(events, rounds[i], short=plan.short))
        if tok is not None:
            tok.show(rounds[i])
        return []

    draw_frame(0)
    return TrialAnimation(fig, draw_frame, rounds, interval_ms)


LANE_LABEL_CHAR_IN = 0.06  # width of one character of a lane label (7 pt) in the message-flow frames
LANE_LABEL_PAD_IN = 0.25  # from the figure's left edge to the longest lane label
SYSTEM_LANE = "System"


def _flow_animation(events: list[dict], interval_ms: int) -> TrialAnimation:
    agents = flowmod.agents_of(events)
    tokens = flowmod.tokens_by_round(events)
    last = max(tokens) if tokens else 0
    n_lines = max(len(agents) + 1, 3)
    lanes = len(agents) + 1
    left = LANE_LABEL_PAD_IN + LANE_LABEL_CHAR_IN * max(len(a) for a in [*agents, SYSTEM_LANE])  # whole lane names
    top_w = left + 0.25 + flowmod.ROUND_IN * (last + 1) + 2.2  # lanes, rounds and the legend at the right
    top_h = 0.45 + flowmod.LANE_IN * lanes
    rounds = list(range(last + 1))
    with style.theme():
        fig, ev_ax, tok_ax, width, height, bottom_h = _frame_figure(top_w, top_h, n_lines)
        f_ax = fig.add_axes((left / width, (bottom_h + 0.4) / height, (width - left - 2.45) / width,
                             (top_h - 0.4) / height))
        flowmod.flow(events, ax=f_ax, rounds=last)  # every mark once; a frame hides the future ones
        future = f_ax.axvspan(0, last + 0.6, color="white", zorder=5, lw=0)
        now = f_ax.axvspan(-0.45, 0.45, color="#fef0c7", zorder=0, lw=0)
        title = fig.text(0.1 / width, 1 - 0.08 / height, "", fontsize=style.TITLE_PT, va="top")
        lines = _EventsPanel(ev_ax, n_lines, agents)
        tok = _TokensPanel(tok_ax, tokens)

    def draw_frame(i: int):
        r = rounds[i]
        future.set_x(r + 0.5)
        now.set_x(r - 0.45)
        title.set_text(f"round {r}: who did what, and every broadcast")
        lines.show(flowmod.round_lines(events, r))
        tok.show(r)
        return []

    acted = [r for r in rounds if any(line for line in flowmod.round_lines(events, r))]
    start = rounds.index(acted[0]) if acted else 0
    draw_frame(start)
    return TrialAnimation(fig, draw_frame, rounds, interval_ms, start=start)
