"""One visual style for every analysis figure: a colour per team, the status colours of graph nodes,
and the matplotlib backend choice. Defined once so Figures 2-4 agree with each other."""

from __future__ import annotations

import os

TEAM_PALETTE = {
    "latte": "#2196F3",
    "leader_worker": "#AB47BC",
    "decentralized": "#EF5350",
    "static": "#4CAF50",
    "metagpt": "#FF8F00",
    "pipeline": "#8D6E63",
}
"""The released notebook's team colours (reference §10); our pipeline team gets brown."""

FALLBACK_COLOR = "#757575"  # a team not in the palette

STATUS_COLORS = {
    "pending": "#E0E0E0",
    "assigned": "#FFF176",
    "in_progress": "#64B5F6",
    "done": "#81C784",
    "verified": "#388E3C",
    "closed": "#B0BEC5",
}
NEW_NODE_EDGE = "#FF8F00"  # nodes new since the previous panel of Figure 3C
JITTER_HALF_WIDTH = 0.15  # uniform jitter of the points on Figure 4 bars
FIG_DPI = 150  # PNG resolution of saved figures


def team_color(team: str) -> str:
    return TEAM_PALETTE.get(team, FALLBACK_COLOR)


def pyplot():
    """matplotlib.pyplot with the Agg backend when there is no display (CI, servers, subprocesses)."""
    import matplotlib

    if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND") and "inline" not in str(
            matplotlib.get_backend()).lower():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def apply_theme() -> None:
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper", font_scale=1.0)
