"""ll.viz.animate: one object that displays once and plays offline, frames with the round's events and the
running tokens, files (GIF, MP4 where ffmpeg exists, HTML), and the message-flow view of flat teams."""

from __future__ import annotations

import re
import shutil

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import latte_lab as ll  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    plt.close("all")  # figures another test file left open in this worker are not this test's
    yield
    plt.close("all")


# Twelve rounds: planning, discovery, claims, completions and verification all happen in them, and every
# frame of the animation is drawn (and encoded, for the saved files) once per test that renders them.
ROUNDS = 12


@pytest.fixture(scope="module")
def graph_trial(tmp_path_factory):
    return ll.run_trial(ll.TrialConfig(task="textproc", team="latte", seed=0, n_workers=3, max_rounds=ROUNDS,
                                       runs_dir=str(tmp_path_factory.mktemp("runs"))))


@pytest.fixture(scope="module")
def flat_trial(tmp_path_factory):
    return ll.run_trial(ll.TrialConfig(task="textproc", team="decentralized", seed=0, n_workers=3,
                                       max_rounds=ROUNDS, runs_dir=str(tmp_path_factory.mktemp("runs"))))


def _frame_texts(anim, i) -> list[str]:
    anim._draw_frame(i)
    return [t.get_text() for t in anim.fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text()]


def test_animate_returns_one_player_that_never_displays_itself(graph_trial, monkeypatch):
    import IPython.display

    calls = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: calls.append(a))
    anim = ll.viz.animate(graph_trial)
    assert calls == [] and not plt.get_fignums()  # nothing shown besides the returned object
    assert len(anim) == len(graph_trial.snapshots) and anim.rounds == [s["round"] for s in graph_trial.snapshots]
    html = anim._repr_html_()
    assert html is anim._repr_html_()  # rendered once, reused
    frames = set(re.findall(r"frames\[(\d+)\] = ", html))
    assert frames == {str(i) for i in range(len(anim))}
    assert "play_animation" in html and "<img" in html  # the player's own JavaScript: no kernel needed


def test_each_frame_shows_the_graph_the_rounds_events_and_the_tokens(graph_trial):
    anim = ll.viz.animate(graph_trial)
    r = 2
    texts = _frame_texts(anim, anim.rounds.index(r))
    assert any(t.startswith(f"round {r} ·") for t in texts)
    agents = {line.split(":")[0] for line in ll.viz.round_lines(graph_trial.events, r)}
    assert agents and {f"{a}:" for a in agents} <= set(texts)  # one line per agent that acted
    from latte_lab.viz.flow import tokens_by_round

    tokens = tokens_by_round(graph_trial.event_list)[r]
    assert f"tokens so far: {tokens:,}" in texts and tokens > 0
    last = _frame_texts(anim, -1)
    assert f"tokens so far: {graph_trial.tokens:,}" in last  # the running total ends at the trial's tokens


def test_save_writes_a_gif_and_an_mp4_where_ffmpeg_exists(graph_trial, tmp_path):
    from PIL import Image

    anim = ll.viz.animate(graph_trial)
    gif = anim.save(tmp_path / "trial.gif", dpi=40)
    assert Image.open(gif).n_frames == len(anim)
    if shutil.which("ffmpeg"):
        assert anim.save(tmp_path / "trial.mp4", dpi=40).stat().st_size > 0
    else:
        with pytest.raises(ll.LatteError, match="ffmpeg is not installed"):
            anim.save(tmp_path / "trial.mp4")
    with pytest.raises(ll.LatteError, match=r"\.gif, \.mp4 or \.html"):
        anim.save(tmp_path / "trial.avi")
    assert "play_animation" in anim.save(tmp_path / "trial.html").read_text()


def test_flat_teams_animate_as_a_message_flow(flat_trial):
    assert not flat_trial.snapshots
    anim = ll.viz.animate(flat_trial)
    last = max(e["round"] for e in flat_trial.event_list if e.get("round") is not None)
    assert anim.rounds == list(range(last + 1))
    texts = _frame_texts(anim, 1)
    assert "round 1: who did what, and every broadcast" in texts
    ax = ll.viz.flow(flat_trial)
    from latte_lab.viz.flow import agents_of

    agents = agents_of(flat_trial)
    assert [t.get_text() for t in ax.get_yticklabels()][:len(agents)] == agents
    broadcasts = [e for e in flat_trial.event_list if e["type"] == "broadcast"]
    from matplotlib.collections import LineCollection

    arrows = sum(len(c.get_segments()) for c in ax.collections if isinstance(c, LineCollection))
    assert broadcasts and arrows == len(broadcasts) * (len(agents) - 1)  # to every other agent
    legend = {t.get_text() for t in ax.get_legend().get_texts()}
    assert "broadcast to every agent" in legend


def test_round_lines_name_every_agent_once():
    events = [{"type": "agent_reply", "round": 3, "agent": "Lead", "input_tokens": 1, "output_tokens": 1},
              {"type": "discover_task", "round": 3, "agent": "Lead", "task": "a"},
              {"type": "assign_task", "round": 3, "task": "a", "assigner": "Lead", "assignee": "Dev1"},
              {"type": "claim_task", "round": 3, "agent": "Dev2", "task": "b"},
              {"type": "run_tests", "round": 3, "agent": "System", "passed": 3, "failed": 1, "errors": 0}]
    assert ll.viz.round_lines(events, 3, short={"a": "T1", "b": "T2"}) == [
        "Lead: discover T1 · assign T1→Dev1", "Dev2: claim T2", "System: tests 3/4"]


def test_the_player_asks_the_network_for_nothing():
    """matplotlib's player links Font Awesome from a CDN: offline its buttons came out empty after a wait."""
    from latte_lab.scheduling import chain, simulate

    page = ll.viz.animate(simulate(chain(3), n_workers=1)).to_jshtml()
    assert not re.findall(r'(?:href|src)="https?://', page) and "font-awesome" not in page
    assert page.count('class="latte-glyph"') == 9 and 'title="Play"' in page
