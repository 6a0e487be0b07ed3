"""The trial explorer: Run shows a progress bar then the animation, the Gantt chart and the results row in
the form's own output area, for every team; compare mode; base_url; the model list follows the keys
present; every error is one line."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import latte_lab as ll  # noqa: E402
from latte_lab.viz import widgets  # noqa: E402


def _shown(output) -> list[str]:
    """What an Output widget (and the Output widgets inside it) holds, as mime types and text."""
    out = []
    for o in output.outputs:
        data = o.get("data", {})
        out += list(data) + [str(data.get("text/plain", "")), str(data.get("text/html", ""))[:2000]]
    return out


def test_run_shows_progress_then_animation_gantt_and_row_for_a_flat_team(tmp_path, monkeypatch):
    captured = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj, **k: captured.append(obj))
    form = ll.viz.trial_form(task="textproc", team="decentralized", n_workers=3, runs_dir=str(tmp_path))
    seen = []
    form.progress.observe(lambda ch: seen.append(ch["new"]), names="value")
    res = form.run()
    assert res is not None and res.config.team == "decentralized" and form.result is res
    assert seen and max(seen) == res.rounds  # the bar moved round by round
    import pandas as pd

    kinds = [type(x).__name__ for x in captured]
    rows = [x for x in captured if isinstance(x, pd.DataFrame)]  # the row: its display defines success, accuracy
    assert "VBox" in kinds and "Image" in kinds and len(rows) == 1  # the player, the Gantt chart, the row
    assert "the share of the task's hidden tests that pass" in rows[0]._repr_html_()
    chart = next(x for x in captured if type(x).__name__ == "Image")  # drawn to PNG by the form itself
    from PIL import Image

    pixels = Image.open(io.BytesIO(chart.data)).convert("L")
    assert pixels.getextrema()[0] < 100  # bars and labels drawn, not a blank canvas
    player = next(x for x in captured if type(x).__name__ == "VBox" and type(x.children[0]).__name__ == "Image")
    image, (play, slider, label) = player.children[0], player.children[1].children
    first = image.value
    slider.value = 2  # what Play does, a frame at a time
    assert image.value != first and label.value == "round 2" and play.max == res.rounds
    row = rows[0]
    assert row["team"].tolist() == ["decentralized"]
    # the trial viewer, shown in the notebook under the trial (no file:// link), and hidden again
    toggle = next(x for x in captured if type(x).__name__ == "VBox" and type(x.children[0]).__name__ == "HBox")
    button, frame = toggle.children[0].children[0], toggle.children[1]
    assert button.description == "show the trial viewer" and not frame.outputs
    captured.clear()
    button.click()
    assert button.description == "hide the trial viewer" and len(captured) == 1
    assert captured[0]._repr_html_().startswith('<iframe class="latte-viewer" srcdoc=')
    assert (res.run_dir / "view.html").is_file()  # also beside the run, for latte-lab view --serve
    button.click()
    assert button.description == "show the trial viewer" and len(captured) == 1
    assert "decentralized" in form.status.value
    assert "SUCCESS" in form.status.value or "no success" in form.status.value
    assert not form.button.disabled


def test_compare_runs_two_teams_on_the_same_seed(tmp_path, monkeypatch):
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj, **k: None)
    form = ll.viz.trial_form(task="textproc", team="latte", seed=3, n_workers=3, runs_dir=str(tmp_path),
                             compare_with="pipeline")
    form.run()
    assert [r.config.team for r in form.results] == ["latte", "pipeline"]
    assert {r.config.seed for r in form.results} == {3}


def test_every_error_is_one_line_in_the_form(tmp_path, monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)  # no .env above
    form = ll.viz.trial_form(task="textproc", runs_dir=str(tmp_path))
    form.model.value = "anthropic/claude-sonnet-4-5"
    assert form.run() is None
    assert "ANTHROPIC_API_KEY" in form.status.value and "\n" not in form.status.value
    assert "Traceback" not in form.status.value and "color:#b42318" in form.status.value
    form.model.value = "simulated"
    form.base_url.value = "http://127.0.0.1:9/v1"  # a server for a local model: a config error, one line
    assert form.run() is None and "base_url" in form.status.value and "\n" not in form.status.value
    assert not list(tmp_path.glob("*/config.json"))  # nothing was started


def test_model_list_offers_only_providers_whose_key_is_present(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert widgets.model_choices() == ["simulated", "simulated/calibrated", "simulated/careful", "simulated/fast"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "x" * 24)
    choices = widgets.model_choices()
    assert any(c.startswith("openai/") for c in choices) and not any(c.startswith("anthropic/") for c in choices)


def test_base_url_lists_the_servers_models(monkeypatch):
    monkeypatch.setattr(widgets, "server_models", lambda url: ["llama3.1:8b", "qwen2.5:7b"])
    form = ll.viz.trial_form(task="textproc")
    form.base_url.value = "http://127.0.0.1:11434/v1"
    assert {"llama3.1:8b", "qwen2.5:7b"} <= set(form.model.options)
    form.model.value = "llama3.1:8b"
    cfg = form.config()
    assert (cfg.model, cfg.base_url) == ("llama3.1:8b", "http://127.0.0.1:11434/v1")


def test_an_unreachable_server_lists_nothing_and_says_so():
    form = ll.viz.trial_form(task="textproc")
    form.base_url.value = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
    assert "no model list" in form.status.value
    assert widgets.model_choices("http://127.0.0.1:9/v1") == ["simulated", "simulated/calibrated", "simulated/careful", "simulated/fast"]
