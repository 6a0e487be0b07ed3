"""The trial viewer: one self-contained HTML page per trial (every round, every prompt and reply, every file
change), a table page for a sweep directory, a side-by-side page for two trials, and ``transcript``, the
same agent lanes as a notebook widget.

A page embeds its data as JSON and its script inline; it needs no server and no network, so it opens from
disk and can be mailed. Its parts: :mod:`~latte_lab.viz.viewer.data` (a run read into the page's data),
:mod:`~latte_lab.viz.viewer.page` (the pages, put together from the HTML, CSS and JavaScript files of
``latte_lab/viz/viewer/assets/``, package data read with ``importlib.resources``, so that tools for those
languages can check them) and :mod:`~latte_lab.viz.viewer.notebook` (the page and the lanes in a notebook). What a trial page shows, for the round chosen with the slider (or the arrow keys):

- a header with the configuration, outcome, accuracy, tokens, dollars and wall clock, and the tokens over
  rounds as a sparkline (click it to jump to a round);
- the coordination graph at that round, laid out as :func:`latte_lab.viz.draw` lays it out (the positions
  are computed here by :func:`latte_lab.viz.graph_drawing.plan`); clicking a node lists its events;
- one lane per agent: each prompt (collapsible; the messages new in this call, the view the prompt was
  built from this round, are marked), the reply with its actions highlighted and each action's outcome,
  file edits as unified diffs (:mod:`difflib`) and test runs with their failures;
- the Lead's triggers and the heartbeat alerts, flagged on the round and on the slider.

Prompts repeat an agent's earlier messages at every call; a page stores each text once (as the run's
``calls.jsonl`` does) and every call names its messages by number. Agent text reaches the page only through
``textContent``, and the embedded JSON has ``</`` written ``<\\/``, so a reply holding ``<script>`` shows that
text and runs nothing.

>>> import latte_lab as ll                                        # doctest: +SKIP
>>> res = ll.run_trial(ll.TrialConfig(task="debug", model="simulated"))   # doctest: +SKIP
>>> ll.viz.build_page(res.run_dir)                                 # doctest: +SKIP
PosixPath('runs/debug-latte-s0-.../view.html')
>>> ll.viz.transcript(res)                                         # doctest: +SKIP
"""


from latte_lab.viz.viewer.data import PX_PER_IN, action_spans, trial_data
from latte_lab.viz.viewer.notebook import EMBED_HEIGHT_PX, EmbeddedPage, embed, lanes_html, transcript
from latte_lab.viz.viewer.page import (
    PAGE_NAME,
    build_page,
    compare_html,
    is_sweep_dir,
    serve,
    sweep_html,
    trial_html,
    unpack_texts,
)

__all__ = ["EMBED_HEIGHT_PX", "PAGE_NAME", "PX_PER_IN", "EmbeddedPage", "action_spans", "build_page", "compare_html",
           "embed", "is_sweep_dir", "lanes_html", "serve", "sweep_html", "transcript", "trial_data", "trial_html",
           "unpack_texts"]
