"""The trial explorer: a form that configures a trial, runs it and shows what happened; and a team comparison.

Run shows a progress bar, then, in the form's own output area, the trial's animation (the graph, or the
message flow of a team without one; a Play button and a slider that draw each round when shown), its Gantt
chart and its results row. "Compare with" runs a second team
on the same task and seed and shows both side by side. Every error is one line in the form.

The model list holds the simulated profiles, the models of every provider whose API key is set (from the
environment or ``.env``), and, when a ``base_url`` is given, the models that OpenAI-compatible server lists.

>>> import latte_lab as ll
>>> form = ll.viz.trial_form(task="debug", n_workers=3)
>>> form                                       # doctest: +SKIP
>>> cfg = form.config()                        # the TrialConfig the controls describe
>>> cfg.task, cfg.n_workers
('debug', 3)
>>> form.model.value = "openai/gpt-4o"; form.base_url.value = "http://127.0.0.1:9/v1"
>>> form.config().base_url
'http://127.0.0.1:9/v1'
"""

from __future__ import annotations

import html
import os
from typing import Any

from latte_lab.config import TrialConfig

__all__ = ["TrialForm", "compare", "model_choices", "trial_form"]

SERVER_LIST_TIMEOUT_S = 2.0  # listing a local server's models; a slower server is typed by hand
COMPARE_COLUMNS = ["team", "task", "model", "seed", "success", "accuracy", "total_rounds", "total_tokens",
                   "wall_clock_seconds", "cross_agent_overwrites", "n_concurrent_collisions", "function_overwrites",
                   "discarded_chars", "total_messages", "idle_fraction"]
"""The results-row columns that tell teams apart (the explorer's result row and :func:`compare`)."""
ERROR_STYLE = "color:#b42318"


def _provider_keys() -> dict[str, str]:
    from latte_lab.models.providers.anthropic import ANTHROPIC_KEY_ENV
    from latte_lab.models.providers.openai import OPENAI_KEY_ENV

    return {"openai": OPENAI_KEY_ENV, "anthropic": ANTHROPIC_KEY_ENV}


def server_models(base_url: str) -> list[str]:
    """The models an OpenAI-compatible server (vLLM, Ollama, LM Studio) lists at ``base_url``."""
    from latte_lab.errors import require_extra
    from latte_lab.models.keys import base_url_api_key

    OpenAI = require_extra("openai", "openai", "listing a server's models").OpenAI
    client = OpenAI(base_url=base_url, api_key=base_url_api_key(),  # never OPENAI_API_KEY: see models.keys
                    timeout=SERVER_LIST_TIMEOUT_S, max_retries=0)
    return sorted(m.id for m in client.models.list())


def model_choices(base_url: str | None = None) -> list[str]:
    """Model specs worth offering: the simulated profiles, the priced models of each provider whose key is
    set, and the models a server at ``base_url`` lists (a server that does not answer lists nothing).

    >>> model_choices()[:3]
    ['simulated', 'simulated/calibrated', 'simulated/careful']
    """
    from latte_lab.models import PROFILES, load_prices
    from latte_lab.models.keys import load_env

    out = ["simulated"] + [f"simulated/{p}" for p in sorted(PROFILES) if p != "default"]
    if base_url:
        try:
            out += server_models(base_url)
        except Exception:  # noqa: BLE001 - an unreachable server: the user types the model name
            pass
        return out
    load_env()
    keys = _provider_keys()
    for price in load_prices():
        env = keys.get(price.provider)
        if env and os.environ.get(env, "").strip():
            out.append(f"{price.provider}/{price.model}")
    return list(dict.fromkeys(out))


def one_line(exc: BaseException) -> str:
    """An exception as one line of text, API keys masked."""
    from latte_lab.errors import LatteError
    from latte_lab.models.keys import redact

    text = " ".join(str(exc).split()) or type(exc).__name__
    if not isinstance(exc, LatteError):
        text = f"{type(exc).__name__}: {text}"
    return redact(text)


class TrialForm:
    """Controls for a TrialConfig, a Run button and an output area; the last result is ``.result`` (with
    compare on, ``.results`` holds both)."""

    def __init__(self, *, runs_dir: str = "runs", models: tuple[str, ...] | None = None, **defaults: Any):
        from latte_lab.errors import require_extra

        w = require_extra("ipywidgets", "lab", "the trial form")

        from latte_lab import tasks, teams

        compare_team = defaults.pop("compare_with", None)
        base = TrialConfig(task=defaults.pop("task", "debug"), **defaults)
        self.runs_dir = runs_dir
        self.result = None
        self.results: list = []
        style = {"description_width": "90px"}
        wide = w.Layout(width="330px")
        self.task = w.Dropdown(options=tasks.names(), value=base.task, description="task", style=style, layout=wide)
        self.team = w.Dropdown(options=teams.names(), value=base.team, description="team", style=style, layout=wide)
        self.base_url = w.Text(value=base.base_url or "", description="base_url", style=style, layout=wide,
                               placeholder="OpenAI-compatible server, e.g. http://localhost:11434/v1",
                               continuous_update=False)
        options = list(dict.fromkeys([base.model, *(models or model_choices(base.base_url))]))
        self.model = w.Combobox(options=options, value=base.model, description="model", style=style, layout=wide,
                                placeholder="simulated, openai/<model>, anthropic/<model>", ensure_option=False)
        self.seed = w.IntText(value=base.seed, description="seed", style=style, layout=wide)
        self.n_workers = w.IntSlider(value=base.n_workers, min=1, max=12, description="workers", style=style)
        self.max_rounds = w.IntSlider(value=base.rounds, min=1, max=80, description="max rounds", style=style)
        self.heartbeat = w.IntSlider(value=base.heartbeat, min=1, max=12, description="heartbeat H", style=style)
        self.released = w.Checkbox(value=False, description="released-code behaviour (all switches)", indent=False)
        self.compare = w.Checkbox(value=compare_team is not None, description="compare with", indent=False,
                                  layout=w.Layout(width="110px"))
        self.team2 = w.Dropdown(options=teams.names(), value=compare_team or "leader_worker",
                                layout=w.Layout(width="180px"))
        self.button = w.Button(description="Run trial", button_style="primary", icon="play")
        self.status = w.HTML(value="")
        self.progress = w.IntProgress(value=0, min=0, max=base.rounds, description="", bar_style="info",
                                      layout=w.Layout(width="330px", visibility="hidden"))
        self.output = w.Output()
        self.button.on_click(lambda _: self.run())
        self.base_url.observe(self._refresh_models, names="value")
        self.widget = w.VBox([
            w.HBox([w.VBox([self.task, self.team, self.model, self.base_url, self.seed]),
                    w.VBox([self.n_workers, self.max_rounds, self.heartbeat, self.released,
                            w.HBox([self.compare, self.team2])])]),
            w.HBox([self.button, self.progress]), self.status, self.output,
        ])

    def _refresh_models(self, change=None) -> None:
        url = self.base_url.value.strip() or None
        choices = model_choices(url)
        self.model.options = list(dict.fromkeys([self.model.value, *choices])) if self.model.value else choices
        if url and len(choices) <= len(model_choices()):  # nothing beyond the simulated profiles and priced models
            self._say(f"no model list from {url}: type the served model's name in the model field")

    def _say(self, text: str, error: bool = False) -> None:
        body = html.escape(text)
        self.status.value = f'<span style="{ERROR_STYLE}">{body}</span>' if error else body

    def config(self, team: str | None = None) -> TrialConfig:
        """The TrialConfig the controls currently describe (validated: errors name the bad field)."""
        fields = dict(task=self.task.value, team=team or self.team.value, model=self.model.value.strip(),
                      seed=int(self.seed.value), n_workers=int(self.n_workers.value),
                      max_rounds=int(self.max_rounds.value), heartbeat=int(self.heartbeat.value),
                      runs_dir=self.runs_dir, base_url=self.base_url.value.strip() or None)
        return TrialConfig.released(**fields) if self.released.value else TrialConfig(**fields)

    def run(self):
        """Runs the configured trial (and the comparison team, if ticked) and shows the results; returns the
        TrialResult, or None when it could not run (the form says why in one line)."""
        from latte_lab.errors import require_extra

        w = require_extra("ipywidgets", "lab", "the trial form")
        from IPython.display import display

        self.output.clear_output()
        teams = [self.team.value] + ([self.team2.value] if self.compare.value else [])
        try:
            configs = [self.config(t) for t in teams]
        except Exception as exc:  # noqa: BLE001 - every error is one line in the form
            self._say(f"Cannot run: {one_line(exc)}", error=True)
            return None
        self.results = []
        # compare mode: one trial above the other, each at full width, so its row is read whole
        areas = [w.Output(layout=w.Layout(width="100%")) for _ in configs]
        with self.output:
            display(w.VBox(areas, layout=w.Layout(width="100%")) if len(areas) > 1 else areas[0])
        self.button.disabled = True
        try:
            for cfg, area in zip(configs, areas):
                res = self._run_one(cfg)
                if res is None:
                    return None
                self.results.append(res)
                self._show(res, area)
        finally:
            self.button.disabled = False
            self.progress.layout.visibility = "hidden"
        self.result = self.results[0]
        done = "; ".join(r.summary().splitlines()[0] for r in self.results)
        self._say(done, error=any(r.status != "ok" for r in self.results))
        return self.result

    def _run_one(self, cfg: TrialConfig):
        from latte_lab.trial import round_line, run_trial

        self.progress.max, self.progress.value = cfg.rounds, 0
        self.progress.layout.visibility = "visible"
        self._say(f"running {cfg.team} on {cfg.task} with {cfg.model} (seed {cfg.seed}) …")

        def tick(info: dict) -> None:
            self.progress.value = info["round"]
            self._say(f"{cfg.team}: {round_line(info)}")

        try:
            return run_trial(cfg, progress=tick)
        except Exception as exc:  # noqa: BLE001 - a missing key, a bad server: one line, not a traceback
            self._say(f"Cannot run {cfg.team}: {one_line(exc)}", error=True)
            return None

    @staticmethod
    def _show(res, area) -> None:
        """The animation, the Gantt chart and the results row of one trial, in ``area``."""
        from IPython.display import HTML, display

        import latte_lab.viz.style as style
        from latte_lab.viz.animation import animate
        from latte_lab.viz.gantt import gantt
        from latte_lab.viz.notebook import not_shown

        with area:
            display(HTML(f"<b>{html.escape(res.summary().splitlines()[0])}</b>"))
            display(_viewer_toggle(res))
            try:
                with not_shown():  # the form shows its own player, not the notebook's
                    player = animate(res).widget()  # frames drawn as they are shown: the form answers at once
                display(player)
                # Drawn to PNG here, on a Figure pyplot does not manage: in JupyterLab a widget's messages are
                # handled on another thread too, and the inline backend's hook after each of them draws and
                # closes every pyplot figure; drawing one at the same time came out blank.
                display(style.png_image(gantt(res, title="", pyplot=False).figure))
            except Exception as exc:  # noqa: BLE001 - a result too broken to draw still shows its row
                display(HTML(f'<span style="{ERROR_STYLE}">cannot draw: {html.escape(one_line(exc))}</span>'))
            # headers with spaces wrap, so the whole row fits the output area instead of running off it
            display(outcome_table(compare([res]).rename(columns=lambda c: c.replace("_", " ")).round(3)))

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)


def _viewer_toggle(res):
    """A button that shows the trial's viewer page (every round, prompt, reply and file change;
    :mod:`latte_lab.viz.viewer`) in the notebook, under it, and hides it again; the page is built when first
    shown. A notebook server cannot open a ``file://`` link, so the page is shown inline (it also goes beside
    the run directory, for a browser: ``latte-lab view RUN --serve``)."""
    from latte_lab.errors import require_extra

    w = require_extra("ipywidgets", "lab", "the trial form")
    from IPython.display import display

    button = w.Button(description="show the trial viewer", icon="eye", layout=w.Layout(width="220px"))
    note = w.HTML(f'<span style="color:#57606a">or in a browser: <code>latte-lab view '
                  f'{html.escape(str(res.run_dir))} --serve</code></span>')
    frame = w.Output(layout=w.Layout(width="100%"))
    shown = {"page": None, "open": False}

    def toggle(_=None) -> None:
        from latte_lab.viz.viewer import build_page, embed

        if shown["page"] is None:
            try:
                build_page(res.run_dir)  # view.html beside the run, for latte-lab view
                shown["page"] = embed(res)
            except Exception as exc:  # noqa: BLE001 - the form's result stands without its page
                with frame:
                    display(w.HTML(f'<span style="{ERROR_STYLE}">no viewer page: {html.escape(one_line(exc))}</span>'))
                return
        if shown["open"]:
            frame.clear_output()
            button.description = "show the trial viewer"
        else:
            with frame:
                display(shown["page"])
            button.description = "hide the trial viewer"
        shown["open"] = not shown["open"]

    button.on_click(toggle)
    return w.VBox([w.HBox([button, note]), frame], layout=w.Layout(width="100%"))


def trial_form(**defaults: Any) -> TrialForm:
    """A form to configure and run one trial (see :class:`TrialForm`); ``compare_with="static"`` ticks the
    comparison with that team."""
    return TrialForm(**defaults)


def compare(results) -> Any:
    """One row per trial result with the columns that tell teams apart (a pandas DataFrame, which a notebook
    shows with what ``success`` and ``accuracy`` mean under it: see :func:`outcome_table`)."""
    import pandas as pd

    rows = [r.row if hasattr(r, "row") else r for r in results]
    df = pd.DataFrame(rows)
    return outcome_table(df[[c for c in COMPARE_COLUMNS if c in df.columns]])


def outcome_table(df):
    """``df`` as an :class:`~latte_lab.analysis.report.OutcomeTable`: the same rows, which a notebook shows with
    the definitions of success and accuracy under them."""
    from latte_lab.analysis.report import OutcomeTable

    return OutcomeTable(df)
