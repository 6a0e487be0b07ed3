"""ipywidgets front ends: a form that configures and runs a trial, and a team comparison.

In Jupyter, a form shows its controls and a Run button:

>>> import latte_lab as ll
>>> form = ll.viz.trial_form(task="debug", n_workers=3)
>>> form                                       # doctest: +SKIP
>>> cfg = form.config()                        # the TrialConfig the controls describe
>>> cfg.task, cfg.n_workers
('debug', 3)
"""

from __future__ import annotations

from typing import Any

from latte_lab.config import TrialConfig

MODEL_CHOICES = ("simulated", "simulated/careful", "simulated/fast")  # offline choices offered by default


class TrialForm:
    """Controls for a TrialConfig plus a Run button; the last result is kept in ``.result``."""

    def __init__(self, *, runs_dir: str = "runs", models: tuple[str, ...] = MODEL_CHOICES, **defaults: Any):
        import ipywidgets as w

        from latte_lab import tasks, teams

        base = TrialConfig(task=defaults.pop("task", "debug"), **defaults)
        self.runs_dir = runs_dir
        self.result = None
        style = {"description_width": "110px"}
        self.task = w.Dropdown(options=tasks.names(), value=base.task, description="task", style=style)
        self.team = w.Dropdown(options=teams.names(), value=base.team, description="team", style=style)
        options = list(dict.fromkeys([base.model, *models]))
        self.model = w.Combobox(options=options, value=base.model, description="model", style=style,
                                placeholder="simulated, openai/<model>, anthropic/<model>")
        self.seed = w.IntText(value=base.seed, description="seed", style=style)
        self.n_workers = w.IntSlider(value=base.n_workers, min=1, max=12, description="workers", style=style)
        self.max_rounds = w.IntSlider(value=base.rounds, min=1, max=80, description="max rounds", style=style)
        self.heartbeat = w.IntSlider(value=base.heartbeat, min=1, max=12, description="heartbeat H", style=style)
        self.released = w.Checkbox(value=False, description="released-code behaviour (all switches)",
                                   indent=False)
        self.button = w.Button(description="Run trial", button_style="primary", icon="play")
        self.output = w.Output()
        self.button.on_click(lambda _: self.run())
        self.widget = w.VBox([
            w.HBox([w.VBox([self.task, self.team, self.model, self.seed]),
                    w.VBox([self.n_workers, self.max_rounds, self.heartbeat, self.released])]),
            self.button, self.output,
        ])

    def config(self) -> TrialConfig:
        """The TrialConfig the controls currently describe (validated: errors name the bad field)."""
        fields = dict(task=self.task.value, team=self.team.value, model=self.model.value.strip(),
                      seed=int(self.seed.value), n_workers=int(self.n_workers.value),
                      max_rounds=int(self.max_rounds.value), heartbeat=int(self.heartbeat.value),
                      runs_dir=self.runs_dir)
        return TrialConfig.released(**fields) if self.released.value else TrialConfig(**fields)

    def run(self):
        """Runs the configured trial, printing one line per round into the form's output area."""
        from latte_lab.errors import LatteError
        from latte_lab.trial import run_trial

        self.output.clear_output()
        with self.output:
            try:
                cfg = self.config()
            except LatteError as exc:
                print(f"Cannot run: {exc}")
                return None
            print(f"{cfg.trial_id}: {cfg.team} on {cfg.task} with {cfg.model}")
            self.result = run_trial(cfg, progress=True)
            print(self.result.summary())
        return self.result

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)


def trial_form(**defaults: Any) -> TrialForm:
    """A form to configure and run one trial (see :class:`TrialForm`)."""
    return TrialForm(**defaults)


def compare(results) -> "Any":
    """One row per trial result with the columns that tell teams apart (a pandas DataFrame)."""
    import pandas as pd

    cols = ["team", "task", "model", "seed", "success", "accuracy", "total_rounds", "total_tokens",
            "wall_clock_seconds", "cross_agent_overwrites", "n_concurrent_collisions", "function_overwrites",
            "discarded_chars", "total_messages", "idle_fraction"]
    rows = [r.row if hasattr(r, "row") else r for r in results]
    df = pd.DataFrame(rows)
    return df[[c for c in cols if c in df.columns]]
